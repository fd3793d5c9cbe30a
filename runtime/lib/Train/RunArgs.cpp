//===- RunArgs.cpp - Command-line options of a training run ---------------===//

#include "gtc/Runtime/RunArgs.h"
#include "gtc/Runtime/Capabilities.h"
#include "gtc/Runtime/Cuda.h"
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

using namespace gtc::rt;

namespace {

/// A size with a unit as in the language (KiB ... TiB, KB ... TB, B or
/// none: bytes), at least one byte; false if `text` is not one.
bool parseBytes(const std::string &text, int64_t &bytes) {
  // A decimal number (strtod alone takes 0x10, inf and nan too); a number
  // of bytes is whole (34.9MiB is rounded down to bytes).
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) ||
                        text[0] == '.') ||
      text.find_first_of("xXpP") != std::string::npos)
    return false;
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  static const std::pair<const char *, double> units[] = {
      {"", 1},           {"B", 1},      {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},       {"TB", 1e12}};
  for (auto [unit, scale] : units)
    if (end != text.c_str() && std::string(end) == unit && v * scale >= 1 &&
        v * scale < 9.2e18 && (scale > 1 || v == std::floor(v))) {
      bytes = static_cast<int64_t>(v * scale);
      return true;
    }
  return false;
}

/// --checkpoint's value: none, every(N), auto(budget: SIZE) with SIZE a
/// number and a unit as in the language (KiB ... TiB, KB ... TB, or bytes).
bool parseCheckpoint(std::string value, RunArgs &out, std::string &error) {
  value.erase(std::remove(value.begin(), value.end(), ' '), value.end());
  // The last --checkpoint given wins: each form clears the others.
  out.checkpointEvery = out.checkpointBudget = 0;
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
                int64_t &out, std::string &error, int64_t min = 1,
                int64_t max = std::numeric_limits<int64_t>::max()) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  const bool number = !value.empty() && *end == '\0';
  // Too large, beyond int64 (ERANGE) or beyond `max`.
  if (number && (errno == ERANGE ? v > 0 : v > max)) {
    error = name + " needs an integer from " + std::to_string(min) + " to " +
            std::to_string(max) + ", got '" + value + "'";
    return false;
  }
  if (!number || errno != 0 || v < min) {
    error = name + " needs an integer >= " + std::to_string(min) + ", got '" +
            value + "'";
    return false;
  }
  out = v;
  return true;
}

/// One run option: `--name METAVAR` (a flag when metavar is empty), its
/// help, and what it sets. `apply` gets the option's name and value and
/// returns false with a message for a bad value.
struct RunOption {
  const char *name;
  const char *metavar;
  const char *help;
  bool (*apply)(const std::string &name, const std::string &value, RunArgs &out,
                std::string &error);
  /// Whether a compiled executable has it fixed (and lists it apart): it
  /// chooses what is compiled (the batch, the precision, the passes'
  /// options, data parallelism's plan), or needs the compiler (--explain,
  /// --dry-run).
  bool compiling = false;
  /// Its help in a compiled executable, where that differs; "" when an
  /// executable refuses it (gtc run's alone, or the compiler's: --explain).
  const char *compiledHelp = nullptr;
};

/// RunOption::compiling, for the table's rows.
constexpr bool kCompiling = true;

/// The class and type of a data member pointer.
template <typename T> struct MemberOf;
template <typename C, typename M> struct MemberOf<M C::*> {
  using Owner = C;
  using Type = M;
};

/// A field's number type (that of an optional's value).
template <typename T> struct NumberOf {
  using Type = T;
};
template <typename T> struct NumberOf<std::optional<T>> {
  using Type = T;
};

/// --name N: an integer >= Min into the field (of RunArgs, or of its
/// RunOptions `run`), and <= Max (0: the largest the field's type holds, so
/// that nothing is cut short).
template <auto Field, int64_t Min = 1, int64_t Max = 0>
bool setCount(const std::string &name, const std::string &value, RunArgs &out,
              std::string &error) {
  using Member = MemberOf<decltype(Field)>;
  using Number = typename NumberOf<typename Member::Type>::Type;
  constexpr auto typeMax =
      static_cast<unsigned long long>(std::numeric_limits<Number>::max());
  constexpr int64_t fits =
      typeMax > static_cast<unsigned long long>(
                    std::numeric_limits<int64_t>::max())
          ? std::numeric_limits<int64_t>::max()
          : static_cast<int64_t>(typeMax);
  int64_t n = 0;
  if (!parseCount(name, value, n, error, Min, Max > 0 ? Max : fits))
    return false;
  typename Member::Owner *owner;
  if constexpr (std::is_same_v<typename Member::Owner, RunArgs>)
    owner = &out;
  else
    owner = &out.run;
  owner->*Field = static_cast<typename Member::Type>(n);
  return true;
}

