//===- DecodeKernels.cpp - Generation: KV caches and attention over them --===//
//
// The kernels of gt-decode's generation plans (`gtc sample`): rope at given
// positions, a window's keys or values written into a KV cache, and the
// window's queries attending over the cache. A decode step is a window of
// one position: these kernels are small, and the CUDA graph of the step
// replays them.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

/// CpuExecutor's rope() with positions: a thread a pair of one head of one
/// row; its angle from the row's position (precise powf and sincosf, as
/// the CPU's f32 run computes them).
bool Emitter::ropeAt() {
  int x = k->inputs[0], at = k->inputs[1], y = k->outputs[0];
  const auto &s = shape(x);
  if (s.size() != 4 || s.back() % 2 != 0 || count(y) != count(x) ||
      count(at) != s[0] * s[1])
    return fail("rope at positions takes [B, T, heads, head_dim] with an "
                "even head_dim and [B, T] positions");
  const int64_t d = s[3], heads = s[2], pairs = count(x) / 2;
  const bool interleaved = k->intAttr("interleaved", 0) != 0;
  std::string consts =
      "constexpr int HALF = " + str(d / 2) + ";\nconstexpr int D = " + str(d) +
      ";\nconstexpr int HEADS = " + str(heads) +
      ";\nconstexpr i64 PAIRS = " + str(pairs) +
      ";\nconstexpr float THETA = " + flt(k->floatAttr("theta", 10000.0)) +
      ";\nconstexpr float SIGN = " +
      (k->intAttr("inverse", 0) ? "-1.0f" : "1.0f") +
      ";\nconstexpr bool INTERLEAVED = " + (interleaved ? "true" : "false") +
      ";\n";
  std::string body =
      R"CU(  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < PAIRS;
       e += (i64)gridDim.x * blockDim.x) {
    const i64 row = e / HALF;  // (b, t, head)
    const int i = (int)(e % HALF);
    const float inv = 1.0f / powf(THETA, (float)(2 * i) / (float)D);
    float sn, c;
    sincosf((float)pos[row / HEADS] * inv, &sn, &c);
    sn *= SIGN;
    const i64 i1 = row * D + (INTERLEAVED ? 2 * i : i);
    const i64 i2 = row * D + (INTERLEAVED ? 2 * i + 1 : i + HALF);
    const float x1 = (float)x[i1], x2 = (float)x[i2];
    y[i1] = x1 * c - x2 * sn;
    y[i2] = x2 * c + x1 * sn;
  }
)CU";
  launch("at",
         "a thread a pair, its position's angle (head_dim " + str(d) +
             (interleaved ? ", interleaved)" : ", rotate-half)"),
         {in(x, "x"), in(at, "pos"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(pairs, kBlock), int64_t(1) << 22));
  return true;
}

/// CpuExecutor's cacheUpdate(): row (b, s) of the window into row
/// positions[b, s] of the cache, a thread an element (a position outside
/// the cache writes nothing; the CPU stops there with an error).
bool Emitter::cacheUpdate() {
  int cache = k->inputs[0], x = k->inputs[1], at = k->inputs[2],
      y = k->outputs[0];
  const auto &cs = shape(cache), &ws = shape(x);
  if (cs.size() != 4 || ws.size() != 4 || y != cache ||
      count(at) != ws[0] * ws[1] || cs[2] * cs[3] != ws[2] * ws[3] ||
      plan.buffers[cache].dtype != plan.buffers[x].dtype)
    return fail("cache_update writes a [B, S, Hkv, d] window into its "
                "[B, Tmax, Hkv, d] cache in place");
  const int64_t n = count(x);
  std::string consts = "constexpr i64 N = " + str(n) +
                       ";\nconstexpr i64 ROW = " + str(ws[2] * ws[3]) +
                       ";\nconstexpr i64 S = " + str(ws[1]) +
                       ";\nconstexpr i64 TMAX = " + str(cs[1]) + ";\n";
  std::string body =
      R"CU(  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < N;
       e += (i64)gridDim.x * blockDim.x) {
    const i64 r = e / ROW, c = e % ROW;
    const int p = pos[r];
    if (p >= 0 && p < TMAX)
      cache[((r / S) * TMAX + p) * ROW + c] = x[e];
  }
)CU";
  launch("", "a thread an element of the window " + str(n),
         {in(x, "x"), in(at, "pos"), out(cache, "cache")}, 0, consts, body,
         std::min(ceilDiv(n, kBlock), int64_t(1) << 22));
  return true;
}

