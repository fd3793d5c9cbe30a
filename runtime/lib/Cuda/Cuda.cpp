//===- Cuda.cpp - Running plans on NVIDIA GPUs ----------------------------===//
//
// The CUDA executor (CudaLibs.cpp loads the libraries and compiles kernels):
// memory, launches and CUDA graphs of a plan's step. CudaImpl.h lists the
// other files of it: GEMMs, collectives, the update, profiling.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Cuda.h"
#include "Cuda/CudaImpl.h"
#include "Train/StepSequence.h"
#include "gtc/Runtime/Bundle.h"
#include "gtc/Runtime/Env.h"
#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/Profile.h"
#include "gtc/Runtime/Rng.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Runtime/Streams.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <nvtx3/nvToolsExt.h>
#include <optional>
#include <unordered_map>

using namespace gtc::rt;
using namespace gtc::rt::cu;

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

namespace {

/// Clipping and the optimizers over flat buffers
/// (runtime/lib/Cuda/Optimizer.cuh, after ScalarOps.h, whose update rules the
/// CPU's optimizerStep() calls).
const std::string kOptimizerSource = std::string(
#include "gtc/Runtime/ScalarOpsText.inc"
                                         ) +
                                     std::string(
#include "OptimizerText.inc"
                                     );

} // namespace

std::vector<std::string> gtc::rt::runtimeKernelSources() {
  return {kOptimizerSource};
}

void CudaExecutor::Impl::takeVariants(int major, int minor,
                                      int multiprocessors) {
  // GTC_PORTABLE_KERNELS=1: the portable kernels everywhere (to compare).
  if (envFlag("GTC_PORTABLE_KERNELS"))
    return;
  // gtc's own GEMM in place of cuBLASLt's (Emitter::hopperGemm) unless
  // GTC_HOPPER_GEMM=0 (to compare; test/gpu/run.sh's "gemm" section).
  const char *ownGemm = std::getenv("GTC_HOPPER_GEMM");
  const bool ownGemms = !ownGemm || std::strcmp(ownGemm, "0") != 0;
  for (std::vector<CudaLaunch> &ls : program.kernels) {
    std::vector<CudaLaunch> kept;
    for (CudaLaunch &l : ls) {
      bool dropped = false;
      for (CudaLaunch::Variant &v : l.variants)
        if (v.major == major && v.minor == minor &&
            ((l.kind != CudaLaunch::Kind::Gemm && !v.withOwnGemm) ||
             ownGemms)) {
          if (v.source.empty()) { // its work done by another's variant
            dropped = true;
            break;
          }
          if (l.kind == CudaLaunch::Kind::Gemm) { // a kernel for cuBLASLt
            l.kind = CudaLaunch::Kind::Kernel;
            l.buffers = std::move(v.buffers);
            l.maps = std::move(v.maps);
            l.persistent = v.persistent;
            l.tensorCores = true;
          }
          l.source = std::move(v.source);
          l.comment += v.what;
          l.grid = v.grid;
          l.block = v.block;
          l.shared = v.shared;
          if (l.persistent)
            l.grid = std::min<int64_t>(l.grid, multiprocessors);
          sourceArch[l.source] = v.arch;
          break;
        }
      l.variants.clear();
      if (!dropped)
        kept.push_back(std::move(l));
    }
    ls = std::move(kept);
  }
}

/// Compiles every distinct source (the program's kernels and the
/// runtime's) on all cores, through the cache.
void CudaExecutor::Impl::compileAll(
    const std::vector<const std::string *> &sources) {
  StartupPhase phase("NVRTC");
  std::vector<CompileJob> jobs;
  for (const std::string *s : sources)
    if (binaries.emplace(*s, std::vector<char>()).second) {
      auto own = sourceArch.find(*s);
      jobs.push_back(
          {s, own == sourceArch.end() ? arch : own->second, {}, false, ""});
    }
  unsigned threads = 0;
  if (!compileCudaJobs(jobs, threads))
    for (const CompileJob &j : jobs)
      if (!j.error.empty())
        throw RuntimeError(j.error);
  int hits = 0;
  for (CompileJob &j : jobs) {
    hits += j.cached;
    binaries[*j.source] = std::move(j.binary);
  }
  phase.detail = std::to_string(jobs.size()) + " distinct kernels, " +
                 std::to_string(jobs.size() - hits) + " compiled on " +
                 std::to_string(threads) + " threads, " + std::to_string(hits) +
                 " from the cache";
}