/// A flag: sets the field to true.
template <bool RunArgs::*Field>
bool setFlag(const std::string &, const std::string &, RunArgs &out,
             std::string &) {
  out.*Field = true;
  return true;
}

/// --name PATH: a file's path, which may not be empty (`--resume "$CKPT"`
/// with CKPT unset would otherwise start from step 0 without a word).
bool filePath(const std::string &name, const std::string &value,
              std::string &error) {
  if (value.empty())
    error = name + " needs a file name; it was given an empty one";
  return !value.empty();
}

/// --name PATH: `value` into a string field of RunArgs.
template <std::string RunArgs::*Field>
bool setString(const std::string &name, const std::string &value,
               RunArgs &out, std::string &error) {
  if (!filePath(name, value, error))
    return false;
  out.*Field = value;
  return true;
}

/// --name PATH: `value` into a string field of RunArgs' RunOptions.
template <std::string RunOptions::*Field>
bool setRunString(const std::string &name, const std::string &value,
                  RunArgs &out, std::string &error) {
  if (!filePath(name, value, error))
    return false;
  out.run.*Field = value;
  return true;
}

/// Every run option, in --help's order. The train block's settings that a
/// run option overrides name it (TrainSettings.def).
const RunOption kRunOptions[] = {
    {"--device", "D",
     "cpu, cuda, or auto (the GPU if there is one; the default)",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) {
       if (v != "cpu" && v != "cuda" && v != "auto") {
         error = "unknown device '" + v + "'; expected cpu, cuda or auto";
         return false;
       }
       out.device = v;
       return true;
     }},
    {"--steps", "N", "train N steps in all (counting resumed ones)",
     setCount<&RunOptions::steps>},
    {"--epochs", "N", "train N epochs", setCount<&RunOptions::epochs>},
    {"--batch", "N",
     "batch size; auto: the largest, of at most the training examples, "
     "whose predicted peak fits the checkpoint budget, or else 95% of the "
     "device's free memory",
     [](const std::string &name, const std::string &v, RunArgs &out,
        std::string &error) {
       // The last --batch given wins.
       out.batchAuto = v == "auto";
       out.batch.reset();
       if (out.batchAuto)
         return true;
       int64_t n = 0;
       return parseCount(name, v, n, error) && (out.batch = n, true);
     },
     kCompiling},
    {"--seed", "S", "seed for initialization, shuffling and sampling",
     setCount<&RunOptions::seed, 0>},
    {"--threads", "N",
     "CPU threads of a run on the CPU (default: all cores; refused on a "
     "GPU, which does not use them)",
     setCount<&RunOptions::threads>},
    {"--log", "FILE",
     "write metrics as JSON lines (a run that resumes appends to the file)",
     setRunString<&RunOptions::logPath>},
    {"--log-every", "N", "log (and print) every N steps",
     setCount<&RunOptions::logEvery>},
    {"--sample-every", "N",
     "print a sample of what the model writes every N steps (a language "
     "model; gtc run)",
     setCount<&RunOptions::sampleEvery>, false, ""},
    {"--bench", "N", "time N training steps on random data and print ms/step",
     setCount<&RunArgs::bench, 1, std::numeric_limits<int>::max()>},
    {"--bench-warmup", "N",
     "steps run before --bench times its N (default 20 on a GPU, 3 on the "
     "CPU; shared/bench's PyTorch scripts run 5)",
     setCount<&RunOptions::benchWarmup, 1, std::numeric_limits<int>::max()>},
    {"--profile", "FILE",
     "profile steady-state steps on random data: a Chrome trace of every "
     "kernel, GEMM and copy to FILE (chrome://tracing, Perfetto) and a table "
     "of kernels by time; with --bench N, N steps are timed first",
     setRunString<&RunOptions::profilePath>},
    {"--precision", "P",
     "fp32, tf32 (cuBLASLt's TF32 GEMMs on a GPU), bf16 or fp16 "
     "(gt-autocast; fp16 with dynamic loss scaling)",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) {
       if (v != "fp32" && v != "tf32" && v != "bf16" && v != "fp16") {
         error =
             "unknown precision '" + v + "'; expected fp32, tf32, bf16 or fp16";
         return false;
       }
       out.precision = v;
       return true;
     },
     kCompiling},
    {"--checkpoint", "C",
     "gradient checkpointing instead of the train block's: none, "
     "'every(N)', 'auto(budget: SIZE)' (e.g. 6GiB) or auto (95% of the "
     "device's free memory)",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) { return parseCheckpoint(v, out, error); },
     kCompiling},
    {"--micro-batch", "M",
     "gradient accumulation: run each batch as micro-batches of M rows (a "
     "divisor of the batch) and update once; auto: the largest whose "
     "predicted peak fits 95% of the free memory",
     [](const std::string &name, const std::string &v, RunArgs &out,
        std::string &error) {
       if (v == "auto")
         return out.microBatch = -1, true;
       return setCount<&RunArgs::microBatch>(name, v, out, error);
     },
     kCompiling},
    {"--devices", "N",
     "data parallel: N processes (one per GPU; on the CPU, N processes "
     "through Gloo), each with batch/N rows of every batch; all: every GPU; "
     "cpu: one CPU process. Overrides the train block's devices. Under "
     "torchrun, srun or mpirun gtc joins their processes instead "
     "(RANK/WORLD_SIZE, ...)",
     [](const std::string &name, const std::string &v, RunArgs &out,
        std::string &error) {
       int64_t n = 0;
       if (v == "all" || v == "cpu")
         out.devices = v;
       else if (parseCount(name, v, n, error, 1, kMaxDevices))
         out.devices = std::to_string(n);
       else
         return false;
       return true;
     },
     false,
     "the processes this executable was compiled for (gtc compile --devices "
     "N; it starts them, or joins a launch of N under torchrun, srun or "
     "mpirun); cpu: one CPU process, for an executable of one process"},
    {"--rendezvous", "file:DIR",
     "meet the other ranks through files in DIR (new or empty, on a file "
     "system all ranks share) instead of TCP at MASTER_ADDR:MASTER_PORT",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) {
       if (v.rfind("file:", 0) != 0 || v.size() == 5) {
         error = "--rendezvous needs file:DIR (a new or empty directory on a "
                 "file system all ranks share), got '" +
                 v + "'";
         return false;
       }
       out.rendezvous = v;
       return true;
     }},
    {"--shard", "S",
     "data parallel: optimizer (ZeRO-1: each process keeps and updates 1/N "
     "of the optimizer state, then the parameters are gathered), gradients "
     "(ZeRO-2, GPUs: 1/N of the gradients kept too) or none; overrides the "
     "train block's shard",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) {
       if (v != "optimizer" && v != "gradients" && v != "none") {
         error = "--shard needs optimizer, gradients or none, got '" + v + "'";
         return false;
       }
       out.shard = v;
       return true;
     },
     kCompiling},
    {"--bucket-size", "SIZE",
     "data parallel: gradients are all-reduced in buckets of at most SIZE "
     "(default 64MiB), each as soon as the backward has computed it",
     [](const std::string &, const std::string &v, RunArgs &out,
        std::string &error) {
       if (parseBytes(v, out.bucketBytes))
         return true;
       error = "--bucket-size needs a size such as 25MiB or 1048576 (bytes), "
               "got '" +
               v + "'";
       return false;
     },
     kCompiling},
    {"--explain", "",
     "print the memory plan (weights, gradients, optimizer state, "
     "activations, workspace), each op's precision, the padded GEMMs, what "
     "gradient checkpointing saves and recomputes, and every kernel of a "
     "step (its ops, bytes moved, FLOPs) before training",
     setFlag<&RunArgs::explain>, kCompiling, ""},
    {"--dry-run", "",
     "compile, plan and print what --explain prints, then exit without "
     "training; --device cuda plans the GPU program on a machine without a "
     "GPU",
     setFlag<&RunArgs::dryRun>, kCompiling, ""},
    {"--check-numerics", "",
     "after every op of every step, check that its output is finite; the "
     "first that is not stops the run with its op, source location, layer "
     "and phase (slow: for debugging; with fp16 loss scaling, whose "
     "gradients may overflow by design, the forward pass only)",
     [](const std::string &, const std::string &, RunArgs &out, std::string &) {
       return out.run.checkNumerics = true;
     }},
    {"--no-pad", "",
     "with bf16 or fp16, keep GEMM dimensions as written (no gt-pad-dims; "
     "other precisions pad nothing)",
     setFlag<&RunArgs::noPad>, kCompiling},
    {"--pad-all", "",
     "with bf16 or fp16, pad small GEMMs too (by default those of fewer than "
     "2^28 multiply-adds keep their sizes: padding them costs more pad and "
     "slice kernels than it saves)",
     setFlag<&RunArgs::padAll>, kCompiling},
    {"--no-fuse", "", "one kernel per op (no gt-fuse; for comparisons)",
     setFlag<&RunArgs::noFuse>, kCompiling},
    {"--data", "PATH",
     "the training data instead of the train block's file (idx sources: "
     "IMAGES,LABELS)",
     setString<&RunArgs::data>},
    {"--eval", "PATH", "the evaluation data, likewise",
     setString<&RunArgs::eval>},
    {"--save", "FILE",
     "write a safetensors checkpoint at the end (and on Ctrl-C or SIGTERM; "
     "without --save an interrupted run writes MODEL-interrupted.safetensors "
     "in the current directory, or MODEL-interrupted-2 (3, ...) where that "
     "name is taken by a file other than the --resume one)",
     setRunString<&RunOptions::savePath>},
    {"--resume", "FILE", "continue from a checkpoint written by --save",
     setRunString<&RunOptions::resumePath>},
    {"--init", "FILE",
     "start from the weights of a safetensors file (matched by name: a gtc "
     "checkpoint, a nanoGPT state_dict, ...; f32, f64, bf16 or f16) with a "
     "fresh optimizer, at step 0",
     setRunString<&RunOptions::initPath>},
};

