//===- Trainer.cpp - The training loop ------------------------------------===//

#include "gtc/Runtime/Trainer.h"
#include "Train/Backends.h"
#include "gtc/Runtime/Cache.h"
#include "gtc/Runtime/Files.h"
#include "gtc/Runtime/Checkpoint.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Data.h"
#include "gtc/Runtime/Messages.h"
#include "gtc/Runtime/Numerics.h"
#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/Sample.h"
#include "gtc/Runtime/Startup.h"
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

using namespace gtc::rt;
using namespace gtc::rt::backends;

namespace {

std::atomic<bool> interrupted{false};
extern "C" void onSignal(int) { interrupted = true; }

/// Installs SIGINT/SIGTERM handlers for the duration of training.
struct SignalGuard {
  struct sigaction oldInt {}, oldTerm {};
  SignalGuard() {
    interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
  }
};


/// The input and label feeds of a plan, checked against the data.
struct Feeds {
  int input = -1, label = -1;
};

/// Why `data` cannot feed the plan (empty when it can): an id beyond what
/// the model indexes with it (`inputRange`, `labelRange`: indexRange, an
/// embedding's rows or the logits' classes; 0 where nothing is indexed).
/// The largest ids were found over the whole file when it was opened, so
/// the run stops before it trains, not at the batch that holds the id (the
/// CPU's kernels would stop there, a GPU's go on to a NaN loss, and the
/// steps before it would be lost).
std::string idsBeyond(const Dataset &data, int64_t inputRange,
                      int64_t labelRange, const TrainConfig::Source &source,
                      const char *which) {
  for (auto [largest, range] :
       {std::pair{data.largestInputId(), inputRange},
        std::pair{data.largestLabelId(), labelRange}})
    if (range > 0 && largest >= range) {
      // (an idx source's images are f32: its ids are its labels)
      const std::string &path =
          source.kind == "idx" ? source.labels : source.path;
      return "the " + std::string(which) + " data (" + path + ") holds id " +
             std::to_string(largest) + ", and the model takes ids from 0 to " +
             std::to_string(range - 1) +
             " there (its embedding's rows, or its classes): give data made "
             "for this model, or a model with room for id " +
             std::to_string(largest);
    }
  return "";
}

/// Multiplies a float input batch by 1e30, so that the step overflows
/// (GTC_INJECT_OVERFLOW, for the loss-scaling tests).
void injectOverflow(const Plan &plan, const Feeds &feeds, void *data) {
  const Buffer &b = plan.buffers[feeds.input];
  if (b.dtype != DType::F32)
    return;
  float *x = static_cast<float *>(data);
  for (int64_t i = 0; i < b.elements(); ++i)
    x[i] = x[i] * 1e30f + 1e30f;
}

bool matchFeeds(const Plan &plan, const Dataset &data, const char *what,
                Feeds &feeds, std::string &error) {
  for (const Feed &f : plan.feeds) {
    int &slot = f.label ? feeds.label : feeds.input;
    if (slot >= 0) {
      error = "the model has more than one " +
              std::string(f.label ? "label" : "input") +
              "; the data sources give one input and one label";
      return false;
    }
    slot = f.buffer;
  }
  if (feeds.input < 0 || feeds.label < 0) {
    error = "the model needs one 'input' and one 'label' to train on " +
            std::string(what) + " data";
    return false;
  }
  for (auto [id, spec, kind] :
       {std::tuple{feeds.input, data.inputSpec(), "input"},
        std::tuple{feeds.label, data.labelSpec(), "label"}}) {
    const Buffer &b = plan.buffers[id];
    std::vector<int64_t> perExample(b.shape.begin() + (b.shape.empty() ? 0 : 1),
                                    b.shape.end());
    if (b.dtype != spec.dtype || perExample != spec.shape) {
      error = std::string("the ") + what + " data gives " + kind +
              " examples of " + typeText(spec.dtype, spec.shape) +
              ", but the model's " + kind + " '" + b.name + "' is " +
              typeText(b.dtype, b.shape) +
              " (batch first); change the model's declaration or the data";
      return false;
    }
  }
  return true;
}

std::string formatDuration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60),
                  (long long)(s % 60));
  return buf;
}

/// A JSON number (null when not finite).
std::string num(double v) {
  if (!std::isfinite(v))
    return "null";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

/// The tensors of a checkpoint: parameters by name, optimizer state as
/// "optimizer.<state>.<name>". `params`, `first` and `second` have the
/// parameter region's layout.
std::vector<StoredTensor> checkpointTensors(const Plan &plan,
                                            const std::vector<float> &params,
                                            const std::vector<float> &first,
                                            const std::vector<float> &second) {
  std::vector<StoredTensor> tensors;
  auto add = [&](const std::string &name, const std::vector<int64_t> &shape,
                 const float *data, int64_t n) {
    StoredTensor t;
    t.name = name;
    t.dtype = "F32";
    t.shape = shape;
    t.bytes.resize(n * sizeof(float));
    std::memcpy(t.bytes.data(), data, t.bytes.size());
    tensors.push_back(std::move(t));
  };
  const char *firstName =
      plan.config.optimizer == OptimizerKind::Sgd ? "momentum_buffer"
                                                  : "exp_avg";
  for (const Param &p : plan.params) {
    const Buffer &b = plan.buffers[p.buffer];
    add(p.name, b.shape, params.data() + b.offset, b.elements());
    if (!first.empty())
      add(std::string("optimizer.") + firstName + "." + p.name, b.shape,
          first.data() + b.offset, b.elements());
    if (!second.empty())
      add("optimizer.exp_avg_sq." + p.name, b.shape, second.data() + b.offset,
          b.elements());
  }
  return tensors;
}

} // namespace

