//===- CudaComm.cpp - The CUDA executor's collectives ---------------------===//
//
// Data parallelism on the executor's streams: gt-bucket's all-reduce of a
// bucket (NCCL on the communication stream, or ZeRO-2's reduction to the
// ranks that own its parts), the mean over micro-batches, the step's own
// reductions, and ZeRO's gather of the parameters.
//===----------------------------------------------------------------------===//

#include "Cuda/CudaImpl.h"
#include <algorithm>
#include <optional>

using namespace gtc::rt;
using namespace gtc::rt::cu;

/// gt-bucket's all-reduce of one bucket. With a communicator: once the
/// launches before it on `stream` are done, one NCCL group on the
/// communication stream, a call per run of adjacent buffers (the
/// gradients of a bucket mostly lie side by side in the gradient region;
/// a gap of alignment padding, under 256 bytes, can hold no other buffer,
/// and is reduced with them). The compute streams go on; the step waits
/// for the communication stream at its end (joinComm), or at once for a
/// bucket reduced out of place, whose input a later kernel may reuse. In
/// one process the mean is the value: outputs are copies.
void CudaExecutor::Impl::enqueueAllReduce(Launch &l, int slot,
                                          CUstream stream) {
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
            static_cast<size_t>(b.elements()) * dtypeBytes(b.dtype), b.dtype};
    inPlace = inPlace && sp.in == sp.out;
    spans.push_back(sp);
  }
  // With accumulation, a micro-batch before the last only leaves its
  // gradients where the update reads them (enqueueAccumulate sums them);
  // the last reduces each bucket's mean (finishMean).
  if (shardGrads)
    return enqueueReduceToOwners(l, slot, stream);
  const bool accumulating = microParts > 1;
  const bool reduceNow =
      dcomm && (!accumulating || microPart + 1 == microParts);
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
              "nccl",
              l.planKernel,
              pooledEvent(),
              pooledEvent(),
              0,
              bytes,
              false};
    CU(cuEventRecord(t->begin, commStream));
  }
  dcomm->groupStart();
  for (const Span &sp : spans)
    dcomm->allReduceMean(
        reinterpret_cast<const void *>(sp.in), reinterpret_cast<void *>(sp.out),
        sp.bytes / dtypeBytes(sp.dtype), commType(sp.dtype), commStream);
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
void CudaExecutor::Impl::enqueueReduceToOwners(Launch &l, int slot,
                                               CUstream stream) {
  const CudaLaunch &s = *l.spec;
  const size_t n = s.buffers.size() / 2;
  struct Run {
    CUdeviceptr in;
    int64_t at, elements; // in the parameter region
  };
  // A view's memory is its root's: a packed parameter's gradient is its
  // parts' (PlanBuilder's Packed), and lies where the packed buffer does.
  auto root = [&](int id) {
    return plan.buffers[id].viewOf < 0 ? id : plan.buffers[id].viewOf;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < n; ++i) {
    const int out = s.buffers[n + i];
    const Param *param = nullptr;
    for (const Param &p : plan.params)
      if (p.grad >= 0 && root(p.grad) == root(out))
        param = &p;
    if (!param)
      throw RuntimeError("shard = gradients: the bucket's '" +
                         plan.buffers[out].name +
                         "' is no parameter's gradient");
    const Buffer &b = plan.buffers[root(param->buffer)];
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
    t = Timed{"", "nccl", l.planKernel, pooledEvent(), pooledEvent(),
              0,  0,      false};
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
    t->name = "nccl reduce to owners (" + std::to_string(n) + " gradients, " +
              std::to_string(calls) + " calls)";
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
void CudaExecutor::Impl::finishMean(CUdeviceptr g, size_t bytes, DType dtype,
                                    CUstream stream) {
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
void CudaExecutor::Impl::joinComm() {
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
void CudaExecutor::Impl::enqueueStepReduction(bool gradients) {
  if (!dcomm)
    return;
  dcomm->groupStart();
  if (gradients && paramElements > 0) {
    CUdeviceptr g = arena + regionOffset.at(Region::Grad);
    dcomm->allReduceMean(
        reinterpret_cast<void *>(g), reinterpret_cast<void *>(g),
        static_cast<size_t>(paramElements), DeviceComm::Type::F32, compute);
  }
  if (plan.loss >= 0) {
    CUdeviceptr loss = ptr(plan.loss, 0);
    dcomm->allReduceMean(reinterpret_cast<void *>(loss),
                         reinterpret_cast<void *>(loss), 1,
                         commType(plan.buffers[plan.loss].dtype), compute);
  }
  dcomm->groupEnd();
}

/// ZeRO-1: every rank's updated share of the parameters, and of their
/// 16-bit copies, to every rank (in place: NCCL reads this rank's share
/// where it lies in the output).
void CudaExecutor::Impl::enqueueGatherParams() {
  const size_t count = static_cast<size_t>(share);
  CUdeviceptr p = arena + regionOffset.at(Region::Param);
  dcomm->groupStart();
  dcomm->allGather(reinterpret_cast<void *>(p + ownFrom * 4),
                   reinterpret_cast<void *>(p), count, DeviceComm::Type::F32,
                   compute);
  if (plan.paramCopies >= 0) {
    CUdeviceptr c = arena + regionOffset.at(Region::Copy);
    dcomm->allGather(reinterpret_cast<void *>(c + ownFrom * 2),
                     reinterpret_cast<void *>(c), count,
                     commType(plan.paramCopyType()), compute);
  }
  dcomm->groupEnd();
}
