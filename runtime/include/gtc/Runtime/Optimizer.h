//===- Optimizer.h - Optimizers and schedules on flat buffers ---*- C++ -*-===//
//
// The update that ends a training step, over the flat parameter and gradient
// regions of a plan. The formulas are torch.optim's (SGD with momentum,
// dampening and Nesterov; Adam with L2 weight decay; AdamW with decoupled
// weight decay) and torch.nn.utils.clip_grad_norm_'s, so results compare.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_OPTIMIZER_H
#define GTC_RUNTIME_OPTIMIZER_H

#include "gtc/Runtime/Plan.h"
#include <cstdint>
#include <vector>

namespace gtc::rt {

/// The learning rate at `step` (0-based) of `total`: linear warmup over
/// `warmup` steps, then constant, linear or cosine decay to `final * lr`.
double scheduledLr(const TrainConfig &c, int64_t step, int64_t total);

/// Optimizer state: one or two buffers with the parameters' layout.
template <typename T> struct OptimizerState {
  std::vector<T> first;  ///< SGD momentum buffer / Adam exp_avg
  std::vector<T> second; ///< Adam exp_avg_sq
  int64_t step = 0;      ///< Updates done so far.
};

/// fp16's dynamic loss scaler, with torch.cuda.amp.GradScaler's defaults:
/// the loss's gradient starts at 2^16; a step whose gradients hold an inf or
/// NaN is skipped (no update) and halves the scale; 2000 finite steps in a
/// row double it. The GPU's update kernel applies the same rule on the
/// device (runtime/lib/Cuda/CudaOptimizer.cpp, gtc_update).
struct LossScaler {
  static constexpr float kInitial = 65536.0f;
  static constexpr int64_t kGrowthInterval = 2000;
  float scale = kInitial;
  int64_t goodSteps = 0; ///< Finite steps since the last change.
  int64_t skipped = 0;   ///< Steps skipped so far.
  /// Records a step whose gradients were finite or not; returns whether its
  /// update applies.
  bool record(bool finite);
};

/// Whether all n values are finite.
template <typename T> bool allFinite(const T *v, int64_t n);

/// Scales `grad` (n elements) so that its L2 norm is at most `maxNorm`, as
/// clip_grad_norm_ (coefficient maxNorm / (norm + 1e-6), clamped to 1).
/// Returns the norm before clipping.
template <typename T> double clipGradNorm(T *grad, int64_t n, double maxNorm);

/// Whether the GPU update first computes the gradient norm (clipping, or
/// the finite check of fp16 loss scaling): two launches more than the
/// update itself.
bool updateNeedsNorm(const Plan &plan);

/// The bytes one update moves over `n` parameters: it reads the parameters
/// and gradients (and for Adam both moments) and writes them back.
double updateBytes(const TrainConfig &c, int64_t n);

/// Applies one update of `c.optimizer` with learning rate `lr` to `param`
/// (n elements) from `grad`, advancing `state`.
template <typename T>
void optimizerStep(const TrainConfig &c, double lr, T *param, const T *grad,
                   int64_t n, OptimizerState<T> &state);

} // namespace gtc::rt

#endif // GTC_RUNTIME_OPTIMIZER_H