CUfunction CudaExecutor::Impl::load(const std::string &source,
                                    const std::string &name) {
  auto it = modules.find(source);
  if (it == modules.end()) {
    auto b = binaries.find(source);
    if (b == binaries.end()) { // not in compileAll's list
      compileAll({&source});
      b = binaries.find(source);
    }
    StartupPhase phase("module load"); // after NVRTC, which has its own
    CUmodule m;
    CU(cuModuleLoadData(&m, b->second.data()));
    it = modules.emplace(source, m).first;
  }
  CUfunction f;
  CU(cuModuleGetFunction(&f, it->second, name.c_str()));
  return f;
}

/// With GTC_CHECK_LAUNCHES=1 (and GTC_NO_GRAPH=1), waits after every
/// launch (for its stream) and names the one that failed.
void CudaExecutor::Impl::checkLaunch(const CudaLaunch &s, CUstream stream) {
  static const bool check = envFlag("GTC_CHECK_LAUNCHES");
  if (!check)
    return;
  CUresult r = libs().cuStreamSynchronize(stream);
  if (r != CUDA_SUCCESS)
    throw RuntimeError("CUDA: launch '" +
                       (s.kind == CudaLaunch::Kind::Kernel ? s.name
                        : s.kind == CudaLaunch::Kind::Gemm
                            ? std::string("gemm")
                            : std::string("memset")) +
                       "' failed: " + cuError(r));
}

/// Runs the kernel of the parameters' 16-bit copies when the host has
/// written the parameters since it last ran (a step leaves it out).
void CudaExecutor::Impl::refreshCopies() {
  if (plan.paramCopies < 0 || !copiesStale)
    return;
  for (Launch &l : launches)
    if (!inStep(l))
      enqueueLaunch(l, 0);
  copiesStale = false;
}

/// The step's launches in order, but for paramCopies'; with
/// `afterKernel`, which waits for the device, called for each plan kernel
/// once its launches are done (one without launches, whose work an
/// earlier launch did, with the next).
void CudaExecutor::Impl::enqueueKernels(
    int slot, const std::function<void(size_t, int)> &afterKernel) {
  if (!afterKernel && side) {
    // Concurrent: the side stream forks from the compute stream and joins
    // it at the end (a captured graph needs both).
    CU(cuEventRecord(fork, compute));
    CU(cuStreamWaitEvent(side, fork, 0));
    for (size_t g = 0; g < groups.size(); ++g) {
      CUstream stream = groups[g].stream ? side : compute;
      for (int w : groups[g].waits)
        CU(cuStreamWaitEvent(stream, groupDone[w], 0));
      for (size_t i = groups[g].begin; i < groups[g].end; ++i)
        enqueueLaunch(launches[i], slot, stream);
      if (groups[g].signals)
        CU(cuEventRecord(groupDone[g], stream));
    }
    CU(cuEventRecord(joined, side));
    CU(cuStreamWaitEvent(compute, joined, 0));
    joinComm();
    return;
  }
  serialComm = static_cast<bool>(afterKernel);
  size_t reported = 0;
  for (size_t i = 0; i < launches.size(); ++i) {
    if (inStep(launches[i]))
      enqueueLaunch(launches[i], slot);
    if (afterKernel && (i + 1 == launches.size() ||
                        launches[i + 1].planKernel != launches[i].planKernel))
      for (; reported <= static_cast<size_t>(launches[i].planKernel);
           ++reported)
        afterKernel(reported, slot);
  }
  for (; afterKernel && reported < plan.kernels.size(); ++reported)
    afterKernel(reported, slot);
  joinComm();
}

void CudaExecutor::Impl::enqueueOutputs() {
  auto *out = static_cast<float *>(pinnedOut);
  CU(cuMemcpyDtoHAsync(out, ptr(plan.loss, 0), 4, compute));
  if (plan.accuracy >= 0)
    CU(cuMemcpyDtoHAsync(out + 1, ptr(plan.accuracy, 0), 4, compute));
  if (plan.scalesLoss()) {
    CU(cuMemcpyDtoHAsync(out + 2, ptr(plan.lossScale, 0), 4, compute));
    CU(cuMemcpyDtoHAsync(out + 4, counter + 3 * 8, 8, compute));
  }
}

