//===- CpuExecutor.cpp - Runs a plan on the CPU ---------------------------===//

#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/ScalarOps.h"
#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>

using namespace gtc::rt;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

namespace {

template <typename T> using Exec = CpuExecutor<T>;

const std::vector<int64_t> &shapeOf(const Plan &p, int id) {
  return p.buffers[id].shape;
}
int64_t countOf(const Plan &p, int id) { return p.buffers[id].elements(); }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
          const float *b, float *c, float beta) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
          const double *b, double *c, double beta) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}

/// Row-major strides of `shape` aligned to the right of an `rank`-dimensional
/// result, with 0 where the dimension is broadcast.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = shape.size() - 1 - i;
    size_t o = rank - 1 - i;
    strides[o] = shape[d] == 1 ? 0 : s;
    s *= shape[d];
  }
  return strides;
}

/// Calls fn(outIndex, aIndex, bIndex) for every element of a broadcast.
template <typename Fn>
void forEachBroadcast(const std::vector<int64_t> &out,
                      const std::vector<int64_t> &sa,
                      const std::vector<int64_t> &sb, int64_t begin,
                      int64_t end, Fn fn) {
  size_t rank = out.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t rem = begin;
  int64_t ia = 0, ib = 0;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % out[d];
    rem /= out[d];
    ia += idx[d] * sa[d];
    ib += idx[d] * sb[d];
  }
  for (int64_t i = begin; i < end; ++i) {
    fn(i, ia, ib);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < out[d])
        break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

template <typename T, typename Op> void binary(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const T *a = e.floats(k.inputs[0]), *b = e.floats(k.inputs[1]);
  T *y = e.floats(k.outputs[0]);
  const auto &out = shapeOf(p, k.outputs[0]);
  int64_t n = countOf(p, k.outputs[0]);
  int64_t na = countOf(p, k.inputs[0]), nb = countOf(p, k.inputs[1]);
  Op op;
  if (na == n && nb == n) {
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        y[i] = op(a[i], b[i]);
    }, 4096);
    return;
  }
  if (na == n && nb == 1) {
    T s = b[0];
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        y[i] = op(a[i], s);
    }, 4096);
    return;
  }
  if (na == n && n % nb == 0 && shapeOf(p, k.inputs[1]).size() <= out.size()) {
    // b repeats along leading dimensions (a bias-like operand).
    const auto &bs = shapeOf(p, k.inputs[1]);
    bool trailing = true;
    for (size_t i = 0; i < bs.size(); ++i)
      trailing &= bs[bs.size() - 1 - i] == out[out.size() - 1 - i];
    if (trailing) {
      parallelFor(n / nb, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r)
          for (int64_t j = 0; j < nb; ++j)
            y[r * nb + j] = op(a[r * nb + j], b[j]);
      }, std::max<int64_t>(1, 4096 / nb));
      return;
    }
  }
  auto sa = broadcastStrides(shapeOf(p, k.inputs[0]), out.size());
  auto sb = broadcastStrides(shapeOf(p, k.inputs[1]), out.size());
  parallelFor(n, [&](int64_t lo, int64_t hi) {
    forEachBroadcast(out, sa, sb, lo, hi, [&](int64_t i, int64_t ia,
                                              int64_t ib) {
      y[i] = op(a[ia], b[ib]);
    });
  }, 4096);
}

struct Add {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};

template <typename T, typename Fn>
void unaryApply(Exec<T> &e, const Kernel &k, Fn fn) {
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  parallelFor(countOf(e.plan(), k.outputs[0]), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      y[i] = fn(x[i]);
  }, 4096);
}

template <typename T> void neg(Exec<T> &e, const Kernel &k) {
  unaryApply(e, k, [](T x) { return -x; });
}
// The activations: ScalarOps.h's formulas, which the generated CUDA calls
// too.
template <typename T, T (*Fwd)(T)>
void activation(Exec<T> &e, const Kernel &k) {
  unaryApply(e, k, [](T x) { return Fwd(x); });
}
template <typename T> void gelu(Exec<T> &e, const Kernel &k) {
  if (k.intAttr("approximate", 0))
    unaryApply(e, k, [](T x) { return gtc_scalar::gelu_tanh_fwd(x); });
  else
    unaryApply(e, k, [](T x) { return gtc_scalar::gelu_fwd(x); });
}

/// A value rounded as a buffer of type `d` stores it (16-bit types), or
/// as it is.
template <typename T> T roundTo(T v, DType d) {
  if (dtypeBytes(d) != 2)
    return v;
  return static_cast<T>(fromHalfBits(toHalfBits(static_cast<float>(v), d), d));
}

/// Calls `fn(f, f')` with the activation `kind`'s function and derivative.
template <typename T, typename Fn>
void withActivation(const std::string &kind, Fn fn) {
#define GTC_KIND(Op, name)                                                     \
  if (kind == #name)                                                           \
    return fn([](T v) { return gtc_scalar::name##_fwd(v); },                   \
              [](T v) { return gtc_scalar::name##_grad(v); });
  GTC_ACTIVATIONS(GTC_KIND)
#undef GTC_KIND
  throw RuntimeError("unknown activation kind '" + kind + "'");
}

/// y = f(a) * b for the halves a, b of each row of x (f(a) rounded to the
/// element type first, as its own op's result would be).
template <typename T> void glu(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  const DType d = p.buffers[k.outputs[0]].dtype;
  const int64_t f = shapeOf(p, k.outputs[0]).back();
  const int64_t n = countOf(p, k.outputs[0]);
  withActivation<T>(k.strAttr("kind", ""), [&](auto act, auto) {
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T *xr = x + i / f * 2 * f + i % f;
        y[i] = roundTo(act(xr[0]), d) * xr[f];
      }
    }, 4096);
  });
}

/// dx = [dy * b * f'(a), dy * f(a)] for the halves a, b of each row of x,
/// rounded as PyTorch's ops of f(a) * b would round their gradients.
template <typename T> void gluGrad(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const T *dy = e.floats(k.inputs[0]), *x = e.floats(k.inputs[1]);
  T *dx = e.floats(k.outputs[0]);
  const DType d = p.buffers[k.outputs[0]].dtype;
  const int64_t f = shapeOf(p, k.inputs[0]).back();
  const int64_t n = countOf(p, k.inputs[0]);
  withActivation<T>(k.strAttr("kind", ""), [&](auto act, auto deriv) {
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t at = i / f * 2 * f + i % f;
        const T a = x[at], b = x[at + f];
        dx[at] = roundTo(dy[i] * b, d) * deriv(a);
        dx[at + f] = dy[i] * roundTo(act(a), d);
      }
    }, 4096);
  });
}