/// `--init FILE`: the model's parameters from a safetensors file, matched by
/// name and shape (f32, f64, bf16 or f16 elements, converted to f32). Every
/// parameter must be there; other tensors (a gtc checkpoint's optimizer
/// state, nanoGPT's tied `lm_head.weight`, Hugging Face's attention masks)
/// are listed in a note and left alone. False with a message on `err`.
bool gtc::rt::loadInitialWeights(const Plan &plan, const std::string &path,
                                 std::vector<float> &params, std::ostream &out,
                                 std::ostream &err) {
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> meta;
  std::string error;
  if (!readSafetensors(path, tensors, meta, error)) {
    err << errorPrefix() << "cannot --init: " << error << "\n";
    return false;
  }
  std::map<std::string, const StoredTensor *> byName;
  for (const StoredTensor &t : tensors)
    byName[t.name] = &t;
  for (const Param &p : plan.params) {
    const Buffer &b = plan.buffers[p.buffer];
    auto it = byName.find(p.name);
    if (it == byName.end()) {
      err << errorPrefix() << "cannot --init: " << path << " has no tensor '"
          << p.name << "' (the model's parameter "
          << typeText(DType::F32, b.shape)
          << "); its names must be the model's (gtc check --emit=mlir "
             "lists them as gt.param)\n";
      return false;
    }
    const StoredTensor &t = *it->second;
    const char *dtypes[] = {"F32", "F64", "BF16", "F16"};
    if (std::find(std::begin(dtypes), std::end(dtypes), t.dtype) ==
            std::end(dtypes) ||
        t.shape != b.shape) {
      std::string shape;
      for (int64_t d : t.shape)
        shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      err << errorPrefix() << "cannot --init: " << path << ": '" << p.name
          << "' is " << t.dtype << "[" << shape << "], the model needs "
          << typeText(DType::F32, b.shape)
          << " (f32, f64, bf16 or f16 elements)\n";
      return false;
    }
    float *dst = params.data() + b.offset;
    const int64_t n = b.elements();
    const uint8_t *src = t.bytes.data();
    for (int64_t i = 0; i < n; ++i) {
      if (t.dtype == "F32") {
        std::memcpy(dst + i, src + 4 * i, 4);
      } else if (t.dtype == "F64") {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      } else {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        dst[i] = fromHalfBits(bits, t.dtype == "BF16" ? DType::BF16
                                                      : DType::F16);
      }
    }
    if (std::string bad = NumericsCheck::count(dst, n); !bad.empty()) {
      err << errorPrefix() << "cannot --init: " << path << ": '" << p.name
          << "' holds " << bad << " (the file is damaged, or its run "
          << "diverged); start from another file\n";
      return false;
    }
    byName.erase(it);
  }
  // A gtc checkpoint's optimizer state is expected; anything else unused is
  // worth a line (a misspelt name would otherwise go unnoticed).
  std::vector<std::string> unused;
  for (const auto &[name, t] : byName)
    if (name.rfind("optimizer.", 0) != 0)
      unused.push_back(name);
  out << "initialized " << plan.params.size() << " parameters from " << path
      << "\n";
  if (!unused.empty()) {
    out << "note: " << unused.size() << " tensor"
        << (unused.size() == 1 ? "" : "s") << " of " << path
        << " not in the model, left alone:";
    for (size_t i = 0; i < unused.size() && i < 4; ++i)
      out << (i ? ", " : " ") << unused[i];
    if (unused.size() > 4)
      out << ", ...";
    out << "\n";
  }
  return true;
}

std::unique_ptr<Dataset> gtc::rt::openSource(const TrainConfig::Source &s,
                                             std::string &error) {
  if (s.kind == "idx")
    return openIdx(s.images, s.labels, static_cast<float>(s.scale), error);
  if (s.kind == "tokens")
    return openTokens(s.path, s.seq, error);
  if (s.kind == "text")
    return openText(s.path, s.seq, error);
  error = "unknown data kind '" + s.kind + "'";
  return nullptr;
}

std::string gtc::rt::lowerBatch(const RunOptions &options) {
  return options.compiled
             ? "compile the executable with a smaller batch (gtc compile "
               "--batch N)"
             : "lower the batch size (--batch)";
}

namespace {
/// A checkpoint's count of steps: a whole number >= 0, or none.
std::optional<int64_t> stepCount(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < 0)
    return std::nullopt;
  return v;
}

} // namespace

std::string gtc::rt::fileTheRunReads(const std::string &path,
                                     const TrainConfig &c,
                                     const std::string &source) {
  for (const auto &[data, what] : {std::pair{&c.data, "training"},
                                   std::pair{&c.eval, "evaluation"}})
    for (const std::string *file : {&data->path, &data->images, &data->labels})
      if (sameFile(path, *file))
        return std::string("the ") + what + " data ('" + *file + "')";
  if (sameFile(path, source))
    return "the model's file ('" + source + "')";
  if (sameFile(path, runningProgram()))
    return "the program that is running";
  return "";
}

namespace {

/// What `path` is among the files the run reads (fileTheRunReads) or its
/// --init and --resume files, which the log or the checkpoint must not
/// replace; for the log (`forLog`), also the checkpoint --save writes.
/// --save may name --resume's file: a run goes on from its checkpoint and
/// saves where it was. Empty when it is none of them.
std::string fileTheRunUses(const std::string &path, const TrainConfig &c,
                           const RunOptions &o, bool forLog) {
  if (std::string file = fileTheRunReads(path, c, o.sourcePath);
      !file.empty())
    return file;
  if (sameTarget(path, o.initPath))
    return "the --init weights ('" + o.initPath + "')";
  if (forLog && sameTarget(path, o.resumePath))
    return "the --resume checkpoint ('" + o.resumePath + "')";
  if (forLog && sameTarget(path, o.savePath))
    return "the --save checkpoint ('" + o.savePath + "')";
  return "";
}

/// Why checkpoints cannot go to `path` (empty when they can): it names
/// something other than a file (a checkpoint replaces the file it is
/// written to, and must not replace a directory, a pipe or a device), or
/// one of the run's data files, its model's file or its --init weights, or
/// the temporary file
/// the checkpoint is written to first cannot be created beside it (its
/// directory does not exist or cannot be written, or the name is too
/// long). Checked before training, so that a long run does not end
/// without its checkpoint.
std::string unwritable(const std::string &path, const TrainConfig &c,
                       const RunOptions &options) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return "--save '" + path + "' is " +
           (S_ISDIR(st.st_mode) ? "a directory"
                                : "not a regular file (a pipe or a device)") +
           "; give the path of a checkpoint file";
  if (std::string file = fileTheRunUses(path, c, options, /*forLog=*/false);
      !file.empty())
    return "--save '" + path + "' is " + file +
           ", which the checkpoint would replace; give --save another path";
  const std::string dir = directoryOf(path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot write the checkpoint '" + path + "': its directory '" + dir +
           "' " +
           (errno == ENOENT ? std::string("does not exist")
                            : std::string("cannot be written (") +
                                  std::strerror(errno) + ")") +
           "; create it, or give --save a path in a writable directory";
  // The temporary file itself, created and removed (a name can be too long
  // for it alone, or the file system read-only).
  const std::string temp = tempPathBeside(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno != EEXIST)
    return "cannot write the checkpoint '" + path + "': cannot create '" +
           temp + "' beside it (" + std::strerror(errno) +
           "); give --save another path";
  if (fd >= 0) {
    ::close(fd);
    ::unlink(temp.c_str());
  }
  return "";
}

/// The device memory the executor planned (regions, workspaces, state) and
/// took (cuMemGetInfo around its allocation).
std::pair<size_t, size_t> deviceMemory(CudaBackend &gpu) {
  size_t planned = 0, measured = 0;
  for (auto [what, bytes] : gpu.exec.memoryBreakdown())
    (what == "measured (cuMemGetInfo)" ? measured : planned) += bytes;
  return {planned, measured};
}

/// The GPU's memory in use (cuMemGetInfo) and where it went: what the
/// context took when it opened, what gtc's executor allocated (against its
/// plan), and the rest: the libraries' own (NCCL's buffers, cuBLASLt),
/// loaded kernels and captured graphs.
struct GpuMemory {
  size_t inUse, context, planned, measured;
  GpuMemory(CudaBackend &gpu)
      : inUse(cudaMemoryInUse()), context(cudaContextMemory()) {
    std::tie(planned, measured) = deviceMemory(gpu);
  }
  /// What no plan counts (Cache.h's record, for --explain).
  OutsideMemory outside() const {
    return {static_cast<int64_t>(context),
            std::max<int64_t>(0, static_cast<int64_t>(inUse) -
                                     static_cast<int64_t>(context + measured))};
  }
  std::string str() const {
    const double mib = 1048576.0;
    std::ostringstream o;
    o << std::fixed << std::setprecision(1)
      << "GPU memory in use after the first step: " << inUse / mib
      << " MiB (cuMemGetInfo) = " << context / mib
      << " MiB the context had + " << measured / mib << " MiB gtc's ("
      << planned / mib << " planned) + " << outside().rest / mib
      << " MiB the rest (NCCL's buffers, cuBLASLt, kernels, graphs)";
    return o.str();
  }
};

/// One training run: opened (data, step count, backend), started
/// (parameters fresh, from --init, or resumed), then its steps, with
/// evaluation, progress, the log and checkpoints. Every method that can
/// fail prints the error and returns false.
class Training {
public:
  Training(const Plan &step, const EvalPlanFn &evalPlan,
           const RunOptions &options, std::ostream &rankOut, std::ostream &err)
      : step(step), c(step.config), evalPlan(evalPlan), options(options),
        comm(options.comm), rank(comm ? comm->rank() : 0),
        ranks(comm ? comm->size() : 1), nowhere(nullptr),
        out(rank == 0 ? rankOut : nowhere), err(err),
        cuda(options.device == "cuda"), tf32(c.precision == Precision::Tf32),
        savePath(options.savePath) {}