/// `text` wrapped at 79 columns, each line after the first indented by
/// `indent` spaces, after `first` (the line's start).
std::string wrap(std::string first, const std::string &text, size_t indent) {
  std::string out;
  std::string line = std::move(first);
  size_t at = 0;
  bool empty = true;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos)
      end = text.size();
    std::string word = text.substr(at, end - at);
    at = end + 1;
    if (!empty && line.size() + 1 + word.size() > 79) {
      out += line + "\n";
      line = std::string(indent, ' ');
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  return out + line + "\n";
}

/// An option's or a setting's first column, padded to `width` (or two
/// spaces past it).
std::string column(const std::string &head, size_t width) {
  return head.size() < width ? head + std::string(width - head.size(), ' ')
                             : head + "  ";
}

} // namespace

std::string gtc::rt::runOptionsHelp(bool compiled) {
  std::string out, fixed;
  for (const RunOption &o : kRunOptions) {
    // (an executable refuses these: gtc run's alone, or the compiler's)
    if (compiled && o.compiledHelp && !*o.compiledHelp)
      continue;
    if (compiled && o.compiling) {
      fixed += std::string(fixed.empty() ? "" : ", ") + o.name;
      continue;
    }
    const char *help = compiled && o.compiledHelp ? o.compiledHelp : o.help;
    std::string head = std::string("  ") + o.name +
                       (*o.metavar ? std::string(" ") + o.metavar : "");
    out += wrap(column(head, 17), help, 17);
  }
  if (compiled)
    out += "  -h, --help     show this help\n\n" +
           wrap("  ",
                "Fixed when this executable was compiled (give "
                "them to gtc compile; --batch and --precision "
                "are accepted when they match): " +
                    fixed + ".",
                2);
  return out;
}