/// dx = dy * the derivative of the activation `kind` at x.
template <typename T> void activationGrad(Exec<T> &e, const Kernel &k) {
  const T *dy = e.floats(k.inputs[0]), *x = e.floats(k.inputs[1]);
  T *dx = e.floats(k.outputs[0]);
  const int64_t n = countOf(e.plan(), k.outputs[0]);
  withActivation<T>(k.strAttr("kind", ""), [&](auto, auto deriv) {
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        dx[i] = dy[i] * deriv(x[i]);
    }, 4096);
  });
}

template <typename T> void copy(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  int64_t n = countOf(p, k.outputs[0]);
  size_t width = isFloat(p.buffers[k.outputs[0]].dtype) ? sizeof(T) : 4;
  std::memmove(e.data(k.outputs[0]), e.data(k.inputs[0]), n * width);
}

template <typename T> void cast(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  DType from = p.buffers[k.inputs[0]].dtype, to = p.buffers[k.outputs[0]].dtype;
  int64_t n = countOf(p, k.outputs[0]);
  // Between float types the values stay (run() rounds 16-bit outputs).
  if (isFloat(from) == isFloat(to))
    return copy(e, k);
  if (from == DType::I32) {
    const int32_t *x = e.ints(k.inputs[0]);
    T *y = e.floats(k.outputs[0]);
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<T>(x[i]);
  } else {
    const T *x = e.floats(k.inputs[0]);
    int32_t *y = e.ints(k.outputs[0]);
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<int32_t>(x[i]);
  }
}

template <typename T> void matmul(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &as = shapeOf(p, k.inputs[0]), &bs = shapeOf(p, k.inputs[1]);
  const auto &ys = shapeOf(p, k.outputs[0]);
  bool ta = k.intAttr("transpose_a", 0), tb = k.intAttr("transpose_b", 0);
  int64_t m = ys[ys.size() - 2], n = ys.back();
  int64_t kk = ta ? as[as.size() - 2] : as.back();
  const T *a = e.floats(k.inputs[0]), *b = e.floats(k.inputs[1]);
  T *y = e.floats(k.outputs[0]);
  int64_t batch = countOf(p, k.outputs[0]) / (m * n);
  if (bs.size() == 2 && !ta) {
    // A shared rank-2 operand: one GEMM over all rows of a.
    gemm(false, tb, batch * m, n, kk, a, b, y, T(0));
    return;
  }
  std::vector<int64_t> batchShape(ys.begin(), ys.end() - 2);
  std::vector<int64_t> aBatch(as.begin(), as.end() - 2),
      bBatch(bs.begin(), bs.end() - 2);
  auto sa = broadcastStrides(aBatch, batchShape.size());
  auto sb = broadcastStrides(bBatch, batchShape.size());
  int64_t aMat = as[as.size() - 2] * as.back(), bMat = bs[bs.size() - 2] * bs.back();
  std::vector<std::pair<int64_t, int64_t>> offsets;
  forEachBroadcast(batchShape, sa, sb, 0, batch,
                   [&](int64_t, int64_t ia, int64_t ib) {
                     offsets.push_back({ia, ib});
                   });
  for (int64_t i = 0; i < batch; ++i)
    gemm(ta, tb, m, n, kk, a + offsets[i].first * aMat,
         b + offsets[i].second * bMat, y + i * m * n, T(0));
}

template <typename T> void linear(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &ws = shapeOf(p, k.inputs[1]);
  int64_t n = ws[0], kk = ws[1];
  int64_t m = countOf(p, k.inputs[0]) / kk;
  T *y = e.floats(k.outputs[0]);
  gemm(false, true, m, n, kk, e.floats(k.inputs[0]), e.floats(k.inputs[1]), y,
       T(0));
  if (k.inputs.size() > 2) {
    const T *bias = e.floats(k.inputs[2]);
    parallelFor(m, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t j = 0; j < n; ++j)
          y[r * n + j] += bias[j];
    }, std::max<int64_t>(1, 4096 / n));
  }
}

/// A row's mean and (biased) variance, accumulated in double; RMS
/// normalization (`centered` false) takes the mean as 0, and the variance
/// is then the mean square.
template <typename T>
void meanAndVariance(const T *xr, int64_t d, bool centered, double &mean,
                     double &var) {
  mean = 0;
  var = 0;
  if (centered) {
    for (int64_t j = 0; j < d; ++j)
      mean += xr[j];
    mean /= d;
  }
  for (int64_t j = 0; j < d; ++j)
    var += (xr[j] - mean) * (xr[j] - mean);
  var /= d;
}

/// layernorm (x - mean) * rstd * w + b, and rmsnorm x * rstd * w.
template <typename T> void layernorm(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const bool centered = k.op == OpKind::LayerNorm;
  int64_t d = shapeOf(p, k.inputs[0]).back();
  int64_t rows = countOf(p, k.inputs[0]) / d;
  const T *x = e.floats(k.inputs[0]), *w = e.floats(k.inputs[1]),
          *b = centered ? e.floats(k.inputs[2]) : nullptr;
  T *y = e.floats(k.outputs[0]);
  double eps = k.floatAttr("epsilon", centered ? 1e-5 : 1e-6);
  parallelFor(rows, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T *xr = x + r * d;
      double mean, var;
      meanAndVariance(xr, d, centered, mean, var);
      T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
      for (int64_t j = 0; j < d; ++j)
        y[r * d + j] = (xr[j] - T(mean)) * rstd * w[j] + (b ? b[j] : T(0));
    }
  }, 8);
}