  /// The process's exit status: 0, 1 on an error, 130 when interrupted.
  int run() {
    if (!open() || !start())
      return 1;
    printHeader();
    SignalGuard signals;
    t0 = lastPrint = std::chrono::steady_clock::now();
    for (int64_t s = first; s < total; ++s) {
      if (stopVoted())
        return stopAt(s);
      if (!trainStep(s))
        return 1;
    }
    // A log that could not be written fails the run, once its training and
    // checkpoint are done.
    return finish() && !logLost ? 0 : 1;
  }

private:
  /// The data, the number of steps, the backend.
  bool open();
  /// The parameters (and optimizer state): fresh, from --init, or resumed.
  bool start();
  bool resume();
  /// A checkpoint after `stepsDone` steps at savePath (none without one).
  bool save(int64_t stepsDone);
  /// Evaluation over the whole eval set, in batches (a smaller last one).
  bool evaluate(int64_t atStep);
  /// --sample-every: rank 0 prints what the model writes now.
  bool sample(int64_t atStep);
  EvalBackend *evalBackend(int64_t n, bool &skip);
  void printHeader();
  /// All ranks stop at the same step when one is interrupted.
  bool stopVoted();
  int stopAt(int64_t s);
  /// Step s: its micro-batches, then the loss, the log, the progress line
  /// and evaluation as due.
  bool trainStep(int64_t s);
  bool checkLoss(int64_t s);
  void logStep(int64_t s, int64_t epoch, double lr, double rate,
               double elapsed);
  void printProgress(int64_t s, int64_t epoch, double rate, double elapsed,
                     double eta);
  bool finish();
  bool fail(const std::string &message) {
    err << errorPrefix() << message << "\n";
    return false;
  }

  const Plan &step;
  const TrainConfig &c;
  const EvalPlanFn &evalPlan;
  const RunOptions &options;
  // Data parallelism: this process's share of every batch; rank 0 alone
  // prints, logs and saves.
  Communicator *comm;
  const int rank, ranks;
  std::ostream nowhere;
  std::ostream &out, &err;
  const bool cuda, tf32;

  std::unique_ptr<Dataset> data, evalData;
  Feeds feeds;
  /// With gradient accumulation a step reads `parts` micro-batches of the
  /// plan's batch: the examples one batch of micro * parts would hold.
  int64_t micro = 0, parts = 1, batch = 0, perEpoch = 0, total = 0;
  uint64_t seed = 0;
  std::unique_ptr<Backend> backend;
  std::vector<float> params, firstMoment, secondMoment;
  int64_t first = 0; ///< the step training starts at (resumed: its step)
  LossScaler resumedScaler; ///< fp16: the checkpoint's, if it has one
  bool haveScaler = false;
  std::unique_ptr<Loader> loader;
  std::ofstream log;
  /// Whether a record did not reach the log: the run goes on without it
  /// (its training and checkpoint matter more) and exits with status 1.
  bool logLost = false;
  /// After each record: flushes it, and on a failed write says so once.
  void logWritten() {
    log.flush();
    if (log || logLost)
      return;
    logLost = true;
    err << "\n" << errorPrefix() << "cannot write the log '" << options.logPath
        << "': " << std::strerror(errno)
        << "; training goes on without it and the run will exit with "
           "status 1 (free space there, or give --log another path)\n";
  }
  /// Where checkpoints go: --save, or, when training is interrupted
  /// without it (Ctrl-C, a scheduler's SIGTERM), interruptedPath(), so that
  /// no progress is lost.
  std::string savePath;
  /// MODEL-interrupted.safetensors here, or MODEL-interrupted-2 (3, ...)
  /// where that name is taken: nothing is replaced that this run was not
  /// given, but the checkpoint it resumed from is brought up to date.
  std::string interruptedPath() const;

  std::map<int64_t, std::unique_ptr<EvalBackend>> evals;
  int64_t evalBatch = 0;  ///< chosen at the first evaluation
  int64_t evaluations = 0; ///< evaluations begun
  bool tightEval = false; ///< whether it had to be smaller than the step's
  double evalSeconds = 0; ///< timed apart from training