void CudaExecutor::Impl::enqueueLaunch(Launch &l, int slot, CUstream stream) {
  const CudaLaunch &s = *l.spec;
  if (s.kind == CudaLaunch::Kind::AllReduce) {
    enqueueAllReduce(l, slot, stream);
  } else if (s.kind == CudaLaunch::Kind::Memset) {
    const Buffer &b = plan.buffers[s.c];
    CU(cuMemsetD8Async(ptr(s.c, slot), 0, b.slots() * 4, stream));
  } else if (s.kind == CudaLaunch::Kind::Gemm) {
    CUdeviceptr a = ptr(s.a, slot) + s.offsetA, b = ptr(s.b, slot) + s.offsetB,
                c = ptr(s.c, slot) + s.offsetC,
                cIn = s.addend >= 0 ? ptr(s.addend, slot) : c;
    setEpiloguePointers(l, slot);
    float alpha = s.alpha, beta = s.beta;
    LT(cublasLtMatmul(
        lt, l.desc, &alpha, reinterpret_cast<void *>(b), l.la,
        reinterpret_cast<void *>(a), l.lb, &beta, reinterpret_cast<void *>(cIn),
        l.lc, reinterpret_cast<void *>(c), l.lc, &l.algo,
        reinterpret_cast<void *>(workspace), workspaceBytes, stream));
  } else {
    std::vector<CUdeviceptr> ptrs;
    for (size_t i = 0; i < s.buffers.size(); ++i)
      ptrs.push_back(ptr(s.buffers[i], slot) +
                     (s.offsets.empty() ? 0 : s.offsets[i]));
    // Tensor maps (CudaLaunch::maps) in place of their buffers' pointers.
    std::vector<CUtensorMap> maps(s.maps.size());
    std::vector<void *> args;
    for (size_t i = 0; i < ptrs.size(); ++i) {
      if (i < s.maps.size() && s.maps[i].rows > 0) {
        const CudaLaunch::TensorMap &m = s.maps[i];
        cuuint64_t dims[2] = {static_cast<cuuint64_t>(m.cols),
                              static_cast<cuuint64_t>(m.rows)};
        cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.cols) * 2};
        cuuint32_t box[2] = {static_cast<cuuint32_t>(m.boxCols),
                             static_cast<cuuint32_t>(m.boxRows)};
        cuuint32_t unit[2] = {1, 1};
        CU(cuTensorMapEncodeTiled(
            &maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT16, 2,
            reinterpret_cast<void *>(ptrs[i]), dims, strides, box, unit,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
        args.push_back(&maps[i]);
      } else {
        args.push_back(&ptrs[i]);
      }
    }
    // On sm_90 and newer, a programmatic dependent of the launch before
    // it on the stream: the kernel's first statement
    // (CudaLaunch::kDependentWait) orders it after that launch.
    CUlaunchAttribute dependent{};
    dependent.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    dependent.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = static_cast<unsigned>(s.grid);
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(s.block);
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = static_cast<unsigned>(s.shared);
    config.hStream = stream;
    config.attrs = &dependent;
    config.numAttrs = dependentLaunch ? 1 : 0;
    CU(cuLaunchKernelEx(&config, l.fn, args.data(), nullptr));
  }
  checkLaunch(s, stream);
}

/// The streams and events of the step, and cuBLASLt's handle.
void CudaExecutor::Impl::createStreams() {
  Libs &L = libs();
  arch = "sm_" + std::to_string(L.info.major) + std::to_string(L.info.minor);
  dependentLaunch = L.info.major >= 9;
  CU(cuCtxSetCurrent(L.context));
  CU(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING));
  CU(cuStreamCreate(&copy, CU_STREAM_NON_BLOCKING));
  for (int s = 0; s < 2; ++s) {
    CU(cuEventCreate(&copied[s], CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&consumed[s], CU_EVENT_DISABLE_TIMING));
  }
  CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  LT(cublasLtCreate(&lt));
}

/// ZeRO's shares of the parameters (checked against the plan's sharding).
void CudaExecutor::Impl::placeShares() {
  paramElements = plan.regionSize.count(Region::Param)
                      ? plan.regionSize.at(Region::Param)
                      : 0;
  if (plan.shardRanks > 1 && !sharded)
    throw RuntimeError("this plan shards its gradients over " +
                       std::to_string(plan.shardRanks) +
                       " processes (shard = gradients), and runs without "
                       "them; run it with --devices " +
                       std::to_string(plan.shardRanks) + " on GPUs");
  if (sharded) {
    // Equal shares of 128 elements at a time (NCCL gathers equal counts).
    const int64_t ranks = dcomm->deviceRanks(), rank = dcomm->deviceRank();
    share = plan.shareOf(ranks);
    if (plan.shardRanks > 1 && plan.shardRanks != ranks)
      throw RuntimeError("this plan shards its gradients over " +
                         std::to_string(plan.shardRanks) +
                         " processes (shard = gradients), and runs in " +
                         std::to_string(ranks) + "; compile it for " +
                         std::to_string(ranks));
    // Rank r's share starts at r * share, where the in-place all-gather
    // reads it; the last shares may hold fewer elements, or none.
    ownFrom = rank * share;
    own = std::clamp<int64_t>(paramElements - ownFrom, 0, share);
  }
}