/// The gradients of layernorm (dx, dw, db) and of rmsnorm (dx, dw), whose
/// mean is 0 and whose dx has no mean(dxhat) term.
template <typename T> void layernormGrad(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const bool centered = k.op == OpKind::LayerNormGrad;
  int64_t d = shapeOf(p, k.inputs[1]).back();
  int64_t rows = countOf(p, k.inputs[1]) / d;
  const T *dy = e.floats(k.inputs[0]), *x = e.floats(k.inputs[1]),
          *w = e.floats(k.inputs[2]);
  T *dx = e.floats(k.outputs[0]), *dw = e.floats(k.outputs[1]),
    *db = centered ? e.floats(k.outputs[2]) : nullptr;
  double eps = k.floatAttr("epsilon", centered ? 1e-5 : 1e-6);
  std::vector<T> mean(rows), rstd(rows);
  parallelFor(rows, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T *xr = x + r * d;
      double m, v;
      meanAndVariance(xr, d, centered, m, v);
      mean[r] = T(m);
      rstd[r] = T(1.0 / std::sqrt(v + eps));
      double s1 = 0, s2 = 0; // mean(dxhat), mean(dxhat * xhat)
      for (int64_t j = 0; j < d; ++j) {
        double xh = (xr[j] - m) * rstd[r];
        double g = double(dy[r * d + j]) * w[j];
        s1 += g;
        s2 += g * xh;
      }
      s1 = centered ? s1 / d : 0.0;
      s2 /= d;
      for (int64_t j = 0; j < d; ++j) {
        double xh = (xr[j] - m) * rstd[r];
        double g = double(dy[r * d + j]) * w[j];
        dx[r * d + j] = T(rstd[r] * (g - s1 - xh * s2));
      }
    }
  }, 8);
  parallelFor(d, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      double sw = 0, sb = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double g = dy[r * d + j];
        sw += g * (x[r * d + j] - mean[r]) * rstd[r];
        sb += g;
      }
      dw[j] = T(sw);
      if (db)
        db[j] = T(sb);
    }
  }, 16);
}

/// rope: on [..., T, H, d], pair i of position t turns by
/// t * theta^(-2i/d) (minus that with `inverse`); the pairs are (i, i + d/2),
/// or (2i, 2i + 1) when `interleaved`. The angles as Hugging Face computes
/// them (in T: f32 on a float run).
/// Keeps each element with probability 1 - p (ScalarOps.h's draw from the
/// run's seed, the executor's step and the op's salt), scaled by 1 / (1 - p).
template <typename T> void dropout(Exec<T> &e, const Kernel &k) {
  const int64_t n = countOf(e.plan(), k.inputs[0]);
  const double p = k.floatAttr("p", 0);
  const unsigned long long key = gtc_scalar::dropout_key(
      e.seed, static_cast<unsigned long long>(e.step),
      static_cast<unsigned long long>(k.intAttr("salt", 0)));
  const auto threshold = static_cast<unsigned long long>(p * 16777216.0);
  const T scale = T(1.0 / (1.0 - p));
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  parallelFor(
      n,
      [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          y[i] = gtc_scalar::dropout_keep(
                     key, static_cast<unsigned long long>(i), threshold)
                     ? x[i] * scale
                     : T(0);
      },
      4096);
}

template <typename T> void rope(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const std::vector<int64_t> &s = shapeOf(p, k.inputs[0]);
  const size_t n = s.size();
  const int64_t d = s[n - 1], heads = s[n - 2], positions = s[n - 3];
  const int64_t rows = countOf(p, k.inputs[0]) / d, half = d / 2;
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  const T theta = static_cast<T>(k.floatAttr("theta", 10000.0));
  const bool interleaved = k.intAttr("interleaved", 0) != 0;
  const T sign = k.intAttr("inverse", 0) ? T(-1) : T(1);
  const int32_t *at = k.inputs.size() > 1 ? e.ints(k.inputs[1]) : nullptr;
  // Heads from `rotated` on pass unchanged (a packed projection's values).
  const int64_t rotated = k.intAttr("rotated", heads);
  std::vector<T> inv(half);
  for (int64_t i = 0; i < half; ++i)
    inv[i] = T(1) / std::pow(theta, static_cast<T>(2 * i) / static_cast<T>(d));
  parallelFor(
      rows,
      [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          // A row's position: its place along T, or what `at` gives it
          // (gt-decode's windows: [B, T] positions).
          const T t =
              static_cast<T>(at ? at[r / heads] : r / heads % positions);
          const T *xr = x + r * d;
          T *yr = y + r * d;
          if (r % heads >= rotated) {
            std::copy(xr, xr + d, yr);
            continue;
          }
          for (int64_t i = 0; i < half; ++i) {
            const T a = t * inv[i], c = std::cos(a), sn = sign * std::sin(a);
            const int64_t i1 = interleaved ? 2 * i : i;
            const int64_t i2 = interleaved ? 2 * i + 1 : i + half;
            const T x1 = xr[i1], x2 = xr[i2];
            yr[i1] = x1 * c - x2 * sn;
            yr[i2] = x2 * c + x1 * sn;
          }
        }
      },
      8);
}

/// Splits a shape around `axis` into (outer, n, inner).
void aroundAxis(const std::vector<int64_t> &s, int64_t axis, int64_t &outer,
                int64_t &n, int64_t &inner) {
  if (axis < 0)
    axis += static_cast<int64_t>(s.size());
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= s[i];
  n = s[axis];
  for (size_t i = axis + 1; i < s.size(); ++i)
    inner *= s[i];
}

template <typename T> void softmax(Exec<T> &e, const Kernel &k) {
  int64_t outer, n, inner;
  aroundAxis(shapeOf(e.plan(), k.inputs[0]), k.intAttr("axis", -1), outer, n,
             inner);
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  parallelFor(outer * inner, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t base = (r / inner) * n * inner + r % inner;
      T mx = x[base];
      for (int64_t j = 1; j < n; ++j)
        mx = std::max(mx, x[base + j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(x[base + j * inner] - mx));
      for (int64_t j = 0; j < n; ++j)
        y[base + j * inner] = T(std::exp(double(x[base + j * inner] - mx)) / sum);
    }
  }, 8);
}

template <typename T> void softmaxGrad(Exec<T> &e, const Kernel &k) {
  int64_t outer, n, inner;
  aroundAxis(shapeOf(e.plan(), k.inputs[0]), k.intAttr("axis", -1), outer, n,
             inner);
  const T *dy = e.floats(k.inputs[0]), *y = e.floats(k.inputs[1]);
  T *dx = e.floats(k.outputs[0]);
  parallelFor(outer * inner, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t base = (r / inner) * n * inner + r % inner;
      double dot = 0;
      for (int64_t j = 0; j < n; ++j)
        dot += double(dy[base + j * inner]) * y[base + j * inner];
      for (int64_t j = 0; j < n; ++j) {
        int64_t i = base + j * inner;
        dx[i] = T(y[i] * (dy[i] - dot));
      }
    }
  }, 8);
}