  bool scaling = false, tty = false;
  int64_t logEvery = 1;
  /// A test hook: GTC_INJECT_OVERFLOW=N makes step N's inputs overflow.
  int64_t injectOverflowAt = 0;
  std::optional<NumericsCheck> numerics;
  std::chrono::steady_clock::time_point t0, lastPrint;
  /// When the first step (graph capture, cuBLASLt's choices) had finished,
  /// and the evaluation time by then: the steady rate is measured from
  /// there.
  std::optional<std::chrono::steady_clock::time_point> firstDone;
  double evalBeforeSteady = 0;
  double lossEma = 0, lastLoss = 0;
  bool haveEma = false;
  int64_t sinceStart = 0;
};

bool Training::open() {
  setThreads(options.threads);
  std::string error;
  if (c.data.kind.empty())
    return fail("the train block has no 'data' source; add e.g. "
                "data = idx(\"images.gz\", \"labels.gz\")");
  {
    StartupPhase dataPhase("data");
    // (the paths are the train block's, relative to the current
    // directory, or --data's and --eval's)
    // (an executable has no train block to fix)
    const bool block = !options.compiled;
    if (!(data = openSource(c.data, error)))
      return fail(error + " (the training data: " +
                  (block ? "fix the train block's data = ..., or " : "") +
                  "give --data)");
    if (!c.eval.kind.empty() && !(evalData = openSource(c.eval, error)))
      return fail(error + " (the evaluation data: " +
                  (block ? "fix the train block's eval = ..., or " : "") +
                  "give --eval)");
  }
  if (!matchFeeds(step, *data, "training", feeds, error))
    return fail(error);
  // The evaluation data's examples too, before training rather than at
  // the first evaluation.
  if (Feeds evalFeeds;
      evalData && !matchFeeds(step, *evalData, "eval", evalFeeds, error))
    return fail(error);
  const int64_t inputRange =
      feeds.input >= 0 ? indexRange(step, feeds.input) : 0;
  const int64_t labelRange =
      feeds.label >= 0 ? indexRange(step, feeds.label) : 0;
  if (std::string why =
          idsBeyond(*data, inputRange, labelRange, c.data, "training");
      !why.empty())
    return fail(why);
  if (evalData)
    if (std::string why = idsBeyond(*evalData, inputRange, labelRange, c.eval,
                                    "evaluation");
        !why.empty())
      return fail(why);
  micro = step.batch;
  parts = step.microBatches;
  batch = micro * parts * ranks;
  // Evaluation data smaller than one batch is one smaller batch, whose plan
  // a compiled executable has only for the data it was compiled with.
  if (evalData && evalData->size() < micro && evalPlan &&
      !evalPlan(evalData->size()))
    return fail("the evaluation data has " +
                std::to_string(evalData->size()) +
                " examples, fewer than one batch of " + std::to_string(micro) +
                ", and there is no evaluation plan for a batch of " +
                std::to_string(evalData->size()) +
                " (an executable has plans for the evaluation data it was "
                "compiled with): give at least " +
                std::to_string(micro) +
                " evaluation examples, or compile with this data");
  seed = options.seed.value_or(c.seed);
  perEpoch = data->size() / batch;
  if (perEpoch == 0)
    return fail("the training data has " + std::to_string(data->size()) +
                " examples, fewer than one batch of " + std::to_string(batch) +
                "; " + lowerBatch(options));
  // Steps in all, and the examples they read, must be counted in int64.
  const int64_t epochs = options.epochs ? *options.epochs
                                        : std::max<int64_t>(1, c.epochs);
  const bool byEpochs = !options.steps && (options.epochs || c.steps <= 0);
  if (byEpochs && __builtin_mul_overflow(epochs, perEpoch, &total))
    total = std::numeric_limits<int64_t>::max();
  else if (!byEpochs)
    total = options.steps ? *options.steps : c.steps;
  if (int64_t examples; __builtin_mul_overflow(total, batch, &examples)) {
    const std::string given =
        byEpochs ? (options.epochs ? "--epochs " : "epochs = ") +
                       std::to_string(epochs) + " (" +
                       std::to_string(perEpoch) + " steps an epoch, "
                 : (options.steps ? "--steps " : "steps = ") +
                       std::to_string(total) + " (";
    return fail(given + std::to_string(batch) +
                " examples a step) counts more examples than gtc can; give at "
                "most " +
                std::to_string(std::numeric_limits<int64_t>::max() / batch /
                               (byEpochs ? perEpoch : 1)) +
                (byEpochs ? " epochs" : " steps"));
  }
  if (cuda) {
    const CudaProgram *program = options.programFor(step);
    if (!program)
      return false;
    backend = std::make_unique<CudaBackend>(step, *program, tf32, comm,
                                            options.shardOptimizer);
  } else {
    StartupPhase phase("memory");
    const std::string shortfall = hostMemoryShortfall(
        step, options.shardOptimizer && comm ? comm->size() : 1);
    if (!shortfall.empty())
      return fail(shortfall);
    backend = std::make_unique<CpuBackend>(step, options.comm,
                                           options.shardOptimizer);
  }
  return true;
}

bool Training::start() {
  {
    StartupPhase paramPhase("parameters");
    // The host holds the parameters only where it reads or draws them.
    const auto onHost = [&] {
      params.assign(step.regionSize.at(Region::Param), 0.0f);
    };
    if (!options.resumePath.empty()) {
      onHost();
      if (!resume())
        return false;
    } else if (!options.initPath.empty()) {
      onHost();
      if (!loadInitialWeights(step, options.initPath, params, out, err))
        return false;
      backend->setParams(params);
    } else if (!backend->initParams(seed)) {
      onHost();
      initParameters(step, seed, params.data());
      backend->setParams(params);
    }
  }
  loader = std::make_unique<Loader>(*data, batch, seed, c.shuffle,
                                    /*dropLast=*/true);
  // The schedule's counters first: the scaler's are among them.
  backend->setSchedule(first, total, seed);
  if (haveScaler)
    backend->setScaler(resumedScaler);
  if (!options.savePath.empty() && rank == 0)
    if (std::string why = unwritable(options.savePath, c, options);
        !why.empty())
      return fail(why);
  if (!options.logPath.empty() && rank == 0) {
    if (std::string file = fileTheRunUses(options.logPath, c, options,
                                          /*forLog=*/true);
        !file.empty())
      return fail("--log '" + options.logPath + "' is " + file +
                  ", which the log would replace; give --log another path");
    log.open(options.logPath, first > 0 ? std::ios::app : std::ios::trunc);
    if (!log)
      return fail("cannot write the log '" + options.logPath +
                  "': " + std::strerror(errno));
  }
  return true;
}

bool Training::resume() {
  std::string error;
  const int64_t paramElements = static_cast<int64_t>(params.size());
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> meta;
  if (!readSafetensors(options.resumePath, tensors, meta, error))
    return fail("cannot resume: " + error);
  if (meta["format"] != "gtc-checkpoint-1")
    return fail("cannot resume: " + options.resumePath +
                " is not a gtc checkpoint (its metadata lacks format "
                "'gtc-checkpoint-1'); to start from its weights instead, use "
                "--init");
  if (meta["model"] != step.model)
    return fail("cannot resume: " + options.resumePath +
                " is a checkpoint of model '" + meta["model"] +
                "', not of model '" + step.model +
                "'; to start from its weights instead, use --init (every "
                "parameter must match by name and shape)");
  std::map<std::string, const StoredTensor *> byName;
  for (const StoredTensor &t : tensors)
    byName[t.name] = &t;
  bool hasState = meta["optimizer"] == name(c.optimizer);
  if (!hasState && rank == 0)
    err << notePrefix() << options.resumePath << " was saved with "
        << (meta["optimizer"].empty() ? "no optimizer named"
                                      : meta["optimizer"])
        << " and this run uses " << name(c.optimizer)
        << ": its optimizer state starts afresh\n";
  // SGD saved without momentum holds no buffers: resumed with momentum, the
  // buffers start at zero, as they would have then.
  const bool noMomentum =
      hasState && c.optimizer == OptimizerKind::Sgd && c.momentum != 0 &&
      std::none_of(tensors.begin(), tensors.end(), [](const StoredTensor &t) {
        return t.name.rfind("optimizer.momentum_buffer.", 0) == 0;
      });
  if (noMomentum && rank == 0)
    err << notePrefix() << options.resumePath
        << " holds no momentum buffers (it was saved without momentum): "
           "the momentum starts at zero\n";
  if (hasState && c.optimizer != OptimizerKind::Sgd) {
    firstMoment.assign(paramElements, 0.0f);
    secondMoment.assign(paramElements, 0.0f);
  } else if (hasState && c.momentum != 0) {
    firstMoment.assign(paramElements, 0.0f);
  }
  // Every tensor that is missing or differs, named (a model edited
  // since the checkpoint usually differs in several), and every one that
  // holds values no training step could have left.
  std::vector<std::string> differ, damagedTensors;
  auto load = [&](const std::string &name, const Buffer &b, float *dst) {
    auto it = byName.find(name);
    if (it == byName.end()) {
      differ.push_back("'" + name + "' is missing (the model has " +
                       typeText(DType::F32, b.shape) + ")");
      return false;
    }
    if (it->second->dtype != "F32" || it->second->shape != b.shape) {
      std::string dtype = it->second->dtype;
      for (char &ch : dtype)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string have = dtype + "[";
      for (size_t i = 0; i < it->second->shape.size(); ++i)
        have += (i ? ", " : "") + std::to_string(it->second->shape[i]);
      differ.push_back("'" + name + "' is " + have + "] there, " +
                       typeText(DType::F32, b.shape) + " in the model");
      return false;
    }
    std::memcpy(dst, it->second->bytes.data(), it->second->bytes.size());
    // A parameter or moment that is not finite (or a negative second
    // moment, whose square root the update takes) would train to NaN.
    std::string bad = NumericsCheck::count(dst, b.elements());
    if (bad.empty() && name.rfind("optimizer.exp_avg_sq.", 0) == 0 &&
        std::any_of(dst, dst + b.elements(), [](float x) { return x < 0; }))
      bad = "negative values";
    if (!bad.empty())
      damagedTensors.push_back("'" + name + "' holds " + bad);
    return true;
  };
  const char *firstName =
      c.optimizer == OptimizerKind::Sgd ? "momentum_buffer" : "exp_avg";
  for (const Param &p : step.params) {
    const Buffer &b = step.buffers[p.buffer];
    if (!load(p.name, b, params.data() + b.offset))
      continue; // its optimizer state differs alike
    if (!firstMoment.empty() && !noMomentum)
      load(std::string("optimizer.") + firstName + "." + p.name, b,
           firstMoment.data() + b.offset);
    if (!secondMoment.empty())
      load("optimizer.exp_avg_sq." + p.name, b, secondMoment.data() + b.offset);
  }
  if (!differ.empty()) {
    constexpr size_t kShown = 8;
    err << errorPrefix() << "cannot resume: " << options.resumePath
        << " does not fit model '" << step.model << "' (was the model "
        << "changed since it was saved?): " << differ.size() << " tensor"
        << (differ.size() == 1 ? "" : "s") << " differ:\n";
    for (size_t i = 0; i < differ.size() && i < kShown; ++i)
      err << "  " << differ[i] << "\n";
    if (differ.size() > kShown)
      err << "  ... and " << differ.size() - kShown << " more\n";
    return false;
  }
  if (!damagedTensors.empty())
    return fail("cannot resume: " + options.resumePath + ": " +
                damagedTensors.front() +
                (damagedTensors.size() > 1
                     ? " (and " + std::to_string(damagedTensors.size() - 1) +
                           " more tensors)"
                     : std::string()) +
                "; the file is damaged, or its run diverged: resume from an "
                "earlier checkpoint");
  // Every field gtc writes is checked before it is used: a damaged one is
  // named, not read as 0.
  auto damaged = [&](const std::string &key, const std::string &what) {
    return fail("cannot resume: " + options.resumePath + "'s metadata gives " +
                key + " '" + meta[key] + "', not " + what +
                "; the file is damaged: resume from another checkpoint, or "
                "start from its weights with --init");
  };
  std::optional<int64_t> at = stepCount(meta["step"]);
  if (!at)
    return damaged("step", "a number of steps");
  first = *at;
  // The other counts may be absent (a file gtc did not write): their
  // defaults then.
  int64_t savedTotal = 0, skipped = 0, goodSteps = 0;
  const std::pair<const char *, int64_t *> counts[] = {
      {"total_steps", &savedTotal},
      {"skipped_steps", &skipped},
      {"loss_scale_good_steps", &goodSteps}};
  for (auto [key, value] : counts)
    if (!meta[key].empty()) {
      std::optional<int64_t> n = stepCount(meta[key]);
      if (!n)
        return damaged(key, "a number of steps");
      *value = *n;
    }
  if (skipped > first)
    return damaged("skipped_steps", "a number of steps up to its step, " +
                                        std::to_string(first));
  // The data's position is its step times its batch: at another batch the
  // run would skip or repeat examples.
  if (!meta["batch"].empty()) {
    std::optional<int64_t> saved = stepCount(meta["batch"]);
    if (!saved || *saved < 1)
      return damaged("batch", "a batch size");
    if (*saved != batch)
      return fail("cannot resume: " + options.resumePath +
                  " was trained at batch " + std::to_string(*saved) +
                  " (all processes together), and this run's is " +
                  std::to_string(batch) +
                  "; its data would resume at another example: " +
                  (options.compiled
                       ? "resume it with an executable compiled for batch " +
                             std::to_string(*saved) + " (gtc compile --batch " +
                             std::to_string(*saved) + ")"
                       : "give --batch " + std::to_string(*saved)) +
                  ", or start from its weights with --init");
  }
  // Continue the same sequence of batches unless a seed is given again,
  // and the same schedule unless a length is given again (on the command
  // line: the train block's may be what the command line replaced when the
  // run began). A block that says otherwise gets a note.
  if (!options.seed && !meta["seed"].empty()) {
    char *end = nullptr;
    errno = 0;
    const uint64_t saved = std::strtoull(meta["seed"].c_str(), &end, 10);
    if (*end || errno || meta["seed"][0] == '-')
      return damaged("seed", "a seed (a whole number)");
    if (saved != seed && rank == 0)
      err << notePrefix() << "resuming with " << options.resumePath
          << "'s seed " << saved << ", not the train block's " << seed
          << "; give --seed " << seed << " for that\n";
    seed = saved;
  }
  if (!options.steps && !options.epochs && !meta["total_steps"].empty()) {
    if (savedTotal != total && rank == 0)
      err << notePrefix() << "resuming " << options.resumePath
          << "'s schedule of " << savedTotal
          << " steps, not the train block's " << total << "; give --steps "
          << total << " for that\n";
    total = savedTotal;
  }
  if (first >= total)
    return fail(options.resumePath + " is at step " + std::to_string(first) +
                ", and this run trains " + std::to_string(total) +
                " steps in all (resumed ones included); give --steps larger "
                "than " +
                std::to_string(first) + " to train on");
  // Skipped fp16 steps did not update: Adam's t counts the others. The
  // scaler itself resumes where it was (fp16 runs only).
  float scale = 0;
  if (step.scalesLoss() && !meta["loss_scale"].empty()) {
    char *end = nullptr;
    scale = std::strtof(meta["loss_scale"].c_str(), &end);
    if (*end || !std::isfinite(scale) || !(scale > 0))
      return damaged("loss_scale", "a loss scale (a number > 0)");
  }
  backend->setParams(params);
  backend->setState(firstMoment, secondMoment,
                    hasState ? first - skipped : 0);
  if (scale > 0) {
    haveScaler = true;
    resumedScaler.scale = scale;
    resumedScaler.goodSteps = goodSteps;
    resumedScaler.skipped = skipped;
  }
  out << "resumed " << options.resumePath << " at step " << first << "\n";
  return true;
}

bool Training::save(int64_t stepsDone) {
  if (savePath.empty())
    return true;
  // The ranks' parameters are the same; with ZeRO each holds a part of
  // the optimizer state, which every rank gathers (a collective).
  const bool sharded = options.shardOptimizer && comm;
  if (sharded)
    backend->getState(firstMoment, secondMoment);
  if (rank != 0)
    return true;
  std::map<std::string, std::string> meta = {
      {"format", "gtc-checkpoint-1"},
      {"model", step.model},
      {"step", std::to_string(stepsDone)},
      {"total_steps", std::to_string(total)},
      {"seed", std::to_string(seed)},
      {"optimizer", name(c.optimizer)},
      {"batch", std::to_string(batch)},
      {"rng", "stateless: batches and windows derive from (seed, epoch, "
              "index)"}};
  // fp16: the loss scaler, so that a resumed run scales as this one would.
  LossScaler scaler;
  if (backend->getScaler(scaler)) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.9g", scaler.scale);
    meta["loss_scale"] = scale;
    meta["loss_scale_good_steps"] = std::to_string(scaler.goodSteps);
    meta["skipped_steps"] = std::to_string(scaler.skipped);
  }
  backend->getParams(params);
  if (!sharded)
    backend->getState(firstMoment, secondMoment);
  std::string error;
  if (!writeSafetensors(
          savePath, checkpointTensors(step, params, firstMoment, secondMoment),
          meta, error))
    // The writer replaces the file only once the new one is complete.
    return fail(error + (error.find("was replaced") == std::string::npos
                             ? "; the checkpoint there before, if any, is "
                               "unchanged"
                             : ""));
  return true;
}