/// All device memory in one allocation (cuMemAlloc takes whole 2 MiB
/// pages, so one allocation keeps the measured peak at the predicted one):
/// the arena of every region but the inputs, two slots of those, cuBLASLt's
/// workspace, the kernels' scratch, the optimizer state, the step counters
/// with the norm's partial sums, and the gradient accumulator. Measures
/// what it took, and zeroes the arena.
void CudaExecutor::Impl::allocate() {
  Libs &L = libs();
  size_t freeBefore = 0, total = 0;
  CU(cuMemGetInfo(&freeBefore, &total));
  size_t bytesTotal = 0;
  auto take = [&](size_t bytes) {
    size_t at = bytesTotal;
    bytesTotal += (bytes + 255) / 256 * 256;
    return at;
  };
  // The arena first: a region's offset into it is its offset into the
  // allocation. The gradients lie inside the temporaries where the plan
  // lets them (ZeRO-1 keeps them apart: it pads them, and gathers the
  // optimizer state in them between steps).
  const bool gradsInTemp = plan.gradsInTemp >= 0 && !sharded;
  for (auto [region, elements] : plan.regionSize) {
    if (region == Region::Input || region == Region::Local ||
        (region == Region::Grad && gradsInTemp))
      continue;
    int64_t e = elements;
    if (sharded && (region == Region::Param || region == Region::Grad))
      e = std::max(e, paddedParams());
    if (shardGrads && region == Region::Grad)
      e = share; // this rank's
    if (sharded && region == Region::Copy)
      e = std::max(e, (paddedParams() + 1) / 2);
    regionOffset[region] = take(static_cast<size_t>(e) * 4);
  }
  if (gradsInTemp)
    regionOffset[Region::Grad] = regionOffset.at(Region::Temp) +
                                 static_cast<size_t>(plan.gradsInTemp) * 4;
  arenaBytes = std::max<size_t>(bytesTotal, 256);
  bytesTotal = arenaBytes;
  size_t inputBytes = std::max<size_t>(
      256, static_cast<size_t>(plan.regionSize.count(Region::Input)
                                   ? plan.regionSize.at(Region::Input)
                                   : 0) *
               4);
  size_t inputAt[2] = {take(inputBytes), take(inputBytes)};
  size_t workspaceAt = take(workspaceBytes);
  size_t scratchAt = take(static_cast<size_t>(program.workspaceBytes));
  size_t stateAt = 0, counterAt = 0, accumulatorAt = 0;
  const bool stepping = plan.kind == "step" && paramElements > 0;
  if (stepping) {
    // Adam's two moments; SGD's momentum buffer: of every parameter, or
    // of this rank's share.
    stateBytes = static_cast<size_t>(plan.stateFloats()) * 4 *
                 static_cast<size_t>(sharded ? std::max<int64_t>(own, 64)
                                             : paramElements);
    stateAt = take(stateBytes);
    partials = (paramElements + 4095) / 4096;
    counterAt = take(512 + partials * 4);
    if (plan.microBatches > 1) {
      if (plan.loss < 0 || plan.buffers[plan.loss].dtype != DType::F32)
        throw RuntimeError("gradient accumulation needs an f32 loss");
      accumulatorBytes = static_cast<size_t>(gradElements() + 1) * 4;
      accumulatorAt = take(accumulatorBytes);
    }
  }
  if (CUresult r = L.cuMemAlloc(&device, bytesTotal); r != CUDA_SUCCESS) {
    if (r != CUDA_ERROR_OUT_OF_MEMORY)
      throw RuntimeError("CUDA: cuMemAlloc: " + cuError(r));
    // Out of memory: what the plan needed, what the GPU had, and the ways
    // to need less.
    const Plan::Memory m = plan.memory();
    auto mib = [](double b) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
      return std::string(buf);
    };
    throw RuntimeError(
        "out of GPU memory: the step of " + plan.model + " at batch " +
        std::to_string(plan.batch) + " needs " +
        mib(static_cast<double>(bytesTotal)) + " and " + L.info.name + " has " +
        mib(static_cast<double>(freeBefore)) + " free (memory plan: weights " +
        mib(m.weights) + ", gradients " + mib(m.gradients) +
        ", optimizer state " + mib(m.optimizerState) +
        ", activations and temporaries " + mib(m.temporaries) +
        "); lower the batch (--batch N), let gtc choose it (--batch auto), "
        "or recompute activations (checkpoint = auto, or --checkpoint "
        "auto); gtc run --dry-run --explain --batch N shows a plan without "
        "training");
  }
  arena = device;
  for (int s = 0; s < 2; ++s) {
    inputs[s] = device + inputAt[s];
    CU(cuMemHostAlloc(&staged[s], inputBytes, 0));
  }
  workspace = device + workspaceAt;
  if (program.workspaceBytes > 0)
    scratch = device + scratchAt;
  CU(cuMemHostAlloc(&pinnedOut, 32, 0));
  if (stepping) {
    state = device + stateAt;
    CU(cuMemsetD8Async(state, 0, stateBytes, compute));
    counter = device + counterAt;
    norm = counter + 256;
    partial = counter + 512;
    CU(cuMemsetD8Async(counter, 0, (CudaLaunch::kSeedSlot + 1) * 8, compute));
    if (accumulatorBytes)
      accumulator = device + accumulatorAt;
  }
  size_t freeAfter = 0;
  CU(cuMemGetInfo(&freeAfter, &total));
  measured = freeBefore > freeAfter ? freeBefore - freeAfter : 0;
  CU(cuMemsetD8Async(arena, 0, arenaBytes, compute));
  CU(cuStreamSynchronize(compute));
}

