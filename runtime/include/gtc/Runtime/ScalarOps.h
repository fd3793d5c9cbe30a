//===- ScalarOps.h - Per-element formulas, once for CPU and GPU -*- C++ -*-===//
//
// The one definition of every activation's forward formula and derivative,
// and of the learning-rate schedule and the optimizers' update of one
// element. The CPU compiles this header (T = float, or double for the
// gradient checks); for the GPU its text, as it is, goes in the prelude of
// the kernels that call it (the emitter's elementwise kernels, the
// runtime's update kernel), where NVRTC compiles it with T = float
// (runtime/CMakeLists.txt embeds it at build time). So the CPU and the GPU
// evaluate the same expressions, and an activation is added here: its two
// functions and a line of GTC_ACTIVATION_OPS (below).
//
// Plain C++ that both compilers take: no headers under NVRTC; math through
// GTC_MATH at T (tanhf, expf, ... on the GPU; std:: overloads on the CPU)
// and GTC_DMATH in double.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_SCALAROPS_H
#define GTC_RUNTIME_SCALAROPS_H

#ifdef __CUDACC_RTC__
#define GTC_SCALAR __device__ __forceinline__
#define GTC_MATH(fn) fn##f
#define GTC_DMATH(fn) fn
#else
#include <cmath>
#define GTC_SCALAR inline
#define GTC_MATH(fn) std::fn
#define GTC_DMATH(fn) std::fn
#endif

