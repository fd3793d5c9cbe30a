//===- Optimizer.cpp - Optimizers and schedules on flat buffers -----------===//

#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/ScalarOps.h"
#include "gtc/Runtime/CpuExecutor.h"
#include <cmath>

using namespace gtc::rt;

bool gtc::rt::updateNeedsNorm(const Plan &plan) {
  return plan.config.gradClip > 0 || plan.scalesLoss();
}

double gtc::rt::updateBytes(const TrainConfig &c, int64_t n) {
  return static_cast<double>(n) * 4 * (c.optimizer == OptimizerKind::Sgd ? 3 : 7);
}

double gtc::rt::scheduledLr(const TrainConfig &c, int64_t step,
                            int64_t total) {
  return gtc_scalar::scheduled_lr(c.lr, c.final, c.warmup,
                                  static_cast<int>(c.schedule), step, total);
}

bool gtc::rt::LossScaler::record(bool finite) {
  if (!finite) {
    scale *= 0.5f;
    goodSteps = 0;
    ++skipped;
    return false;
  }
  if (++goodSteps == kGrowthInterval) {
    scale *= 2.0f;
    goodSteps = 0;
  }
  return true;
}

template <typename T> bool gtc::rt::allFinite(const T *v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      return false;
  return true;
}

template <typename T>
double gtc::rt::clipGradNorm(T *grad, int64_t n, double maxNorm) {
  // Partial sums per fixed chunk, added in order: the same result on any
  // number of threads.
  constexpr int64_t kChunk = 1 << 16;
  int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
  parallelFor(chunks, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s = 0;
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
        s += double(grad[i]) * grad[i];
      partial[c] = s;
    }
  });
  double total = 0;
  for (double s : partial)
    total += s;
  double norm = std::sqrt(total);
  double coef = maxNorm / (norm + 1e-6);
  if (coef < 1.0)
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        grad[i] = T(grad[i] * coef);
    }, 1 << 14);
  return norm;
}

template <typename T>
void gtc::rt::optimizerStep(const TrainConfig &c, double lr, T *param,
                            const T *grad, int64_t n,
                            OptimizerState<T> &state) {
  ++state.step;
  const double wd = c.weightDecay;
  if (c.optimizer == OptimizerKind::Sgd) {
    const double mom = c.momentum, damp = c.dampening;
    if (mom != 0 && state.first.size() != static_cast<size_t>(n))
      state.first.assign(n, T(0));
    const bool first = state.step == 1;
    T *buf = state.first.data();
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T unused = T(0); // the buffer without momentum, which SGD ignores
        gtc_scalar::sgd_update(param[i], grad[i], mom != 0 ? buf[i] : unused,
                               lr, wd, mom, damp, c.nesterov, first);
      }
    }, 1 << 14);
    return;
  }
  // Adam and AdamW (ScalarOps.h's adam_update, as the GPU's update kernel).
  if (state.first.size() != static_cast<size_t>(n)) {
    state.first.assign(n, T(0));
    state.second.assign(n, T(0));
  }
  const double b1 = c.beta1, b2 = c.beta2, eps = c.eps;
  const double bc1 = 1 - std::pow(b1, double(state.step));
  const double bc2 = 1 - std::pow(b2, double(state.step));
  const double stepSize = lr / bc1, bc2Sqrt = std::sqrt(bc2);
  const bool decoupled = c.optimizer == OptimizerKind::AdamW;
  T *m = state.first.data(), *v = state.second.data();
  parallelFor(n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      gtc_scalar::adam_update(param[i], grad[i], m[i], v[i], lr, wd, decoupled,
                              b1, b2, eps, stepSize, bc2Sqrt);
  }, 1 << 14);
}

template bool gtc::rt::allFinite<float>(const float *, int64_t);
template double gtc::rt::clipGradNorm<float>(float *, int64_t, double);
template double gtc::rt::clipGradNorm<double>(double *, int64_t, double);
template void gtc::rt::optimizerStep<float>(const TrainConfig &, double,
                                            float *, const float *, int64_t,
                                            OptimizerState<float> &);
template void gtc::rt::optimizerStep<double>(const TrainConfig &, double,
                                             double *, const double *,
                                             int64_t, OptimizerState<double> &);
