//===- Trainer.cpp - The training loop ------------------------------------===//

#include "gtc/Runtime/Trainer.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Runtime/Profile.h"
#include "gtc/Runtime/Checkpoint.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Data.h"
#include "gtc/Runtime/Numerics.h"
#include "gtc/Runtime/Optimizer.h"
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <unistd.h>

using namespace gtc::rt;

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

/// `--init FILE`: the model's parameters from a safetensors file, matched by
/// name and shape (f32, f64, bf16 or f16 elements, converted to f32). Every
/// parameter must be there; other tensors (a gtc checkpoint's optimizer
/// state, nanoGPT's tied `lm_head.weight`, Hugging Face's attention masks)
/// are listed in a note and left alone. False with a message on `err`.
bool loadInitialWeights(const Plan &plan, const std::string &path,
                        std::vector<float> &params, std::ostream &out,
                        std::ostream &err) {
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> meta;
  std::string error;
  if (!readSafetensors(path, tensors, meta, error)) {
    err << "gtc: error: cannot --init: " << error << "\n";
    return false;
  }
  std::map<std::string, const StoredTensor *> byName;
  for (const StoredTensor &t : tensors)
    byName[t.name] = &t;
  for (const Param &p : plan.params) {
    const Buffer &b = plan.buffers[p.buffer];
    auto it = byName.find(p.name);
    if (it == byName.end()) {
      err << "gtc: error: cannot --init: " << path << " has no tensor '"
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
      err << "gtc: error: cannot --init: " << path << ": '" << p.name
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

/// Where a training step runs. The trainer writes each batch into feed(),
/// then calls run(); loss() may wait for the device.
class Backend {
public:
  virtual ~Backend() = default;
  /// Host memory for buffer `id` of the next batch (after prepare()).
  virtual void *feed(int id) = 0;
  virtual void prepare() {}
  /// One step: forward, backward, clipping and the update with `lr`;
  /// loss() is valid afterwards only if `wantLoss`. With gradient
  /// accumulation a step is `parts` calls, one per micro-batch: each adds
  /// its gradients and loss, the last updates with their mean.
  virtual void run(double lr, int64_t stepNo, bool wantLoss, int part,
                   int parts) = 0;
  virtual double loss() = 0;
  /// The gradient norm before clipping, if the backend measured it.
  virtual double gradNorm() { return -1; }
  /// With dynamic loss scaling: the scale for the next step and the steps
  /// skipped so far (as of the last step whose loss was read).
  virtual bool lossScale(double &scale, int64_t &skipped) { return false; }
  /// Dynamic loss scaling's whole state, for checkpoints; false without
  /// scaling.
  virtual bool getScaler(LossScaler &s) { return false; }
  virtual void setScaler(const LossScaler &s) {}
  /// --check-numerics: check every op's outputs with `check` as it runs.
  virtual void checkNumerics(const NumericsCheck &check) = 0;
  virtual void getParams(std::vector<float> &params) = 0;
  virtual void setParams(const std::vector<float> &params) = 0;
  virtual void getState(std::vector<float> &first,
                        std::vector<float> &second) = 0;
  virtual void setState(const std::vector<float> &first,
                        const std::vector<float> &second,
                        int64_t stepsDone) = 0;
  /// The steps done and the schedule's length (devices that compute the
  /// learning rate themselves; setState gave the updates applied).
  virtual void setSchedule(int64_t done, int64_t total) {}
};

class CpuBackend : public Backend {
public:
  CpuBackend(const Plan &plan, Communicator *comm, bool shard)
      : plan(plan), exec(plan), comm(comm) {
    // ZeRO-1: rank r owns the r-th of N contiguous parts of the flat
    // parameters (the last one shorter), their optimizer state and update.
    const int64_t n = exec.regionElements(Region::Param);
    const int ranks = comm && shard ? comm->size() : 1;
    const int64_t each = (n + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r)
      shares.push_back(static_cast<size_t>(
          std::max<int64_t>(0, std::min(n, (r + 1) * each) - r * each)));
    ownFrom = std::min(n, (comm && shard ? comm->rank() : 0) * each);
    // gt-bucket's all_reduce kernels reduce the gradients a bucket at a
    // time during the step; a plan without them (one process) has its
    // gradients reduced after it, all at once. With accumulation the
    // buckets of the last micro-batch are reduced, each as the mean over
    // the micro-batches (the earlier ones are summed after they run).
    for (const Kernel &k : plan.kernels)
      reducesInStep = reducesInStep || k.op == OpKind::AllReduce;
    if (comm && reducesInStep)
      exec.allReduceMean =
          [this](const std::vector<std::pair<float *, size_t>> &bucket) {
            if (parts > 1) {
              if (part + 1 < parts)
                return;
              for (auto [data, n] : bucket)
                finishMean(data, n);
            }
            this->comm->allReduceMean(bucket);
          };
  }
  void *feed(int id) override { return exec.data(id); }
  void run(double lr, int64_t, bool, int thisPart, int stepParts) override {
    const bool scaling = plan.scalesLoss();
    if (scaling)
      exec.floats(plan.lossScale)[0] = scaler.scale;
    part = thisPart;
    parts = stepParts;
    exec.run();
    float *grads = exec.region(Region::Grad);
    int64_t n = exec.regionElements(Region::Param);
    lastLoss = exec.floats(plan.loss)[0];
    if (parts > 1) {
      // The sums over micro-batches, then their mean (as the GPU's
      // gtc_accumulate: (sum + last) * (1 / parts)).
      if (part == 0) {
        accumulated.assign(grads, grads + n);
        lossSum = lastLoss;
      } else if (part + 1 < parts) {
        for (int64_t i = 0; i < n; ++i)
          accumulated[i] += grads[i];
        lossSum += lastLoss;
      }
      if (part + 1 < parts)
        return;
      if (!comm || !reducesInStep)
        finishMean(grads, static_cast<size_t>(n));
      lastLoss = (static_cast<float>(lossSum) + lastLoss) *
                 (1.0f / static_cast<float>(parts));
    }
    if (comm) {
      // The mean over processes of their batch shares' means: the mean
      // over the global batch (the shares are equal).
      if (!reducesInStep)
        comm->allReduceMean(grads, static_cast<size_t>(n));
      comm->allReduceMean(&lastLoss, 1);
    }
    if (scaling) {
      // Unscale with the scale this step used; skip on inf/NaN.
      float used = scaler.scale;
      if (!scaler.record(allFinite(grads, n))) {
        norm = -1;
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        grads[i] /= used;
    }
    norm = plan.config.gradClip > 0
               ? clipGradNorm(grads, n, plan.config.gradClip)
               : -1;
    float *params = exec.region(Region::Param);
    optimizerStep(plan.config, lr, params + ownFrom, grads + ownFrom,
                  static_cast<int64_t>(own()), opt);
    if (sharded())
      comm->allGather(params, shares);
  }
  bool lossScale(double &scale, int64_t &skipped) override {
    scale = scaler.scale;
    skipped = scaler.skipped;
    return plan.scalesLoss();
  }
  bool getScaler(LossScaler &s) override {
    s = scaler;
    return plan.scalesLoss();
  }
  void setScaler(const LossScaler &s) override { scaler = s; }
  void checkNumerics(const NumericsCheck &check) override {
    exec.afterOp = [this, &check](size_t kernel, const Kernel &op) {
      check.after(kernel, op, [this](int id, std::vector<float> &) {
        return static_cast<const float *>(exec.floats(id));
      });
    };
  }
  double loss() override { return lastLoss; }
  double gradNorm() override { return norm; }
  void getParams(std::vector<float> &p) override {
    float *base = exec.region(Region::Param);
    p.assign(base, base + exec.regionElements(Region::Param));
  }
  void setParams(const std::vector<float> &p) override {
    std::copy(p.begin(), p.end(), exec.region(Region::Param));
  }
  /// With ZeRO-1 a collective: every rank's part of the state, gathered.
  void getState(std::vector<float> &first,
                std::vector<float> &second) override {
    first = gathered(opt.first);
    second = gathered(opt.second);
  }
  void setState(const std::vector<float> &first,
                const std::vector<float> &second, int64_t steps) override {
    opt.first = ownPart(first);
    opt.second = ownPart(second);
    opt.step = steps;
  }
  /// In the last micro-batch: the gradients at `g` (n of the gradient
  /// region) become their mean over the micro-batches.
  void finishMean(float *g, size_t n) {
    float *grads = exec.region(Region::Grad);
    const size_t at = static_cast<size_t>(g - grads);
    if (g < grads || at + n > accumulated.size())
      throw RuntimeError("an all-reduced bucket of a step with gradient "
                         "accumulation is not in the gradient region");
    const float scale = 1.0f / static_cast<float>(parts);
    for (size_t i = 0; i < n; ++i)
      g[i] = (accumulated[at + i] + g[i]) * scale;
  }
  bool sharded() const { return shares.size() > 1; }
  size_t own() const {
    return shares[sharded() ? static_cast<size_t>(comm->rank()) : 0];
  }
  /// The whole of a state vector this rank holds its part of (empty while
  /// the optimizer has not made it: the same on every rank).
  std::vector<float> gathered(const std::vector<float> &mine) {
    if (!sharded() || mine.empty())
      return mine;
    std::vector<float> all(static_cast<size_t>(
        exec.regionElements(Region::Param)));
    std::copy(mine.begin(), mine.end(), all.begin() + ownFrom);
    comm->allGather(all.data(), shares);
    return all;
  }
  std::vector<float> ownPart(const std::vector<float> &all) const {
    if (!sharded() || all.empty())
      return all;
    return std::vector<float>(all.begin() + ownFrom,
                              all.begin() + ownFrom + own());
  }

  const Plan &plan;
  CpuExecutor<float> exec;
  OptimizerState<float> opt;
  double norm = -1;
  LossScaler scaler;
  std::vector<float> accumulated; ///< gradients summed over micro-batches
  float lossSum = 0, lastLoss = 0;
  int part = 0, parts = 1; ///< the micro-batch being run, of the step's
  Communicator *comm;
  /// Whether the plan all-reduces its gradients itself (gt-bucket).
  bool reducesInStep = false;
  /// ZeRO-1: the parameters' elements each rank owns, and where this
  /// rank's start (one part of all of them, from 0, without sharding).
  std::vector<size_t> shares;
  int64_t ownFrom = 0;
};

/// Runs evaluation batches on the same kind of device as training.
class EvalBackend {
public:
  virtual ~EvalBackend() = default;
  virtual const Plan &plan() const = 0;
  virtual void *feed(int id) = 0;
  virtual void setParams(const Plan &train, const std::vector<float> &p) = 0;
  /// Runs the batch; returns (loss, accuracy).
  virtual std::pair<double, double> run() = 0;
};

/// Copies parameters by name (the eval plan may lay them out differently).
template <typename SetFn>
void copyParamsByName(const Plan &from, const std::vector<float> &params,
                      const Plan &to, SetFn set) {
  std::map<std::string, const Param *> byName;
  for (const Param &p : from.params)
    byName[p.name] = &p;
  for (const Param &p : to.params) {
    auto it = byName.find(p.name);
    if (it != byName.end())
      set(p.buffer, params.data() + from.buffers[it->second->buffer].offset);
  }
}

class CpuEval : public EvalBackend {
public:
  explicit CpuEval(const Plan &p) : exec(p) {}
  const Plan &plan() const override { return exec.plan(); }
  void *feed(int id) override { return exec.data(id); }
  void setParams(const Plan &train, const std::vector<float> &p) override {
    copyParamsByName(train, p, exec.plan(), [&](int id, const float *src) {
      std::memcpy(exec.floats(id), src,
                  exec.plan().buffers[id].elements() * sizeof(float));
    });
  }
  std::pair<double, double> run() override {
    exec.run();
    const Plan &p = exec.plan();
    return {exec.floats(p.loss)[0],
            p.accuracy >= 0 ? exec.floats(p.accuracy)[0] : 0.0};
  }
  CpuExecutor<float> exec;
};

class CudaBackend : public Backend {
public:
  CudaBackend(const Plan &plan, const CudaProgram &program, bool tf32,
              Communicator *comm, bool shardOptimizer)
      : plan(plan), exec(plan, program, tf32, comm, shardOptimizer) {}
  void prepare() override { exec.waitSlot(slot); }
  void *feed(int id) override { return exec.stagedInput(slot, id); }
  void run(double, int64_t, bool wantLoss, int part, int parts) override {
    // The device follows the schedule itself (setSchedule); the learning
    // rate and step number the host passes are what it computes.
    exec.step(slot, /*update=*/true, wantLoss && part + 1 == parts, part,
              parts);
    slot ^= 1;
  }
  double loss() override { return exec.loss(); }
  bool lossScale(double &scale, int64_t &skipped) override {
    return exec.lossScale(scale, skipped);
  }
  bool getScaler(LossScaler &s) override { return exec.downloadScaler(s); }
  void setScaler(const LossScaler &s) override { exec.uploadScaler(s); }
  void checkNumerics(const NumericsCheck &check) override {
    exec.afterKernel = [this, &check](size_t kernel, int slot) {
      check.after(kernel, plan.kernels[kernel],
                  [this, slot](int id, std::vector<float> &values) {
                    const Buffer &b = plan.buffers[id];
                    values.resize(static_cast<size_t>(b.elements()));
                    if (b.dtype == DType::F32) {
                      exec.download(id, values.data(), slot);
                    } else {
                      std::vector<uint16_t> bits(values.size());
                      exec.download(id, bits.data(), slot);
                      for (size_t i = 0; i < bits.size(); ++i)
                        values[i] = fromHalfBits(bits[i], b.dtype);
                    }
                    return static_cast<const float *>(values.data());
                  });
    };
  }
  void getParams(std::vector<float> &p) override {
    p.resize(plan.regionSize.at(Region::Param));
    exec.downloadRegion(Region::Param, p.data());
  }
  void setParams(const std::vector<float> &p) override {
    exec.uploadRegion(Region::Param, p.data());
  }
  void getState(std::vector<float> &first,
                std::vector<float> &second) override {
    exec.downloadState(first, second);
    if (plan.config.optimizer == OptimizerKind::Sgd) {
      second.clear();
      if (plan.config.momentum == 0)
        first.clear();
    }
  }
  void setState(const std::vector<float> &first,
                const std::vector<float> &second, int64_t steps) override {
    exec.uploadState(first, second);
    updates = steps;
  }
  void setSchedule(int64_t done, int64_t total) override {
    exec.setSchedule(done, total, updates);
  }
  const Plan &plan;
  CudaExecutor exec;
  int slot = 0;
  int64_t updates = 0; ///< applied before this run (setState)
};

class CudaEval : public EvalBackend {
public:
  CudaEval(const Plan &p, const CudaProgram &program, bool tf32)
      : exec(p, program, tf32) {}
  const Plan &plan() const override { return exec.plan(); }
  void *feed(int id) override {
    exec.waitSlot(0);
    return exec.stagedInput(0, id);
  }
  void setParams(const Plan &train, const std::vector<float> &p) override {
    copyParamsByName(train, p, exec.plan(),
                     [&](int id, const float *src) { exec.upload(id, src); });
  }
  std::pair<double, double> run() override {
    exec.step(0, /*update=*/false);
    return {exec.loss(), exec.plan().accuracy >= 0 ? exec.accuracy() : 0.0};
  }
  CudaExecutor exec;
};

} // namespace

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

namespace {
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
std::string memoryInUse(CudaBackend &gpu) {
  auto [planned, measured] = deviceMemory(gpu);
  const double mib = 1048576.0, used = cudaMemoryInUse() / mib,
               context = cudaContextMemory() / mib;
  std::ostringstream o;
  o << std::fixed << std::setprecision(1)
    << "GPU memory in use after the first step: " << used
    << " MiB (cuMemGetInfo) = " << context << " MiB the context had + "
    << measured / mib << " MiB gtc's (" << planned / mib << " planned) + "
    << used - context - measured / mib
    << " MiB the rest (NCCL's buffers, cuBLASLt, kernels, graphs)";
  return o.str();
}

int trainImpl(const Plan &step, const EvalPlanFn &evalPlan,
              const RunOptions &options, std::ostream &rankOut,
              std::ostream &err) {
  const TrainConfig &c = step.config;
  // Data parallelism: this process's share of every batch; rank 0 alone
  // prints, logs and saves.
  Communicator *comm = options.comm;
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;
  std::ostream nowhere(nullptr);
  std::ostream &out = rank == 0 ? rankOut : nowhere;
  setThreads(options.threads);
  std::string error;
  if (c.data.kind.empty()) {
    err << "gtc: error: the train block has no 'data' source; add e.g. "
           "data = idx(\"images.gz\", \"labels.gz\")\n";
    return 1;
  }
  auto dataPhase = std::make_optional<StartupPhase>("data");
  std::unique_ptr<Dataset> data = openSource(c.data, error);
  if (!data) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<Dataset> evalData;
  if (!c.eval.kind.empty() && !(evalData = openSource(c.eval, error))) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }
  dataPhase.reset();
  Feeds feeds;
  if (!matchFeeds(step, *data, "training", feeds, error)) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }

  // With gradient accumulation a step reads `parts` micro-batches of the
  // plan's batch: the examples one batch of micro * parts would hold.
  const int64_t micro = step.batch, parts = step.microBatches,
                batch = micro * parts * ranks;
  uint64_t seed = options.seed.value_or(c.seed);
  const int64_t perEpoch = data->size() / batch;
  if (perEpoch == 0) {
    err << "gtc: error: the training data has " << data->size()
        << " examples, fewer than one batch of " << batch
        << "; lower the batch size (--batch)\n";
    return 1;
  }
  int64_t total;
  if (options.steps)
    total = *options.steps;
  else if (options.epochs)
    total = *options.epochs * perEpoch;
  else if (c.steps > 0)
    total = c.steps;
  else
    total = std::max<int64_t>(1, c.epochs) * perEpoch;

  const bool cuda = options.device == "cuda";
  const bool tf32 = c.precision == Precision::Tf32;
  std::unique_ptr<Backend> backend;
  if (cuda) {
    const CudaProgram *program = options.programFor(step);
    if (!program)
      return 1;
    backend = std::make_unique<CudaBackend>(step, *program, tf32, comm,
                                            options.shardOptimizer);
  } else {
    StartupPhase phase("memory");
    backend = std::make_unique<CpuBackend>(step, options.comm,
                                           options.shardOptimizer);
  }
  auto paramPhase = std::make_optional<StartupPhase>("parameters");
  const int64_t paramElements = step.regionSize.at(Region::Param);
  std::vector<float> params(paramElements), first, second;
  int64_t start = 0;
  LossScaler resumedScaler; // fp16: the checkpoint's, if it has one
  bool haveScaler = false;

  if (!options.resumePath.empty()) {
    std::vector<StoredTensor> tensors;
    std::map<std::string, std::string> meta;
    if (!readSafetensors(options.resumePath, tensors, meta, error)) {
      err << "gtc: error: cannot resume: " << error << "\n";
      return 1;
    }
    if (meta["format"] != "gtc-checkpoint-1") {
      err << "gtc: error: cannot resume: " << options.resumePath
          << " is not a gtc checkpoint (its metadata lacks format "
             "'gtc-checkpoint-1'); to start from its weights instead, use "
             "--init\n";
      return 1;
    }
    if (meta["model"] != step.model) {
      err << "gtc: error: cannot resume: " << options.resumePath
          << " is a checkpoint of model '" << meta["model"]
          << "', not of model '" << step.model
          << "'; to start from its weights instead, use --init (every "
             "parameter must match by name and shape)\n";
      return 1;
    }
    std::map<std::string, const StoredTensor *> byName;
    for (const StoredTensor &t : tensors)
      byName[t.name] = &t;
    bool hasState = meta["optimizer"] == name(c.optimizer);
    if (hasState && c.optimizer != OptimizerKind::Sgd) {
      first.assign(paramElements, 0.0f);
      second.assign(paramElements, 0.0f);
    } else if (hasState && c.momentum != 0) {
      first.assign(paramElements, 0.0f);
    }
    // Every tensor that is missing or differs, named (a model edited
    // since the checkpoint usually differs in several).
    std::vector<std::string> differ;
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
      return true;
    };
    const char *firstName =
        c.optimizer == OptimizerKind::Sgd ? "momentum_buffer" : "exp_avg";
    for (const Param &p : step.params) {
      const Buffer &b = step.buffers[p.buffer];
      if (!load(p.name, b, params.data() + b.offset))
        continue; // its optimizer state differs alike
      if (!first.empty())
        load(std::string("optimizer.") + firstName + "." + p.name, b,
             first.data() + b.offset);
      if (!second.empty())
        load("optimizer.exp_avg_sq." + p.name, b, second.data() + b.offset);
    }
    if (!differ.empty()) {
      constexpr size_t kShown = 8;
      err << "gtc: error: cannot resume: " << options.resumePath
          << " does not fit model '" << step.model << "' (was the model "
          << "changed since it was saved?): " << differ.size()
          << " tensor" << (differ.size() == 1 ? "" : "s") << " differ:\n";
      for (size_t i = 0; i < differ.size() && i < kShown; ++i)
        err << "  " << differ[i] << "\n";
      if (differ.size() > kShown)
        err << "  ... and " << differ.size() - kShown << " more\n";
      return 1;
    }
    start = std::strtoll(meta["step"].c_str(), nullptr, 10);
    // Continue the same sequence of batches unless a seed is given again,
    // and the same schedule unless a length is given again.
    if (!options.seed && !meta["seed"].empty())
      seed = std::strtoull(meta["seed"].c_str(), nullptr, 10);
    if (!options.steps && !options.epochs && !meta["total_steps"].empty())
      total = std::strtoll(meta["total_steps"].c_str(), nullptr, 10);
    if (start >= total) {
      err << "gtc: error: " << options.resumePath << " is at step " << start
          << ", and this run trains " << total
          << " steps in all (resumed ones included); give --steps larger "
             "than " << start << " to train on\n";
      return 1;
    }
    // Skipped fp16 steps did not update: Adam's t counts the others. The
    // scaler itself resumes where it was (fp16 runs only).
    int64_t skipped = std::strtoll(meta["skipped_steps"].c_str(), nullptr, 10);
    if (step.scalesLoss() && !meta["loss_scale"].empty()) {
      haveScaler = true;
      resumedScaler.scale = std::strtof(meta["loss_scale"].c_str(), nullptr);
      resumedScaler.goodSteps =
          std::strtoll(meta["loss_scale_good_steps"].c_str(), nullptr, 10);
      resumedScaler.skipped = skipped;
    }
    backend->setParams(params);
    backend->setState(first, second, hasState ? start - skipped : 0);
    out << "resumed " << options.resumePath << " at step " << start << "\n";
  } else if (!options.initPath.empty()) {
    if (!loadInitialWeights(step, options.initPath, params, out, err))
      return 1;
    backend->setParams(params);
  } else {
    initParameters(step, seed, params.data());
    backend->setParams(params);
  }
  paramPhase.reset();

  Loader loader(*data, batch, seed, c.shuffle, /*dropLast=*/true);
  backend->setSchedule(start, total);
  if (haveScaler)
    backend->setScaler(resumedScaler);

  std::ofstream log;
  if (!options.logPath.empty() && rank == 0) {
    log.open(options.logPath, start > 0 ? std::ios::app : std::ios::trunc);
    if (!log) {
      err << "gtc: error: cannot write the log '" << options.logPath << "': "
          << std::strerror(errno) << "\n";
      return 1;
    }
  }

  // Where checkpoints go: --save, or, when training is interrupted without
  // it (Ctrl-C, a scheduler's SIGTERM), MODEL-interrupted.safetensors here,
  // so that no progress is lost.
  std::string savePath = options.savePath;
  auto save = [&](int64_t stepsDone) -> bool {
    if (savePath.empty())
      return true;
    // The ranks' parameters are the same; with ZeRO-1 each holds a part of
    // the optimizer state, which every rank gathers (a collective).
    if (options.shardOptimizer && comm)
      backend->getState(first, second);
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
    if (!(options.shardOptimizer && comm))
      backend->getState(first, second);
    if (!writeSafetensors(savePath,
                          checkpointTensors(step, params, first, second),
                          meta, error)) {
      // The writer replaces the file only once the new one is complete.
      err << "gtc: error: " << error
          << (error.find("was replaced") == std::string::npos
                  ? "; the checkpoint there before, if any, is unchanged"
                  : "")
          << "\n";
      return false;
    }
    return true;
  };

  // Evaluation over the whole eval set, in batches (a smaller last one).
  std::map<int64_t, std::unique_ptr<EvalBackend>> evals;
  int64_t evalBatch = 0; // chosen at the first evaluation
  bool tightEval = false; // whether it had to be smaller than the step's
  double evalSeconds = 0; // timed apart from training
  auto evaluate = [&](int64_t atStep) -> bool {
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
    backend->getParams(params);
    double lossSum = 0, accSum = 0;
    int64_t seen = 0;
    bool hasAccuracy = false;
    // With data parallelism each rank evaluates every ranks-th batch, and
    // the sums are added up.
    for (int64_t b = rank; b < evalLoader.batchesPerEpoch(); b += ranks) {
      int64_t n = evalLoader.batchSize(b);
      // Where the memory is tight one evaluation executor at a time (the
      // full batches', then the last, smaller batch's).
      if (tightEval && !evals.count(n))
        evals.clear();
      auto &ev = evals[n];
      if (!ev) {
        const Plan *plan = evalPlan ? evalPlan(n) : nullptr;
        if (!plan && n < evalBatch) {
          // A compiled executable given other eval data than it was
          // compiled with has no plan for its last, smaller batch.
          out << "  note: the last " << n << " eval examples are skipped "
              << "(no evaluation plan for a batch of " << n << ")\n";
          evals.erase(n);
          continue;
        }
        if (!plan) {
          err << "gtc: error: cannot build the evaluation for a batch of "
              << n << "\n";
          return false;
        }
        Feeds ef;
        if (!matchFeeds(*plan, *evalData, "eval", ef, error)) {
          err << "gtc: error: " << error << "\n";
          return false;
        }
        if (cuda) {
          const CudaProgram *program = options.programFor(*plan);
          if (!program)
            return false;
          ev = std::make_unique<CudaEval>(*plan, *program, tf32);
        } else {
          ev = std::make_unique<CpuEval>(*plan);
        }
      }
      ev->setParams(step, params);
      Feeds ef;
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
    if (log)
      log << "{\"eval\": true, \"step\": " << atStep
          << ", \"loss\": " << num(loss) << ", \"accuracy\": " << num(acc)
          << "}\n";
    return true;
  };

  out << "training " << step.model << " on " << data->describe() << "\n"
      << "  " << step.parameterCount() << " parameters, batch " << batch;
  if (ranks > 1)
    out << " (" << ranks << " processes of " << micro * parts
        << ", gradients averaged over " << comm->describe()
        << (options.shardOptimizer ? ", optimizer state sharded" : "")
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
    out << "  note: tf32 is a GPU GEMM mode; the CPU computes in fp32\n";
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
  if (cuda)
    out << "  kernels: " << compileStats().compiled << " compiled ("
        << std::fixed << std::setprecision(2) << compileStats().seconds
        << " s), " << compileStats().cacheHits << " from the cache\n"
        << std::defaultfloat;
  out.flush();

  const bool scaling = step.scalesLoss();
  if (scaling)
    out << "  loss scaling: dynamic, initial " << LossScaler::kInitial
        << ", x2 after " << LossScaler::kGrowthInterval
        << " finite steps, x0.5 and skip on inf/NaN\n";
  // A test hook: GTC_INJECT_OVERFLOW=N makes step N's inputs overflow.
  const int64_t injectOverflowAt =
      std::getenv("GTC_INJECT_OVERFLOW")
          ? std::atoll(std::getenv("GTC_INJECT_OVERFLOW"))
          : 0;
  std::optional<NumericsCheck> numerics;
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

  SignalGuard signals;
  const bool tty = options.progress && isatty(STDERR_FILENO);
  const int64_t logEvery =
      options.logEvery > 0
          ? options.logEvery
          : c.logEvery > 0 ? c.logEvery
                           : std::max<int64_t>(1, (total - start) / 50);
  auto t0 = std::chrono::steady_clock::now();
  auto lastPrint = t0;
  // When the first step (graph capture, cuBLASLt's choices) had finished,
  // and the evaluation time by then: the steady rate is measured from there.
  std::optional<std::chrono::steady_clock::time_point> firstDone;
  double evalBeforeSteady = 0;
  double lossEma = 0, lastLoss = 0;
  bool haveEma = false;
  int64_t sinceStart = 0;
  for (int64_t s = start; s < total; ++s) {
    // All ranks stop at the same step when one is interrupted. The decision
    // is the reduced value alone: a signal that lands during the reduction
    // stays in the flag for the next step (overwriting the flag with the
    // result lost it, and the run went on).
    bool stop = interrupted;
    if (comm) {
      double votes = stop ? 1 : 0;
      comm->allReduceSum(&votes, 1);
      stop = votes > 0;
    }
    if (stop) {
      // Rank 0 speaks for all (it alone writes the checkpoint).
      if (rank == 0)
        err << "\ninterrupted at step " << s << "\n";
      if (savePath.empty())
        savePath = step.model + "-interrupted.safetensors";
      if (!save(s))
        return 1;
      if (rank == 0)
        err << "saved " << savePath << " (resume with --resume " << savePath
            << ")\n";
      return 130;
    }
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
        loader.fill(epoch, b, (rank * parts + part) * micro, micro,
                    backend->feed(feeds.input), backend->feed(feeds.label));
        if (s + 1 == injectOverflowAt)
          injectOverflow(step, feeds, backend->feed(feeds.input));
        backend->run(lr, s + 1, logged || printLine, part,
                     static_cast<int>(parts));
      }
      if (s == start && !Startup::get().isClosed()) {
        // Where the time to the first step went (waits for the step).
        backend->loss();
        Startup::get().add("the step",
                           std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - stepStart)
                               .count());
        (tty ? err : out) << "first step: " << Startup::get().report()
                          << "\n";
        if (auto *gpu = dynamic_cast<CudaBackend *>(backend.get()))
          (tty ? err : out) << "  " << memoryInUse(*gpu) << "\n";
        Startup::get().close();
      }
    } catch (const RuntimeError &e) {
      err << "\ngtc: error: at step " << s + 1 << ": " << e.what() << "\n";
      return 1;
    }
    ++sinceStart;
    if (sinceStart == 1 && s + 1 < total) {
      backend->loss(); // waits for the first step
      firstDone = std::chrono::steady_clock::now();
      evalBeforeSteady = evalSeconds;
    }
    auto now = std::chrono::steady_clock::now();
    // The loss is read only when it is shown or logged: on a GPU that is
    // the only time the host waits for the device.
    if (!cuda || logged || printLine) {
      double loss = backend->loss();
      lastLoss = loss;
      // With loss scaling an inf/NaN step is skipped, not fatal.
      if (!std::isfinite(loss) && !scaling) {
        err << "\ngtc: error: the loss is " << loss << " at step " << s + 1
            << "; lower the learning rate or add grad_clip\n";
        return 1;
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
        err << "\ngtc: error: the fp16 loss scale fell to " << scale
            << " after " << skipped << " skipped steps (at step " << s + 1
            << "): the gradients overflow whatever the scale; lower the "
               "learning rate, add grad_clip, or use precision bf16\n";
        return 1;
      }
    }
    double elapsed = std::chrono::duration<double>(now - t0).count();
    double rate = sinceStart * batch / std::max(elapsed - evalSeconds, 1e-9);
    double eta = (total - s - 1) * batch / std::max(rate, 1e-9);
    if (log && logged) {
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
    if (printLine) {
      lastPrint = now;
      std::ostringstream line;
      line << "step " << s + 1 << "/" << total << " | epoch " << epoch + 1
           << " | loss " << std::fixed << std::setprecision(4) << lossEma;
      // fp16: the steps skipped on an overflow so far, as the log has them.
      double scale = 0;
      int64_t skipped = 0;
      if (backend->lossScale(scale, skipped) && skipped > 0)
        line << " | " << skipped << " skipped";
      line << " | " << std::setprecision(0) << rate << " samples/s | "
           << formatDuration(elapsed) << " elapsed | ETA "
           << formatDuration(eta);
      if (tty)
        err << "\r" << line.str() << "\033[K" << std::flush;
      else
        out << line.str() << "\n" << std::flush;
    }
    bool epochEnd = (s + 1) % perEpoch == 0;
    bool evalNow = evalData &&
                   (c.evalEvery > 0 ? (s + 1) % c.evalEvery == 0 : epochEnd);
    if (evalNow || (evalData && lastStep)) {
      if (tty)
        err << "\n";
      if (!evaluate(s + 1))
        return 1;
    }
  }
  if (tty)
    err << "\n";
  lastLoss = backend->loss();
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  out << "done: " << total << " steps, final loss " << std::fixed
      << std::setprecision(4) << lastLoss << ", " << std::setprecision(1)
      << elapsed << " s";
  if (evalSeconds > 0)
    out << " (training " << elapsed - evalSeconds << " s, evaluation "
        << evalSeconds << " s)";
  if (firstDone) {
    // Steps 2 to the last, evaluation left out: the rate to compare runs
    // on different numbers of devices by.
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
    return 1;
  if (!options.savePath.empty())
    out << "saved " << options.savePath << "\n";
  return 0;
}

} // namespace