/// Attention's layout (Plan.h), checked.
AttentionLayout attnLayout(const Plan &p, const Kernel &k) {
  AttentionLayout a = attentionLayout(p, k);
  if (!a.error.empty())
    throw RuntimeError(a.error);
  return a;
}

/// Row `u` of key (or value) head hk of batch bi in `base` (an operand or
/// its gradient).
template <typename P>
P *kvRowAt(const AttentionLayout &s, P *base, int64_t bi, int64_t u,
           int64_t hk) {
  return base + (bi * s.t + u) * s.kvRow + hk * s.hd;
}

/// out[u] = x . (row u of head hk of batch bi in `rows`) for u = 0..last,
/// each a sum over the head's columns in order, in double. Four rows at a
/// time: four independent sums, each in the order of one alone, so the
/// results are those of one row at a time, bit for bit, in a quarter of
/// the dependent additions.
template <typename T>
void dotRows(const AttentionLayout &s, const T *x, const T *rows, int64_t bi,
             int64_t hk, int64_t last, double *out) {
  int64_t u = 0;
  for (; u + 3 <= last; u += 4) {
    const T *r0 = kvRowAt(s, rows, bi, u, hk), *r1 = r0 + s.kvRow,
            *r2 = r1 + s.kvRow, *r3 = r2 + s.kvRow;
    double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int64_t c = 0; c < s.hd; ++c) {
      const double xc = x[c];
      d0 += xc * r0[c];
      d1 += xc * r1[c];
      d2 += xc * r2[c];
      d3 += xc * r3[c];
    }
    out[u] = d0, out[u + 1] = d1, out[u + 2] = d2, out[u + 3] = d3;
  }
  for (; u <= last; ++u) {
    const T *r = kvRowAt(s, rows, bi, u, hk);
    double d = 0;
    for (int64_t c = 0; c < s.hd; ++c)
      d += double(x[c]) * r[c];
    out[u] = d;
  }
}

/// The softmax numerators of query `q` against keys 0..last of batch bi's
/// key head hk, into w (the scaled scores' max subtracted); returns
/// (max, sum of w).
template <typename T>
std::pair<double, double>
attnScores(const AttentionLayout &s, const T *q, const T *kb, int64_t bi,
           int64_t hk, int64_t last, double scale, std::vector<double> &w) {
  dotRows(s, q, kb, bi, hk, last, w.data());
  double mx = -INFINITY;
  for (int64_t u = 0; u <= last; ++u) {
    w[u] *= scale;
    mx = std::max(mx, w[u]);
  }
  double sum = 0;
  for (int64_t u = 0; u <= last; ++u)
    sum += (w[u] = std::exp(w[u] - mx));
  return {mx, sum};
}

/// out = (sum over u = 0..last of w[u] times row u of value head hk of batch
/// bi) / sum: each column's sum over the keys in key order, the value rows
/// read whole; acc holds the head's columns.
template <typename T>
void weightedRows(const AttentionLayout &s, const std::vector<double> &w,
                  const T *vb, int64_t bi, int64_t hk, int64_t last,
                  double sum, std::vector<double> &acc, T *out) {
  std::fill(acc.begin(), acc.end(), 0.0);
  for (int64_t u = 0; u <= last; ++u) {
    const T *v = kvRowAt(s, vb, bi, u, hk);
    const double wu = w[u];
    for (int64_t c = 0; c < s.hd; ++c)
      acc[c] += wu * v[c];
  }
  for (int64_t c = 0; c < s.hd; ++c)
    out[c] = T(acc[c] / sum);
}

template <typename T> void attention(Exec<T> &e, const Kernel &k) {
  AttentionLayout s = attnLayout(e.plan(), k);
  const T *qb = e.floats(s.q) + s.qCol, *kb = e.floats(s.k) + s.kCol,
          *vb = e.floats(s.v) + s.vCol;
  T *y = e.floats(s.y), *lse = e.floats(s.lse);
  const double scale = double(T(1) / std::sqrt(T(s.hd))); // rounded to T
  parallelFor(s.b * s.h * s.t, [&](int64_t lo, int64_t hi) {
    std::vector<double> w(s.t), acc(s.hd);
    for (int64_t idx = lo; idx < hi; ++idx) {
      int64_t bi = idx / (s.h * s.t), h = (idx / s.t) % s.h, t = idx % s.t;
      int64_t hk = h / s.group();
      const T *q = qb + (bi * s.t + t) * s.qRow + h * s.hd;
      int64_t last = s.causal ? t : s.t - 1;
      auto [mx, sum] = attnScores(s, q, kb, bi, hk, last, scale, w);
      lse[idx] = T(mx + std::log(sum)); // idx = (b, h, t): lse's layout
      weightedRows(s, w, vb, bi, hk, last, sum, acc,
                   y + (bi * s.t + t) * s.width() + h * s.hd);
    }
  }, 4);
}

