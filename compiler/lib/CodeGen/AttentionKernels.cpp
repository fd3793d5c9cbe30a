//===- AttentionKernels.cpp - Fused attention and its gradient ------------===//
//
// Flash-attention style kernels on CUDA cores (fp32 arithmetic): the forward
// pass with an online softmax and the three-pass deterministic backward
// pass. They serve f32 attention and head sizes other than 64 and 128; bf16
// and fp16 heads of 64 or 128 take the tensor-core kernels of
// FlashAttention.cpp.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

struct AttnShape {
  int64_t b, t, d, h, hd;
};

/// Row stride (in floats) of a shared-memory tile read one row per lane:
/// conflict-free for float4 reads (stride / 4 odd) or scalar reads (odd).
int64_t laneRowStride(int64_t hd) {
  if (hd % 4 == 0)
    return (hd / 4) % 2 == 1 ? hd : hd + 4;
  return hd % 2 == 1 ? hd : hd + 1;
}

/// `dots<R>(s, rows, stride, b)`: s[i] = rows[i * stride] . b over a head
/// vector, for R rows read by the whole warp (broadcast) and one row b per
/// lane, so each element of b is loaded once for R products.
std::string dotsSnippet(int64_t hd) {
  if (hd % 4 == 0)
    return R"CU(
template <int R>
__device__ __forceinline__ void dots(float (&s)[R], const float *rows,
                                     int stride, const float *b) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    s[i] = 0.f;
#pragma unroll 2
  for (int c = 0; c < HD / 4; ++c) {
    const float4 y = reinterpret_cast<const float4 *>(b)[c];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 x = reinterpret_cast<const float4 *>(rows + i * stride)[c];
      s[i] += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
    }
  }
}
)CU";
  return R"CU(
template <int R>
__device__ __forceinline__ void dots(float (&s)[R], const float *rows,
                                     int stride, const float *b) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    s[i] = 0.f;
  for (int c = 0; c < HD; ++c) {
    const float y = b[c];
#pragma unroll
    for (int i = 0; i < R; ++i)
      s[i] += rows[i * stride + c] * y;
  }
}
)CU";
}

std::string attnConsts(const AttnShape &s, bool causal, float scale) {
  return "constexpr int B = " + str(s.b) + ", T = " + str(s.t) +
         ", D = " + str(s.d) + ", H = " + str(s.h) + ", HD = " + str(s.hd) +
         ";\nconstexpr bool CAUSAL = " + (causal ? "true" : "false") +
         ";\nconstexpr float SCALE = " + flt(scale) +
         ";  // 1 / sqrt(HD)\nconstexpr i64 ROW = 3 * D;  // floats per "
         "position in qkv\nconstexpr int HDP = " +
         str(laneRowStride(s.hd)) +
         ";  // padded row stride of tiles read one row per lane\n"
         "constexpr int NC = (HD + 31) / 32;  // head dims per lane\n";
}

