//===- CpuExecutor.h - Runs a plan on the CPU -------------------*- C++ -*-===//
//
// Executes the kernels of a plan on the CPU: GEMMs through OpenBLAS, every
// other kernel written here and split across threads by output elements, so
// results do not depend on scheduling. The executor is a template on the
// float type: float for training, double for gradient checks (every f32
// buffer of the plan is then computed in float64).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CPUEXECUTOR_H
#define GTC_RUNTIME_CPUEXECUTOR_H

#include "gtc/Runtime/Plan.h"
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace gtc::rt {

/// A problem found while running a plan (e.g. a label out of range): the
/// message says where and what to do.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `fn(begin, end)` over [0, n) on the runtime's worker threads, in
/// contiguous chunks; returns when all are done.
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &fn,
                 int64_t grain = 1);
/// Sets the number of threads (0: the machine's cores). Also OpenBLAS's.
/// Throws RuntimeError (naming --threads) when the system cannot start them.
void setThreads(int threads);
/// Bytes of memory available to start new work without swapping (Linux's
/// MemAvailable), or 0 if unknown; less where the process's cgroup (a
/// container's memory limit) or its address-space limit (ulimit -v) leaves
/// less, with `where` (when given) saying which: "this machine has", "the
/// memory limit of this process's cgroup leaves", "the address-space limit
/// (ulimit -v) leaves".
int64_t availableMemory(std::string *where = nullptr);
/// Why training `plan` on the CPU would not fit in availableMemory(): its
/// predicted peak (with `optimizerShards` > 1, ZeRO-1's part of the
/// optimizer state) against what is available, and what to change; empty
/// when it fits or the available memory is unknown. Checked before the
/// CPU executor allocates, so that a run too large is refused with the
/// figures instead of failing an allocation part way. A generation plan
/// (`sampling`) is advised a smaller batch or a GPU, not recomputation;
/// `beside` counts bytes held at the same time (gtc sample's second plan).
std::string hostMemoryShortfall(const Plan &plan, int optimizerShards = 1,
                                bool sampling = false, int64_t beside = 0);
int threads();

/// Whether the CPU executor runs kernels of `kind` (every kind of Ops.def;
/// checked by the unit tests).
bool cpuRuns(OpKind kind);

/// Fills the parameter region `params` (the plan's layout) from each
/// parameter's initializer, with a generator seeded from (seed, name):
/// independent of order and of the other parameters, on every device.
template <typename T>
void initParameters(const Plan &plan, uint64_t seed, T *params);

template <typename T> class CpuExecutor {
public:
  /// Checks that every kernel of the plan is known (RuntimeError if not) and
  /// allocates the regions (zeroed) and the constants.
  explicit CpuExecutor(const Plan &plan);
  ~CpuExecutor();
  CpuExecutor(const CpuExecutor &) = delete;
  CpuExecutor &operator=(const CpuExecutor &) = delete;

  const Plan &plan() const { return plan_; }
  /// The data of buffer `id`: T elements for float buffers (16-bit ones hold
  /// their rounded values), int32_t for i32.
  void *data(int id) const;
  T *floats(int id) const { return static_cast<T *>(data(id)); }
  int32_t *ints(int id) const { return static_cast<int32_t *>(data(id)); }
  /// The start of a region (parameters and gradients are flat, same layout).
  T *region(Region r) const;
  int64_t regionElements(Region r) const;

  /// Fills every parameter from its initializer with a generator seeded from
  /// (seed, parameter name): independent of order and of the other parameters.
  void initParams(uint64_t seed);
  /// Copies region `r` of `from`, whose plan lays it out alike (a
  /// generation's prompt plan and its one-token plan share their KV caches,
  /// Region::State).
  void copyRegionFrom(const CpuExecutor &from, Region r);
  /// Runs all kernels in order. With `spans`, appends each kernel's start
  /// and end (steady-clock microseconds) for profiles.
  void run(std::vector<double> *spans = nullptr);
  /// The collective of a data-parallel run (set by the trainer): in place,
  /// the mean over the processes of each (pointer, elements) of a bucket;
  /// an all_reduce kernel calls it once with all of its buffers. Empty in a
  /// single process.
  std::function<void(const std::vector<std::pair<T *, size_t>> &)>
      allReduceMean;
  /// The steps done before this one and the run's seed: dropout draws its
  /// masks from them (set by the trainer; evaluation has no dropout).
  int64_t step = 0;
  uint64_t seed = 0;
  /// Called after each op (each op of a fusion region too) with the plan
  /// kernel's index and the op; --check-numerics looks at its outputs.
  std::function<void(size_t, const Kernel &)> afterOp;

private:
  using KernelFn = void (*)(CpuExecutor &, const Kernel &);
  /// Rounds the kernel's 16-bit outputs as the GPU stores them.
  void roundHalfOutputs(const Kernel &k);
  const Plan &plan_;
  /// Per plan kernel, its function, or its body's functions (fusion regions).
  std::vector<std::vector<KernelFn>> fns_;
  std::map<Region, std::unique_ptr<std::byte[]>> regions_;
  /// Whether the plan has 16-bit buffers: each of their elements takes a T
  /// here, so the regions that hold them are widened twice (a 4-byte slot of
  /// the plan becomes two T).
  bool sixteenBit_ = false;
  int64_t widen(Region r) const {
    return sixteenBit_ && r != Region::Param && r != Region::Grad ? 2 : 1;
  }
  /// Whether the gradients lie inside the temporaries (Plan::gradsInTemp):
  /// where their slots are the temporaries' (no 16-bit buffers).
  bool gradsInTemp() const { return plan_.gradsInTemp >= 0 && !sixteenBit_; }
  std::byte *base(Region r) const;
};

extern template class CpuExecutor<float>;
extern template class CpuExecutor<double>;

} // namespace gtc::rt

#endif // GTC_RUNTIME_CPUEXECUTOR_H