/// Every buffer a launch names must exist.
void CudaExecutor::Impl::checkProgram() const {
  auto valid = [&](int id) {
    return id >= 0 && static_cast<size_t>(id) < plan.buffers.size();
  };
  for (const std::vector<CudaLaunch> &ls : program.kernels)
    for (const CudaLaunch &s : ls) {
      bool ok = true;
      if (s.kind == CudaLaunch::Kind::Kernel) {
        ok = s.offsets.empty() || s.offsets.size() == s.buffers.size();
        for (int id : s.buffers)
          ok = ok &&
               (valid(id) ||
                (id == CudaLaunch::kWorkspace && program.workspaceBytes > 0) ||
                (id == CudaLaunch::kStepCounter && plan.kind == "step" &&
                 plan.parameterCount() > 0));
      } else if (s.kind == CudaLaunch::Kind::AllReduce) {
        ok = !s.buffers.empty() && s.buffers.size() % 2 == 0;
        for (int id : s.buffers)
          ok = ok && valid(id);
      } else if (s.kind == CudaLaunch::Kind::Gemm)
        ok = valid(s.a) && valid(s.b) && valid(s.c) &&
             (s.bias == -1 || valid(s.bias));
      else
        ok = valid(s.c);
      if (!ok)
        throw RuntimeError("the CUDA program names a missing buffer in '" +
                           s.name + "'");
    }
}

