//===- CudaProfile.cpp - Timing the CUDA executor's step ------------------===//
//
// --bench (the step's graph replayed between events, the GPU's energy and
// clocks meanwhile) and --profile (every launch between events, with FLOPs
// and bytes against the device's peaks).
//===----------------------------------------------------------------------===//

#include "Cuda/CudaImpl.h"
#include "Cuda/CudaPower.h"
#include "Train/StepSequence.h"
#include "gtc/Runtime/Profile.h"
#include <algorithm>
#include <map>
#include <nvtx3/nvToolsExt.h>

using namespace gtc::rt;
using namespace gtc::rt::cu;

CudaExecutor::StepTimes CudaExecutor::timeStep(int warmup, int iters) {
  Impl &I = *impl;
  // A step of a plan that accumulates runs all its micro-batches.
  const int parts = static_cast<int>(I.plan.microBatches);
  for (int i = 0; i < warmup; ++i)
    for (int part = 0; part < parts; ++part)
      step((i * parts + part) % 2, /*update=*/true, /*wantLoss=*/true, part,
           parts);
  CU(cuStreamSynchronize(I.compute));
  auto launchStep = [&](int i) {
    for (int part = 0; part < parts; ++part) {
      const int s = (i * parts + part) % 2;
      CUgraphExec *slot = I.graphs[s];
      int phase = Impl::microPhase(part, parts);
      CUgraphExec exec = slot[phase] ? slot[phase] : I.graphs[0][phase];
      if (exec) // the warm-up captured the step
        CU(cuGraphLaunch(exec, I.compute));
      else // GTC_NO_GRAPH: launch by launch
        step(s, /*update=*/true, /*wantLoss=*/false, part, parts);
    }
  };
  auto elapsed = [&] {
    CU(cuEventSynchronize(I.stop));
    float t = 0;
    CU(cuEventElapsedTime(&t, I.start, I.stop));
    return static_cast<double>(t);
  };
  StepTimes times;
  if (iters <= 0)
    return times;
  PowerMeter meter;
  meter.begin();
  CU(cuEventRecord(I.start, I.compute));
  for (int i = 0; i < iters; ++i)
    launchStep(i);
  CU(cuEventRecord(I.stop, I.compute));
  times.backToBack = elapsed() / iters;
  times.power = meter.end(iters, times.backToBack);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    CU(cuEventRecord(I.start, I.compute));
    launchStep(i);
    CU(cuEventRecord(I.stop, I.compute));
    ms.push_back(elapsed());
  }
  std::sort(ms.begin(), ms.end());
  times.alone = ms[ms.size() / 2];
  return times;
}

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

/// Enqueues launch `l` between two events, named and counted (FLOPs, bytes)
/// for the profile.
void CudaExecutor::Impl::timedEnqueue(Launch &l, int slot) {
  Impl &I = *this;
  const CudaLaunch &spec = *l.spec;
  const Kernel &k = I.plan.kernels[l.planKernel];
  std::string name = spec.name;
  const char *kind = "kernel";
  double flops = 0, bytes = 0;
  bool tensorCore = false;
  // A cuBLASLt GEMM, or gtc's own kernel in its place (a variant that
  // takes tensor maps, Emitter::hopperGemm): named and counted alike.
  const bool ownGemm = !spec.maps.empty();
  if (spec.kind == CudaLaunch::Kind::Gemm || ownGemm) {
    kind = "gemm";
    // Operands' type (the tensor-core rate applies), and the output's
    // when a folded cast widens it.
    DType in = I.plan.buffers[spec.a].dtype, d = I.plan.buffers[spec.c].dtype;
    tensorCore = dtypeBytes(in) == 2 || I.tf32;
    OpKind op = k.op == OpKind::Fused && !k.body.empty() ? k.body[0].op : k.op;
    name = std::string("gemm ") + opName(op) + " " + std::to_string(spec.m) +
           "x" + std::to_string(spec.n) + "x" + std::to_string(spec.k) +
           (spec.batch > 1 ? " x" + std::to_string(spec.batch) : "") + " " +
           dtypeName(in) + (d != in ? std::string(" -> ") + dtypeName(d) : "") +
           spec.epilogueName() + (ownGemm ? " (gtc)" : "");
    flops = spec.gemmFlops();
    // The operands' parts it touches (a GEMM may cover a slice of its
    // buffers); C twice when beta adds to it.
    auto part = [&](int id, int64_t rows, int64_t cols, int64_t stride) {
      return static_cast<double>(dtypeBytes(I.plan.buffers[id].dtype)) * rows *
             cols * (stride ? spec.batch : 1);
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

void CudaExecutor::profile(int warmup, int steps, Profile &out) {
  Impl &I = *impl;
  const Libs &L = libs();
  out.device = L.info.name;
  out.steps = steps;
  out.peakTensorFlops = L.info.peakTensorFlops();
  out.peakFp32Flops = L.info.peakFp32Flops();
  out.peakBytesPerSecond = L.info.peakBytesPerSecond();
  out.stepMs = timeStep(warmup, 20).alone;
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
      Impl::Timed c{"copy batch (host to device)",
                    "copy",
                    -1,
                    I.pooledEvent(),
                    I.pooledEvent(),
                    0,
                    static_cast<double>(inputBytes),
                    false};
      CU(cuStreamWaitEvent(I.copy, origin, 0));
      CU(cuEventRecord(c.begin, I.copy));
      CU(cuMemcpyHtoDAsync(I.inputs[slot], I.staged[slot], inputBytes, I.copy));
      CU(cuEventRecord(c.end, I.copy));
      CU(cuStreamWaitEvent(I.compute, c.end, 0));
      timed.push_back(c);
    }
    auto kernels = [&] {
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
        I.timedEnqueue(l, slot);
      }
      if (!layer.empty())
        nvtxRangePop();
      if (!phase.empty())
        nvtxRangePop();
      I.joinComm();
    };
    runStepSequence(
        {0, 1, /*update=*/true, I.bucketed}, kernels, [] {},
        [&](bool gradients) { I.enqueueStepReduction(gradients); },
        [&] {
          nvtxRangePushA("optimizer");
          I.enqueueUpdate();
          nvtxRangePop();
        });
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