int gtc::rt::train(const Plan &step, const EvalPlanFn &evalPlan,
                   const RunOptions &options, std::ostream &out,
                   std::ostream &err) {
  int status = 1;
  try {
    status = trainImpl(step, evalPlan, options, out, err);
  } catch (const RuntimeError &e) {
    err << "\ngtc: error: " << e.what() << "\n";
  } catch (const std::bad_alloc &) {
    err << "\ngtc: error: out of memory; lower the batch size (--batch)\n";
  } catch (const std::exception &e) {
    err << "\ngtc: error: " << e.what() << "\n";
  }
  // After an error this rank leaves without the others: they learn it from
  // the communicator instead of waiting for its collectives.
  if (status == 1 && options.comm)
    options.comm->abort();
  return status;
}

/// The range [0, n) that `--bench` draws the i32 feed `buffer` from: the
/// rows of the tables it indexes and the classes of the logits it labels
/// (the fewest of them), else 10. Tokens spread over the whole vocabulary,
/// as PyTorch's benchmark draws them, and not on ten rows of the embedding
/// (whose gradient then adds thousands of rows into the same ten).
static int64_t benchRange(const Plan &plan, int buffer) {
  int64_t range = 0;
  auto use = [&](int64_t n) { range = range ? std::min(range, n) : n; };
  auto visit = [&](const Kernel &k, auto &self) -> void {
    for (const Kernel &sub : k.body)
      self(sub, self);
    const auto &in = k.inputs;
    auto lastDim = [&](int id) { return plan.buffers[id].shape.empty()
                                            ? int64_t(1)
                                            : plan.buffers[id].shape.back(); };
    if (k.op == OpKind::Embedding && in.size() == 2 && in[0] == buffer &&
        !plan.buffers[in[1]].shape.empty())
      use(plan.buffers[in[1]].shape[0]);
    if ((k.op == OpKind::CrossEntropy || k.op == OpKind::Accuracy) &&
        in.size() == 2 && in[1] == buffer)
      use(lastDim(in[0]));
  };
  for (const Kernel &k : plan.kernels)
    visit(k, visit);
  return range > 0 ? range : 10;
}