/// The launches: kernels from their modules, the collectives' events and
/// stream, the GEMMs with cuBLASLt's choices, and the two streams' groups.
void CudaExecutor::Impl::prepareLaunches() {
  Libs &L = libs();
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (const CudaLaunch &s : program.kernels[k]) {
      Launch l;
      l.spec = &s;
      l.planKernel = static_cast<int>(k);
      if (s.kind == CudaLaunch::Kind::Kernel) {
        l.fn = load(s.source, CudaLaunch::kKernelEntry);
        if (s.shared > 48 * 1024)
          CU(cuFuncSetAttribute(l.fn,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(s.shared)));
      }
      launches.push_back(l);
    }
  // Bucket collectives: events to order them, and their own stream.
  bool collectives = false;
  for (Launch &l : launches)
    if (l.spec->kind == CudaLaunch::Kind::AllReduce) {
      collectives = true;
      CU(cuEventCreate(&l.ready, CU_EVENT_DISABLE_TIMING));
      CU(cuEventCreate(&l.reduced, CU_EVENT_DISABLE_TIMING));
    }
  bucketed = collectives;
  if (dcomm && (collectives || plan.kind == "step")) {
    CU(cuStreamCreate(&commStream, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&commJoined, CU_EVENT_DISABLE_TIMING));
  }
  StartupPhase gemmPhase("cuBLASLt heuristics");
  for (Launch &l : launches)
    if (l.spec->kind == CudaLaunch::Kind::Gemm)
      setupGemm(l);
  // Independent plan kernels on two streams, unless GTC_ONE_STREAM is set
  // (to compare) or no group would use the second.
  if (!envFlag("GTC_ONE_STREAM")) {
    groups = scheduleStreams(plan, program, L.info.multiprocessors);
    groupDone.assign(groups.size(), nullptr);
    bool used = false;
    for (size_t g = 0; g < groups.size(); ++g) {
      used = used || groups[g].stream == 1;
      if (groups[g].signals)
        CU(cuEventCreate(&groupDone[g], CU_EVENT_DISABLE_TIMING));
    }
    if (used) {
      CU(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
      CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
      CU(cuEventCreate(&joined, CU_EVENT_DISABLE_TIMING));
    }
  }
}

CudaExecutor::CudaExecutor(const Plan &plan, const CudaProgram &program,
                           bool tf32, Communicator *comm, bool shardOptimizer)
    : impl(std::make_unique<Impl>(plan, program, tf32, comm,
                                  shardOptimizer && plan.kind == "step")) {
  std::string error;
  {
    StartupPhase phase("CUDA driver and context");
    if (!initDevice(error))
      throw RuntimeError(error);
  }
  Libs &L = libs();
  if (!L.nvrtc)
    throw RuntimeError("NVRTC is not available (" + L.nvrtcError +
                       "); install the CUDA 13 libraries");
  if (!L.cublas)
    throw RuntimeError("cuBLASLt is not available (" + L.cublasError +
                       "); install the CUDA 13 libraries");
  Impl &I = *impl;
  I.createStreams();
  I.takeVariants(L.info.major, L.info.minor, L.info.multiprocessors);
  // Every kernel first, on all cores: the program's (identical layers share
  // one source) and the optimizer's.
  std::vector<const std::string *> sources;
  for (const std::vector<CudaLaunch> &ls : I.program.kernels)
    for (const CudaLaunch &s : ls)
      if (s.kind == CudaLaunch::Kind::Kernel)
        sources.push_back(&s.source);
  static const std::string optimizerSource = kOptimizerSource;
  if (plan.kind == "step")
    sources.push_back(&optimizerSource);
  I.compileAll(sources);
  auto memoryStart = std::chrono::steady_clock::now();
  I.placeShares();
  I.allocate();
  for (const Constant &c : plan.constants) {
    const Buffer &b = plan.buffers[c.buffer];
    std::vector<float> f;
    std::vector<int32_t> i;
    std::vector<uint16_t> h;
    for (int64_t e = 0; e < b.elements(); ++e) {
      double v = c.values.size() == 1 ? c.values[0] : c.values[e];
      f.push_back(static_cast<float>(v));
      i.push_back(static_cast<int32_t>(v));
      h.push_back(toHalfBits(static_cast<float>(v), b.dtype));
    }
    upload(c.buffer, b.dtype == DType::F32 ? static_cast<const void *>(f.data())
                     : b.dtype == DType::I32
                         ? static_cast<const void *>(i.data())
                         : h.data());
  }
  // Dynamic loss scaling starts the seed of the backward pass at 2^16.
  if (plan.scalesLoss()) {
    float initial = LossScaler::kInitial;
    upload(plan.lossScale, &initial);
  }

  Startup::get().add("device memory",
                     std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - memoryStart)
                         .count());
  if (I.state) {
    I.sumsq = I.load(kOptimizerSource, "gtc_sumsq");
    I.normFn = I.load(kOptimizerSource, "gtc_norm");
    I.update = I.load(kOptimizerSource, "gtc_update");
    I.accumulateFn = I.load(kOptimizerSource, "gtc_accumulate");
  }

  I.checkProgram();
  I.prepareLaunches();
}

CudaExecutor::~CudaExecutor() {
  if (!impl)
    return;
  // Device memory goes with the process; free what is large.
  Libs &L = libs();
  if (L.cuStreamSynchronize && impl->compute)
    L.cuStreamSynchronize(impl->compute);
  // The graphs first: those of a data-parallel step hold NCCL's work,
  // which the communicator waits for when it is destroyed.
  for (int s = 0; s < 2; ++s)
    for (int p = 0; p < 3; ++p)
      for (CUgraphExec g : {impl->graphs[s][p], impl->noUpdate[s][p]})
        if (g)
          L.cuGraphExecDestroy(g);
  if (impl->device)
    L.cuMemFree(impl->device);
  for (void *p : {impl->staged[0], impl->staged[1], impl->pinnedOut})
    if (p)
      L.cuMemFreeHost(p);
}

const Plan &CudaExecutor::plan() const { return impl->plan; }

void CudaExecutor::upload(int id, const void *data) {
  CU(cuStreamSynchronize(impl->compute));
  const Buffer &b = impl->plan.buffers[id];
  impl->copiesStale |= b.region == Region::Param;
  for (int s = 0; s < (b.region == Region::Input ? 2 : 1); ++s)
    CU(cuMemcpyHtoD(impl->ptr(id, s), data,
                    b.elements() * dtypeBytes(b.dtype)));
}

void CudaExecutor::download(int id, void *data, int slot) {
  CU(cuStreamSynchronize(impl->compute));
  const Buffer &b = impl->plan.buffers[id];
  CU(cuMemcpyDtoH(data, impl->ptr(id, slot),
                  b.elements() * dtypeBytes(b.dtype)));
}