std::string gtc::rt::trainSettingsHelp() {
  std::string out;
#define GTC_TRAIN_SETTING(NAME, KIND, DEFAULT, FLAG, HELP)                     \
  out += wrap(column("  " #NAME, 15),                                          \
              std::string(HELP) + " (default: " DEFAULT +                      \
                  (*FLAG ? std::string("; ") + FLAG : std::string()) + ")",    \
              15);
#include "gtc/Runtime/TrainSettings.def"
  return out;
}

bool gtc::rt::isRunOption(const std::string &name) {
  for (const RunOption &o : kRunOptions)
    if (name == o.name)
      return true;
  return false;
}

bool gtc::rt::isCompilingOption(const std::string &name) {
  for (const RunOption &o : kRunOptions)
    if (name == o.name)
      return o.compiling;
  return false;
}

ArgResult gtc::rt::parseRunArg(const std::vector<std::string> &args,
                               size_t &i, RunArgs &out, std::string &error) {
  const std::string &a = args[i];
  std::string name = a.substr(0, a.find('='));
  const RunOption *option = nullptr;
  for (const RunOption &o : kRunOptions)
    if (name == o.name)
      option = &o;
  if (!option)
    return ArgResult::NotMine;
  std::string value;
  if (!*option->metavar) {
    if (name != a) {
      error = name + " takes no value";
      return ArgResult::Error;
    }
  } else if (a.find('=') != std::string::npos) {
    value = a.substr(a.find('=') + 1);
  } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) == 0) {
    // A value left out: "--log --dry-run" would write a file "--dry-run".
    error = name + " needs a value; it is followed by the option '" +
            args[i + 1] + "' (for a value that starts with --, give " + name +
            "=VALUE)";
    return ArgResult::Error;
  } else if (i + 1 < args.size()) {
    value = args[++i];
  } else {
    error = name + " needs a value";
    return ArgResult::Error;
  }
  out.names.push_back(name);
  return option->apply(name, value, out, error) ? ArgResult::Ok
                                                : ArgResult::Error;
}