/// The evaluation backend of batches of n (null with `skip` when there is
/// no plan for it and it may be skipped; null alone after an error).
EvalBackend *Training::evalBackend(int64_t n, bool &skip) {
  skip = false;
  // Where the memory is tight one evaluation executor at a time (the full
  // batches', then the last, smaller batch's).
  if (tightEval && !evals.count(n))
    evals.clear();
  std::unique_ptr<EvalBackend> &ev = evals[n];
  if (ev)
    return ev.get();
  const Plan *plan = evalPlan ? evalPlan(n) : nullptr;
  if (!plan && n < evalBatch) {
    // A compiled executable given other eval data than it was compiled
    // with has no plan for its last, smaller batch.
    out << "  note: the last " << n << " eval examples are skipped "
        << "(no evaluation plan for a batch of " << n << ")\n";
    evals.erase(n);
    skip = true;
    return nullptr;
  }
  if (!plan) {
    fail("cannot build the evaluation for a batch of " + std::to_string(n));
    return nullptr;
  }
  Feeds ef;
  std::string error;
  if (!matchFeeds(*plan, *evalData, "eval", ef, error)) {
    fail(error);
    return nullptr;
  }
  if (cuda) {
    const CudaProgram *program = options.programFor(*plan);
    if (!program)
      return nullptr;
    ev = std::make_unique<CudaEval>(*plan, *program, tf32);
  } else {
    ev = std::make_unique<CpuEval>(*plan);
  }
  return ev.get();
}

