//===- CudaImpl.h - The CUDA executor's state (private) ---------*- C++ -*-===//
//
// CudaExecutor::Impl: the device memory, launches, graphs and streams of one
// plan, shared by the executor's files: Cuda.cpp (memory, launches, the
// step), CudaGemm.cpp (cuBLASLt), CudaComm.cpp (the collectives of data
// parallelism), CudaOptimizer.cpp (accumulation, the update, optimizer
// state) and CudaProfile.cpp (timing and profiles).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_CUDAIMPL_H
#define GTC_RUNTIME_LIB_CUDAIMPL_H

#include "Comm/Nccl.h"
#include "Cuda/CudaLibs.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/CudaProgram.h"
#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Streams.h"
#include <functional>
#include <map>
#include <nvtx3/nvToolsExt.h>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gtc::rt {

// The executor's files name libcuda's, NVRTC's and cuBLASLt's types and
// functions as their own headers do.
using namespace cu;

/// The update kernel's step counters (see gtc_update).
inline constexpr int kCounters = 5;

struct CudaExecutor::Impl {
  const Plan &plan;
  /// The emitter's program, with the variants for this device taken
  /// (takeVariants).
  CudaProgram program;
  bool tf32;
  std::string arch; ///< the device's (sm_XY)
  /// Sources compiled for another architecture than `arch` (a variant's).
  std::map<std::string, std::string> sourceArch;
  /// Whether kernels are launched as programmatic dependents (sm_90+).
  bool dependentLaunch = false;
  CUstream compute = nullptr, copy = nullptr;
  /// The one device allocation; the pointers below are into it.
  CUdeviceptr device = 0;
  CUdeviceptr arena = 0, inputs[2] = {0, 0}, workspace = 0, state = 0;
  CUdeviceptr scratch = 0; ///< the program's kWorkspace memory
  size_t arenaBytes = 0, workspaceBytes = Plan::kGemmWorkspaceBytes,
         stateBytes = 0;
  size_t measured = 0; ///< device memory this executor took (cuMemGetInfo)
  std::map<Region, size_t> regionOffset; ///< bytes into the arena
  void *staged[2] = {nullptr, nullptr};  ///< pinned copies of the inputs
  /// loss, accuracy (floats), loss scale (float at 8), skipped (u64 at 16)
  void *pinnedOut = nullptr;
  CUdeviceptr counter = 0, partial = 0, norm = 0;
  /// Whether Region::Copy may differ from the parameters' casts: the
  /// parameters were written from the host since paramCopies last ran.
  bool copiesStale = true;
  int64_t totalSteps = 1; ///< the schedule's length (setSchedule)
  int64_t paramElements = 0, partials = 0;
  CUevent copied[2], consumed[2], done, start, stop;
  bool consumedRecorded[2] = {false, false};
  /// One module per distinct source; binaries that compileAll made.
  std::unordered_map<std::string, CUmodule> modules;
  std::unordered_map<std::string, std::vector<char>> binaries;
  struct Launch {
    const CudaLaunch *spec;
    int planKernel = -1;
    CUfunction fn = nullptr;
    /// An all-reduce's bucket is ready (recorded on its stream) / reduced
    /// (recorded on the communication stream, when a stream waits for it).
    CUevent ready = nullptr, reduced = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  std::vector<Launch> launches;
  CUfunction sumsq = nullptr, normFn = nullptr, update = nullptr,
             accumulateFn = nullptr;
  /// The gradients' sum over micro-batches (then the loss's), when the plan
  /// accumulates.
  CUdeviceptr accumulator = 0;
  size_t accumulatorBytes = 0;
  cublasLtHandle_t lt = nullptr;
  /// Per input slot, per phase (microPhase): the captured step.
  /// A step without the update (an evaluation, a gradient check) is
  /// another graph: graphs[slot][phase] and noUpdate[slot][phase].
  CUgraphExec graphs[2][3] = {}, noUpdate[2][3] = {};
  CUevent timingEvent() {
    CUevent e;
    CU(cuEventCreate(&e, CU_EVENT_DEFAULT));
    return e;
  }

  /// Data parallelism: the NCCL communicator (null in one process), the
  /// stream its bucket collectives run on, and whether one was enqueued
  /// since the compute stream last joined that stream.
  DeviceComm *dcomm = nullptr;
  CUstream commStream = nullptr;
  CUevent commJoined = nullptr;
  bool commPending = false;
  /// The micro-batch being enqueued (step()'s part of parts), and whether
  /// the plan has gt-bucket's all-reduces: with accumulation they run in the
  /// last micro-batch, on each bucket's mean over the micro-batches.
  int microPart = 0, microParts = 1;
  bool bucketed = false;
  /// Each collective joined at once (--check-numerics reads its outputs).
  bool serialComm = false;