/// The reference recomputes each query's softmax (the forward's output and
/// lse serve the GPU's kernels).
template <typename T> void attentionGrad(Exec<T> &e, const Kernel &k) {
  AttentionLayout s = attnLayout(e.plan(), k);
  const T *dy = e.floats(s.dy);
  const T *qb = e.floats(s.q) + s.qCol, *kb = e.floats(s.k) + s.kCol,
          *vb = e.floats(s.v) + s.vCol;
  T *dqb = e.floats(s.dq) + s.qCol, *dkb = e.floats(s.dk) + s.kCol,
    *dvb = e.floats(s.dv) + s.vCol;
  double scale = 1.0 / std::sqrt(double(s.hd));
  auto qAt = [&](int64_t bi, int64_t t, int64_t h) {
    return (bi * s.t + t) * s.qRow + h * s.hd;
  };
  // Each (batch, key head) owns its columns of dk, dv and of its query
  // heads' dq: no two threads share them.
  parallelFor(
      s.b * s.hkv,
      [&](int64_t lo, int64_t hi) {
        std::vector<double> p(s.t), dp(s.t);
        for (int64_t idx = lo; idx < hi; ++idx) {
          int64_t bi = idx / s.hkv, hk = idx % s.hkv;
          for (int64_t t = 0; t < s.t; ++t) {
            std::fill_n(kvRowAt(s, dkb, bi, t, hk), s.hd, T(0));
            std::fill_n(kvRowAt(s, dvb, bi, t, hk), s.hd, T(0));
            for (int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h)
              std::fill_n(dqb + qAt(bi, t, h), s.hd, T(0));
          }
          for (int64_t h = hk * s.group(); h < (hk + 1) * s.group(); ++h)
            for (int64_t t = 0; t < s.t; ++t) {
              const T *q = qb + qAt(bi, t, h);
              const T *g = dy + (bi * s.t + t) * s.width() + h * s.hd;
              int64_t last = s.causal ? t : s.t - 1;
              double sum = attnScores(s, q, kb, bi, hk, last, scale, p).second;
              dotRows(s, g, vb, bi, hk, last, dp.data());
              // The rows of dv, dk and dq a key adds to overlap neither
              // each other nor the operands; saying so (restrict) made this
              // kernel about 8% faster (char_gpt, g++ -O3).
              double pdp = 0;
              for (int64_t u = 0; u <= last; ++u) {
                const double pu = p[u] /= sum;
                pdp += pu * dp[u];
                T *__restrict dv = kvRowAt(s, dvb, bi, u, hk);
                for (int64_t c = 0; c < s.hd; ++c)
                  dv[c] += T(pu * g[c]);
              }
              T *__restrict dq = dqb + qAt(bi, t, h);
              for (int64_t u = 0; u <= last; ++u) {
                const double ds = p[u] * (dp[u] - pdp) * scale;
                const T *__restrict kv = kvRowAt(s, kb, bi, u, hk);
                T *__restrict dk = kvRowAt(s, dkb, bi, u, hk);
                for (int64_t c = 0; c < s.hd; ++c) {
                  dq[c] += T(ds * kv[c]);
                  dk[c] += T(ds * q[c]);
                }
              }
            }
        }
      },
      1);
}

/// gt.cache_update: row (b, s) of the window into row positions[b, s] of
/// the cache [B, Tmax, Hkv, d], in place.
template <typename T> void cacheUpdate(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &cs = shapeOf(p, k.outputs[0]);
  const auto &ws = shapeOf(p, k.inputs[1]);
  const int64_t rows = ws[0] * ws[1], tmax = cs[1], row = cs[2] * cs[3];
  const int32_t *pos = e.ints(k.inputs[2]);
  const T *x = e.floats(k.inputs[1]);
  T *cache = e.floats(k.outputs[0]);
  for (int64_t r = 0; r < rows; ++r) {
    if (pos[r] < 0 || pos[r] >= tmax)
      throw RuntimeError("cache_update: position " + std::to_string(pos[r]) +
                         " is outside the KV cache's " + std::to_string(tmax) +
                         " positions; a sequence ends at the model's T");
    std::memcpy(cache + ((r / ws[1]) * tmax + pos[r]) * row, x + r * row,
                row * sizeof(T));
  }
}

/// gt.cached_attention: query (b, s, h) at position p = positions[b, s]
/// attends to the cache's positions 0..p of row b (key head h / group),
/// as attention() computes a causal query's (its scale rounded to T).
template <typename T> void cachedAttention(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &qs = shapeOf(p, k.inputs[0]);
  const auto &cs = shapeOf(p, k.inputs[1]);
  const int64_t b = qs[0], win = qs[1], h = qs[2], hd = qs[3];
  const int64_t tmax = cs[1], hkv = cs[2], group = h / hkv;
  const T *q = e.floats(k.inputs[0]), *kc = e.floats(k.inputs[1]),
          *vc = e.floats(k.inputs[2]);
  const int32_t *pos = e.ints(k.inputs[3]);
  T *y = e.floats(k.outputs[0]);
  const double scale = double(T(1) / std::sqrt(T(hd)));
  for (int64_t r = 0; r < b * win; ++r)
    if (pos[r] < 0 || pos[r] >= tmax)
      throw RuntimeError("cached_attention: position " +
                         std::to_string(pos[r]) +
                         " is outside the KV "
                         "cache's " +
                         std::to_string(tmax) + " positions");
  // The cache as attention's keys and values: row u of key head hk of
  // batch row bi at ((bi * tmax + u) * hkv + hk) * hd.
  AttentionLayout s;
  s.b = b, s.t = tmax, s.h = h, s.hkv = hkv, s.hd = hd, s.kvRow = hkv * hd;
  parallelFor(
      b * win * h,
      [&](int64_t lo, int64_t hi) {
        std::vector<double> w(tmax), acc(hd);
        for (int64_t idx = lo; idx < hi; ++idx) {
          const int64_t r = idx / h, hq = idx % h, hk = hq / group,
                        bi = r / win, last = pos[r];
          const double sum =
              attnScores(s, q + idx * hd, kc, bi, hk, last, scale, w).second;
          weightedRows(s, w, vc, bi, hk, last, sum, acc, y + idx * hd);
        }
      },
      4);
}

template <typename T> void embedding(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const int32_t *ids = e.ints(k.inputs[0]);
  const T *table = e.floats(k.inputs[1]);
  const auto &ts = shapeOf(p, k.inputs[1]);
  int64_t v = ts[0], d = ts[1], n = countOf(p, k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= v)
      throw RuntimeError("embedding: index " + std::to_string(ids[i]) +
                         " is outside the table's " + std::to_string(v) +
                         " rows; check the data's vocabulary against the "
                         "model's");
  parallelFor(n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      std::memcpy(y + i * d, table + int64_t(ids[i]) * d, d * sizeof(T));
  }, 16);
}

template <typename T> void embeddingGrad(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const T *dy = e.floats(k.inputs[0]);
  const int32_t *ids = e.ints(k.inputs[1]);
  const auto &ts = shapeOf(p, k.outputs[0]);
  int64_t v = ts[0], d = ts[1], n = countOf(p, k.inputs[1]);
  T *dt = e.floats(k.outputs[0]);
  std::fill_n(dt, v * d, T(0));
  // Threads own column ranges, so the sum order per element is fixed.
  parallelFor(d, [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t row = ids[i];
      if (row < 0 || row >= v)
        continue;
      for (int64_t j = lo; j < hi; ++j)
        dt[row * d + j] += dy[i * d + j];
    }
  }, 16);
}

