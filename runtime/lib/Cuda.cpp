//===- Cuda.cpp - Running plans on NVIDIA GPUs ----------------------------===//
//
// The CUDA executor (CudaLibs.cpp loads the libraries and compiles kernels):
// memory, launches and CUDA graphs of a plan's step, its collectives, the
// optimizer's kernels (Optimizer.cuh), and profiling.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Cuda.h"
#include "CudaLibs.h"
#include "Nccl.h"
#include "gtc/Runtime/Bundle.h"
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
#include <optional>
#include <nvtx3/nvToolsExt.h>
#include <unordered_map>

using namespace gtc::rt;
using namespace gtc::rt::cu;

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

namespace {

/// Clipping and the optimizers over flat buffers (runtime/lib/Optimizer.cuh,
/// after ScalarOps.h, whose update rules the CPU's optimizerStep() calls).
const std::string kOptimizerSource = std::string(
#include "gtc/Runtime/ScalarOpsText.inc"
                                         ) +
                                     std::string(
#include "OptimizerText.inc"
                                     );

/// The kernel's Hyper, byte for byte.
struct Hyper {
  double lr, final, beta1, beta2, eps, weightDecay, maxNorm, momentum,
      dampening;
  long long warmup, total;
  int nesterov, kind, schedule;
  int scaling;
};

/// The update kernel's step counters (see gtc_update).
constexpr int kCounters = 5;

} // namespace

std::vector<std::string> gtc::rt::runtimeKernelSources() {
  return {kOptimizerSource};
}


struct CudaExecutor::Impl {
  const Plan &plan;
  const CudaProgram &program;
  bool tf32;
  std::string arch;
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
  void enqueueAllReduce(Launch &l, int slot, CUstream stream) {
    const CudaLaunch &s = *l.spec;
    const size_t n = s.buffers.size() / 2;
    struct Span {
      CUdeviceptr in, out;
      size_t bytes;
      DType dtype;
    };
    std::vector<Span> spans;
    bool inPlace = true;
    for (size_t i = 0; i < n; ++i) {
      const Buffer &b = plan.buffers[s.buffers[n + i]];
      Span sp{ptr(s.buffers[i], slot), ptr(s.buffers[n + i], slot),
              static_cast<size_t>(b.elements()) * dtypeBytes(b.dtype),
              b.dtype};
      inPlace = inPlace && sp.in == sp.out;
      spans.push_back(sp);
    }
    // With accumulation, a micro-batch before the last only leaves its
    // gradients where the update reads them (enqueueAccumulate sums them);
    // the last reduces each bucket's mean (finishMean).
    if (shardGrads)
      return enqueueReduceToOwners(l, slot, stream);
    const bool accumulating = microParts > 1;
    const bool reduceNow = dcomm && (!accumulating || microPart + 1 == microParts);
    if (!reduceNow || (accumulating && !inPlace)) {
      for (Span &sp : spans)
        if (sp.in != sp.out) {
          CU(cuMemcpyDtoDAsync(sp.out, sp.in, sp.bytes, stream));
          sp.in = sp.out;
        }
      inPlace = true;
    }
    if (!reduceNow) {
      if (accumulating && microPart + 1 == microParts)
        for (const Span &sp : spans)
          finishMean(sp.out, sp.bytes, sp.dtype, stream);
      return;
    }
    if (inPlace) {
      std::sort(spans.begin(), spans.end(),
                [](const Span &a, const Span &b) { return a.out < b.out; });
      std::vector<Span> runs;
      for (const Span &sp : spans) {
        if (!runs.empty() && runs.back().dtype == sp.dtype &&
            sp.out >= runs.back().out + runs.back().bytes &&
            sp.out - (runs.back().out + runs.back().bytes) < 256)
          runs.back().bytes = sp.out + sp.bytes - runs.back().out;
        else
          runs.push_back(sp);
      }
      spans = std::move(runs);
      for (Span &sp : spans)
        sp.in = sp.out;
    }
    CU(cuEventRecord(l.ready, stream));
    CU(cuStreamWaitEvent(commStream, l.ready, 0));
    if (accumulating)
      for (const Span &sp : spans)
        finishMean(sp.out, sp.bytes, sp.dtype, commStream);
    // While profiling, the group between two events of its own stream.
    std::optional<Timed> t;
    if (timed) {
      double bytes = 0;
      for (const Span &sp : spans)
        bytes += static_cast<double>(sp.bytes);
      t = Timed{"nccl all-reduce (" + std::to_string(n) + " gradients, " +
                    std::to_string(spans.size()) + " calls)",
                "nccl", l.planKernel, pooledEvent(), pooledEvent(), 0, bytes,
                false};
      CU(cuEventRecord(t->begin, commStream));
    }
    dcomm->groupStart();
    for (const Span &sp : spans)
      dcomm->allReduceMean(reinterpret_cast<const void *>(sp.in),
                           reinterpret_cast<void *>(sp.out),
                           sp.bytes / dtypeBytes(sp.dtype), commType(sp.dtype),
                           commStream);
    dcomm->groupEnd();
    if (t) {
      CU(cuEventRecord(t->end, commStream));
      timed->push_back(std::move(*t));
    }
    if (!inPlace || serialComm) {
      CU(cuEventRecord(l.reduced, commStream));
      CU(cuStreamWaitEvent(stream, l.reduced, 0));
    } else {
      commPending = true;
    }
  }