  /// ZeRO-1 (shard = optimizer): this rank keeps the optimizer state of,
  /// and updates, parameters [ownFrom, ownFrom + own) of equal shares of
  /// `share` elements (the last one shorter), then the parameters (and
  /// their 16-bit copies) are all-gathered; the parameter, gradient and
  /// copy regions are allocated for ranks * share elements.
  bool sharded = false;
  int64_t share = 0, ownFrom = 0, own = 0;
  /// ZeRO-2 (shard = gradients, Plan::shardRanks): also sharded, and the
  /// gradient region holds only this rank's share: each bucket's group of
  /// gradients (a temporary mirroring the bucket's parameters) is reduced
  /// to the ranks whose shares it overlaps (enqueueReduceToOwners).
  bool shardGrads = false;

  Impl(const Plan &p, const CudaProgram &prog, bool tf32, Communicator *comm,
       bool shardOptimizer)
      : plan(p), program(prog), tf32(tf32),
        dcomm(comm ? comm->device() : nullptr),
        sharded(dcomm && (shardOptimizer || p.shardRanks > 1) &&
                dcomm->deviceRanks() > 1),
        shardGrads(sharded && p.shardRanks > 1) {}

  // Setting up (the executor's constructor, in this order).
  void createStreams();
  void placeShares();
  void allocate();
  void checkProgram() const;
  void prepareLaunches();

  /// The elements of the gradient region: this rank's share under ZeRO-2,
  /// else one a parameter element.
  int64_t gradElements() const { return shardGrads ? share : paramElements; }

  /// The elements of the parameter region that updates and gathers touch:
  /// ranks * share when sharded.
  int64_t paddedParams() const {
    return sharded ? share * dcomm->deviceRanks() : paramElements;
  }

  static DeviceComm::Type commType(DType t) {
    return t == DType::BF16  ? DeviceComm::Type::BF16
           : t == DType::F16 ? DeviceComm::Type::F16
                             : DeviceComm::Type::F32;
  }

  /// gt-bucket's all-reduce of one bucket. With a communicator: once the
  /// launches before it on `stream` are done, one NCCL group on the
  /// communication stream, a call per run of adjacent buffers (the
  /// gradients of a bucket mostly lie side by side in the gradient region;
  /// a gap of alignment padding, under 256 bytes, can hold no other buffer,
  /// and is reduced with them). The compute streams go on; the step waits
  /// for the communication stream at its end (joinComm), or at once for a
  /// bucket reduced out of place, whose input a later kernel may reuse. In
  /// one process the mean is the value: outputs are copies.
  void enqueueAllReduce(Launch &l, int slot, CUstream stream);

  /// ZeRO-2: gt-bucket's all-reduce of one bucket becomes a reduction of
  /// its gradients to the ranks that own them (a reduce-scatter of uneven
  /// shares: one ncclReduce to each owner of a run of the bucket, in one
  /// group on the communication stream). The bucket's gradients lie in its
  /// group as their parameters lie in the parameter region (PlanBuilder's
  /// groupGradients), so parameter offsets say where each element goes;
  /// the alignment gaps between them are not sent, and stay zero in the
  /// share. The group lives to the step's end, which joins the stream.
  void enqueueReduceToOwners(Launch &l, int slot, CUstream stream);

  /// In the last micro-batch, the gradients at `g` (`bytes` of the
  /// gradient region) become their mean over the micro-batches:
  /// (accumulated + last) / parts, as enqueueAccumulate does for the whole
  /// region when the plan has no buckets.
  void finishMean(CUdeviceptr g, size_t bytes, DType dtype, CUstream stream);

  /// The compute stream waits for the collectives enqueued so far.
  void joinComm();

  /// At the end of a data-parallel step (after its last micro-batch): the
  /// loss averaged over the processes, and, when the plan has no bucket
  /// collectives of its own (it accumulates micro-batches), the gradients,
  /// in one NCCL group on the compute stream.
  void enqueueStepReduction(bool gradients);

  CUdeviceptr ptr(int id, int slot) const {
    if (id == CudaLaunch::kWorkspace)
      return scratch;
    if (id == CudaLaunch::kStepCounter)
      return counter;
    const Buffer &b = plan.buffers[id];
    if (b.region == Region::Input)
      return inputs[slot] + b.offset * 4;
    return arena + regionOffset.at(b.region) + b.offset * 4;
  }

  /// Puts each launch's variant for this device (CudaLaunch::Variant), if
  /// it has one, in place of its portable kernel.
  void takeVariants(int major, int minor, int multiprocessors);