bool gtc::rt::checkRunArgs(const RunArgs &args, std::string &error,
                           const char *printsOnly) {
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
                     : printsOnly             ? printsOnly
                     : !r.profilePath.empty() ? "--profile"
                     : args.bench             ? "--bench"
                                              : nullptr;
  if (r.benchWarmup && !args.bench && r.profilePath.empty()) {
    error = "--bench-warmup sets the warm-up of --bench (or --profile), "
            "which were not given; add --bench N or drop it";
    return false;
  }
  if (!mode)
    return true;
  const bool printsPlan =
      printsOnly && std::string(printsOnly) == "--emit=plan";
  if (printsOnly) {
    const char *runs = args.bench               ? "--bench"
                       : !r.profilePath.empty() ? "--profile"
                       : args.explain           ? "--explain"
                       : r.threads              ? "--threads"
                                                : nullptr;
    if (runs) {
      error = std::string(printsOnly) + " prints and stops, so " + runs +
              " would have no effect; drop it";
      return false;
    }
  }
  if (args.dryRun && (args.bench || !r.profilePath.empty())) {
    error = "--dry-run trains and times nothing; drop --bench and --profile, "
            "or --dry-run";
    return false;
  }
  if (args.dryRun && r.threads) {
    error = "--dry-run runs nothing, so --threads would have no effect; drop it";
    return false;
  }
  const char *training = r.steps                 ? "--steps"
                         : r.epochs              ? "--epochs"
                         : r.seed                ? "--seed"
                         : r.logEvery            ? "--log-every"
                         : r.sampleEvery         ? "--sample-every"
                         : !r.logPath.empty()    ? "--log"
                         : !r.savePath.empty()   ? "--save"
                         : !r.resumePath.empty() ? "--resume"
                         : !r.initPath.empty()   ? "--init"
                         // (the plan names its data files)
                         : !printsPlan && !args.data.empty() ? "--data"
                         : !printsPlan && !args.eval.empty() ? "--eval"
                         : r.checkNumerics ? "--check-numerics"
                         // (no process meets another)
                         : !args.rendezvous.empty() ? "--rendezvous"
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
    if (run.threads > 0) {
      error = kThreadsOnGpuError;
      return false;
    }
    return true;
  }
  return device != "cuda";
}

bool gtc::rt::threadsOnGpus(const RunOptions &run, const std::string &device) {
  return run.threads > 0 && device != "cpu" &&
         (device == "cuda" || cudaDeviceCount() > 0);
}

bool gtc::rt::deviceForDevices(const std::string &devices,
                               std::string &device, std::string &error) {
  if (devices != "cpu")
    return true;
  if (device == "cuda") {
    error = "devices = cpu trains one CPU process, and --device cuda asks for "
            "the GPU: give --devices 1 (or N GPUs) to train on the GPU, or "
            "drop --device cuda";
    return false;
  }
  device = "cpu";
  return true;
}
