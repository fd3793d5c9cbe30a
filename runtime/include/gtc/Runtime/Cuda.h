//===- Cuda.h - Running plans on NVIDIA GPUs --------------------*- C++ -*-===//
//
// The driver (libcuda.so.1), NVRTC and cuBLASLt are loaded at run time with
// dlopen, so gtc starts on machines without them and says what is missing.
// Kernels are compiled by NVRTC for the device's own architecture and cached
// on disk by content hash (~/.cache/gtc, or $GTC_CACHE_DIR). A training step
// is captured once as a CUDA graph per input slot and replayed; batches are
// staged in pinned host buffers and copied on a separate stream, two slots
// deep, so the copy of batch n+1 overlaps step n.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CUDA_H
#define GTC_RUNTIME_CUDA_H

#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/CudaProgram.h"
#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Profile.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gtc::rt {

/// Facts about the GPU, for logs and --explain.
struct CudaDeviceInfo {
  std::string name;
  int count = 1; ///< GPUs this process sees
  int major = 0, minor = 0;
  int multiprocessors = 0;
  size_t memory = 0;
  size_t freeMemory = 0; ///< free when cudaAvailable() was called
  int clockKHz = 0, memoryClockKHz = 0, busWidthBits = 0;
  /// Peaks from the data sheet arithmetic (0 if unknown): dense 16-bit
  /// tensor-core FLOP/s, fp32 FLOP/s and DRAM bytes/s.
  double peakTensorFlops() const;
  double peakFp32Flops() const;
  double peakBytesPerSecond() const;
};

/// Loads the driver and opens the GPU selectCudaDevice chose (device 0 by
/// default). Returns false with a message that says what is missing and
/// what to do (e.g. "no NVIDIA driver/GPU found (libcuda.so.1: cannot open
/// ...); use --device cpu").
bool cudaAvailable(CudaDeviceInfo &info, std::string &error);

/// Which GPU this process uses (a data-parallel process: its local rank);
/// call before anything opens the GPU.
void selectCudaDevice(int ordinal);

/// Bytes of the GPU's memory in use now (cuMemGetInfo's total - free: this
/// process's context, allocations and libraries such as NCCL, and any other
/// process's); 0 before the GPU is opened.
size_t cudaMemoryInUse();

/// Bytes in use once this process's context was open, before gtc allocated
/// anything (the context's own memory, and any other process's); 0 before
/// the GPU is opened.
size_t cudaContextMemory();

/// The GPUs the driver shows this process (CUDA_VISIBLE_DEVICES applies),
/// without opening one; 0 without a driver or GPU.
int cudaDeviceCount();

/// NVRTC compiles `source` for `arch` (e.g. "sm_90") to a cubin, or for a
/// virtual arch ("compute_90") to PTX, through the on-disk cache; kernels
/// registered with setPrebuiltKernels() (a compiled executable's) come first.
/// Thread-safe (NVRTC programs are independent; the cache writes through
/// temporary names).
/// Errors carry NVRTC's log with the offending source lines.
bool compileCuda(const std::string &source, const std::string &arch,
                 std::vector<char> &cubin, bool &cached, std::string &error);

/// One compilation of compileCudaJobs: `source` for `arch`.
struct CompileJob {
  const std::string *source = nullptr;
  std::string arch;
  std::vector<char> binary;
  bool cached = false;
  std::string error; ///< empty when it succeeded
};

/// Runs compileCuda for every job, on as many threads as the machine has
/// cores (`threads` says how many ran). False if any job failed.
bool compileCudaJobs(std::vector<CompileJob> &jobs, unsigned &threads);

/// The runtime's own kernel sources (clipping and the optimizers), which a
/// compiled executable ships next to the plan's.
std::vector<std::string> runtimeKernelSources();

/// Counts of what compileCuda did, for "a second run compiles nothing".
/// `rejected`: cache files whose content was not this kernel's (another
/// key under the same hash, a corrupt or truncated file, an older format),
/// compiled again and replaced.
struct CompileStats {
  int compiled = 0, cacheHits = 0, rejected = 0;
  double seconds = 0;
};
CompileStats &compileStats();

/// Runs a plan's CudaProgram on the GPU. Buffers live in one device arena
/// laid out by the plan's memory plan; parameters, gradients and optimizer
/// state are each contiguous, so clipping and the update are one kernel.
class CudaExecutor {
public:
  /// Throws RuntimeError when the GPU, a kernel compilation or an
  /// allocation fails. With `comm` (a GPU communicator, connectGpu), the
  /// plan's all_reduce kernels (gt-bucket) run as NCCL collectives on a
  /// communication stream, each as soon as its bucket is computed, and the
  /// step's loss is averaged over the processes; a plan that accumulates
  /// micro-batches has its gradients averaged after the last one. With
  /// `shardOptimizer` too (ZeRO-1), each process keeps the optimizer state
  /// of and updates an equal share of the parameters, which are then
  /// all-gathered; downloadState() is then a collective.
  CudaExecutor(const Plan &plan, const CudaProgram &program, bool tf32,
               Communicator *comm = nullptr, bool shardOptimizer = false);
  ~CudaExecutor();

