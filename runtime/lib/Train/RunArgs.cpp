//===- RunArgs.cpp - Command-line options of a training run ---------------===//

#include "gtc/Runtime/RunArgs.h"
#include "gtc/Runtime/Cuda.h"
#include <algorithm>
#include <tuple>
#include <cerrno>
#include <cstdlib>

using namespace gtc::rt;

const char *const gtc::rt::kRunOptionsHelp =
    R"(  --device D     cpu, cuda, or auto (the GPU if there is one; the default)
  --steps N      train N steps in all (counting resumed ones)
  --epochs N     train N epochs
  --batch N      batch size; auto: the largest whose predicted peak fits the
                 checkpoint budget, or else 95% of the device's free memory
  --seed S       seed for initialization, shuffling and sampling
  --threads N    CPU threads (default: all cores)
  --log FILE     append metrics as JSON lines
  --log-every N  log (and print) every N steps
  --bench N      time N training steps on random data and print ms/step
  --profile FILE profile steady-state steps on random data: a Chrome trace
                 of every kernel, GEMM and copy to FILE (chrome://tracing,
                 Perfetto) and a table of kernels by time; with --bench N,
                 N steps are timed first
  --precision P  fp32, tf32 (cuBLASLt's TF32 GEMMs on a GPU), bf16 or fp16
                 (gt-autocast; fp16 with dynamic loss scaling)
  --checkpoint C gradient checkpointing instead of the train block's: none,
                 'every(N)', 'auto(budget: SIZE)' (e.g. 6GiB) or auto (95%
                 of the device's free memory)
  --micro-batch M  gradient accumulation: run each batch as micro-batches
                 of M rows (a divisor of the batch) and update once; auto:
                 the largest whose predicted peak fits 95% of the free memory
  --devices N    data parallel: N processes (one per GPU; on the CPU, N
                 processes through Gloo), each with batch/N rows of every
                 batch; all: every GPU; cpu: one CPU process. Overrides
                 the train block's devices. Under torchrun, srun or mpirun
                 gtc joins their processes instead (RANK/WORLD_SIZE, ...)
  --rendezvous file:DIR  meet the other ranks through files in DIR (new or
                 empty, on a file system all ranks share) instead of TCP
                 at MASTER_ADDR:MASTER_PORT
  --shard S      data parallel: optimizer (ZeRO-1: each process keeps and
                 updates 1/N of the optimizer state, then the parameters
                 are gathered), gradients (ZeRO-2, GPUs: 1/N of the
                 gradients kept too) or none; overrides the train block's
                 shard
  --bucket-size SIZE  data parallel: gradients are all-reduced in buckets
                 of at most SIZE (default 25MiB), each as soon as the
                 backward has computed it
  --check-numerics  after every op of every step, check that its output is
                 finite; the first that is not stops the run with its op,
                 source location, layer and phase (slow: for debugging; with
                 fp16 loss scaling, whose gradients may overflow by design,
                 the forward pass only)
  --no-pad       keep GEMM dimensions as written (no gt-pad-dims)
  --pad-all      with bf16 or fp16, pad small GEMMs too (by default those
                 of fewer than 2^28 multiply-adds keep their sizes: padding
                 them costs more pad and slice kernels than it saves)
  --no-fuse      one kernel per op (no gt-fuse; for comparisons)
  --data PATH    the training data instead of the train block's file
                 (idx sources: IMAGES,LABELS)
  --eval PATH    the evaluation data, likewise
  --save FILE    write a safetensors checkpoint at the end (and on Ctrl-C
                 or SIGTERM; without --save an interrupted run writes
                 MODEL-interrupted.safetensors in the current directory)
  --resume FILE  continue from a checkpoint written by --save
  --init FILE    start from the weights of a safetensors file (matched by
                 name: a gtc checkpoint, a nanoGPT state_dict, ...; f32,
                 f64, bf16 or f16) with a fresh optimizer, at step 0
)";

namespace {

/// A size with a unit as in the language (KiB ... TiB, KB ... TB, B or
/// none: bytes), at least one byte; false if `text` is not one.
bool parseBytes(const std::string &text, int64_t &bytes) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  static const std::pair<const char *, double> units[] = {
      {"", 1},           {"B", 1},      {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},       {"TB", 1e12}};
  for (auto [unit, scale] : units)
    if (end != text.c_str() && std::string(end) == unit && v * scale >= 1 &&
        v * scale < 9.2e18) {
      bytes = static_cast<int64_t>(v * scale);
      return true;
    }
  return false;
}

/// --checkpoint's value: none, every(N), auto(budget: SIZE) with SIZE a
/// number and a unit as in the language (KiB ... TiB, KB ... TB, or bytes).
bool parseCheckpoint(std::string value, RunArgs &out, std::string &error) {
  value.erase(std::remove(value.begin(), value.end(), ' '), value.end());
  auto inside = [&](const std::string &head) -> std::optional<std::string> {
    if (value.size() > head.size() + 1 && value.compare(0, head.size(), head) == 0 &&
        value.back() == ')')
      return value.substr(head.size(), value.size() - head.size() - 1);
    return std::nullopt;
  };
  char *end = nullptr;
  if (value == "none") {
    out.checkpointEvery = -1;
    return true;
  }
  if (auto n = inside("every(")) {
    long long v = std::strtoll(n->c_str(), &end, 10);
    if (!n->empty() && *end == '\0' && v >= 1) {
      out.checkpointEvery = v;
      return true;
    }
  } else if (auto b = inside("auto(budget:")) {
    if (parseBytes(*b, out.checkpointBudget))
      return true;
  } else if (value == "auto") {
    out.checkpointBudget = -1; // the device's free memory
    return true;
  }
  error = "--checkpoint needs none, 'every(N)' (N >= 1), 'auto(budget: "
          "SIZE)' (e.g. 6GiB) or auto, got '" + value + "'";
  return false;
}

bool parseCount(const std::string &name, const std::string &value,
                int64_t &out, std::string &error, int64_t min = 1) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < min) {
    error = name + " needs an integer >= " + std::to_string(min) + ", got '" +
            value + "'";
    return false;
  }
  out = v;
  return true;
}

} // namespace