  /// Compiles every distinct source (the program's kernels and the
  /// runtime's) on all cores, through the cache.
  void compileAll(const std::vector<const std::string *> &sources);

  CUfunction load(const std::string &source, const std::string &name);

  /// cuBLASLt's epilogue for a launch. Row-major op(A) is cuBLASLt's B
  /// (see setupGemm): its row sums over k are BGRADB.
  static cublasLtEpilogue_t epilogueOf(const CudaLaunch &s);

  /// Points the GEMM's epilogue at this slot's bias (or bias gradient) and
  /// saved GELU input.
  void setEpiloguePointers(Launch &l, int slot);

  void setupGemm(Launch &l);

  /// With GTC_CHECK_LAUNCHES=1 (and GTC_NO_GRAPH=1), waits after every
  /// launch (for its stream) and names the one that failed.
  void checkLaunch(const CudaLaunch &s, CUstream stream);

  /// Times each candidate algorithm on this GEMM's own buffers (CUDA
  /// events, after a warm-up) and keeps the fastest. The output buffer gets
  /// scratch values; every step writes it again before reading it.
  void autotune(Launch &l, const cublasLtMatmulHeuristicResult_t *results,
                int found);

  void enqueueLaunch(Launch &l, int slot) { enqueueLaunch(l, slot, compute); }

  void enqueueLaunch(Launch &l, int slot, CUstream stream);

  /// Plan kernels that may run side by side (scheduleStreams): `side` is
  /// the second stream, `groupDone` a group's event when another waits for it.
  std::vector<StreamGroup> groups;
  std::vector<CUevent> groupDone;
  CUstream side = nullptr;
  CUevent fork = nullptr, joined = nullptr;

  /// Whether a launch belongs to the step: all but those of the kernel of
  /// the parameters' 16-bit copies (Plan::paramCopies), which the optimizer's
  /// update writes.
  bool inStep(const Launch &l) const {
    return l.planKernel != plan.paramCopies;
  }

  /// Runs the kernel of the parameters' 16-bit copies when the host has
  /// written the parameters since it last ran (a step leaves it out).
  void refreshCopies();

  /// The step's launches in order, but for paramCopies'; with
  /// `afterKernel`, which waits for the device, called for each plan kernel
  /// once its launches are done (one without launches, whose work an
  /// earlier launch did, with the next).
  void enqueueKernels(int slot,
                      const std::function<void(size_t, int)> &afterKernel);

  /// While profiling: events around each launch, in order (begin, end).
  struct Timed {
    std::string name, kind;
    int planKernel;
    CUevent begin, end;
    double flops, bytes;
    bool tensorCore;
  };
  std::vector<Timed> *timed = nullptr;
  std::vector<CUevent> eventPool;
  size_t eventsUsed = 0;

  CUevent pooledEvent() {
    if (eventsUsed == eventPool.size())
      eventPool.push_back(timingEvent());
    return eventPool[eventsUsed++];
  }

  /// Runs `enqueue` on the compute stream; while profiling, between two
  /// events recorded as `name`.
  template <typename F>
  void timedLaunch(const std::string &name, const char *kind, int planKernel,
                   double flops, double bytes, bool tensorCore, F &&enqueue) {
    if (!timed) {
      enqueue();
      return;
    }
    Timed t{name,          kind,  planKernel, pooledEvent(),
            pooledEvent(), flops, bytes,      tensorCore};
    // An NVTX range of the profile's name around each launch: Nsight
    // Compute's --nvtx --print-nvtx-rename kernel names every kernel so.
    nvtxRangePushA(name.c_str());
    CU(cuEventRecord(t.begin, compute));
    enqueue();
    CU(cuEventRecord(t.end, compute));
    nvtxRangePop();
    timed->push_back(std::move(t));
  }

  /// While profiling: launch `l` between two events, named and counted
  /// (FLOPs, bytes).
  void timedEnqueue(Launch &l, int slot);

  void enqueueUpdate();

  /// ZeRO-1: every rank's updated share of the parameters, and of their
  /// 16-bit copies, to every rank (in place: NCCL reads this rank's share
  /// where it lies in the output).
  void enqueueGatherParams();

  /// After micro-batch `part` of `parts`: adds its gradients (and loss)
  /// to the accumulator; after the last, leaves their mean in the gradients
  /// (and the loss) for the update.
  void enqueueAccumulate(int part, int parts);

  /// The step's phase in gradient accumulation: 0 the first micro-batch
  /// (and a step without accumulation), 1 a middle one, 2 the last.
  static int microPhase(int part, int parts) {
    return parts == 1 || part == 0 ? 0 : part + 1 < parts ? 1 : 2;
  }

  void enqueueOutputs();
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_LIB_CUDAIMPL_H