/// The row's maximum and log(sum(exp(x - max))), in double.
template <typename T> std::pair<double, double> logSumExp(const T *x, int64_t n) {
  double mx = x[0];
  for (int64_t j = 1; j < n; ++j)
    mx = std::max<double>(mx, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp(double(x[j]) - mx);
  return {mx, std::log(sum)};
}

void checkLabel(int32_t label, int64_t classes) {
  if (label < 0 || label >= classes)
    throw RuntimeError("cross_entropy: label " + std::to_string(label) +
                       " is outside the " + std::to_string(classes) +
                       " classes; check the data's labels against the "
                       "model's output size");
}

template <typename T> void crossEntropy(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  int64_t c = shapeOf(p, k.inputs[0]).back();
  int64_t rows = countOf(p, k.inputs[0]) / c;
  const T *x = e.floats(k.inputs[0]);
  const int32_t *y = e.ints(k.inputs[1]);
  for (int64_t r = 0; r < rows; ++r)
    checkLabel(y[r], c);
  std::vector<double> losses(rows);
  parallelFor(rows, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      auto [mx, lse] = logSumExp(x + r * c, c);
      losses[r] = lse + mx - x[r * c + y[r]];
    }
  }, 8);
  double total = 0;
  for (double l : losses)
    total += l;
  e.floats(k.outputs[0])[0] = T(total / rows);
}

template <typename T> void crossEntropyGrad(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  int64_t c = shapeOf(p, k.inputs[1]).back();
  int64_t rows = countOf(p, k.inputs[1]) / c;
  double g = e.floats(k.inputs[0])[0];
  const T *x = e.floats(k.inputs[1]);
  const int32_t *y = e.ints(k.inputs[2]);
  T *dx = e.floats(k.outputs[0]);
  for (int64_t r = 0; r < rows; ++r)
    checkLabel(y[r], c);
  parallelFor(rows, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T *xr = x + r * c;
      auto [mx, lse] = logSumExp(xr, c);
      for (int64_t j = 0; j < c; ++j) {
        double pj = std::exp(double(xr[j]) - mx - lse);
        dx[r * c + j] = T((pj - (j == y[r] ? 1.0 : 0.0)) * g / rows);
      }
    }
  }, 8);
}

template <typename T> void accuracy(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  int64_t c = shapeOf(p, k.inputs[0]).back();
  int64_t rows = countOf(p, k.inputs[0]) / c;
  const T *x = e.floats(k.inputs[0]);
  const int32_t *y = e.ints(k.inputs[1]);
  int64_t right = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * c;
    int64_t best = std::max_element(xr, xr + c) - xr;
    right += best == y[r];
  }
  e.floats(k.outputs[0])[0] = T(double(right) / rows);
}

/// Sums `x` into `y`, where y's shape broadcasts to x's (sum_to, and sum/mean
/// through their kept-dimension shape); `scale` multiplies the result.
template <typename T>
void reduceInto(const T *x, const std::vector<int64_t> &xs, T *y,
                const std::vector<int64_t> &ys, double scale) {
  int64_t nx = 1, ny = 1;
  for (int64_t d : xs)
    nx *= d;
  for (int64_t d : ys)
    ny *= d;
  // Fast path: y is the trailing part of x (a bias gradient).
  bool trailing = ys.size() <= xs.size();
  for (size_t i = 0; trailing && i < ys.size(); ++i)
    trailing = ys[ys.size() - 1 - i] == xs[xs.size() - 1 - i];
  if (trailing) {
    int64_t rows = nx / ny;
    parallelFor(ny, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        double acc = 0;
        for (int64_t r = 0; r < rows; ++r)
          acc += x[r * ny + j];
        y[j] = T(acc * scale);
      }
    }, 64);
    return;
  }
  std::vector<double> acc(ny, 0.0);
  auto sy = broadcastStrides(ys, xs.size());
  std::vector<int64_t> zero(xs.size(), 0);
  forEachBroadcast(xs, sy, zero, 0, nx, [&](int64_t i, int64_t iy, int64_t) {
    acc[iy] += x[i];
  });
  for (int64_t j = 0; j < ny; ++j)
    y[j] = T(acc[j] * scale);
}

/// The kept-dimension shape of a sum/mean and the number of reduced elements.
std::vector<int64_t> keptShape(const std::vector<int64_t> &xs,
                               const std::vector<int64_t> &axes,
                               int64_t &count) {
  std::vector<int64_t> kept(xs);
  count = 1;
  for (size_t i = 0; i < xs.size(); ++i) {
    bool reduced = axes.empty();
    for (int64_t a : axes)
      reduced |= (a < 0 ? a + static_cast<int64_t>(xs.size()) : a) ==
                 static_cast<int64_t>(i);
    if (reduced) {
      count *= kept[i];
      kept[i] = 1;
    }
  }
  return kept;
}

template <typename T> void reduce(Exec<T> &e, const Kernel &k, bool mean) {
  const Plan &p = e.plan();
  const auto &xs = shapeOf(p, k.inputs[0]);
  int64_t count;
  auto kept = keptShape(xs, k.intsAttr("axes"), count);
  reduceInto(e.floats(k.inputs[0]), xs, e.floats(k.outputs[0]), kept,
             mean ? 1.0 / double(count) : 1.0);
}
template <typename T> void sum(Exec<T> &e, const Kernel &k) {
  reduce(e, k, false);
}
template <typename T> void meanK(Exec<T> &e, const Kernel &k) {
  reduce(e, k, true);
}
template <typename T> void sumTo(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  reduceInto(e.floats(k.inputs[0]), shapeOf(p, k.inputs[0]),
             e.floats(k.outputs[0]), shapeOf(p, k.outputs[0]), 1.0);
}

template <typename T> void broadcast(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &ys = shapeOf(p, k.outputs[0]);
  auto sx = broadcastStrides(shapeOf(p, k.inputs[0]), ys.size());
  std::vector<int64_t> zero(ys.size(), 0);
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  parallelFor(countOf(p, k.outputs[0]), [&](int64_t lo, int64_t hi) {
    forEachBroadcast(ys, sx, zero, lo, hi,
                     [&](int64_t i, int64_t ix, int64_t) { y[i] = x[ix]; });
  }, 4096);
}