/// The query-tile loop shared by the forward pass, the statistics pass of
/// the backward pass and the dq pass: each block takes a tile of BQ queries
/// of one (batch, head) and each warp QPW of them (t = q0 + warp + 8 i);
/// lanes take the 32 keys of a key tile (u = k0 + lane) staged in ks and vs.
/// `perTile` runs per key tile, `finish` per query (i, t) at the end. With
/// `withG` the dy rows of the queries are staged in gs.
std::string attnQueryLoop(bool withG, const std::string &state,
                          const std::string &perTile,
                          const std::string &finish) {
  std::string s = "  __shared__ __align__(16) float qs[BQ * HD];\n";
  if (withG)
    s += "  __shared__ __align__(16) float gs[BQ * HD];\n";
  s += R"CU(  __shared__ __align__(16) float ks[32 * HDP];
  __shared__ __align__(16) float vs[32 * HDP];
  __shared__ __align__(16) float ws[8][QPW][32];  // per warp: weights of the keys
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int tile = blockIdx.x; tile < B * H * QT; tile += gridDim.x) {
    const int qt = QT - 1 - tile % QT;  // the longest causal tiles first
    const int h = tile / QT % H, b = tile / QT / H;
    const int q0 = qt * BQ;
    const auto *base = qkv + (i64)b * T * ROW + h * HD;
    __syncthreads();
    for (int e = threadIdx.x; e < BQ * HD; e += blockDim.x) {
      const int r = e / HD, c = e % HD;
      qs[e] = q0 + r < T ? base[(i64)(q0 + r) * ROW + c] : 0.f;
)CU";
  if (withG)
    s += "      gs[e] = q0 + r < T ? dy[((i64)b * T + q0 + r) * D + h * HD + c] "
         ": 0.f;\n";
  s += "    }\n";
  s += state;
  s += R"CU(    const int kend = CAUSAL ? min(T, q0 + BQ) : T;
    const int tlast = q0 + warp + 8 * (QPW - 1);  // the warp's last query
    for (int k0 = 0; k0 < kend; k0 += 32) {
      __syncthreads();
      for (int e = threadIdx.x; e < 32 * HD; e += blockDim.x) {
        const int r = e / HD, c = e % HD;
        const bool ok = k0 + r < T;
        const auto *src = base + (i64)(k0 + r) * ROW + c;
        ks[r * HDP + c] = ok ? src[D] : 0.f;
        vs[r * HDP + c] = ok ? src[2 * D] : 0.f;
      }
      __syncthreads();
      if (CAUSAL && k0 > tlast)
        continue;  // every key of the tile is masked for this warp
      const int u = k0 + lane;
)CU";
  s += perTile;
  s += R"CU(    }
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      const int t = q0 + warp + 8 * i;
      if (t >= T)
        continue;
)CU";
  s += finish;
  s += "    }\n  }\n";
  return s;
}

/// Queries per block for a query-tile kernel whose shared memory is
/// `fixed` + `perQuery` * BQ bytes; 0 if even 8 do not fit.
int64_t pickQueryTile(int64_t fixed, int64_t perQuery) {
  for (int64_t bq : {64, 32, 16, 8})
    if (fixed + perQuery * bq <= kSharedLimit)
      return bq;
  return 0;
}

const char *kForwardState = R"CU(    float m[QPW], l[QPW], acc[QPW][NC];
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      m[i] = -GTC_INF;
      l[i] = 0.f;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        acc[i][j] = 0.f;
    }
)CU";

} // namespace

/// CpuExecutor's attention(): softmax(q k^T / sqrt(hd)) v per head, with an
/// online softmax over key tiles (flash-attention style, fp32).
bool Emitter::attention() {
  int qkv = k->inputs[0], y = k->outputs[0], lse = k->outputs[1];
  const auto &qs = shape(qkv);
  if (qs.size() != 3 || qs[2] % 3 != 0)
    return fail("attention takes qkv of shape [B, T, 3D]");
  AttnShape s{qs[0], qs[1], qs[2] / 3, k->intAttr("heads", 1), 0};
  if (s.h <= 0 || s.d % s.h != 0)
    return fail("the model width is not a multiple of the heads");
  s.hd = s.d / s.h;
  if (count(y) != s.b * s.t * s.d || count(lse) != s.b * s.h * s.t)
    return fail("attention result sizes do not match");
  bool causal = k->intAttr("causal", 1);
  if (tensorCoreAttention(s.hd, {qkv, y}))
    return flashAttention(s.b, s.t, s.d, s.h, causal);
  float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  int64_t hdp = laneRowStride(s.hd);
  int64_t bq = pickQueryTile(4 * 2 * 32 * hdp, 4 * s.hd + 4 * 32);
  if (!bq)
    return fail("head size " + str(s.hd) +
                " is too large for the GPU attention kernel");
  int64_t qt = ceilDiv(s.t, bq);
  std::string consts = attnConsts(s, causal, scale) +
                       "constexpr int BQ = " + str(bq) +
                       ", QPW = BQ / 8;  // queries per block and warp\n"
                       "constexpr int QT = " +
                       str(qt) + ";  // query tiles\n" + dotsSnippet(s.hd) +
                       cuh::attention_weighted;
  std::string finish = R"CU(      auto *out = y + ((i64)b * T + t) * D + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          out[lane + 32 * j] = acc[i][j] / l[i];
      if (lane == 0)
        lse[((i64)b * H + h) * T + t] = m[i] + logf(l[i]);
)CU";
  std::string body = attnQueryLoop(false, kForwardState,
                                   cuh::attention_online_softmax, finish);
  launch("", "one block per " + str(bq) + " queries of one (batch, head): " +
                 str(s.b * s.h * qt) + " tiles, online softmax over " +
                 str(s.t) + " keys",
         {in(qkv, "qkv"), out(y, "y"), out(lse, "lse")}, kWarpHelpers, consts,
         body,
         std::min(s.b * s.h * qt, kMaxRowGrid));
  return true;
}

