//===- ScalarOps.h - Each activation's formula and derivative, once -*- C++ -*-===//
//
// The one definition of every activation's forward formula and derivative.
// The CPU executor compiles this header (T = float, or double for the
// gradient checks); the CUDA emitter puts its text, as it is, in the
// prelude of every elementwise kernel, where NVRTC compiles it with
// T = float (compiler/lib/CodeGen/CMakeLists.txt embeds it at build time).
// So the CPU and the GPU evaluate the same expressions, and an activation is
// added here: its two functions and a line of GTC_ACTIVATIONS, which the
// dialect's verifier, both executors and the emitter read.
//
// Plain C++ that both compilers take: no headers under NVRTC, math through
// GTC_MATH (tanhf, expf, ... on the GPU; std:: overloads on the CPU).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_SCALAROPS_H
#define GTC_RUNTIME_SCALAROPS_H

#ifdef __CUDACC_RTC__
#define GTC_SCALAR __device__ __forceinline__
#define GTC_MATH(fn) fn##f
#else
#include <cmath>
#define GTC_SCALAR inline
#define GTC_MATH(fn) std::fn
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

} // namespace gtc_scalar

// The activations gt.activation_grad differentiates, by the kind it names
// them with: X(kind), where gtc_scalar::kind_fwd and kind_grad are above.
#define GTC_ACTIVATIONS(X)                                                     \
  X(relu)                                                                      \
  X(gelu)                                                                      \
  X(gelu_tanh)                                                                 \
  X(tanh)                                                                      \
  X(sigmoid)                                                                   \
  X(exp)                                                                       \
  X(log)                                                                       \
  X(sqrt)

#endif // GTC_RUNTIME_SCALAROPS_H