/// pad and slice: y[c] = x[c + shift] where that is inside x, else 0 (the
/// shapes have one rank; slice's y lies in x, pad's x in y;
/// Kernel::padShift).
template <typename T> void padOrSlice(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &xs = shapeOf(p, k.inputs[0]);
  const auto &ys = shapeOf(p, k.outputs[0]);
  if (xs.size() != ys.size())
    throw RuntimeError(std::string(opName(k.op)) + " between ranks " + std::to_string(xs.size()) +
                       " and " + std::to_string(ys.size()));
  const std::vector<int64_t> shift = k.padShift(ys.size());
  const T *x = e.floats(k.inputs[0]);
  T *y = e.floats(k.outputs[0]);
  // Row by row (the last dimension): zeros, the part inside x, zeros.
  const int64_t xn = xs.back(), yn = ys.back(), sn = shift.back();
  const int64_t from = std::clamp<int64_t>(-sn, 0, yn),
                to = std::clamp<int64_t>(xn - sn, from, yn);
  parallelFor(countOf(p, k.outputs[0]) / yn, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, off = 0, stride = xn;
      bool inside = true;
      for (size_t d = ys.size() - 1; d-- > 0;) {
        int64_t c = rem % ys[d] + shift[d];
        rem /= ys[d];
        inside = inside && c >= 0 && c < xs[d];
        off += c * stride;
        stride *= xs[d];
      }
      T *yr = y + row * yn;
      if (!inside) {
        std::fill(yr, yr + yn, T(0));
        continue;
      }
      std::fill(yr, yr + from, T(0));
      std::copy(x + off + from + sn, x + off + to + sn, yr + from);
      std::fill(yr + to, yr + yn, T(0));
    }
  }, std::max<int64_t>(1, 4096 / yn));
}

template <typename T> void transpose(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  const auto &xs = shapeOf(p, k.inputs[0]);
  const auto &ys = shapeOf(p, k.outputs[0]);
  auto perm = k.intsAttr("permutation");
  std::vector<int64_t> xStrides(xs.size(), 1);
  for (size_t i = xs.size(); i-- > 1;)
    xStrides[i - 1] = xStrides[i] * xs[i];
  std::vector<int64_t> sx(ys.size());
  for (size_t i = 0; i < ys.size(); ++i)
    sx[i] = xStrides[perm[i]];
  std::vector<int64_t> zero(ys.size(), 0);
  bool isInt = p.buffers[k.inputs[0]].dtype == DType::I32;
  parallelFor(countOf(p, k.outputs[0]), [&](int64_t lo, int64_t hi) {
    forEachBroadcast(ys, sx, zero, lo, hi, [&](int64_t i, int64_t ix, int64_t) {
      if (isInt)
        e.ints(k.outputs[0])[i] = e.ints(k.inputs[0])[ix];
      else
        e.floats(k.outputs[0])[i] = e.floats(k.inputs[0])[ix];
    });
  }, 4096);
}

/// gt-bucket's all-reduce: each output is the mean over the processes of
/// its input (copied first unless the plan reduces it in place), through the
/// executor's allReduceMean, one call for the bucket (none: one process, the
/// mean is the value).
template <typename T> void allReduce(Exec<T> &e, const Kernel &k) {
  const Plan &p = e.plan();
  if (k.inputs.size() != k.outputs.size())
    throw RuntimeError("an all_reduce reduces each input into one output");
  std::vector<std::pair<T *, size_t>> bucket;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const T *x = e.floats(k.inputs[i]);
    T *y = e.floats(k.outputs[i]);
    const int64_t n = countOf(p, k.outputs[i]);
    if (x != y)
      std::copy(x, x + n, y);
    bucket.push_back({y, static_cast<size_t>(n)});
  }
  if (e.allReduceMean)
    e.allReduceMean(bucket);
}

/// The CPU kernel of each op; null for a fusion region (its ops run one by
/// one). A switch without default: the compiler names a kind left out.
template <typename T> void (*cpuKernel(OpKind kind))(Exec<T> &, const Kernel &) {
  switch (kind) {
  case OpKind::Add:
    return binary<T, Add>;
  case OpKind::Sub:
    return binary<T, Sub>;
  case OpKind::Mul:
    return binary<T, Mul>;
  case OpKind::Div:
    return binary<T, Div>;
  case OpKind::Neg:
    return neg<T>;
#define GTC_ACTIVATION_CASE(Op, name)                                          \
  case OpKind::Op:                                                             \
    return activation<T, gtc_scalar::name##_fwd<T>>;
    GTC_ACTIVATION_OPS(GTC_ACTIVATION_CASE)
#undef GTC_ACTIVATION_CASE
  case OpKind::Gelu:
    return gelu<T>;
  case OpKind::ActivationGrad:
    return activationGrad<T>;
  case OpKind::Glu:
    return glu<T>;
  case OpKind::GluGrad:
    return gluGrad<T>;
  case OpKind::Cast:
    return cast<T>;
  case OpKind::Broadcast:
    return broadcast<T>;
  case OpKind::Copy:
  case OpKind::Reshape:
    return copy<T>;
  case OpKind::Transpose:
    return transpose<T>;
  case OpKind::Pad:
  case OpKind::Slice:
    return padOrSlice<T>;
  case OpKind::Matmul:
    return matmul<T>;
  case OpKind::Linear:
    return linear<T>;
  case OpKind::LayerNorm:
  case OpKind::RmsNorm:
    return layernorm<T>;
  case OpKind::LayerNormGrad:
  case OpKind::RmsNormGrad:
    return layernormGrad<T>;
  case OpKind::Rope:
    return rope<T>;
  case OpKind::Dropout:
    return dropout<T>;
  case OpKind::Softmax:
    return softmax<T>;
  case OpKind::SoftmaxGrad:
    return softmaxGrad<T>;
  case OpKind::Attention:
    return attention<T>;
  case OpKind::AttentionGrad:
    return attentionGrad<T>;
  case OpKind::CacheUpdate:
    return cacheUpdate<T>;
  case OpKind::CachedAttention:
    return cachedAttention<T>;
  case OpKind::Embedding:
    return embedding<T>;
  case OpKind::EmbeddingGrad:
    return embeddingGrad<T>;
  case OpKind::CrossEntropy:
    return crossEntropy<T>;
  case OpKind::CrossEntropyGrad:
    return crossEntropyGrad<T>;
  case OpKind::Accuracy:
    return accuracy<T>;
  case OpKind::Sum:
    return sum<T>;
  case OpKind::Mean:
    return meanK<T>;
  case OpKind::SumTo:
    return sumTo<T>;
  case OpKind::AllReduce:
    return allReduce<T>;
  case OpKind::Fused:
    return nullptr;
  }
  return nullptr;
}

} // namespace

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