  const Plan &plan() const;
  /// Copies host data into buffer `id` / out of it (synchronous): its
  /// elements as stored (16-bit buffers as BF16/F16 bits); an input buffer
  /// from input slot `slot`.
  void upload(int id, const void *data);
  void download(int id, void *data, int slot = 0);
  /// Elements [first, first + count) of buffer `id` (gtc sample: the logits
  /// of the positions it draws from, not the window's).
  void download(int id, int64_t first, int64_t count, void *data);
  void uploadRegion(Region r, const void *data);
  /// Copies the parameters of `from` (another executor on this device:
  /// the training step's, into an evaluation's) by name, device to device.
  void copyParamsFrom(const CudaExecutor &from);
  /// Copies region `r` of `from` (another executor on this device whose
  /// plan lays the region out alike: a generation's prompt plan and its
  /// one-token plan share their KV caches, Region::State), device to device.
  void copyRegionFrom(const CudaExecutor &from, Region r);
  /// Draws every parameter on the device (gtc_init): the values
  /// initParameters draws on the host, bit for bit. (gtc-gpu-check compares
  /// the two; the trainer still uploads the host's draws until that check
  /// has run on a GPU.)
  void initParams(uint64_t seed);
  void downloadRegion(Region r, void *data);

  /// Pinned host memory for the inputs of slot 0/1: fill it, then step().
  void *stagedInput(int slot, int buffer);
  /// Runs one training step from input slot `slot`: copies the staged batch
  /// (copy stream), runs the kernels (a graph after the first step), and
  /// with `update` clips and applies the optimizer (the plan's train config;
  /// the learning rate follows the device's step counter). Returns at
  /// once; the loss arrives later (loss()) if `wantLoss` (otherwise it stays
  /// on the device: no copy, no wait).
  ///
  /// Gradient accumulation (Plan::microBatches): a step of `parts`
  /// micro-batches is `parts` calls, `part` 0 to parts - 1, each on its own
  /// micro-batch; the gradients (and the loss) are summed on the device and
  /// the last call updates with their mean.
  void step(int slot, bool update, bool wantLoss = true, int part = 0,
            int parts = 1);
  /// Sets the step counters (steps done and updates applied, e.g. when
  /// resuming: fewer when fp16 steps were skipped), the schedule's length
  /// and the run's seed (dropout's masks); call before the first step.
  void setSchedule(int64_t done, int64_t total, int64_t updates, uint64_t seed);
  /// Waits for everything enqueued and returns the last step's loss (and
  /// accuracy of an eval plan, if it has one).
  double loss();
  double accuracy();
  /// With dynamic loss scaling (fp16): the scale for the next step and the
  /// steps skipped, as of the last step that copied its loss back; false
  /// without scaling.
  bool lossScale(double &scale, int64_t &skipped);
  /// When set, steps run launch by launch (no CUDA graph) and this is
  /// called after each plan kernel's launches with its index and the input
  /// slot (--check-numerics downloads its outputs).
  std::function<void(size_t, int)> afterKernel;
  /// Dynamic loss scaling's whole state (waits for the device), for
  /// checkpoints; false without scaling.
  bool downloadScaler(LossScaler &scaler);
  void uploadScaler(const LossScaler &scaler);
  /// Waits until the staged input of `slot` may be overwritten.
  void waitSlot(int slot);
  /// Optimizer state (same layout as the parameters) for checkpoints.
  void downloadState(std::vector<float> &first, std::vector<float> &second);
  void uploadState(const std::vector<float> &first,
                   const std::vector<float> &second);
  /// Bytes of device memory: arena (by region), workspace, optimizer state.
  std::vector<std::pair<std::string, size_t>> memoryBreakdown() const;
  /// A step's time in milliseconds after `warmup` steps (CUDA events, graph
  /// replays): `iters` steps launched back to back as training runs them,
  /// their mean (how PyTorch's references time theirs) and the energy they
  /// took, and each step alone, waited for, their median.
  struct StepTimes {
    double backToBack = 0, alone = 0;
    /// The GPU's energy and clocks over the steps launched back to back.
    PowerReading power;
  };
  StepTimes timeStep(int warmup, int iters);
  /// Profiles `steps` steps after timeStep(warmup, 20): launched one by one
  /// (no graph) with CUDA events around every launch and the batch copy, and
  /// NVTX ranges per phase and layer. Fills `profile` (records, stepMs,
  /// device peaks).
  void profile(int warmup, int steps, Profile &profile);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_CUDA_H