  /// ZeRO-2: gt-bucket's all-reduce of one bucket becomes a reduction of
  /// its gradients to the ranks that own them (a reduce-scatter of uneven
  /// shares: one ncclReduce to each owner of a run of the bucket, in one
  /// group on the communication stream). The bucket's gradients lie in its
  /// group as their parameters lie in the parameter region (PlanBuilder's
  /// groupGradients), so parameter offsets say where each element goes;
  /// the alignment gaps between them are not sent, and stay zero in the
  /// share. The group lives to the step's end, which joins the stream.
  void enqueueReduceToOwners(Launch &l, int slot, CUstream stream) {
    const CudaLaunch &s = *l.spec;
    const size_t n = s.buffers.size() / 2;
    struct Run {
      CUdeviceptr in;
      int64_t at, elements; // in the parameter region
    };
    std::vector<Run> runs;
    for (size_t i = 0; i < n; ++i) {
      const int out = s.buffers[n + i];
      const Param *param = nullptr;
      for (const Param &p : plan.params)
        if (p.grad == out || (p.grad >= 0 && plan.buffers[out].viewOf == p.grad))
          param = &p;
      if (!param)
        throw RuntimeError("shard = gradients: the bucket's '" +
                           plan.buffers[out].name +
                           "' is no parameter's gradient");
      const Buffer &b = plan.buffers[param->buffer];
      runs.push_back({ptr(s.buffers[i], slot), b.offset, b.elements()});
    }
    std::sort(runs.begin(), runs.end(),
              [](const Run &a, const Run &b) { return a.at < b.at; });
    std::vector<Run> merged;
    for (const Run &r : runs)
      if (!merged.empty() && merged.back().at + merged.back().elements == r.at &&
          merged.back().in + merged.back().elements * 4 == r.in)
        merged.back().elements += r.elements;
      else
        merged.push_back(r);
    CU(cuEventRecord(l.ready, stream));
    CU(cuStreamWaitEvent(commStream, l.ready, 0));
    std::optional<Timed> t;
    int calls = 0;
    if (timed) {
      t = Timed{"", "nccl", l.planKernel, pooledEvent(), pooledEvent(), 0, 0,
                false};
      CU(cuEventRecord(t->begin, commStream));
    }
    const int me = dcomm->deviceRank();
    CUdeviceptr mine = arena + regionOffset.at(Region::Grad);
    dcomm->groupStart();
    for (const Run &r : merged)
      for (int64_t at = r.at; at < r.at + r.elements;) {
        const int owner = static_cast<int>(at / share);
        const int64_t end = std::min(r.at + r.elements, (owner + 1) * share);
        CUdeviceptr out = owner == me ? mine + (at - ownFrom) * 4 : mine;
        dcomm->reduceMean(reinterpret_cast<const void *>(r.in + (at - r.at) * 4),
                          reinterpret_cast<void *>(out),
                          static_cast<size_t>(end - at), DeviceComm::Type::F32,
                          owner, commStream);
        if (t)
          t->bytes += static_cast<double>(end - at) * 4;
        ++calls;
        at = end;
      }
    dcomm->groupEnd();
    if (t) {
      t->name = "nccl reduce to owners (" + std::to_string(n) +
                " gradients, " + std::to_string(calls) + " calls)";
      CU(cuEventRecord(t->end, commStream));
      timed->push_back(std::move(*t));
    }
    if (serialComm) {
      CU(cuEventRecord(l.reduced, commStream));
      CU(cuStreamWaitEvent(stream, l.reduced, 0));
    } else {
      commPending = true;
    }
  }

  /// In the last micro-batch, the gradients at `g` (`bytes` of the
  /// gradient region) become their mean over the micro-batches:
  /// (accumulated + last) / parts, as enqueueAccumulate does for the whole
  /// region when the plan has no buckets.
  void finishMean(CUdeviceptr g, size_t bytes, DType dtype, CUstream stream) {
    CUdeviceptr grads = arena + regionOffset.at(Region::Grad);
    if (dtype != DType::F32 || g < grads ||
        g + bytes > grads + static_cast<size_t>(paramElements) * 4)
      throw RuntimeError("an all-reduced bucket of a step with gradient "
                         "accumulation is not in the fp32 gradient region");
    CUdeviceptr acc = accumulator + (g - grads);
    long long count = static_cast<long long>(bytes / 4);
    int mode = 2;
    float scale = 1.0f / static_cast<float>(microParts);
    void *none = nullptr;
    void *args[] = {&acc, &g, &count, &mode, &scale, &none, &none};
    CU(cuLaunchKernel(accumulateFn, 132 * 4, 1, 1, 256, 1, 1, 0, stream, args,
                      nullptr));
  }

  /// The compute stream waits for the collectives enqueued so far.
  void joinComm() {
    if (!commPending)
      return;
    CU(cuEventRecord(commJoined, commStream));
    CU(cuStreamWaitEvent(compute, commJoined, 0));
    commPending = false;
  }

  /// At the end of a data-parallel step (after its last micro-batch): the
  /// loss averaged over the processes, and, when the plan has no bucket
  /// collectives of its own (it accumulates micro-batches), the gradients,
  /// in one NCCL group on the compute stream.
  void enqueueStepReduction(bool gradients) {
    if (!dcomm)
      return;
    dcomm->groupStart();
    if (gradients && paramElements > 0) {
      CUdeviceptr g = arena + regionOffset.at(Region::Grad);
      dcomm->allReduceMean(reinterpret_cast<void *>(g),
                           reinterpret_cast<void *>(g),
                           static_cast<size_t>(paramElements),
                           DeviceComm::Type::F32, compute);
    }
    if (plan.loss >= 0) {
      CUdeviceptr loss = ptr(plan.loss, 0);
      dcomm->allReduceMean(reinterpret_cast<void *>(loss),
                           reinterpret_cast<void *>(loss), 1,
                           commType(plan.buffers[plan.loss].dtype), compute);
    }
    dcomm->groupEnd();
  }

  CUdeviceptr ptr(int id, int slot) const {
    if (id == CudaLaunch::kWorkspace)
      return scratch;
    const Buffer &b = plan.buffers[id];
    if (b.region == Region::Input)
      return inputs[slot] + b.offset * 4;
    return arena + regionOffset.at(b.region) + b.offset * 4;
  }

  /// Compiles every distinct source (the program's kernels and the
  /// runtime's) on all cores, through the cache.
  void compileAll(const std::vector<const std::string *> &sources) {
    StartupPhase phase("NVRTC");
    std::vector<CompileJob> jobs;
    for (const std::string *s : sources)
      if (binaries.emplace(*s, std::vector<char>()).second)
        jobs.push_back({s, arch, {}, false, ""});
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
                   std::to_string(threads) + " threads, " +
                   std::to_string(hits) + " from the cache";
  }

  CUfunction load(const std::string &source, const std::string &name) {
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

  /// cuBLASLt's epilogue for a launch. Row-major op(A) is cuBLASLt's B
  /// (see setupGemm): its row sums over k are BGRADB.
  static cublasLtEpilogue_t epilogueOf(const CudaLaunch &s) {
    bool bias = s.bias >= 0, aux = s.aux >= 0;
    if (s.dgelu)
      return CUBLASLT_EPILOGUE_DGELU;
    if (s.biasGrad >= 0)
      return CUBLASLT_EPILOGUE_BGRADB;
    switch (s.act) {
    case CudaLaunch::Activation::Relu:
      return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case CudaLaunch::Activation::Gelu:
      return aux    ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                            : CUBLASLT_EPILOGUE_GELU_AUX)
             : bias ? CUBLASLT_EPILOGUE_GELU_BIAS
                    : CUBLASLT_EPILOGUE_GELU;
    case CudaLaunch::Activation::None:
      break;
    }
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }

  /// Points the GEMM's epilogue at this slot's bias (or bias gradient) and
  /// saved GELU input.
  void setEpiloguePointers(Launch &l, int slot) {
    const CudaLaunch &s = *l.spec;
    int bias = s.bias >= 0 ? s.bias : s.biasGrad;
    if (bias >= 0) {
      CUdeviceptr p = ptr(bias, slot);
      LT(cublasLtMatmulDescSetAttribute(
          l.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p));
    }
    if (s.aux >= 0) {
      CUdeviceptr p = ptr(s.aux, slot);
      LT(cublasLtMatmulDescSetAttribute(
          l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p, sizeof p));
    }
  }

