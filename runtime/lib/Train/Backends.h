//===- Backends.h - Where a training step runs --------------------*- C++ -*-===//
//
// Private to the runtime: the trainer's view of a device. A Backend runs one
// training step (one micro-batch at a time) with the step's whole sequence:
// accumulation, the all-reduce over processes, unscaling and skipping,
// clipping and the update; an EvalBackend runs evaluation batches. The CPU's
// are CpuExecutor and the host optimizer, the GPU's the CUDA executor, whose
// kernels do the same on the device. Trainer.cpp trains with them,
// Benchmark.cpp times them.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_BACKENDS_H
#define GTC_RUNTIME_LIB_BACKENDS_H

#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Numerics.h"
#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Trainer.h"
#include "Train/StepSequence.h"
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gtc::rt::backends {

/// The note for --precision tf32 on the CPU, which has no TF32 GEMMs (gtc
/// run and gtc sample print it).
inline constexpr const char *kTf32OnCpuNote =
    "note: tf32 is a GPU GEMM mode; the CPU computes in fp32";

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
  /// Draws the initial parameters where they live (initParameters' values,
  /// bit for bit); false if the caller must draw them and setParams.
  virtual bool initParams(uint64_t seed) { return false; }
  virtual void getState(std::vector<float> &first,
                        std::vector<float> &second) = 0;
  virtual void setState(const std::vector<float> &first,
                        const std::vector<float> &second,
                        int64_t stepsDone) = 0;
  /// The steps done and the schedule's length (devices that compute the
  /// learning rate themselves; setState gave the updates applied).
  /// and the run's seed, which dropout draws its masks from.
  virtual void setSchedule(int64_t done, int64_t total, uint64_t seed) = 0;
};

class CpuBackend : public Backend {
public:
  CpuBackend(const Plan &plan, Communicator *comm, bool shard)
      : plan(plan), exec(plan), comm(comm) {
    if (plan.shardRanks > 1)
      throw RuntimeError(kCpuShardGradientsError);
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
  void setSchedule(int64_t, int64_t, uint64_t seed) override {
    exec.seed = seed;
  }
  void run(double lr, int64_t stepNo, bool, int thisPart,
           int stepParts) override {
    exec.step = stepNo - 1; // steps done, as the GPU's counter
    if (plan.scalesLoss())
      exec.floats(plan.lossScale)[0] = scaler.scale;
    part = thisPart;
    parts = stepParts;
    float *grads = exec.region(Region::Grad);
    const int64_t n = exec.regionElements(Region::Param);
    std::optional<UpdateSpan> updateSpan;
    runStepSequence(
        {part, parts, /*update=*/true, /*bucketed=*/comm && reducesInStep},
        [&] {
          exec.run(spans);
          updateSpan.emplace(spans);
          lastLoss = exec.floats(plan.loss)[0];
        },
        [&] { accumulate(grads, n); },
        [&](bool gradients) {
          // The mean over processes of their batch shares' means: the
          // mean over the global batch (the shares are equal).
          if (!comm)
            return;
          if (gradients)
            comm->allReduceMean(grads, static_cast<size_t>(n));
          comm->allReduceMean(&lastLoss, 1);
        },
        [&] { update(lr, grads, n); });
  }
  /// While profiling: the rest of the step after its kernels, timed as one
  /// (from construction to destruction).
  struct UpdateSpan {
    std::vector<double> *spans;
    explicit UpdateSpan(std::vector<double> *s) : spans(s) {
      if (spans)
        spans->push_back(now());
    }
    ~UpdateSpan() {
      if (spans)
        spans->push_back(now());
    }
    static double now() {
      return std::chrono::duration<double, std::micro>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    }
  };
  /// The sums over micro-batches, then after the last their mean (as the
  /// GPU's gtc_accumulate: (sum + last) * (1 / parts)); the buckets of the
  /// last one made their own means, as they were all-reduced.
  void accumulate(float *grads, int64_t n) {
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
  /// Unscaling (skipping a step whose gradients overflowed), clipping, the
  /// update of this rank's part, and ZeRO-1's gather.
  void update(double lr, float *grads, int64_t n) {
    if (plan.scalesLoss()) {
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
  /// While profiling (--profile): each kernel's (start, end) in
  /// microseconds of the steady clock, then the update's.
  std::vector<double> *spans = nullptr;
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
  /// Takes the parameters from the training backend where both are on one
  /// device (no copy through the host); false where it cannot.
  virtual bool setParamsFrom(Backend &train) { return false; }
  /// Runs the batch; returns (loss, accuracy).
  virtual std::pair<double, double> run() = 0;
  /// The evaluation whose parameters it holds (Training::evaluate sets
  /// them once an evaluation, not once a batch: GPT-2's are 498 MB).
  int64_t paramsOf = -1;
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
  bool initParams(uint64_t seed) override {
    exec.initParams(seed);
    return true;
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
  void setSchedule(int64_t done, int64_t total, uint64_t seed) override {
    exec.setSchedule(done, total, updates, seed);
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
  bool setParamsFrom(Backend &train) override {
    auto *cuda = dynamic_cast<CudaBackend *>(&train);
    if (!cuda)
      return false;
    exec.copyParamsFrom(cuda->exec);
    return true;
  }
  std::pair<double, double> run() override {
    exec.step(0, /*update=*/false);
    return {exec.loss(), exec.plan().accuracy >= 0 ? exec.accuracy() : 0.0};
  }
  CudaExecutor exec;
};

} // namespace gtc::rt::backends

#endif // GTC_RUNTIME_LIB_BACKENDS_H