void CudaExecutor::download(int id, int64_t first, int64_t count,
                            void *data) {
  CU(cuStreamSynchronize(impl->compute));
  const Buffer &b = impl->plan.buffers[id];
  if (first < 0 || count < 0 || first + count > b.elements())
    throw RuntimeError("download of elements past a buffer's end");
  const int64_t size = dtypeBytes(b.dtype);
  CU(cuMemcpyDtoH(data, impl->ptr(id, 0) + first * size, count * size));
}

void CudaExecutor::uploadRegion(Region r, const void *data) {
  CU(cuStreamSynchronize(impl->compute));
  impl->copiesStale |= r == Region::Param;
  CU(cuMemcpyHtoD(impl->arena + impl->regionOffset.at(r), data,
                  impl->plan.regionSize.at(r) * 4));
}

void CudaExecutor::copyParamsFrom(const CudaExecutor &from) {
  Impl &I = *impl;
  const Impl &F = *from.impl;
  CU(cuStreamSynchronize(F.compute)); // its last update
  CU(cuStreamSynchronize(I.compute));
  std::map<std::string, int> byName;
  for (const Param &p : F.plan.params)
    byName[p.name] = p.buffer;
  for (const Param &p : I.plan.params) {
    auto it = byName.find(p.name);
    if (it == byName.end())
      continue;
    const Buffer &to = I.plan.buffers[p.buffer],
                 &src = F.plan.buffers[it->second];
    if (to.elements() != src.elements() || to.dtype != src.dtype)
      throw RuntimeError("parameter '" + p.name + "' is " +
                         typeText(src.dtype, src.shape) + " in one plan and " +
                         typeText(to.dtype, to.shape) + " in the other");
    CU(cuMemcpyDtoDAsync(I.ptr(p.buffer, 0), F.ptr(it->second, 0),
                         to.elements() * dtypeBytes(to.dtype), I.compute));
  }
  CU(cuStreamSynchronize(I.compute));
  I.copiesStale = true;
}

void CudaExecutor::copyRegionFrom(const CudaExecutor &from, Region r) {
  Impl &I = *impl;
  const Impl &F = *from.impl;
  auto size = I.plan.regionSize.find(r);
  auto other = F.plan.regionSize.find(r);
  // Neither has the region (a model without attention keeps no KV cache).
  if (size == I.plan.regionSize.end() && other == F.plan.regionSize.end())
    return;
  if (size == I.plan.regionSize.end() || other == F.plan.regionSize.end() ||
      size->second != other->second)
    throw RuntimeError(std::string("the two plans' ") + regionName(r) +
                       " regions differ; recompile them together");
  CU(cuStreamSynchronize(F.compute));
  CU(cuStreamSynchronize(I.compute));
  CU(cuMemcpyDtoDAsync(I.arena + I.regionOffset.at(r),
                       F.arena + F.regionOffset.at(r), size->second * 4,
                       I.compute));
  CU(cuStreamSynchronize(I.compute));
}

void CudaExecutor::initParams(uint64_t seed) {
  Impl &I = *impl;
  CU(cuStreamSynchronize(I.compute));
  I.copiesStale = true;
  CUfunction init = I.load(kOptimizerSource, "gtc_init");
  for (const Param &p : I.plan.params) {
    ParamDraw d = paramDraw(p, seed);
    CUdeviceptr w = I.arena + I.regionOffset.at(Region::Param) +
                    I.plan.buffers[p.buffer].offset * 4;
    long long n = I.plan.buffers[p.buffer].elements();
    if (n == 0)
      continue;
    unsigned long long s = d.seed;
    void *args[] = {&w, &n, &d.kind, &d.a, &d.c, &s};
    unsigned blocks =
        static_cast<unsigned>(std::min<long long>((n + 255) / 256, 132 * 16));
    CU(cuLaunchKernel(init, blocks, 1, 1, 256, 1, 1, 0, I.compute, args,
                      nullptr));
  }
  CU(cuStreamSynchronize(I.compute));
}

void CudaExecutor::downloadRegion(Region r, void *data) {
  CU(cuStreamSynchronize(impl->compute));
  CU(cuMemcpyDtoH(data, impl->arena + impl->regionOffset.at(r),
                  impl->plan.regionSize.at(r) * 4));
}

void *CudaExecutor::stagedInput(int slot, int buffer) {
  return static_cast<char *>(impl->staged[slot]) +
         impl->plan.buffers[buffer].offset * 4;
}

void CudaExecutor::waitSlot(int slot) {
  // The staged (pinned) slot is free once its copy has finished.
  CU(cuEventSynchronize(impl->copied[slot]));
}

