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

// GTC_FDIV(a, b) is a / b, on the GPU through an approximate reciprocal
// (__fdividef, 2 ulp): the logistic's division compiled to about ten
// instructions an element, which made the SwiGLU kernels issue-bound
// (test/bench/NOTES.md, forty-first session).
#ifdef __CUDACC_RTC__
#define GTC_SCALAR __device__ __forceinline__
#define GTC_MATH(fn) fn##f
#define GTC_DMATH(fn) fn
#define GTC_FDIV(a, b) __fdividef(a, b)
#else
#include <cmath>
#define GTC_SCALAR inline
#define GTC_MATH(fn) std::fn
#define GTC_DMATH(fn) std::fn
#define GTC_FDIV(a, b) ((a) / (b))
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
  return GTC_FDIV(T(1), T(1) + GTC_MATH(exp)(-x));
}
template <typename T> GTC_SCALAR T sigmoid_grad(T x) {
  T s = GTC_FDIV(T(1), T(1) + GTC_MATH(exp)(-x));
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
  return GTC_FDIV(x, T(1) + GTC_MATH(exp)(-x));
}
template <typename T> GTC_SCALAR T silu_grad(T x) {
  T s = GTC_FDIV(T(1), T(1) + GTC_MATH(exp)(-x));
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

// Parameter initialization's draws, counter-based: draw k of a generator of
// seed s (Rng, SplitMix64) is dropout_mix(s + k golden), so any element of
// any parameter is drawn on its own, on either device. The normal transform
// (Box-Muller) is written here in single IEEE double operations, rounded
// one at a time (GTC_DMUL and the rest: no library log or cos, whose last
// bits differ between C libraries and CUDA, and no multiply-add contracted
// into an FMA on one device only): the CPU (initParameters, Rng::normal)
// and the GPU (gtc_init) draw every parameter bit for bit alike.
#ifdef __CUDACC_RTC__
#define GTC_DMUL(a, b) __dmul_rn(a, b)
#define GTC_DADD(a, b) __dadd_rn(a, b)
#define GTC_DDIV(a, b) __ddiv_rn(a, b)
#define GTC_DSQRT(a) __dsqrt_rn(a)
GTC_SCALAR unsigned long long dbits(double x) {
  return __double_as_longlong(x);
}
GTC_SCALAR double dfrombits(unsigned long long b) {
  return __longlong_as_double(b);
}
#else
// Plain operations: the build compiles with -ffp-contract=off (the top
// CMakeLists.txt), so no product is fused into the sum it feeds.
#define GTC_DMUL(a, b) ((a) * (b))
#define GTC_DADD(a, b) ((a) + (b))
#define GTC_DDIV(a, b) ((a) / (b))
#define GTC_DSQRT(a) std::sqrt(a)
GTC_SCALAR unsigned long long dbits(double x) {
  return __builtin_bit_cast(unsigned long long, x);
}
GTC_SCALAR double dfrombits(unsigned long long b) {
  return __builtin_bit_cast(double, b);
}
#endif

/// Draw k (from 0) of the generator of seed s.
GTC_SCALAR unsigned long long rng_bits(unsigned long long s,
                                       unsigned long long k) {
  return dropout_mix(s + k * 0x9E3779B97F4A7C15ull);
}
/// A double in [0, 1) of the top 53 bits (exact).
GTC_SCALAR double rng_uniform(unsigned long long bits) {
  return (double)(bits >> 11) * 0x1.0p-53;
}
/// k[0] + k[1] z + ... + k[9] z^9 in Estrin's order (pairs, then pairs of
/// pairs): a shorter chain of dependent operations than Horner's.
GTC_SCALAR double poly10(const double *k, double z) {
  const double z2 = GTC_DMUL(z, z), z4 = GTC_DMUL(z2, z2),
               z8 = GTC_DMUL(z4, z4);
  const double p01 = GTC_DADD(k[0], GTC_DMUL(k[1], z)),
               p23 = GTC_DADD(k[2], GTC_DMUL(k[3], z)),
               p45 = GTC_DADD(k[4], GTC_DMUL(k[5], z)),
               p67 = GTC_DADD(k[6], GTC_DMUL(k[7], z)),
               p89 = GTC_DADD(k[8], GTC_DMUL(k[9], z));
  const double p03 = GTC_DADD(p01, GTC_DMUL(p23, z2)),
               p47 = GTC_DADD(p45, GTC_DMUL(p67, z2));
  return GTC_DADD(GTC_DADD(p03, GTC_DMUL(p47, z4)), GTC_DMUL(p89, z8));
}
/// The natural logarithm of x in (0, 1]: x = m 2^e with m in [1/sqrt 2,
/// sqrt 2), log m = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172, by its
/// series to t^21 (the next term is under 2^-56 of the sum).
GTC_SCALAR double rng_log(double x) {
  const unsigned long long b = dbits(x);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  double m = dfrombits((b & 0xFFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) { // sqrt 2
    m = GTC_DMUL(m, 0.5);         // exact
    e += 1;
  }
  const double t = GTC_DDIV(GTC_DADD(m, -1.0), GTC_DADD(m, 1.0)),
               z = GTC_DMUL(t, t);
  const double c[] = {0x1.5555555555555p-2, 0x1.999999999999ap-3,
                      0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4,
                      0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4,
                      0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5,
                      0x1.af286bca1af28p-5, 0x1.8618618618618p-5};
  const double p = poly10(c, z); // 1/3 + z / 5 + ... + z^9 / 21
  // log m = 2 t (1 + z p); log x = e ln 2 + log m.
  const double lm = GTC_DMUL(GTC_DMUL(2.0, t), GTC_DADD(1.0, GTC_DMUL(z, p)));
  return GTC_DADD(GTC_DMUL((double)e, 0x1.62e42fefa39efp-1), lm);
}
/// cos(2 pi u) for u in [0, 1): the quarter turn q and the fraction f of it
/// are exact; the angle within it, at most pi / 4, takes the Taylor series of
/// cos and sin to its 18th and 19th powers (the next terms are under 2^-60).
GTC_SCALAR double rng_cos_turns(double u) {
  const double u4 = GTC_DMUL(u, 4.0); // exact
  const int q = (int)u4;
  const double f = GTC_DADD(u4, -(double)q); // exact, in [0, 1)
  const bool complement = f > 0.5;
  const double g = complement ? GTC_DADD(1.0, -f) : f; // exact
  const double th = GTC_DMUL(g, 0x1.921fb54442d18p+0), z = GTC_DMUL(th, th);
  const double cc[] = {0x1.0000000000000p+0,  -0x1.0000000000000p-1,
                       0x1.5555555555555p-5,  -0x1.6c16c16c16c17p-10,
                       0x1.a01a01a01a01ap-16, -0x1.27e4fb7789f5cp-22,
                       0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37,
                       0x1.ae7f3e733b81fp-45, -0x1.6827863b97d97p-53};
  const double sc[] = {0x1.0000000000000p+0,  -0x1.5555555555555p-3,
                       0x1.1111111111111p-7,  -0x1.a01a01a01a01ap-13,
                       0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26,
                       0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41,
                       0x1.952c77030ad4ap-49, -0x1.2f49b46814157p-57};
  // cos(f pi / 2) is cos th, or sin th for the complement; sin(f pi / 2)
  // the other; the quarter q says which of the two, and its sign.
  const bool sine = ((q & 1) != 0) != complement;
  double r = poly10(sine ? sc : cc, z);
  if (sine)
    r = GTC_DMUL(r, th);
  return q == 1 || q == 2 ? -r : r;
}
/// A standard normal draw from two (Box-Muller, as Rng::normal).
GTC_SCALAR double rng_normal(unsigned long long b1, unsigned long long b2) {
  const double u1 = GTC_DADD(1.0, -rng_uniform(b1)); // (0, 1]
  return GTC_DMUL(GTC_DSQRT(GTC_DMUL(-2.0, rng_log(u1))),
                  rng_cos_turns(rng_uniform(b2)));
}
/// The initial value of element i of a parameter (initParameters' kinds:
/// 0 zeros, 1 the constant a, 2 normal(a, c), 3 uniform in [a, c)) whose
/// generator has seed s: a normal takes draws 2 i and 2 i + 1, a uniform
/// draw i.
GTC_SCALAR double init_value(int kind, double a, double c, unsigned long long s,
                             long long i) {
  const unsigned long long k = (unsigned long long)i;
  switch (kind) {
  case 1:
    return a;
  case 2:
    return GTC_DADD(
        a, GTC_DMUL(c, rng_normal(rng_bits(s, 2 * k), rng_bits(s, 2 * k + 1))));
  case 3:
    return GTC_DADD(a, GTC_DMUL(GTC_DADD(c, -a), rng_uniform(rng_bits(s, k))));
  default:
    return 0.0;
  }
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