  void setupGemm(Launch &l) {
    const CudaLaunch &s = *l.spec;
    Libs &L = libs();
    cublasComputeType_t compute =
        tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    // 16-bit operands (gt-autocast) accumulate in f32 too; the bias has the
    // output's type, the output the operands' or f32 (a folded cast).
    auto dataType = [](DType d) {
      return d == DType::BF16  ? CUDA_R_16BF
             : d == DType::F16 ? CUDA_R_16F
                               : CUDA_R_32F;
    };
    DType dt = plan.buffers[s.a].dtype, out = plan.buffers[s.c].dtype;
    cudaDataType_t type = dataType(dt), outType = dataType(out);
    // Every epilogue buffer has the output's type; only the bias gradient
    // goes with an output wider than the operands (a folded cast).
    bool plain = s.bias < 0 && s.act == CudaLaunch::Activation::None &&
                 !s.dgelu;
    bool ok = plan.buffers[s.b].dtype == dt &&
              (out == dt || (out == DType::F32 && plain));
    for (int id : {s.bias, s.aux, s.biasGrad})
      ok = ok && (id < 0 || plan.buffers[id].dtype == out);
    if (!ok)
      throw RuntimeError("GEMM operands of element types cuBLASLt is not "
                         "given here ('" + plan.buffers[s.a].name + "', '" +
                         plan.buffers[s.c].name + "')");
    LT(cublasLtMatmulDescCreate(&l.desc, compute, CUDA_R_32F));
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: pass B
    // first. In column-major terms B (row-major rowsB x colsB) is colsB x rowsB.
    cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                      &opA, sizeof opA));
    LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                      &opB, sizeof opB));
    if (cublasLtEpilogue_t epi = epilogueOf(s); epi != CUBLASLT_EPILOGUE_DEFAULT) {
      LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                        &epi, sizeof epi));
      // The saved GELU input has C's layout (column-major n x m).
      if (s.aux >= 0) {
        int64_t ld = s.n;
        LT(cublasLtMatmulDescSetAttribute(
            l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
      }
    }
    int64_t rowsB = s.transB ? s.n : s.k, colsB = s.transB ? s.k : s.n;
    int64_t rowsA = s.transA ? s.k : s.m, colsA = s.transA ? s.m : s.k;
    LT(cublasLtMatrixLayoutCreate(&l.la, type, colsB, rowsB, colsB));
    LT(cublasLtMatrixLayoutCreate(&l.lb, type, colsA, rowsA, colsA));
    LT(cublasLtMatrixLayoutCreate(&l.lc, outType, s.n, s.m, s.n));
    if (s.batch > 1) {
      int32_t count = static_cast<int32_t>(s.batch);
      for (auto [layout, stride] :
           {std::pair{l.la, s.strideB}, std::pair{l.lb, s.strideA},
            std::pair{l.lc, s.strideC}}) {
        LT(cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        LT(cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
            sizeof stride));
      }
    }
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
        sizeof workspaceBytes));
    // cuBLASLt's heuristic assumes 256-byte aligned operands; the memory
    // plan places every buffer so (PlanBuilder's kAlign).
    for (auto [id, off] : {std::pair{s.a, s.offsetA}, std::pair{s.b, s.offsetB},
                           std::pair{s.c, s.offsetC}})
      for (int slot = 0; slot < 2; ++slot)
        if ((ptr(id, slot) + off) % 256 != 0)
          throw RuntimeError("GEMM operand '" + plan.buffers[id].name +
                             "' is not 256-byte aligned; the plan was not "
                             "made by this gtc (recompile it)");
    cublasLtMatmulHeuristicResult_t results[8] = {};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, l.desc, l.la, l.lb, l.lc, l.lc, pref,
                                      8, results, &found));
    if (found == 0)
      throw RuntimeError("cuBLASLt has no algorithm for a " +
                         std::to_string(s.m) + "x" + std::to_string(s.n) +
                         "x" + std::to_string(s.k) + " GEMM");
    l.algo = results[0].algo;
    // Timing the candidates (GTC_AUTOTUNE=1) can pick another algorithm in
    // another process, with another summation order: results would then
    // differ between two runs of one plan (seen as 5e-6 between gtc run and
    // a compiled executable once GEMMs wrote f32 gradients). Reproducible
    // by default; large GEMMs only, as small ones (latency-bound, inside a
    // graph) measured no faster (test/bench/NOTES.md).
    if (found > 1 && s.m * s.n * s.k * s.batch >= (int64_t(1) << 28) &&
        std::getenv("GTC_AUTOTUNE") != nullptr)
      autotune(l, results, found);
    (void)L;
  }

  /// With GTC_CHECK_LAUNCHES=1 (and GTC_NO_GRAPH=1), waits after every
  /// launch (for its stream) and names the one that failed.
  void checkLaunch(const CudaLaunch &s, CUstream stream) {
    static const bool check = std::getenv("GTC_CHECK_LAUNCHES") != nullptr;
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

  /// Times each candidate algorithm on this GEMM's own buffers (CUDA
  /// events, after a warm-up) and keeps the fastest. The output buffer gets
  /// scratch values; every step writes it again before reading it.
  void autotune(Launch &l, const cublasLtMatmulHeuristicResult_t *results,
                int found) {
    const CudaLaunch &s = *l.spec;
    setEpiloguePointers(l, 0);
    float alpha = s.alpha, beta = s.beta;
    auto run = [&](const cublasLtMatmulAlgo_t &algo) {
      return libs().cublasLtMatmul(
          lt, l.desc, &alpha,
          reinterpret_cast<void *>(ptr(s.b, 0) + s.offsetB), l.la,
          reinterpret_cast<void *>(ptr(s.a, 0) + s.offsetA), l.lb, &beta,
          reinterpret_cast<void *>(ptr(s.c, 0) + s.offsetC), l.lc,
          reinterpret_cast<void *>(ptr(s.c, 0) + s.offsetC), l.lc, &algo,
          reinterpret_cast<void *>(workspace), workspaceBytes, compute);
    };
    float best = -1;
    for (int i = 0; i < found; ++i) {
      if (run(results[i].algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      CU(cuEventRecord(start, compute));
      for (int r = 0; r < 5; ++r)
        run(results[i].algo);
      CU(cuEventRecord(stop, compute));
      CU(cuEventSynchronize(stop));
      float ms = 0;
      CU(cuEventElapsedTime(&ms, start, stop));
      if (best < 0 || ms < best) {
        best = ms;
        l.algo = results[i].algo;
      }
    }
  }

  void enqueueLaunch(Launch &l, int slot) { enqueueLaunch(l, slot, compute); }

  void enqueueLaunch(Launch &l, int slot, CUstream stream) {
    const CudaLaunch &s = *l.spec;
    if (s.kind == CudaLaunch::Kind::AllReduce) {
      enqueueAllReduce(l, slot, stream);
    } else if (s.kind == CudaLaunch::Kind::Memset) {
      const Buffer &b = plan.buffers[s.c];
      CU(cuMemsetD8Async(ptr(s.c, slot), 0, b.slots() * 4, stream));
    } else if (s.kind == CudaLaunch::Kind::Gemm) {
      CUdeviceptr a = ptr(s.a, slot) + s.offsetA,
                  b = ptr(s.b, slot) + s.offsetB,
                  c = ptr(s.c, slot) + s.offsetC;
      setEpiloguePointers(l, slot);
      float alpha = s.alpha, beta = s.beta;
      LT(cublasLtMatmul(lt, l.desc, &alpha, reinterpret_cast<void *>(b), l.la,
                        reinterpret_cast<void *>(a), l.lb, &beta,
                        reinterpret_cast<void *>(c), l.lc,
                        reinterpret_cast<void *>(c), l.lc, &l.algo,
                        reinterpret_cast<void *>(workspace), workspaceBytes,
                        stream));
    } else {
      std::vector<CUdeviceptr> ptrs;
      for (size_t i = 0; i < s.buffers.size(); ++i)
        ptrs.push_back(ptr(s.buffers[i], slot) +
                       (s.offsets.empty() ? 0 : s.offsets[i]));
      std::vector<void *> args;
      for (CUdeviceptr &p : ptrs)
        args.push_back(&p);
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
  void refreshCopies() {
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
  void enqueueKernels(int slot,
                      const std::function<void(size_t, int)> &afterKernel) {
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
    Timed t{name, kind, planKernel, pooledEvent(), pooledEvent(), flops, bytes,
            tensorCore};
    CU(cuEventRecord(t.begin, compute));
    enqueue();
    CU(cuEventRecord(t.end, compute));
    timed->push_back(std::move(t));
  }

  void enqueueUpdate() {
    if (paramElements == 0 || plan.kind != "step")
      return;
    // Sharded, the update covers this rank's share; the norm all of the
    // (all-reduced) gradients. ZeRO-2's gradient region is this rank's
    // share of them, and the norm's partial sums are summed over the ranks.
    CUdeviceptr p = arena + regionOffset.at(Region::Param) + ownFrom * 4;
    CUdeviceptr g =
        arena + regionOffset.at(Region::Grad) + (shardGrads ? 0 : ownFrom * 4);
    const int64_t updated = sharded ? own : paramElements;
    CUdeviceptr m = state, v = state + updated * 4;
    long long n = updated;
    CUdeviceptr allGrads = arena + regionOffset.at(Region::Grad);
    long long allN = shardGrads ? own : paramElements;
    int np = static_cast<int>(shardGrads ? (share + 4095) / 4096 : partials);
    const TrainConfig &c = plan.config;
    const bool scaling = plan.scalesLoss();
    Hyper h{c.lr,
            c.final,
            c.beta1,
            c.beta2,
            c.eps,
            c.weightDecay,
            c.gradClip,
            c.momentum,
            c.dampening,
            c.warmup,
            totalSteps,
            c.nesterov,
            static_cast<int>(c.optimizer), // Hyper: 0 sgd, 1 adam, 2 adamw
            static_cast<int>(c.schedule),  // 0 constant, 1 linear, 2 cosine
            scaling};
    CUdeviceptr scale = scaling ? ptr(plan.lossScale, 0) : 0;
    double bytes = static_cast<double>(paramElements) * 4;
    if (updateNeedsNorm(plan)) {
      void *args[] = {&allGrads, &allN, &partial};
      timedLaunch("gtc_sumsq (gradient norm)", "optimizer", -1, 0, bytes,
                  false, [&] {
                    CU(cuLaunchKernel(sumsq, static_cast<unsigned>(np), 1, 1,
                                      256, 1, 1, 0, compute, args, nullptr));
                  });
      if (shardGrads)
        dcomm->allReduceSum(reinterpret_cast<void *>(partial),
                            reinterpret_cast<void *>(partial),
                            static_cast<size_t>(np), DeviceComm::Type::F32,
                            compute);
      void *normArgs[] = {&partial, &np, &norm};
      timedLaunch("gtc_norm", "optimizer", -1, 0, 0, false, [&] {
        CU(cuLaunchKernel(normFn, 1, 1, 1, 1024, 1, 1, 0, compute, normArgs,
                          nullptr));
      });
    }
    // The parameters' 16-bit copies, when the plan keeps them.
    CUdeviceptr copy = 0;
    int copyType = 0;
    if (plan.paramCopies >= 0) {
      copy = arena + regionOffset.at(Region::Copy) + ownFrom * 2;
      copyType = plan.paramCopyType() == DType::BF16 ? 1 : 2;
    }
    void *args[] = {&p,     &g,     &m,    &v,        &n,      &h,
                    &counter, &norm, &scale, &copy, &copyType};
    // Reads p, g (and m, v) and writes p (and m, v, the copies).
    timedLaunch(std::string("gtc_update (") + name(c.optimizer) + ")",
                "optimizer", -1, 0,
                updateBytes(c, paramElements) + (copy ? 2.0 * n : 0.0), false,
                [&] {
                  CU(cuLaunchKernel(update, 132 * 4, 1, 1, 256, 1, 1, 0,
                                    compute, args, nullptr));
                });
    if (sharded)
      enqueueGatherParams();
  }

  /// ZeRO-1: every rank's updated share of the parameters, and of their
  /// 16-bit copies, to every rank (in place: NCCL reads this rank's share
  /// where it lies in the output).
  void enqueueGatherParams() {
    const size_t count = static_cast<size_t>(share);
    CUdeviceptr p = arena + regionOffset.at(Region::Param);
    dcomm->groupStart();
    dcomm->allGather(reinterpret_cast<void *>(p + ownFrom * 4),
                     reinterpret_cast<void *>(p), count,
                     DeviceComm::Type::F32, compute);
    if (plan.paramCopies >= 0) {
      CUdeviceptr c = arena + regionOffset.at(Region::Copy);
      dcomm->allGather(reinterpret_cast<void *>(c + ownFrom * 2),
                       reinterpret_cast<void *>(c), count,
                       commType(plan.paramCopyType()), compute);
    }
    dcomm->groupEnd();
  }

  /// After micro-batch `part` of `parts`: adds its gradients (and loss)
  /// to the accumulator; after the last, leaves their mean in the gradients
  /// (and the loss) for the update.
  void enqueueAccumulate(int part, int parts) {
    CUdeviceptr acc = accumulator, g = arena + regionOffset.at(Region::Grad);
    CUdeviceptr lossAcc = accumulator + paramElements * 4,
                loss = ptr(plan.loss, 0);
    int mode = microPhase(part, parts);
    // The last micro-batch's buckets made their own means (finishMean).
    long long n = mode == 2 && bucketed ? 0 : paramElements;
    float scale = 1.0f / static_cast<float>(parts);
    void *args[] = {&acc, &g, &n, &mode, &scale, &lossAcc, &loss};
    timedLaunch("gtc_accumulate (micro-batches)", "optimizer", -1, 0,
                static_cast<double>(paramElements) * 12, false, [&] {
                  CU(cuLaunchKernel(accumulateFn, 132 * 4, 1, 1, 256, 1, 1, 0,
                                    compute, args, nullptr));
                });
  }

  /// The step's phase in gradient accumulation: 0 the first micro-batch
  /// (and a step without accumulation), 1 a middle one, 2 the last.
  static int microPhase(int part, int parts) {
    return parts == 1 || part == 0 ? 0 : part + 1 < parts ? 1 : 2;
  }

  void enqueueOutputs() {
    auto *out = static_cast<float *>(pinnedOut);
    CU(cuMemcpyDtoHAsync(out, ptr(plan.loss, 0), 4, compute));
    if (plan.accuracy >= 0)
      CU(cuMemcpyDtoHAsync(out + 1, ptr(plan.accuracy, 0), 4, compute));
    if (plan.scalesLoss()) {
      CU(cuMemcpyDtoHAsync(out + 2, ptr(plan.lossScale, 0), 4, compute));
      CU(cuMemcpyDtoHAsync(out + 4, counter + 3 * 8, 8, compute));
    }
  }
};

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
  I.arch = "sm_" + std::to_string(L.info.major) + std::to_string(L.info.minor);
  I.dependentLaunch = L.info.major >= 9;
  CU(cuCtxSetCurrent(L.context));
  CU(cuStreamCreate(&I.compute, CU_STREAM_NON_BLOCKING));
  CU(cuStreamCreate(&I.copy, CU_STREAM_NON_BLOCKING));
  for (int s = 0; s < 2; ++s) {
    CU(cuEventCreate(&I.copied[s], CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&I.consumed[s], CU_EVENT_DISABLE_TIMING));
  }
  CU(cuEventCreate(&I.done, CU_EVENT_DISABLE_TIMING));
  CU(cuEventCreate(&I.start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&I.stop, CU_EVENT_DEFAULT));
  LT(cublasLtCreate(&I.lt));
  // Every kernel first, on all cores: the program's (identical layers share
  // one source) and the optimizer's.
  std::vector<const std::string *> sources;
  for (const std::vector<CudaLaunch> &ls : program.kernels)
    for (const CudaLaunch &s : ls)
      if (s.kind == CudaLaunch::Kind::Kernel)
        sources.push_back(&s.source);
  static const std::string optimizerSource = kOptimizerSource;
  if (plan.kind == "step")
    sources.push_back(&optimizerSource);
  I.compileAll(sources);
  auto memoryStart = std::chrono::steady_clock::now();
  size_t freeBefore = 0, total = 0;
  CU(cuMemGetInfo(&freeBefore, &total));

  // All device memory in one allocation (cuMemAlloc takes whole 2 MiB
  // pages, so one allocation keeps the measured peak at the predicted one):
  // the arena of every region but the inputs, two slots of those, cuBLASLt's
  // workspace, the kernels' scratch, the optimizer state, the step counters
  // with the norm's partial sums, and the gradient accumulator.
  size_t bytesTotal = 0;
  auto take = [&](size_t bytes) {
    size_t at = bytesTotal;
    bytesTotal += (bytes + 255) / 256 * 256;
    return at;
  };
  I.paramElements = plan.regionSize.count(Region::Param)
                        ? plan.regionSize.at(Region::Param)
                        : 0;
  if (plan.shardRanks > 1 && !I.sharded)
    throw RuntimeError("this plan shards its gradients over " +
                       std::to_string(plan.shardRanks) +
                       " processes (shard = gradients), and runs without "
                       "them; run it with --devices " +
                       std::to_string(plan.shardRanks) + " on GPUs");
  if (I.sharded) {
    // Equal shares of 128 elements at a time (NCCL gathers equal counts).
    const int64_t ranks = I.dcomm->deviceRanks(), rank = I.dcomm->deviceRank();
    I.share = plan.shareOf(ranks);
    if (plan.shardRanks > 1 && plan.shardRanks != ranks)
      throw RuntimeError("this plan shards its gradients over " +
                         std::to_string(plan.shardRanks) +
                         " processes (shard = gradients), and runs in " +
                         std::to_string(ranks) + "; compile it for " +
                         std::to_string(ranks));
    // Rank r's share starts at r * share, where the in-place all-gather
    // reads it; the last shares may hold fewer elements, or none.
    I.ownFrom = rank * I.share;
    I.own = std::clamp<int64_t>(I.paramElements - I.ownFrom, 0, I.share);
  }
  // The arena first: a region's offset into it is its offset into the
  // allocation.
  for (auto [region, elements] : plan.regionSize) {
    if (region == Region::Input || region == Region::Local)
      continue;
    int64_t e = elements;
    if (I.sharded && (region == Region::Param || region == Region::Grad))
      e = std::max(e, I.paddedParams());
    if (I.shardGrads && region == Region::Grad)
      e = I.share; // this rank's
    if (I.sharded && region == Region::Copy)
      e = std::max(e, (I.paddedParams() + 1) / 2);
    I.regionOffset[region] = take(static_cast<size_t>(e) * 4);
  }
  I.arenaBytes = std::max<size_t>(bytesTotal, 256);
  bytesTotal = I.arenaBytes;
  size_t inputBytes = std::max<size_t>(
      256, static_cast<size_t>(plan.regionSize.count(Region::Input)
                                   ? plan.regionSize.at(Region::Input)
                                   : 0) *
               4);
  size_t inputAt[2] = {take(inputBytes), take(inputBytes)};
  size_t workspaceAt = take(I.workspaceBytes);
  size_t scratchAt = take(static_cast<size_t>(program.workspaceBytes));
  size_t stateAt = 0, counterAt = 0, accumulatorAt = 0;
  const bool stepping = plan.kind == "step" && I.paramElements > 0;
  if (stepping) {
    // Adam's two moments; SGD's momentum buffer: of every parameter, or
    // of this rank's share.
    I.stateBytes = static_cast<size_t>(plan.stateFloats()) * 4 *
                   static_cast<size_t>(I.sharded
                                           ? std::max<int64_t>(I.own, 64)
                                           : I.paramElements);
    stateAt = take(I.stateBytes);
    I.partials = (I.paramElements + 4095) / 4096;
    counterAt = take(512 + I.partials * 4);
    if (plan.microBatches > 1) {
      if (plan.loss < 0 || plan.buffers[plan.loss].dtype != DType::F32)
        throw RuntimeError("gradient accumulation needs an f32 loss");
      I.accumulatorBytes = static_cast<size_t>(I.paramElements + 1) * 4;
      accumulatorAt = take(I.accumulatorBytes);
    }
  }
  if (CUresult r = L.cuMemAlloc(&I.device, bytesTotal); r != CUDA_SUCCESS) {
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
        mib(static_cast<double>(bytesTotal)) + " and " + L.info.name +
        " has " + mib(static_cast<double>(freeBefore)) +
        " free (memory plan: weights " + mib(m.weights) + ", gradients " +
        mib(m.gradients) + ", optimizer state " + mib(m.optimizerState) +
        ", activations and temporaries " + mib(m.temporaries) +
        "); lower the batch (--batch N), let gtc choose it (--batch auto), "
        "or recompute activations (checkpoint = auto, or --checkpoint "
        "auto); gtc run --dry-run --explain --batch N shows a plan without "
        "training");
  }
  I.arena = I.device;
  for (int s = 0; s < 2; ++s) {
    I.inputs[s] = I.device + inputAt[s];
    CU(cuMemHostAlloc(&I.staged[s], inputBytes, 0));
  }
  I.workspace = I.device + workspaceAt;
  if (program.workspaceBytes > 0)
    I.scratch = I.device + scratchAt;
  CU(cuMemHostAlloc(&I.pinnedOut, 32, 0));
  if (stepping) {
    I.state = I.device + stateAt;
    CU(cuMemsetD8Async(I.state, 0, I.stateBytes, I.compute));
    I.counter = I.device + counterAt;
    I.norm = I.counter + 256;
    I.partial = I.counter + 512;
    CU(cuMemsetD8Async(I.counter, 0, kCounters * 8, I.compute));
    if (I.accumulatorBytes)
      I.accumulator = I.device + accumulatorAt;
  }
  size_t freeAfter = 0;
  CU(cuMemGetInfo(&freeAfter, &total));
  I.measured = freeBefore > freeAfter ? freeBefore - freeAfter : 0;
  // Zero the arena, then the constants.
  CU(cuMemsetD8Async(I.arena, 0, I.arenaBytes, I.compute));
  CU(cuStreamSynchronize(I.compute));
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
    upload(c.buffer, b.dtype == DType::F32   ? static_cast<const void *>(f.data())
                     : b.dtype == DType::I32 ? static_cast<const void *>(i.data())
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

  // Every buffer a launch names must exist.
  auto valid = [&](int id) {
    return id >= 0 && static_cast<size_t>(id) < plan.buffers.size();
  };
  for (const std::vector<CudaLaunch> &ls : program.kernels)
    for (const CudaLaunch &s : ls) {
      bool ok = true;
      if (s.kind == CudaLaunch::Kind::Kernel) {
        ok = s.offsets.empty() || s.offsets.size() == s.buffers.size();
        for (int id : s.buffers)
          ok = ok && (valid(id) || (id == CudaLaunch::kWorkspace &&
                                    program.workspaceBytes > 0));
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

  // The launches: kernels from their modules, then the GEMMs with the
  // algorithm of cuBLASLt's heuristic.
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (const CudaLaunch &s : program.kernels[k]) {
      Impl::Launch l;
      l.spec = &s;
      l.planKernel = static_cast<int>(k);
      if (s.kind == CudaLaunch::Kind::Kernel) {
        l.fn = I.load(s.source, CudaLaunch::kKernelEntry);
        if (s.shared > 48 * 1024)
          CU(cuFuncSetAttribute(l.fn,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(s.shared)));
      }
      I.launches.push_back(l);
    }
  // Bucket collectives: events to order them, and their own stream.
  bool collectives = false;
  for (Impl::Launch &l : I.launches)
    if (l.spec->kind == CudaLaunch::Kind::AllReduce) {
      collectives = true;
      CU(cuEventCreate(&l.ready, CU_EVENT_DISABLE_TIMING));
      CU(cuEventCreate(&l.reduced, CU_EVENT_DISABLE_TIMING));
    }
  I.bucketed = collectives;
  if (I.dcomm && (collectives || plan.kind == "step")) {
    CU(cuStreamCreate(&I.commStream, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&I.commJoined, CU_EVENT_DISABLE_TIMING));
  }
  StartupPhase gemmPhase("cuBLASLt heuristics");
  for (Impl::Launch &l : I.launches)
    if (l.spec->kind == CudaLaunch::Kind::Gemm)
      I.setupGemm(l);
  // Independent plan kernels on two streams, unless GTC_ONE_STREAM is set
  // (to compare) or no group would use the second.
  const char *oneStream = std::getenv("GTC_ONE_STREAM");
  if (!oneStream || !*oneStream || std::string(oneStream) == "0") {
    I.groups = scheduleStreams(plan, program, L.info.multiprocessors);
    I.groupDone.assign(I.groups.size(), nullptr);
    bool used = false;
    for (size_t g = 0; g < I.groups.size(); ++g) {
      used = used || I.groups[g].stream == 1;
      if (I.groups[g].signals)
        CU(cuEventCreate(&I.groupDone[g], CU_EVENT_DISABLE_TIMING));
    }
    if (used) {
      CU(cuStreamCreate(&I.side, CU_STREAM_NON_BLOCKING));
      CU(cuEventCreate(&I.fork, CU_EVENT_DISABLE_TIMING));
      CU(cuEventCreate(&I.joined, CU_EVENT_DISABLE_TIMING));
    }
  }
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
    CU(cuMemcpyHtoD(impl->ptr(id, s), data, b.elements() * dtypeBytes(b.dtype)));
}

void CudaExecutor::download(int id, void *data, int slot) {
  CU(cuStreamSynchronize(impl->compute));
  const Buffer &b = impl->plan.buffers[id];
  CU(cuMemcpyDtoH(data, impl->ptr(id, slot),
                  b.elements() * dtypeBytes(b.dtype)));
}

void CudaExecutor::uploadRegion(Region r, const void *data) {
  CU(cuStreamSynchronize(impl->compute));
  impl->copiesStale |= r == Region::Param;
  CU(cuMemcpyHtoD(impl->arena + impl->regionOffset.at(r), data,
                  impl->plan.regionSize.at(r) * 4));
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
    I.enqueueKernels(slot, afterKernel);
    if (parts > 1 && I.plan.kind == "step")
      I.enqueueAccumulate(part, parts);
    if (part + 1 == parts && I.plan.kind == "step")
      I.enqueueStepReduction(/*gradients=*/parts > 1 && !I.bucketed);
    if (update)
      I.enqueueUpdate();
  };
  bool useGraph = std::getenv("GTC_NO_GRAPH") == nullptr && !afterKernel;
  const int phase = Impl::microPhase(part, parts);
  CUgraphExec &exec = update || part + 1 < parts ? I.graphs[slot][phase]
                                                 : I.noUpdate[slot][phase];
  static const bool traceComm = std::getenv("GTC_TRACE_COMM") != nullptr;
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

void CudaExecutor::setSchedule(int64_t done, int64_t total, int64_t updates) {
  impl->totalSteps = std::max<int64_t>(1, total);
  if (!impl->counter)
    return;
  CU(cuStreamSynchronize(impl->compute));
  unsigned long long c[kCounters] = {static_cast<unsigned long long>(done), 0,
                                     static_cast<unsigned long long>(updates)};
  CU(cuMemcpyHtoD(impl->counter, c, sizeof c));
}

bool CudaExecutor::downloadScaler(LossScaler &scaler) {
  Impl &I = *impl;
  if (!I.plan.scalesLoss() || !I.counter)
    return false;
  CU(cuStreamSynchronize(I.compute));
  unsigned long long c[kCounters];
  CU(cuMemcpyDtoH(c, I.counter, sizeof c));
  CU(cuMemcpyDtoH(&scaler.scale, I.ptr(I.plan.lossScale, 0), 4));
  scaler.skipped = static_cast<int64_t>(c[3]);
  scaler.goodSteps = static_cast<int64_t>(c[4]);
  return true;
}

void CudaExecutor::uploadScaler(const LossScaler &scaler) {
  Impl &I = *impl;
  if (!I.plan.scalesLoss() || !I.counter)
    return;
  CU(cuStreamSynchronize(I.compute));
  unsigned long long c[2] = {static_cast<unsigned long long>(scaler.skipped),
                            static_cast<unsigned long long>(scaler.goodSteps)};
  CU(cuMemcpyHtoD(I.counter + 3 * 8, c, sizeof c));
  upload(I.plan.lossScale, &scaler.scale);
}

void CudaExecutor::downloadState(std::vector<float> &first,
                                 std::vector<float> &second) {
  Impl &I = *impl;
  CU(cuStreamSynchronize(I.compute));
  size_t n = static_cast<size_t>(I.paramElements);
  first.assign(n, 0.f);
  second.assign(n, 0.f);
  if (!I.sharded) {
    if (I.stateBytes >= n * 4)
      CU(cuMemcpyDtoH(first.data(), I.state, n * 4));
    if (I.stateBytes >= n * 8)
      CU(cuMemcpyDtoH(second.data(), I.state + n * 4, n * 4));
    return;
  }
  // ZeRO-1, a collective: every rank's share of each moment gathered into
  // the gradient region (free between steps), then copied out. ZeRO-2's
  // holds a share: the temporaries' region when large enough (the
  // gradients' groups are in it), else memory of its own for the while.
  const size_t own = static_cast<size_t>(I.own);
  const size_t need = static_cast<size_t>(I.paddedParams()) * 4;
  CUdeviceptr grads = I.arena + I.regionOffset.at(Region::Grad), extra = 0;
  if (I.shardGrads) {
    auto temp = I.plan.regionSize.find(Region::Temp);
    if (temp != I.plan.regionSize.end() &&
        static_cast<size_t>(temp->second) * 4 >= need)
      grads = I.arena + I.regionOffset.at(Region::Temp);
    else {
      CU(cuMemAlloc(&extra, need));
      grads = extra;
    }
  }
  for (int moment = 0; moment < 2; ++moment) {
    std::vector<float> &out = moment ? second : first;
    if (I.stateBytes < (moment + 1) * std::max<size_t>(own, 64) * 4)
      continue;
    CU(cuMemsetD8Async(grads, 0, I.paddedParams() * 4, I.compute));
    CU(cuMemcpyDtoDAsync(grads + I.ownFrom * 4, I.state + moment * own * 4,
                         own * 4, I.compute));
    I.dcomm->allGather(reinterpret_cast<void *>(grads + I.ownFrom * 4),
                       reinterpret_cast<void *>(grads),
                       static_cast<size_t>(I.share), DeviceComm::Type::F32,
                       I.compute);
    CU(cuStreamSynchronize(I.compute));
    CU(cuMemcpyDtoH(out.data(), grads, n * 4));
  }
  if (extra)
    CU(cuMemFree(extra));
}

void CudaExecutor::uploadState(const std::vector<float> &first,
                               const std::vector<float> &second) {
  Impl &I = *impl;
  size_t n = static_cast<size_t>(I.paramElements);
  const size_t from = static_cast<size_t>(I.ownFrom);
  const size_t own = static_cast<size_t>(I.sharded ? I.own : I.paramElements);
  CU(cuStreamSynchronize(I.compute));
  // Sharded, this rank's share of each moment.
  if (first.size() == n && I.stateBytes >= own * 4)
    CU(cuMemcpyHtoD(I.state, first.data() + from, own * 4));
  if (second.size() == n && I.stateBytes >= own * 8)
    CU(cuMemcpyHtoD(I.state + own * 4, second.data() + from, own * 4));
}

std::vector<std::pair<std::string, size_t>>
CudaExecutor::memoryBreakdown() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (auto [region, elements] : impl->plan.regionSize) {
    if (region == Region::Local)
      continue; // registers
    size_t bytes = static_cast<size_t>(elements) * 4 *
                   (region == Region::Input ? 2 : 1);
    if (region == Region::Grad && impl->shardGrads)
      bytes = static_cast<size_t>(impl->share) * 4; // this rank's share
    out.push_back({regionName(region), bytes});
  }
  out.push_back({"optimizer state", impl->stateBytes});
  out.push_back({"cuBLASLt workspace", impl->workspaceBytes});
  out.push_back({"kernel scratch", static_cast<size_t>(
                                       impl->program.workspaceBytes)});
  if (impl->accumulatorBytes)
    out.push_back({"gradient accumulator", impl->accumulatorBytes});
  out.push_back({"measured (cuMemGetInfo)", impl->measured});
  return out;
}

double CudaExecutor::timeStep(int warmup, int iters) {
  Impl &I = *impl;
  // A step of a plan that accumulates runs all its micro-batches.
  const int parts = static_cast<int>(I.plan.microBatches);
  for (int i = 0; i < warmup; ++i)
    for (int part = 0; part < parts; ++part)
      step((i * parts + part) % 2, /*update=*/true, /*wantLoss=*/true, part,
           parts);
  CU(cuStreamSynchronize(I.compute));
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    CU(cuEventRecord(I.start, I.compute));
    for (int part = 0; part < parts; ++part) {
      CUgraphExec *slot = I.graphs[(i * parts + part) % 2];
      int phase = Impl::microPhase(part, parts);
      CU(cuGraphLaunch(slot[phase] ? slot[phase] : I.graphs[0][phase],
                       I.compute));
    }
    CU(cuEventRecord(I.stop, I.compute));
    CU(cuEventSynchronize(I.stop));
    float t = 0;
    CU(cuEventElapsedTime(&t, I.start, I.stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0 : ms[ms.size() / 2];
}

//===----------------------------------------------------------------------===//
// Profiling
//===----------------------------------------------------------------------===//

/// Dense 16-bit tensor-core FLOPs per SM and clock: Ampere (sm_80) 2048,
/// Hopper (sm_90) 4096, Blackwell (sm_100) 8192; other parts are not counted.
double CudaDeviceInfo::peakTensorFlops() const {
  int perClock = major == 8 && minor == 0 ? 2048
                 : major == 9             ? 4096
                 : major == 10            ? 8192
                                          : 0;
  return static_cast<double>(multiprocessors) * clockKHz * 1e3 * perClock;
}

/// 128 fp32 lanes per SM from sm_80 on (64 on sm_80 itself), 2 FLOPs each.
double CudaDeviceInfo::peakFp32Flops() const {
  int lanes = major == 8 && minor == 0 ? 64 : 128;
  return static_cast<double>(multiprocessors) * clockKHz * 1e3 * lanes * 2;
}

double CudaDeviceInfo::peakBytesPerSecond() const {
  return 2.0 * memoryClockKHz * 1e3 * busWidthBits / 8;
}

void CudaExecutor::profile(int warmup, int steps, Profile &out) {
  Impl &I = *impl;
  const Libs &L = libs();
  out.device = L.info.name;
  out.steps = steps;
  out.peakTensorFlops = L.info.peakTensorFlops();
  out.peakFp32Flops = L.info.peakFp32Flops();
  out.peakBytesPerSecond = L.info.peakBytesPerSecond();
  out.stepMs = timeStep(warmup, 20);
  CU(cuStreamSynchronize(I.compute));
  CU(cuStreamSynchronize(I.copy));

  std::vector<KernelContext> contexts = kernelContexts(I.plan);
  std::vector<Impl::Timed> timed;
  std::vector<size_t> stepStart;
  I.timed = &timed;
  I.microPart = 0; // one compiled batch, as a step without accumulation
  I.microParts = 1;
  I.eventsUsed = 0;
  CUevent origin = I.pooledEvent();
  CU(cuEventRecord(origin, I.compute));
  size_t inputBytes = I.plan.regionSize.count(Region::Input)
                          ? I.plan.regionSize.at(Region::Input) * 4
                          : 0;
  for (int s = 0; s < steps; ++s) {
    int slot = s % 2;
    stepStart.push_back(timed.size());
    nvtxRangePushA(("step " + std::to_string(s)).c_str());
    // The batch copy, on the copy stream (the step waits for it).
    if (inputBytes) {
      Impl::Timed c{"copy batch (host to device)", "copy", -1,
                    I.pooledEvent(), I.pooledEvent(), 0,
                    static_cast<double>(inputBytes), false};
      CU(cuStreamWaitEvent(I.copy, origin, 0));
      CU(cuEventRecord(c.begin, I.copy));
      CU(cuMemcpyHtoDAsync(I.inputs[slot], I.staged[slot], inputBytes,
                           I.copy));
      CU(cuEventRecord(c.end, I.copy));
      CU(cuStreamWaitEvent(I.compute, c.end, 0));
      timed.push_back(c);
    }
    std::string phase, layer;
    for (Impl::Launch &l : I.launches) {
      if (!I.inStep(l))
        continue;
      const KernelContext &ctx = contexts[l.planKernel];
      std::string group = layerGroup(ctx.layer);
      if (ctx.phase != phase || group != layer) {
        if (!layer.empty())
          nvtxRangePop();
        if (ctx.phase != phase) {
          if (!phase.empty())
            nvtxRangePop();
          nvtxRangePushA(ctx.phase.c_str());
          phase = ctx.phase;
        }
        layer = group;
        if (!layer.empty())
          nvtxRangePushA(layer.c_str());
      }
      const CudaLaunch &spec = *l.spec;
      const Kernel &k = I.plan.kernels[l.planKernel];
      std::string name = spec.name;
      const char *kind = "kernel";
      double flops = 0, bytes = 0;
      bool tensorCore = false;
      if (spec.kind == CudaLaunch::Kind::Gemm) {
        kind = "gemm";
        // Operands' type (the tensor-core rate applies), and the output's
        // when a folded cast widens it.
        DType in = I.plan.buffers[spec.a].dtype, d = I.plan.buffers[spec.c].dtype;
        tensorCore = dtypeBytes(in) == 2 || I.tf32;
        OpKind op = k.op == OpKind::Fused && !k.body.empty() ? k.body[0].op
                                                              : k.op;
        name = std::string("gemm ") + opName(op) + " " +
               std::to_string(spec.m) + "x" + std::to_string(spec.n) + "x" +
               std::to_string(spec.k) +
               (spec.batch > 1 ? " x" + std::to_string(spec.batch) : "") +
               " " + dtypeName(in) +
               (d != in ? std::string(" -> ") + dtypeName(d) : "") +
               spec.epilogueName();
        flops = spec.gemmFlops();
        // The operands' parts it touches (a GEMM may cover a slice of its
        // buffers); C twice when beta adds to it.
        auto part = [&](int id, int64_t rows, int64_t cols, int64_t stride) {
          return static_cast<double>(dtypeBytes(I.plan.buffers[id].dtype)) *
                 rows * cols * (stride ? spec.batch : 1);
        };
        bytes = part(spec.a, spec.m, spec.k, spec.strideA) +
                part(spec.b, spec.k, spec.n, spec.strideB) +
                part(spec.c, spec.m, spec.n, 1) * (spec.beta != 0 ? 2 : 1);
        for (int id : {spec.bias, spec.aux, spec.biasGrad})
          bytes += bufferBytes(I.plan, id);
      } else if (spec.kind == CudaLaunch::Kind::Memset) {
        kind = "memset";
        name = "memset";
        bytes = static_cast<double>(I.plan.buffers[spec.c].slots()) * 4;
      } else {
        for (int id : spec.buffers)
          bytes += bufferBytes(I.plan, id);
        flops = spec.gemmFlops();
        tensorCore = spec.tensorCores;
      }
      I.timedLaunch(name, kind, l.planKernel, flops, bytes, tensorCore,
                    [&] { I.enqueueLaunch(l, slot); });
    }
    if (!layer.empty())
      nvtxRangePop();
    if (!phase.empty())
      nvtxRangePop();
    I.joinComm();
    I.enqueueStepReduction(/*gradients=*/false);
    nvtxRangePushA("optimizer");
    I.enqueueUpdate();
    nvtxRangePop();
    nvtxRangePop(); // step
  }
  CU(cuStreamSynchronize(I.compute));
  CU(cuStreamSynchronize(I.copy));
  I.timed = nullptr;

  auto at = [&](CUevent e) {
    float ms = 0;
    CU(cuEventElapsedTime(&ms, origin, e));
    return ms * 1000.0;
  };
  // Counted FLOPs of non-GEMM kernels (attention) go to their launches in
  // proportion to time: each launch shows the op's achieved rate.
  std::map<std::pair<size_t, int>, double> kernelUs;
  std::vector<ProfileRecord> records;
  for (int s = 0; s < steps; ++s) {
    size_t end = s + 1 < steps ? stepStart[s + 1] : timed.size();
    for (size_t i = stepStart[s]; i < end; ++i) {
      const Impl::Timed &t = timed[i];
      ProfileRecord r;
      r.name = t.name;
      r.kind = t.kind;
      r.step = s;
      r.planKernel = t.planKernel;
      r.startUs = at(t.begin);
      r.durationUs = at(t.end) - r.startUs;
      r.flops = t.flops;
      r.bytes = t.bytes;
      r.tensorCore = t.tensorCore;
      if (t.planKernel >= 0) {
        r.op = opName(I.plan.kernels[t.planKernel].op);
        r.phase = contexts[t.planKernel].phase;
        r.layer = contexts[t.planKernel].layer;
        if (r.kind == "kernel")
          kernelUs[{static_cast<size_t>(s), t.planKernel}] += r.durationUs;
      } else {
        r.phase = r.kind == "copy" ? "copy" : "optimizer";
      }
      if (r.kind == "nccl")
        r.phase = "communication";
      records.push_back(std::move(r));
    }
  }
  // A plan kernel's FLOPs that its GEMMs do not carry (attention's) go to
  // its kernel launches by their share of its time; a classifier's row
  // kernels get none (its GEMMs do all of its FLOPs).
  std::map<int, double> gemmFlops; // per plan kernel, one step's
  for (const Impl::Launch &l : I.launches)
    gemmFlops[l.planKernel] += l.spec->gemmFlops();
  for (ProfileRecord &r : records) {
    if (r.kind != "kernel" || r.planKernel < 0)
      continue;
    double total = kernelUs[{static_cast<size_t>(r.step), r.planKernel}];
    double flops = kernelFlops(I.plan, I.plan.kernels[r.planKernel]) -
                   gemmFlops[r.planKernel];
    if (total > 0 && flops > 0)
      r.flops = flops * r.durationUs / total;
  }
  out.records = std::move(records);
}