ArgResult gtc::rt::parseRunArg(const std::vector<std::string> &args,
                               size_t &i, RunArgs &out, std::string &error) {
  const std::string &a = args[i];
  if (a == "--explain" || a == "--no-pad" || a == "--pad-all" ||
      a == "--no-fuse" || a == "--dry-run" || a == "--check-numerics") {
    (a == "--explain"    ? out.explain
     : a == "--no-pad"   ? out.noPad
     : a == "--pad-all"  ? out.padAll
     : a == "--no-fuse"  ? out.noFuse
     : a == "--dry-run"  ? out.dryRun
                         : out.run.checkNumerics) = true;
    out.given = true;
    return ArgResult::Ok;
  }
  static const char *valued[] = {
      "--device", "--steps",     "--epochs", "--batch",     "--seed",
      "--threads", "--log",      "--save",   "--resume",    "--log-every",
      "--bench",  "--precision", "--data",   "--eval",      "--profile",
      "--init",   "--checkpoint", "--micro-batch", "--devices",
      "--rendezvous", "--bucket-size", "--shard"};
  std::string name = a.substr(0, a.find('='));
  if (std::find(std::begin(valued), std::end(valued), name) ==
      std::end(valued))
    return ArgResult::NotMine;
  std::string value;
  if (a.find('=') != std::string::npos)
    value = a.substr(a.find('=') + 1);
  else if (i + 1 < args.size())
    value = args[++i];
  else {
    error = name + " needs a value";
    return ArgResult::Error;
  }
  out.given = true;
  int64_t n = 0;
  auto count = [&](int64_t min = 1) {
    return parseCount(name, value, n, error, min);
  };
  if (name == "--device") {
    if (value != "cpu" && value != "cuda" && value != "auto") {
      error = "unknown device '" + value + "'; expected cpu, cuda or auto";
      return ArgResult::Error;
    }
    out.device = value;
  } else if (name == "--precision") {
    if (value != "fp32" && value != "tf32" && value != "bf16" &&
        value != "fp16") {
      error = "unknown precision '" + value +
              "'; expected fp32, tf32, bf16 or fp16";
      return ArgResult::Error;
    }
    out.precision = value;
  } else if (name == "--checkpoint") {
    if (!parseCheckpoint(value, out, error))
      return ArgResult::Error;
  } else if (name == "--log") {
    out.run.logPath = value;
  } else if (name == "--save") {
    out.run.savePath = value;
  } else if (name == "--resume") {
    out.run.resumePath = value;
  } else if (name == "--init") {
    out.run.initPath = value;
  } else if (name == "--data") {
    out.data = value;
  } else if (name == "--eval") {
    out.eval = value;
  } else if (name == "--profile") {
    out.run.profilePath = value;
  } else if (name == "--batch" && value == "auto") {
    out.batchAuto = true;
  } else if (name == "--micro-batch" && value == "auto") {
    out.microBatch = -1;
  } else if (name == "--devices" && (value == "all" || value == "cpu")) {
    out.devices = value;
  } else if (name == "--shard") {
    if (value != "optimizer" && value != "gradients" && value != "none") {
      error = "--shard needs optimizer, gradients or none, got '" + value + "'";
      return ArgResult::Error;
    }
    out.shard = value;
  } else if (name == "--bucket-size") {
    if (!parseBytes(value, out.bucketBytes)) {
      error = "--bucket-size needs a size such as 25MiB or 1048576 (bytes), "
              "got '" + value + "'";
      return ArgResult::Error;
    }
  } else if (name == "--rendezvous") {
    if (value.rfind("file:", 0) != 0 || value.size() == 5) {
      error = "--rendezvous needs file:DIR (a new or empty directory on a "
              "file system all ranks share), got '" + value + "'";
      return ArgResult::Error;
    }
    out.rendezvous = value;
  } else if (!count(name == "--seed" ? 0 : 1)) {
    return ArgResult::Error;
  } else if (name == "--steps") {
    out.run.steps = n;
  } else if (name == "--epochs") {
    out.run.epochs = n;
  } else if (name == "--batch") {
    out.batch = n;
  } else if (name == "--seed") {
    out.run.seed = static_cast<uint64_t>(n);
  } else if (name == "--threads") {
    out.run.threads = static_cast<int>(n);
  } else if (name == "--log-every") {
    out.run.logEvery = n;
  } else if (name == "--micro-batch") {
    out.microBatch = n;
  } else if (name == "--devices") {
    out.devices = std::to_string(n);
  } else {
    out.bench = n;
  }
  return ArgResult::Ok;
}