bool Training::evaluate(int64_t atStep) {
  auto evalStart = std::chrono::steady_clock::now();
  // Evaluation batches of the step's plan (micro-batches, when it
  // accumulates), halved on a GPU until the evaluation plan fits 90% of
  // the memory the training left (a batch chosen to fill the GPU, --batch
  // auto, leaves little; an evaluation's logits are not chunked).
  if (evalBatch == 0) {
    evalBatch = micro;
    CudaDeviceInfo info;
    std::string why;
    if (cuda && evalPlan && cudaAvailable(info, why))
      while (evalBatch > 1) {
        const Plan *p = evalPlan(evalBatch);
        if (!p || p->memory().peak() <= int64_t(info.freeMemory) / 10 * 9)
          break;
        evalBatch = (evalBatch + 1) / 2;
      }
    tightEval = evalBatch < micro;
    if (tightEval)
      out << "  note: evaluation in batches of " << evalBatch
          << ", which fit the memory left beside training\n";
  }
  Loader evalLoader(*evalData, evalBatch, seed, /*shuffle=*/false,
                    /*dropLast=*/false);
  bool paramsOnHost = false; // fetched from the backend (where needed)
  ++evaluations;
  double lossSum = 0, accSum = 0;
  int64_t seen = 0;
  bool hasAccuracy = false;
  // With data parallelism each rank evaluates every ranks-th batch, and
  // the sums are added up.
  for (int64_t b = rank; b < evalLoader.batchesPerEpoch(); b += ranks) {
    int64_t n = evalLoader.batchSize(b);
    bool skip;
    EvalBackend *ev = evalBackend(n, skip);
    if (skip)
      continue;
    if (!ev)
      return false;
    if (ev->paramsOf != evaluations) {
      if (!ev->setParamsFrom(*backend)) {
        if (!paramsOnHost)
          backend->getParams(params);
        paramsOnHost = true;
        ev->setParams(step, params);
      }
      ev->paramsOf = evaluations;
    }
    Feeds ef;
    std::string error;
    matchFeeds(ev->plan(), *evalData, "eval", ef, error);
    evalLoader.fill(0, b, ev->feed(ef.input), ev->feed(ef.label));
    auto [l, a] = ev->run();
    lossSum += l * n;
    accSum += a * n;
    hasAccuracy = ev->plan().accuracy >= 0;
    seen += n;
  }
  if (comm) {
    double sums[4] = {lossSum, accSum, static_cast<double>(seen),
                      hasAccuracy ? 1.0 : 0.0};
    comm->allReduceSum(sums, 4);
    lossSum = sums[0];
    accSum = sums[1];
    seen = static_cast<int64_t>(sums[2]);
    hasAccuracy = sums[3] > 0;
  }
  double loss = lossSum / std::max<int64_t>(1, seen);
  double acc = accSum / std::max<int64_t>(1, seen);
  out << "eval  step " << atStep << " | loss " << std::fixed
      << std::setprecision(4) << loss;
  if (hasAccuracy)
    out << " | accuracy " << std::setprecision(2) << acc * 100 << "%";
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - evalStart)
                       .count();
  evalSeconds += seconds;
  out << " | " << seen << " examples | " << std::setprecision(2) << seconds
      << " s\n"
      << std::defaultfloat << std::flush;
  if (log.is_open() && !logLost) {
    log << "{\"eval\": true, \"step\": " << atStep
        << ", \"loss\": " << num(loss) << ", \"accuracy\": " << num(acc)
        << "}\n";
    logWritten();
  }
  return true;
}