template <typename T>
CpuExecutor<T>::CpuExecutor(const Plan &plan) : plan_(plan) {
  auto lookup = [](const Kernel &k) {
    KernelFn fn = cpuKernel<T>(k.op);
    if (!fn)
      throw RuntimeError(std::string("the CPU runtime cannot run a '") +
                         opName(k.op) + "' kernel here; recompile the plan");
    return fn;
  };
  for (const Kernel &k : plan.kernels) {
    std::vector<KernelFn> body;
    if (k.op == OpKind::Fused) {
      if (k.body.empty())
        throw RuntimeError("a fusion region without ops; recompile the plan");
      for (const Kernel &sub : k.body)
        body.push_back(lookup(sub));
    } else {
      body.push_back(lookup(k));
    }
    fns_.push_back(std::move(body));
  }
  for (const Buffer &b : plan.buffers) {
    if (dtypeBytes(b.dtype) != 2)
      continue;
    if (b.region == Region::Param || b.region == Region::Grad)
      throw RuntimeError("16-bit parameter or gradient '" + b.name +
                         "': parameters and gradients are f32 (master "
                         "weights); recompile the plan");
    sixteenBit_ = true;
  }
  for (auto [region, elements] : plan.regionSize) {
    if (region == Region::Grad && gradsInTemp())
      continue;
    size_t bytes = static_cast<size_t>(std::max<int64_t>(elements, 1)) *
                   widen(region) * sizeof(T);
    regions_[region].reset(new std::byte[bytes]());
  }
  for (const Constant &c : plan.constants) {
    const Buffer &b = plan.buffers[c.buffer];
    for (int64_t i = 0; i < b.elements(); ++i) {
      double v = c.values.size() == 1 ? c.values[0] : c.values[i];
      if (isFloat(b.dtype))
        floats(c.buffer)[i] = static_cast<T>(v);
      else
        ints(c.buffer)[i] = static_cast<int32_t>(v);
    }
  }
}

template <typename T> CpuExecutor<T>::~CpuExecutor() = default;

template <typename T> void *CpuExecutor<T>::data(int id) const {
  const Buffer &b = plan_.buffers[id];
  if (b.viewOf >= 0) {
    // A view (a reshape, or a slice some slots in): its elements from the
    // root's, each one a T here whatever the plan's element size.
    const Buffer &root = plan_.buffers[b.viewOf];
    int64_t elements = (b.offset - root.offset) * 4 / dtypeBytes(b.dtype);
    return static_cast<std::byte *>(data(b.viewOf)) + elements * sizeof(T);
  }
  return base(b.region) + b.offset * widen(b.region) * sizeof(T);
}

template <typename T> std::byte *CpuExecutor<T>::base(Region r) const {
  if (r == Region::Grad && gradsInTemp())
    return regions_.at(Region::Temp).get() + plan_.gradsInTemp * sizeof(T);
  return regions_.at(r).get();
}

template <typename T> T *CpuExecutor<T>::region(Region r) const {
  return reinterpret_cast<T *>(base(r));
}

template <typename T>
void CpuExecutor<T>::copyRegionFrom(const CpuExecutor &from, Region r) {
  const int64_t n = regionElements(r);
  if (n == 0 && from.regionElements(r) == 0)
    return; // neither has it (a model without attention keeps no KV cache)
  if (n != from.regionElements(r) || widen(r) != from.widen(r) ||
      !regions_.count(r) || !from.regions_.count(r))
    throw RuntimeError(std::string("the two plans' ") + regionName(r) +
                       " regions differ; recompile them together");
  std::memcpy(region(r), from.region(r), n * widen(r) * sizeof(T));
}

template <typename T>
int64_t CpuExecutor<T>::regionElements(Region r) const {
  auto it = plan_.regionSize.find(r);
  return it == plan_.regionSize.end() ? 0 : it->second;
}

/// Each parameter draws from its own generator (seeded by its name), each
/// element its own draws of it (counter-based), so any split over threads,
/// and the GPU's gtc_init, draw the same values (GPT-2's 124M took 10 s on
/// one thread).
template <typename T>
void gtc::rt::initParameters(const Plan &plan, uint64_t seed, T *params) {
  for (const Param &p : plan.params) {
    const ParamDraw d = paramDraw(p, seed);
    T *w = params + plan.buffers[p.buffer].offset;
    parallelFor(
        plan.buffers[p.buffer].elements(),
        [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i)
            w[i] = static_cast<T>(
                gtc_scalar::init_value(d.kind, d.a, d.c, d.seed, i));
        },
        1 << 16);
  }
}

template <typename T> void CpuExecutor<T>::initParams(uint64_t seed) {
  initParameters(plan_, seed, region(Region::Param));
}

template <typename T> void CpuExecutor<T>::run(std::vector<double> *spans) {
  auto now = [] {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (size_t i = 0; i < fns_.size(); ++i) {
    const Kernel &k = plan_.kernels[i];
    if (spans)
      spans->push_back(now());
    // A fusion region runs op by op: the oracle for its one GPU kernel,
    // which rounds its 16-bit intermediates the same way.
    for (size_t j = 0; j < fns_[i].size(); ++j) {
      const Kernel &op = k.op == OpKind::Fused ? k.body[j] : k;
      fns_[i][j](*this, op);
      roundHalfOutputs(op);
      if (afterOp)
        afterOp(i, op);
    }
    if (spans)
      spans->push_back(now());
  }
}

template <typename T>
void CpuExecutor<T>::roundHalfOutputs(const Kernel &k) {
  // A 16-bit output holds what the GPU stores: the value rounded.
  for (int id : k.outputs) {
    DType d = plan_.buffers[id].dtype;
    if (dtypeBytes(d) != 2)
      continue;
    T *y = floats(id);
    int64_t n = plan_.buffers[id].elements();
    parallelFor(n, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j)
        y[j] = roundTo(y[j], d);
    }, 4096);
  }
}

template class gtc::rt::CpuExecutor<float>;
template class gtc::rt::CpuExecutor<double>;
template void gtc::rt::initParameters<float>(const Plan &, uint64_t, float *);
template void gtc::rt::initParameters<double>(const Plan &, uint64_t,
                                              double *);

bool gtc::rt::cpuRuns(OpKind kind) {
  return kind == OpKind::Fused || cpuKernel<float>(kind) != nullptr;
}