/// CpuExecutor's attentionGrad() in three deterministic passes (they
/// recompute the statistics; the forward's lse and output serve the
/// tensor-core kernels):
///   stats: the forward pass again, keeping per query lse = m + log(l) and
///          delta = dy . y (= sum_u p_u dp_u) in the workspace;
///   dq:    per query, dq = sum_u ds_u k_u with ds = p (dy.v_u - delta) scale;
///   dkdv:  per key, dv = sum_t p_t dy_t and dk = sum_t ds_t q_t.
/// Every element of dqkv is written once, by the thread that owns it.
bool Emitter::attentionGrad() {
  int dy = k->inputs[0], qkv = k->inputs[1], dq = k->outputs[0];
  const auto &qs = shape(qkv);
  if (qs.size() != 3 || qs[2] % 3 != 0)
    return fail("attention_grad takes qkv of shape [B, T, 3D]");
  AttnShape s{qs[0], qs[1], qs[2] / 3, k->intAttr("heads", 1), 0};
  if (s.h <= 0 || s.d % s.h != 0)
    return fail("the model width is not a multiple of the heads");
  s.hd = s.d / s.h;
  if (count(dy) != s.b * s.t * s.d || count(dq) != count(qkv) ||
      count(k->inputs[2]) != count(dy) ||
      count(k->inputs[3]) != s.b * s.h * s.t)
    return fail("attention_grad operand sizes do not match");
  bool causal = k->intAttr("causal", 1);
  if (tensorCoreAttention(s.hd, {dy, qkv, k->inputs[2], dq}))
    return flashAttentionGrad(s.b, s.t, s.d, s.h, causal);
  float scale = static_cast<float>(1.0 / std::sqrt(double(s.hd)));
  int64_t hdp = laneRowStride(s.hd);
  needWorkspace(4 * 2 * s.b * s.h * s.t);
  std::string common = attnConsts(s, causal, scale);
  auto tooLarge = [&] {
    return fail("head size " + str(s.hd) +
                " is too large for the GPU attention kernels");
  };

  // Pass 1: statistics.
  int64_t bq = pickQueryTile(4 * 2 * 32 * hdp, 4 * s.hd + 4 * 32);
  if (!bq)
    return tooLarge();
  int64_t qt = ceilDiv(s.t, bq);
  std::string consts = common + "constexpr int BQ = " + str(bq) +
                       ", QPW = BQ / 8;\nconstexpr int QT = " + str(qt) +
                       ";\n" + dotsSnippet(s.hd) + cuh::attention_weighted;
  std::string finish = R"CU(      const auto *g = dy + ((i64)b * T + t) * D + h * HD;
      float delta = 0.f;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          delta += g[lane + 32 * j] * (acc[i][j] / l[i]);
      delta = warp_sum(delta);
      if (lane == 0) {
        float *st = stats + (((i64)b * H + h) * T + t) * 2;
        st[0] = m[i] + logf(l[i]);
        st[1] = delta;
      }
)CU";
  launch("stats",
         "forward recomputation, one block per " + str(bq) +
             " queries of one (batch, head); lse and dy.y per query to the "
             "workspace",
         {in(dy, "dy"), in(qkv, "qkv"), ws("float", "stats")}, kWarpHelpers,
         consts,
         attnQueryLoop(false, kForwardState, cuh::attention_online_softmax,
                       finish),
         std::min(s.b * s.h * qt, kMaxRowGrid));

  // Pass 2: dq.
  bq = pickQueryTile(4 * 2 * 32 * hdp, 8 * s.hd + 4 * 32);
  if (!bq)
    return tooLarge();
  qt = ceilDiv(s.t, bq);
  consts = common + "constexpr int BQ = " + str(bq) +
           ", QPW = BQ / 8;\nconstexpr int QT = " + str(qt) + ";\n" +
           dotsSnippet(s.hd) + cuh::attention_weighted;
  std::string state = R"CU(    float lse[QPW], delta[QPW], acc[QPW][NC];