void CudaExecutor::step(int slot, bool update, bool wantLoss, int part,
                        int parts) {
  Impl &I = *impl;
  Libs &L = libs();
  // Copy the staged batch on the copy stream once the step that last read
  // this slot's device inputs is done.
  size_t inputBytes = I.plan.regionSize.count(Region::Input)
                          ? I.plan.regionSize.at(Region::Input) * 4
                          : 0;
  if (I.consumedRecorded[slot])
    CU(cuStreamWaitEvent(I.copy, I.consumed[slot], 0));
  if (inputBytes)
    CU(cuMemcpyHtoDAsync(I.inputs[slot], I.staged[slot], inputBytes, I.copy));
  CU(cuEventRecord(I.copied[slot], I.copy));
  CU(cuStreamWaitEvent(I.compute, I.copied[slot], 0));
  I.refreshCopies();

  if (parts > 1 && !I.accumulator)
    throw RuntimeError("this executor's plan does not accumulate gradients");
  update = update && part + 1 == parts;
  I.microPart = part;
  I.microParts = parts;
  auto enqueue = [&] {
    if (I.plan.kind != "step")
      return I.enqueueKernels(slot, afterKernel);
    runStepSequence(
        {part, parts, update, I.bucketed},
        [&] { I.enqueueKernels(slot, afterKernel); },
        [&] { I.enqueueAccumulate(part, parts); },
        [&](bool gradients) { I.enqueueStepReduction(gradients); },
        [&] { I.enqueueUpdate(); });
  };
  bool useGraph = !envFlag("GTC_NO_GRAPH") && !afterKernel;
  const int phase = Impl::microPhase(part, parts);
  CUgraphExec &exec = update || part + 1 < parts ? I.graphs[slot][phase]
                                                 : I.noUpdate[slot][phase];
  static const bool traceComm = envFlag("GTC_TRACE_COMM");
  if (I.dcomm && traceComm)
    std::fprintf(stderr, "[comm rank %d] step: slot %d, part %d of %d%s\n",
                 I.dcomm->deviceRank(), slot, part, parts,
                 useGraph && !exec ? ", capturing" : "");
  if (useGraph && !exec) {
    CUgraph graph;
    CU(cuStreamBeginCapture(I.compute, CU_STREAM_CAPTURE_MODE_RELAXED));
    enqueue();
    CU(cuStreamEndCapture(I.compute, &graph));
    CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CU(cuGraphDestroy(graph));
  }
  if (useGraph)
    CU(cuGraphLaunch(exec, I.compute));
  else
    enqueue();
  // The loss (computed before the update) is copied back only when asked.
  if (wantLoss)
    I.enqueueOutputs();
  CU(cuEventRecord(I.consumed[slot], I.compute));
  I.consumedRecorded[slot] = true;
  CU(cuEventRecord(I.done, I.compute));
  (void)L;
}

double CudaExecutor::loss() {
  CU(cuEventSynchronize(impl->done));
  return static_cast<float *>(impl->pinnedOut)[0];
}

bool CudaExecutor::lossScale(double &scale, int64_t &skipped) {
  if (!impl->plan.scalesLoss())
    return false;
  CU(cuEventSynchronize(impl->done));
  const char *out = static_cast<const char *>(impl->pinnedOut);
  float s;
  uint64_t k;
  std::memcpy(&s, out + 8, 4);
  std::memcpy(&k, out + 16, 8);
  scale = s;
  skipped = static_cast<int64_t>(k);
  return true;
}

double CudaExecutor::accuracy() {
  CU(cuEventSynchronize(impl->done));
  return static_cast<float *>(impl->pinnedOut)[1];
}

std::vector<std::pair<std::string, size_t>>
CudaExecutor::memoryBreakdown() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (auto [region, elements] : impl->plan.regionSize) {
    if (region == Region::Local)
      continue; // registers
    size_t bytes =
        static_cast<size_t>(elements) * 4 * (region == Region::Input ? 2 : 1);
    if (region == Region::Grad && impl->shardGrads)
      bytes = static_cast<size_t>(impl->share) * 4; // this rank's share
    if (region == Region::Grad && impl->plan.gradsInTemp >= 0 && !impl->sharded)
      continue; // inside the temporaries
    out.push_back({regionName(region), bytes});
  }
  out.push_back({"optimizer state", impl->stateBytes});
  out.push_back({"cuBLASLt workspace", impl->workspaceBytes});
  out.push_back(
      {"kernel scratch", static_cast<size_t>(impl->program.workspaceBytes)});
  if (impl->accumulatorBytes)
    out.push_back({"gradient accumulator", impl->accumulatorBytes});
  out.push_back({"measured (cuMemGetInfo)", impl->measured});
  return out;
}