void Training::printHeader() {
  out << "training " << step.model << " on " << data->describe() << "\n"
      << "  " << step.parameterCount() << " parameters, batch " << batch;
  if (ranks > 1)
    out << " (" << ranks << " processes of " << micro * parts
        << ", gradients averaged over " << comm->describe()
        << (step.shardRanks > 1         ? ", gradients and optimizer state sharded"
            : options.shardOptimizer ? ", optimizer state sharded"
                                     : "")
        << ")";
  if (parts > 1)
    out << " (" << parts << " micro-batches of " << micro
        << ", gradients accumulated)";
  out << ", " << perEpoch << " steps per epoch, " << total << " steps, "
      << name(c.optimizer) << " lr " << c.lr << ", ";
  if (cuda)
    out << options.deviceName;
  else
    out << threads() << " threads";
  out << ", " << name(c.precision) << ", seed " << seed << "\n";
  if (!cuda && c.precision == Precision::Tf32)
    out << "  " << backends::kTf32OnCpuNote << "\n";
  // Settings that this run is too short for.
  if (c.warmup >= total)
    out << "  note: the warmup of " << c.warmup
        << " steps is not shorter than the run (" << total
        << " steps): the learning rate never reaches lr " << c.lr
        << (c.schedule != ScheduleKind::Constant ? " and never decays" : "")
        << "\n";
  const int64_t sampleEvery =
      options.sampleEvery > 0 ? options.sampleEvery : c.sampleEvery;
  if (sampleEvery > total - first)
    out << "  note: sample_every = " << sampleEvery << " is beyond the "
        << total - first << " steps this run trains: it prints no sample\n";
  if (!cuda && (c.precision == Precision::Bf16 ||
                c.precision == Precision::Fp16))
    out << "  note: the CPU emulates " << name(c.precision)
        << ": values rounded to it where the GPU stores it, arithmetic in "
           "fp32\n";
  if (auto *gpu = dynamic_cast<CudaBackend *>(backend.get())) {
    auto [planned, measured] = deviceMemory(*gpu);
    out << "  device memory: " << std::fixed << std::setprecision(1)
        << planned / 1048576.0 << " MiB planned, " << measured / 1048576.0
        << " MiB measured\n"
        << std::defaultfloat;
  }
  if (cuda) {
    out << "  kernels: " << compileStats().compiled << " compiled ("
        << std::fixed << std::setprecision(2) << compileStats().seconds
        << " s), " << compileStats().cacheHits << " from the cache";
    if (compileStats().rejected > 0)
      out << " (" << compileStats().rejected
          << (compileStats().rejected == 1 ? " cache file" : " cache files")
          << " of another kernel, damaged or of an older gtc: replaced)";
    out << "\n" << std::defaultfloat;
  }
  out.flush();

  scaling = step.scalesLoss();
  if (scaling)
    out << "  loss scaling: dynamic, initial " << LossScaler::kInitial
        << ", x2 after " << LossScaler::kGrowthInterval
        << " finite steps, x0.5 and skip on inf/NaN\n";
  injectOverflowAt = std::getenv("GTC_INJECT_OVERFLOW")
                         ? std::atoll(std::getenv("GTC_INJECT_OVERFLOW"))
                         : 0;
  if (options.checkNumerics) {
    numerics.emplace(step);
    backend->checkNumerics(*numerics);
    out << "  --check-numerics: every op's output is checked as it runs ("
        << (numerics->checksForwardOnly()
                ? "the forward pass only: fp16 gradients may overflow by "
                  "design; "
                : "")
        << (cuda ? "no CUDA graph, slow" : "slow") << ")\n";
  }
  if (injectOverflowAt > 0)
    out << "  test hook GTC_INJECT_OVERFLOW: step " << injectOverflowAt
        << "'s inputs times 1e30"
        << (step.buffers[feeds.input].dtype == DType::F32
                ? "\n"
                : " (no effect: the inputs are not f32)\n");
  out.flush();
  tty = options.progress && isatty(STDERR_FILENO);
  logEvery = options.logEvery > 0 ? options.logEvery
             : c.logEvery > 0     ? c.logEvery
                                  : std::max<int64_t>(1, (total - first) / 50);
}

bool Training::stopVoted() {
  // The decision is the reduced value alone: a signal that lands during the
  // reduction stays in the flag for the next step (overwriting the flag
  // with the result lost it, and the run went on).
  bool stop = interrupted;
  if (comm) {
    double votes = stop ? 1 : 0;
    comm->allReduceSum(&votes, 1);
    stop = votes > 0;
  }
  return stop;
}

std::string Training::interruptedPath() const {
  for (int n = 1;; ++n) {
    std::string path = step.model + "-interrupted" +
                       (n > 1 ? "-" + std::to_string(n) : "") +
                       ".safetensors";
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 ||
        sameFile(path, options.resumePath))
      return path;
  }
}

int Training::stopAt(int64_t s) {
  // Rank 0 speaks for all (it alone writes the checkpoint).
  if (rank == 0)
    err << "\ninterrupted at step " << s << "\n";
  if (savePath.empty())
    savePath = interruptedPath();
  if (!save(s))
    return 1;
  if (rank == 0)
    err << "saved " << savePath << " (resume with --resume " << savePath
        << ")\n";
  return 130;
}

bool Training::trainStep(int64_t s) {
  int64_t epoch = s / perEpoch, b = s % perEpoch;
  double lr = scheduledLr(c, s, total);
  bool lastStep = s + 1 == total;
  bool logged = (s + 1) % logEvery == 0 || lastStep;
  bool printLine =
      tty ? std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          lastPrint)
                    .count() > 0.25 ||
                lastStep
          : logged;
  auto stepStart = std::chrono::steady_clock::now();
  try {
    for (int part = 0; part < parts; ++part) {
      backend->prepare();
      loader->fill(epoch, b, (rank * parts + part) * micro, micro,
                   backend->feed(feeds.input), backend->feed(feeds.label));
      if (s + 1 == injectOverflowAt)
        injectOverflow(step, feeds, backend->feed(feeds.input));
      backend->run(lr, s + 1, logged || printLine, part,
                   static_cast<int>(parts));
    }
    if (s == first && !Startup::get().isClosed()) {
      // Where the time to the first step went (waits for the step).
      backend->loss();
      Startup::get().add("the step",
                         std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - stepStart)
                             .count());
      (tty ? err : out) << "first step: " << Startup::get().report() << "\n";
      if (auto *gpu = dynamic_cast<CudaBackend *>(backend.get())) {
        const GpuMemory memory(*gpu);
        (tty ? err : out) << "  " << memory.str() << "\n";
        if (rank == 0) // (every rank's GPU is of one kind)
          recordOutsideMemory(options.deviceName, ranks, memory.outside());
      }
      Startup::get().close();
    }
  } catch (const RuntimeError &e) {
    err << "\n"
        << errorPrefix() << "at step " << s + 1 << ": " << e.what() << "\n";
    return false;
  }
  ++sinceStart;
  if (sinceStart == 1 && s + 1 < total) {
    backend->loss(); // waits for the first step
    firstDone = std::chrono::steady_clock::now();
    evalBeforeSteady = evalSeconds;
  }
  auto now = std::chrono::steady_clock::now();
  // The loss is read only when it is shown or logged: on a GPU that is the
  // only time the host waits for the device.
  if ((!cuda || logged || printLine) && !checkLoss(s))
    return false;
  double elapsed = std::chrono::duration<double>(now - t0).count();
  double rate = sinceStart * batch / std::max(elapsed - evalSeconds, 1e-9);
  double eta = (total - s - 1) * batch / std::max(rate, 1e-9);
  if (log.is_open() && !logLost && logged) {
    logStep(s, epoch, lr, rate, elapsed);
    logWritten();
  }
  if (printLine) {
    lastPrint = now;
    printProgress(s, epoch, rate, elapsed, eta);
  }
  bool epochEnd = (s + 1) % perEpoch == 0;
  bool evalNow = evalData &&
                 (c.evalEvery > 0 ? (s + 1) % c.evalEvery == 0 : epochEnd);
  if (evalNow || (evalData && lastStep)) {
    if (tty)
      err << "\n";
    if (!evaluate(s + 1))
      return false;
  }
  const int64_t sampleEvery =
      options.sampleEvery > 0 ? options.sampleEvery : c.sampleEvery;
  if (sampleEvery > 0 && (s + 1) % sampleEvery == 0 && !sample(s + 1))
    return false;
  return true;
}