/// `gtc run --bench N`: times the training step on random inputs (i32 ones
/// uniform over what they index, benchRange), after warm-up: CUDA events
/// over graph replays on a GPU, a steady clock on the CPU. Prints the median
/// ms per step.
static int benchmarkImpl(const Plan &plan, const RunOptions &run,
                         int64_t iters, std::ostream &rankOut,
                         std::ostream &err);

int gtc::rt::benchmark(const Plan &plan, const RunOptions &run, int64_t iters,
                       std::ostream &out, std::ostream &err) {
  int status = benchmarkImpl(plan, run, iters, out, err);
  if (status != 0 && run.comm)
    run.comm->abort(); // as train() does
  return status;
}

static int benchmarkImpl(const Plan &plan, const RunOptions &run,
                         int64_t iters, std::ostream &rankOut,
                         std::ostream &err) {
  // Data parallelism (GPUs): every process times its step with the
  // collectives; rank 0 prints and writes the trace.
  const int rank = run.comm ? run.comm->rank() : 0;
  std::ostream nowhere(nullptr);
  std::ostream &out = rank == 0 ? rankOut : nowhere;
  if (run.comm && run.device != "cuda") {
    err << "gtc: error: " << kCpuBenchError << "\n";
    return 1;
  }
  Rng rng(1);
  std::vector<float> params(plan.regionSize.at(Region::Param));
  initParameters(plan, 0, params.data());
  auto fill = [&](auto dataFor) {
    for (const Feed &f : plan.feeds) {
      const Buffer &b = plan.buffers[f.buffer];
      void *d = dataFor(f.buffer);
      const int64_t range = benchRange(plan, f.buffer);
      for (int64_t i = 0; i < b.elements(); ++i) {
        if (b.dtype == DType::F32)
          static_cast<float *>(d)[i] = static_cast<float>(rng.normal());
        else
          static_cast<int32_t *>(d)[i] =
              static_cast<int32_t>(rng.below(range));
      }
    }
  };
  double ms = 0, deviceMiB = 0;
  const bool profiling = !run.profilePath.empty();
  if (profiling && plan.microBatches > 1) {
    err << "gtc: error: --profile records the kernels of one step of the "
           "compiled batch; with gradient accumulation ("
        << plan.microBatches << " micro-batches of " << plan.batch
        << ") profile --micro-batch " << plan.batch << " as --batch "
        << plan.batch << " instead\n";
    return 1;
  }
  constexpr int kProfileSteps = 3;
  Profile profile;
  std::ofstream trace;
  if (profiling && rank == 0) {
    trace.open(run.profilePath);
    if (!trace) {
      err << "gtc: error: cannot write the profile to '" << run.profilePath
          << "'; check that its directory exists and is writable\n";
      return 1;
    }
  }
  try {
    if (run.device == "cuda") {
      const CudaProgram *program = run.programFor(plan);
      if (!program)
        return 1;
      CudaExecutor exec(plan, *program,
                        plan.config.precision == Precision::Tf32, run.comm,
                        run.shardOptimizer);
      exec.uploadRegion(Region::Param, params.data());
      for (int slot = 0; slot < 2; ++slot)
        fill([&](int id) { return exec.stagedInput(slot, id); });
      ms = exec.timeStep(20, static_cast<int>(iters));
      if (profiling)
        exec.profile(5, kProfileSteps, profile);
      for (auto [what, bytes] : exec.memoryBreakdown())
        if (what == "measured (cuMemGetInfo)")
          deviceMiB = bytes / 1048576.0;
      out << "kernels: " << compileStats().compiled << " compiled, "
          << compileStats().cacheHits << " from the cache\n";
    } else {
      setThreads(run.threads);
      // The trainer's own step (accumulation, unscaling, clipping, the
      // update), one process.
      CpuBackend backend(plan, /*comm=*/nullptr, /*shard=*/false);
      CpuExecutor<float> &exec = backend.exec;
      backend.setParams(params);
      fill([&](int id) { return backend.feed(id); });
      OptimizerState<float> opt; // the profile's update, after its kernels
      int64_t n = exec.regionElements(Region::Param);
      const int parts = static_cast<int>(plan.microBatches);
      std::vector<double> times;
      for (int64_t i = 0; i < iters + 3; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        for (int part = 0; part < parts; ++part)
          backend.run(1e-4, i + 1, /*wantLoss=*/false, part, parts);
        times.push_back(std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - t0)
                            .count());
      }
      times.erase(times.begin(), times.begin() + 3);
      std::sort(times.begin(), times.end());
      ms = times[times.size() / 2];
      if (profiling) {
        profile.device = "CPU (" + std::to_string(threads()) + " threads)";
        profile.steps = kProfileSteps;
        profile.stepMs = ms;
        std::vector<KernelContext> contexts = kernelContexts(plan);
        std::vector<double> spans;
        double origin = -1;
        for (int s = 0; s < kProfileSteps; ++s) {
          spans.clear();
          exec.run(&spans);
          spans.push_back(spans.back());
          optimizerStep(plan.config, 1e-4, exec.region(Region::Param),
                        exec.region(Region::Grad), n, opt);
          spans.push_back(std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now()
                                  .time_since_epoch())
                              .count());
          if (origin < 0)
            origin = spans.front();
          for (size_t i = 0; i + 1 < spans.size(); i += 2) {
            ProfileRecord r;
            size_t k = i / 2;
            r.step = s;
            r.startUs = spans[i] - origin;
            r.durationUs = spans[i + 1] - spans[i];
            if (k < plan.kernels.size()) {
              const Kernel &kernel = plan.kernels[k];
              r.name = "k" + std::to_string(k) + "_" + opName(kernel.op);
              r.kind = "kernel";
              r.op = opName(kernel.op);
              r.planKernel = static_cast<int>(k);
              r.phase = contexts[k].phase;
              r.layer = contexts[k].layer;
              r.bytes = kernelBytes(plan, kernel);
              r.flops = kernelFlops(plan, kernel);
            } else {
              r.name = std::string("optimizer (") + name(plan.config.optimizer) + ")";
              r.kind = r.phase = "optimizer";
              r.bytes = updateBytes(plan.config, n);
            }
            profile.records.push_back(std::move(r));
          }
        }
      }
    }
  } catch (const std::exception &e) {
    err << "gtc: error: " << e.what() << "\n";
    return 1;
  }
  char line[256];
  std::snprintf(line, sizeof line, "bench %s batch %lld %s %s: %.4f ms/step",
                plan.model.c_str(),
                (long long)(plan.batch * plan.microBatches),
                run.device.c_str(), name(plan.config.precision), ms);
  out << line;
  if (run.comm)
    out << " (each of " << run.comm->size() << " GPUs, gradients averaged)";
  if (plan.microBatches > 1)
    out << " (" << plan.microBatches << " micro-batches of " << plan.batch
        << ")";
  if (deviceMiB > 0)
    out << ", device memory " << std::fixed << std::setprecision(1)
        << deviceMiB << " MiB" << std::defaultfloat;
  out << "\n";
  if (!profiling || rank != 0)
    return 0;
  writeChromeTrace(profile, trace);
  trace.flush();
  if (!trace) {
    err << "gtc: error: cannot write the profile to '" << run.profilePath
        << "'; check that its directory exists and is writable\n";
    return 1;
  }
  printProfileTable(profile, out);
  out << "trace: " << run.profilePath
      << " (open in chrome://tracing or https://ui.perfetto.dev)\n";
  return 0;
}