namespace gtc_scalar {

template <typename T> GTC_SCALAR T relu_fwd(T x) { return x > T(0) ? x : T(0); }
template <typename T> GTC_SCALAR T relu_grad(T x) {
  return x > T(0) ? T(1) : T(0);
}

template <typename T> GTC_SCALAR T tanh_fwd(T x) { return GTC_MATH(tanh)(x); }
template <typename T> GTC_SCALAR T tanh_grad(T x) {
  T t = GTC_MATH(tanh)(x);
  return T(1) - t * t;
}

template <typename T> GTC_SCALAR T sigmoid_fwd(T x) {
  return T(1) / (T(1) + GTC_MATH(exp)(-x));
}
template <typename T> GTC_SCALAR T sigmoid_grad(T x) {
  T s = T(1) / (T(1) + GTC_MATH(exp)(-x));
  return s * (T(1) - s);
}

template <typename T> GTC_SCALAR T exp_fwd(T x) { return GTC_MATH(exp)(x); }
template <typename T> GTC_SCALAR T exp_grad(T x) { return GTC_MATH(exp)(x); }

template <typename T> GTC_SCALAR T log_fwd(T x) { return GTC_MATH(log)(x); }
template <typename T> GTC_SCALAR T log_grad(T x) { return T(1) / x; }

template <typename T> GTC_SCALAR T sqrt_fwd(T x) { return GTC_MATH(sqrt)(x); }
template <typename T> GTC_SCALAR T sqrt_grad(T x) {
  return T(0.5) / GTC_MATH(sqrt)(x);
}

// SiLU (swish), x * sigmoid(x), as torch.nn.SiLU.
template <typename T> GTC_SCALAR T silu_fwd(T x) {
  return x / (T(1) + GTC_MATH(exp)(-x));
}
template <typename T> GTC_SCALAR T silu_grad(T x) {
  T s = T(1) / (T(1) + GTC_MATH(exp)(-x));
  return s * (T(1) + x * (T(1) - s));
}

// GELU, exact (erf), as torch.nn.GELU().
template <typename T> GTC_SCALAR T gelu_fwd(T x) {
  return T(0.5) * x * (T(1) + GTC_MATH(erf)(x * T(0.7071067811865476)));
}
template <typename T> GTC_SCALAR T gelu_grad(T x) {
  T cdf = T(0.5) * (T(1) + GTC_MATH(erf)(x * T(0.7071067811865476)));
  T pdf = GTC_MATH(exp)(T(-0.5) * x * x) * T(0.3989422804014327);
  return cdf + x * pdf;
}

// GELU's tanh approximation, as torch.nn.GELU(approximate="tanh").
template <typename T> GTC_SCALAR T gelu_tanh_fwd(T x) {
  const T c = T(0.7978845608028654); // sqrt(2/pi)
  return T(0.5) * x * (T(1) + GTC_MATH(tanh)(c * (x + T(0.044715) * x * x * x)));
}
template <typename T> GTC_SCALAR T gelu_tanh_grad(T x) {
  const T c = T(0.7978845608028654);
  T u = c * (x + T(0.044715) * x * x * x);
  T t = GTC_MATH(tanh)(u);
  T du = c * (T(1) + T(3 * 0.044715) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

// The learning rate at `step` (from 0) of `total`: `warmup` steps rising
// linearly to lr, then schedule 0 (constant) keeps it, 1 (linear) and
// 2 (cosine) decay it to final * lr at the last step.
GTC_SCALAR double scheduled_lr(double lr, double final, long long warmup,
                               int schedule, long long step,
                               long long total) {
  if (warmup > 0 && step < warmup)
    return lr * double(step + 1) / double(warmup);
  if (schedule == 0 || total <= warmup)
    return lr;
  double progress = double(step - warmup) / double(total - warmup);
  progress = progress < 1.0 ? progress : 1.0;
  double decay = schedule == 1
                     ? 1.0 - progress
                     : 0.5 * (1.0 + GTC_DMATH(cos)(3.14159265358979323846 *
                                                   progress));
  return lr * (final + (1.0 - final) * decay);
}

// One element of torch.optim.SGD: parameter p, gradient g, momentum buffer
// buf (used when mom != 0), on the first update or a later one.
template <typename T>
GTC_SCALAR void sgd_update(T &p, T g, T &buf, double lr, double wd,
                           double mom, double damp, bool nesterov,
                           bool first) {
  if (wd != 0)
    g = T(g + wd * p);
  if (mom != 0) {
    buf = first ? g : T(mom * buf + (1 - damp) * g);
    g = nesterov ? T(g + mom * buf) : buf;
  }
  p = T(p - lr * g);
}

// One element of torch.optim.Adam (AdamW with `decoupled`), in its order of
// operations: stepSize is lr / (1 - beta1^t), bc2Sqrt sqrt(1 - beta2^t).
template <typename T>
GTC_SCALAR void adam_update(T &p, T g, T &m, T &v, double lr, double wd,
                            bool decoupled, double b1, double b2, double eps,
                            double stepSize, double bc2Sqrt) {
  if (decoupled)
    p = T(p * (1 - lr * wd));
  else if (wd != 0)
    g = T(g + wd * p);
  m = T(m + (g - m) * (1 - b1));
  v = T(v * b2 + (1 - b2) * double(g) * g);
  T denom = T(GTC_DMATH(sqrt)(double(v)) / bc2Sqrt + eps);
  p = T(p - stepSize * (m / denom));
}

/// Dropout's draw, counter-based: a 64-bit mix (splitmix64's finalizer) of
/// the run's seed, the step, the dropout op's salt and the element's index,
/// so that any element of any step is drawn alone and the CPU and the GPU
/// draw the same. dropout_key is computed once a kernel; element `index` is
/// kept when the top 24 bits of its draw reach `threshold` = p 2^24.
GTC_SCALAR unsigned long long dropout_mix(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
GTC_SCALAR unsigned long long dropout_key(unsigned long long seed,
                                          unsigned long long step,
                                          unsigned long long salt) {
  return dropout_mix(seed ^ dropout_mix(salt ^ dropout_mix(step)));
}
GTC_SCALAR bool dropout_keep(unsigned long long key, unsigned long long index,
                             unsigned long long threshold) {
  return (dropout_mix(key ^ index) >> 40) >= threshold;
}

} // namespace gtc_scalar

// The activation ops, X(Op, name): gt.<name> (gt::<Op>Op, the runtime's
// OpKind::<Op>) computes gtc_scalar::<name>_fwd, and its gradient is
// gt.activation_grad of kind <name> (gtc_scalar::<name>_grad). The front
// end's builtin, the gradient rule, the plan's op kind, both executors and
// the emitter come from this list: a new activation is its gt op (ODS),
// its two functions above and a line here. (gelu is not one: its
// `approximate` attribute picks one of two kinds.)
#define GTC_ACTIVATION_OPS(X)                                                  \
  X(Relu, relu)                                                                \
  X(Tanh, tanh)                                                                \
  X(Exp, exp)                                                                  \
  X(Log, log)                                                                  \
  X(Sqrt, sqrt)                                                                \
  X(Sigmoid, sigmoid)                                                          \
  X(Silu, silu)

// The kinds gt.activation_grad differentiates, X(Op, kind): the activation
// ops' and GELU's two.
#define GTC_ACTIVATIONS(X)                                                     \
  GTC_ACTIVATION_OPS(X)                                                        \
  X(Gelu, gelu)                                                                \
  X(GeluTanh, gelu_tanh)

#endif // GTC_RUNTIME_SCALAROPS_H
