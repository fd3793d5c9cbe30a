//===- CudaOptimizer.cpp - The CUDA executor's update ---------------------===//
//
// Gradient accumulation, the global norm and the update (Optimizer.cuh's
// kernels), the schedule's and the loss scaler's counters, and the
// optimizer state in and out (gathered from its shares under ZeRO).
//===----------------------------------------------------------------------===//

#include "Cuda/CudaImpl.h"
#include "gtc/Runtime/Optimizer.h"
#include <algorithm>

using namespace gtc::rt;
using namespace gtc::rt::cu;

namespace {

/// The kernel's Hyper, byte for byte.
struct Hyper {
  double lr, final, beta1, beta2, eps, weightDecay, maxNorm, momentum,
      dampening;
  long long warmup, total;
  int nesterov, kind, schedule;
  int scaling;
};

} // namespace

void CudaExecutor::Impl::enqueueUpdate() {
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
    timedLaunch("gtc_sumsq (gradient norm)", "optimizer", -1, 0, bytes, false,
                [&] {
                  CU(cuLaunchKernel(sumsq, static_cast<unsigned>(np), 1, 1, 256,
                                    1, 1, 0, compute, args, nullptr));
                });
    if (shardGrads)
      dcomm->allReduceSum(
          reinterpret_cast<void *>(partial), reinterpret_cast<void *>(partial),
          static_cast<size_t>(np), DeviceComm::Type::F32, compute);
    void *normArgs[] = {&partial, &np, &norm};
    timedLaunch("gtc_norm (clipping factor)", "optimizer", -1, 0, 0, false,
                [&] {
                  CU(cuLaunchKernel(normFn, 1, 1, 1, 1024, 1, 1, 0, compute,
                                    normArgs, nullptr));
                });
  }
  // The parameters' 16-bit copies, when the plan keeps them.
  CUdeviceptr copy = 0;
  int copyType = 0;
  if (plan.paramCopies >= 0) {
    copy = arena + regionOffset.at(Region::Copy) + ownFrom * 2;
    copyType = plan.paramCopyType() == DType::BF16 ? 1 : 2;
  }
  void *args[] = {&p,       &g,    &m,     &v,    &n,       &h,
                  &counter, &norm, &scale, &copy, &copyType};
  // Reads p, g (and m, v) and writes p (and m, v, the copies).
  timedLaunch(
      std::string("gtc_update (") + name(c.optimizer) + ")", "optimizer", -1, 0,
      updateBytes(c, paramElements) + (copy ? 2.0 * n : 0.0), false, [&] {
        CU(cuLaunchKernel(update, 132 * 4, 1, 1, 256, 1, 1, 0, compute, args,
                          nullptr));
      });
  if (sharded)
    enqueueGatherParams();
}

/// After micro-batch `part` of `parts`: adds its gradients (and loss)
/// to the accumulator; after the last, leaves their mean in the gradients
/// (and the loss) for the update. Under ZeRO-2 every micro-batch's buckets
/// were reduced to their owners (the kernels joined them): the rank's
/// share of the gradients is what it sums.
void CudaExecutor::Impl::enqueueAccumulate(int part, int parts) {
  CUdeviceptr acc = accumulator, g = arena + regionOffset.at(Region::Grad);
  CUdeviceptr lossAcc = accumulator + gradElements() * 4,
              loss = ptr(plan.loss, 0);
  int mode = microPhase(part, parts);
  // The last micro-batch's buckets made their own means (finishMean), but
  // for ZeRO-2's share.
  long long n = mode == 2 && bucketed && !shardGrads ? 0 : gradElements();
  float scale = 1.0f / static_cast<float>(parts);
  void *args[] = {&acc, &g, &n, &mode, &scale, &lossAcc, &loss};
  timedLaunch("gtc_accumulate (micro-batches)", "optimizer", -1, 0,
              static_cast<double>(n) * 12, false, [&] {
                CU(cuLaunchKernel(accumulateFn, 132 * 4, 1, 1, 256, 1, 1, 0,
                                  compute, args, nullptr));
              });
}

void CudaExecutor::setSchedule(int64_t done, int64_t total, int64_t updates,
                               uint64_t seed) {
  impl->totalSteps = std::max<int64_t>(1, total);
  if (!impl->counter)
    return;
  CU(cuStreamSynchronize(impl->compute));
  unsigned long long c[kCounters] = {static_cast<unsigned long long>(done), 0,
                                     static_cast<unsigned long long>(updates)};
  CU(cuMemcpyHtoD(impl->counter, c, sizeof c));
  unsigned long long s = seed;
  CU(cuMemcpyHtoD(impl->counter + CudaLaunch::kSeedSlot * 8, &s, sizeof s));
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