bool Training::sample(int64_t atStep) {
  if (!options.sampleWindow)
    return true;
  // Every rank holds the parameters; rank 0 alone writes (a GPU's are
  // downloaded first).
  if (rank != 0)
    return true;
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> host;
  backend->getParams(host);
  const Plan &w = *options.sampleWindow;
  const Buffer &logits = w.buffers[w.loss];
  const bool bytes = c.data.kind == "text";
  GenerateOptions g;
  // A newline for text, token 0 otherwise; up to 64 new tokens.
  g.prompts = {{bytes ? 10 : 0}};
  g.tokens = std::min<int64_t>(64, logits.shape[1] - 1);
  g.seed = mixSeed(seed, static_cast<uint64_t>(atStep));
  g.paramsPlan = &step;
  g.params = &host;
  g.report = false;
  std::vector<std::vector<int32_t>> generated;
  std::ostringstream problems;
  if (generate(w, options.sampleStep, g, options, generated, problems) != 0) {
    err << "\n" << problems.str();
    return false;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  evalSeconds += seconds;
  if (tty)
    err << "\n";
  out << "sample step " << atStep << " (" << std::fixed << std::setprecision(2)
      << seconds << " s): " << std::defaultfloat;
  for (size_t i = 0; i < generated[0].size(); ++i) {
    const int32_t id = generated[0][i];
    if (bytes) {
      char text[8];
      std::snprintf(text, sizeof text,
                    id >= 32 && id < 127 ? "%c"
                    : id == 10           ? "\\n"
                                         : "\\x%02x",
                    id);
      out << text;
    } else
      out << (i ? "," : "") << id;
  }
  out << "\n" << std::flush;
  return true;
}

/// Reads step s's loss: false (printed) when training cannot go on.
bool Training::checkLoss(int64_t s) {
  double loss = backend->loss();
  lastLoss = loss;
  // With loss scaling an inf/NaN step is skipped, not fatal.
  if (!std::isfinite(loss) && !scaling) {
    err << "\n"
        << errorPrefix() << "the loss is " << loss << " at step " << s + 1
        << "; lower the learning rate or add grad_clip\n";
    return false;
  }
  if (std::isfinite(loss)) {
    lossEma = haveEma ? 0.9 * lossEma + 0.1 * loss : loss;
    haveEma = true;
  }
  // Every step overflowing halves the scale each time; below fp16's
  // smallest value it can no longer help.
  double scale;
  int64_t skipped;
  if (scaling && backend->lossScale(scale, skipped) && scale < 0x1p-24) {
    err << "\n"
        << errorPrefix() << "the fp16 loss scale fell to " << scale
        << " after " << skipped << " skipped steps (at step " << s + 1
        << "): the gradients overflow whatever the scale; lower the "
           "learning rate, add grad_clip, or use precision bf16\n";
    return false;
  }
  return true;
}

void Training::logStep(int64_t s, int64_t epoch, double lr, double rate,
                       double elapsed) {
  double norm = backend->gradNorm(), scale = 0;
  int64_t skipped = 0;
  std::string scaleFields;
  if (backend->lossScale(scale, skipped))
    scaleFields = ", \"loss_scale\": " + num(scale) +
                  ", \"skipped_steps\": " + std::to_string(skipped);
  log << "{\"step\": " << s + 1 << ", \"epoch\": " << epoch + 1
      << ", \"loss\": " << num(lastLoss) << ", \"lr\": " << num(lr)
      << (norm >= 0 ? ", \"grad_norm\": " + num(norm) : "") << scaleFields
      << ", \"samples_per_s\": " << num(rate)
      << ", \"elapsed_s\": " << num(elapsed) << "}\n";
}

void Training::printProgress(int64_t s, int64_t epoch, double rate,
                             double elapsed, double eta) {
  std::ostringstream line;
  line << "step " << s + 1 << "/" << total << " | epoch " << epoch + 1
       << " | loss " << std::fixed << std::setprecision(4) << lossEma;
  // fp16: the steps skipped on an overflow so far, as the log has them.
  double scale = 0;
  int64_t skipped = 0;
  if (backend->lossScale(scale, skipped) && skipped > 0)
    line << " | " << skipped << " skipped";
  line << " | " << std::setprecision(0) << rate << " samples/s | "
       << formatDuration(elapsed) << " elapsed | ETA " << formatDuration(eta);
  if (tty)
    err << "\r" << line.str() << "\033[K" << std::flush;
  else
    out << line.str() << "\n" << std::flush;
}

bool Training::finish() {
  if (tty)
    err << "\n";
  lastLoss = backend->loss();
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  out << "done: " << total << " steps, final loss " << std::fixed
      << std::setprecision(4) << lastLoss << ", " << std::setprecision(1)
      << elapsed << " s";
  if (evalSeconds > 0)
    out << " (training " << elapsed - evalSeconds << " s, evaluation "
        << evalSeconds << " s)";
  if (firstDone) {
    // Steps 2 to the last, evaluation left out: the rate to compare runs on
    // different numbers of devices by.
    double steady = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - *firstDone)
                        .count() -
                    (evalSeconds - evalBeforeSteady);
    out << ", " << std::setprecision(1)
        << (sinceStart - 1) * batch / std::max(steady, 1e-9)
        << " samples/s after the first step";
  }
  out << "\n" << std::defaultfloat;
  if (!save(total))
    return false;
  if (!options.savePath.empty())
    out << "saved " << options.savePath << "\n";
  return true;
}

} // namespace

int gtc::rt::train(const Plan &step, const EvalPlanFn &evalPlan,
                   const RunOptions &options, std::ostream &out,
                   std::ostream &err) {
  if ((options.sampleEvery > 0 || step.config.sampleEvery > 0) &&
      !options.sampleWindow) {
    err << errorPrefix() << "sample_every prints samples under gtc run; a "
           "compiled training executable has no generation plans (sample "
           "from its --save file with gtc sample)\n";
    return 1;
  }
  int status = 1;
  try {
    status = Training(step, evalPlan, options, out, err).run();
  } catch (const RuntimeError &e) {
    err << "\n" << errorPrefix() << e.what() << "\n";
  } catch (const std::bad_alloc &) {
    err << "\n"
        << errorPrefix() << "out of memory; " << lowerBatch(options) << "\n";
  } catch (const std::exception &e) {
    err << "\n" << errorPrefix() << e.what() << "\n";
  }
  // After an error this rank leaves without the others: they learn it from
  // the communicator instead of waiting for its collectives.
  if (status == 1 && options.comm)
    options.comm->abort();
  return status;
}