/// CpuExecutor's cachedAttention(): a block a query (row of the window and
/// head). Its threads take the keys 0..p in turn (a row of d each), the
/// scores stay in shared memory for the softmax, then each thread sums the
/// weighted values of its columns.
bool Emitter::cachedAttention() {
  int q = k->inputs[0], kc = k->inputs[1], vc = k->inputs[2], at = k->inputs[3],
      y = k->outputs[0];
  const auto &qs = shape(q), &cs = shape(kc);
  if (qs.size() != 4 || cs.size() != 4 || qs[3] != cs[3] || cs[2] == 0 ||
      qs[2] % cs[2] != 0 || count(at) != qs[0] * qs[1] ||
      count(y) != count(q) || plan.buffers[kc].dtype != plan.buffers[vc].dtype)
    return fail("cached_attention takes q [B, S, H, d] and caches "
                "[B, Tmax, Hkv, d] with Hkv dividing H");
  const int64_t tmax = cs[1], d = qs[3];
  if (tmax > 8192)
    return fail("cached_attention keeps a query's scores in shared memory: "
                "at most 8192 positions");
  const int64_t v = d % 8 == 0 ? 8 : d % 4 == 0 ? 4 : d % 2 == 0 ? 2 : 1;
  std::string consts = "constexpr int S = " + str(qs[1]) +
                       ";\nconstexpr int H = " + str(qs[2]) +
                       ";\nconstexpr int HKV = " + str(cs[2]) +
                       ";\nconstexpr int D = " + str(d) +
                       ";\nconstexpr int TMAX = " + str(tmax) +
                       ";\nconstexpr int V = " + str(v) +
                       ";  // elements a load\nconstexpr float SCALE = " +
                       flt(1.0f / std::sqrt(static_cast<float>(d))) + ";\n";
  std::string body = R"CU(  __shared__ float w[TMAX], qv[D], red[32];
  const int r = blockIdx.x / H, h = blockIdx.x % H, hk = h / (H / HKV);
  const i64 b = r / S;
  const int last = min(max(pos[r], -1), TMAX - 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32,
            warps = blockDim.x / 32;
  for (int c = threadIdx.x; c < D; c += blockDim.x)
    qv[c] = (float)q[((i64)r * H + h) * D + c];
  __syncthreads();
  // The scores, and their max.
  float mx = -GTC_INF;
  for (int u = threadIdx.x; u <= last; u += blockDim.x) {
    const auto *kr = kc + ((b * TMAX + u) * HKV + hk) * D;
    float s = 0.0f, kv[V];
    for (int c = 0; c < D; c += V) {
      loadv<V>(kr + c, kv);
#pragma unroll
      for (int j = 0; j < V; ++j)
        s += qv[c + j] * kv[j];
    }
    s *= SCALE;
    w[u] = s;
    mx = fmaxf(mx, s);
  }
  for (int o = 16; o > 0; o /= 2)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0)
    red[warp] = mx;
  __syncthreads();
  mx = -GTC_INF;
  for (int i = 0; i < warps; ++i)
    mx = fmaxf(mx, red[i]);
  __syncthreads();
  float sum = 0.0f;
  for (int u = threadIdx.x; u <= last; u += blockDim.x)
    sum += (w[u] = expf(w[u] - mx));
  for (int o = 16; o > 0; o /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0)
    red[warp] = sum;
  __syncthreads();
  sum = 0.0f;
  for (int i = 0; i < warps; ++i)
    sum += red[i];
  // The weighted values: a thread a column.
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    const auto *vr = vc + (b * TMAX * HKV + hk) * D + c;
    float acc = 0.0f;
    for (int u = 0; u <= last; ++u)
      acc += w[u] * (float)vr[(i64)u * HKV * D];
    y[((i64)r * H + h) * D + c] = acc / sum;
  }
)CU";
  launch("",
         "a block a query of " + str(count(at) * qs[2]) + " over " + str(tmax) +
             " cached positions (head_dim " + str(d) + ")",
         {in(q, "q"), in(kc, "kc"), in(vc, "vc"), in(at, "pos"), out(y, "y")},
         kPackHelpers, consts, body, count(at) * qs[2], 128);
  return true;
}