#pragma unroll
    for (int i = 0; i < QPW; ++i) {
      const int t = min(q0 + warp + 8 * i, T - 1);
      const float *st = stats + (((i64)b * H + h) * T + t) * 2;
      lse[i] = st[0];
      delta[i] = st[1];
#pragma unroll
      for (int j = 0; j < NC; ++j)
        acc[i][j] = 0.f;
    }
)CU";
  std::string perTile = R"CU(      float s[QPW], dp[QPW];
      dots<QPW>(s, qs + warp * HD, 8 * HD, ks + lane * HDP);
      dots<QPW>(dp, gs + warp * HD, 8 * HD, vs + lane * HDP);
#pragma unroll
      for (int i = 0; i < QPW; ++i) {
        const int t = q0 + warp + 8 * i;
        const bool valid = u < T && t < T && (!CAUSAL || u <= t);
        const float p = valid ? expf(s[i] * SCALE - lse[i]) : 0.f;
        ws[warp][i][lane] = p * (dp[i] - delta[i]) * SCALE;
      }
      __syncwarp();
      weighted<QPW>(acc, ws[warp], ks, lane);
      __syncwarp();
)CU";
  finish = R"CU(      auto *out = dqkv + ((i64)b * T + t) * ROW + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          out[lane + 32 * j] = acc[i][j];
)CU";
  launch("dq",
         "one block per " + str(bq) +
             " queries of one (batch, head); dq = sum over keys of ds k",
         {in(dy, "dy"), in(qkv, "qkv"), wsIn("float", "stats"),
          out(dq, "dqkv")},
         kWarpHelpers, consts, attnQueryLoop(true, state, perTile, finish),
         std::min(s.b * s.h * qt, kMaxRowGrid));

  // Pass 3: dk and dv. A block takes BKY keys of one (batch, head), each
  // warp KPW of them (u = u0 + warp + 8 i); lanes take the 32 queries of a
  // query tile (t = t0 + lane) staged in qs and gs.
  int64_t kpw = 0;
  for (int64_t c : {4, 2, 1})
    if (4 * (2 * 8 * c * s.hd + 2 * 32 * hdp + 2 * 8 * c * 32 + 2 * 32) <=
        kSharedLimit) {
      kpw = c;
      break;
    }
  if (!kpw)
    return tooLarge();
  int64_t bk = 8 * kpw, kt = ceilDiv(s.t, bk);
  consts = common + "constexpr int KPW = " + str(kpw) +
           ", BKY = 8 * KPW;  // keys per warp and block\nconstexpr int KT = " +
           str(kt) + ";  // key tiles\n" + dotsSnippet(s.hd) +
           cuh::attention_weighted;
  std::string body = cuh::attention_grad;
  launch("dkdv",
         "one block per " + str(bk) +
             " keys of one (batch, head); dk, dv = sums over queries",
         {in(dy, "dy"), in(qkv, "qkv"), wsIn("float", "stats"),
          out(dq, "dqkv")},
         kWarpHelpers, consts, body, std::min(s.b * s.h * kt, kMaxRowGrid));
  return true;
}