bool gtc::rt::checkRunArgs(const RunArgs &args, std::string &error) {
  const RunOptions &r = args.run;
  if (r.steps && r.epochs) {
    error = "give --steps or --epochs, not both";
    return false;
  }
  if (args.noPad && args.padAll) {
    error = "give --no-pad (pad nothing) or --pad-all (pad small GEMMs "
            "too), not both";
    return false;
  }
  if (!r.resumePath.empty() && !r.initPath.empty()) {
    error = "give --resume (continue a run) or --init (start from its "
            "weights), not both";
    return false;
  }
  const char *mode = args.dryRun              ? "--dry-run"
                     : !r.profilePath.empty() ? "--profile"
                     : args.bench             ? "--bench"
                                              : nullptr;
  if (!mode)
    return true;
  if (args.dryRun && (args.bench || !r.profilePath.empty())) {
    error = "--dry-run trains and times nothing; drop --bench and --profile, "
            "or --dry-run";
    return false;
  }
  if (args.dryRun && r.threads) {
    error = "--dry-run runs nothing, so --threads would have no effect; drop it";
    return false;
  }
  const char *training = r.steps               ? "--steps"
                         : r.epochs            ? "--epochs"
                         : r.seed              ? "--seed"
                         : r.logEvery          ? "--log-every"
                         : !r.logPath.empty()  ? "--log"
                         : !r.savePath.empty() ? "--save"
                         : !r.resumePath.empty() ? "--resume"
                         : !r.initPath.empty() ? "--init"
                         : !args.data.empty()  ? "--data"
                         : !args.eval.empty()  ? "--eval"
                         : r.checkNumerics     ? "--check-numerics"
                                               : nullptr;
  if (training) {
    error = std::string(mode) + " trains nothing, so " + training +
            " would have no effect; drop it";
    return false;
  }
  return true;
}

bool gtc::rt::applyDataPaths(const RunArgs &args, TrainConfig &config,
                             std::string &error) {
  for (auto [path, source, flag] :
       {std::tuple{&args.data, &config.data, "--data"},
        std::tuple{&args.eval, &config.eval, "--eval"}}) {
    if (path->empty())
      continue;
    if (source->kind.empty()) {
      error = std::string(flag) +
              " replaces a file of the train block, which names none";
      return false;
    }
    if (source->kind == "idx") {
      size_t comma = path->find(',');
      if (comma == std::string::npos) {
        error = std::string(flag) + " for idx data needs IMAGES,LABELS";
        return false;
      }
      source->images = path->substr(0, comma);
      source->labels = path->substr(comma + 1);
    } else {
      source->path = *path;
    }
  }
  return true;
}

bool gtc::rt::chooseDevice(const std::string &device, RunOptions &run,
                           std::string &error) {
  run.device = "cpu";
  if (device == "cpu")
    return true;
  CudaDeviceInfo info;
  if (cudaAvailable(info, error)) {
    run.device = "cuda";
    run.deviceName = info.name + " (sm_" + std::to_string(info.major) +
                     std::to_string(info.minor) + ")";
    run.deviceFreeMemory = static_cast<int64_t>(info.freeMemory);
    return true;
  }
  return device != "cuda";
}
