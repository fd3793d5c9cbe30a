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

std::string attnConsts(const AttentionLayout &s, float scale) {
  return attentionShapeConsts(s) + "constexpr float SCALE = " + flt(scale) +
         ";  // 1 / sqrt(HD)\nconstexpr int HDP = " + str(laneRowStride(s.hd)) +
         ";  // padded row stride of tiles read one row per lane\n"
         "constexpr int NC = (HD + 31) / 32;  // head dims per lane\n";
}

/// The query-tile loop shared by the forward pass, the statistics pass of
/// the backward pass and the dq pass: each block takes a tile of BQ queries
/// of one (batch, head) and each warp QPW of them (t = q0 + warp + 8 i);
/// lanes take the 32 keys of a key tile (u = k0 + lane) of the head's key
/// head staged in ks and vs.
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
    const auto *qb = qp + (i64)b * T * QROW + h * HD;
    const i64 kvb = (i64)b * T * KVROW + h / G * HD;
    __syncthreads();
    for (int e = threadIdx.x; e < BQ * HD; e += blockDim.x) {
      const int r = e / HD, c = e % HD;
      qs[e] = q0 + r < T ? qb[(i64)(q0 + r) * QROW + c] : 0.f;
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
        const i64 at = kvb + (i64)(k0 + r) * KVROW + c;
        ks[r * HDP + c] = ok ? kp[at] : 0.f;
        vs[r * HDP + c] = ok ? vp[at] : 0.f;
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

std::string
gtc::codegen::detail::attentionShapeConsts(const AttentionLayout &a) {
  return "constexpr int B = " + str(a.b) + ", T = " + str(a.t) +
         ", H = " + str(a.h) + ", HKV = " + str(a.hkv) + ", HD = " + str(a.hd) +
         ";\nconstexpr int G = H / HKV;  // query heads a key head\n"
         "constexpr int D = H * HD;  // elements per position in y and dy\n"
         "constexpr i64 QROW = " +
         str(a.qRow) + ", KVROW = " + str(a.kvRow) +
         ";  // elements per position in q and in k, v\n"
         "constexpr bool CAUSAL = " +
         (a.causal ? "true" : "false") + ";\n";
}

Emitter::AttnArgs Emitter::attentionOperands(const AttentionLayout &a,
                                             AttnGrad grad) {
  AttnArgs r;
  if (a.packed) {
    // Each row: q's heads, k's from kCol, v's from vCol.
    const std::string kc = str(a.kCol), vc = str(a.vCol);
    r.args = {in(a.q, "qkv")};
    r.pointers = "  const auto *const qp = qkv, *const kp = qkv + " + kc +
                 ", *const vp = qkv + " + vc + ";\n";
    if (grad != AttnGrad::None)
      r.args.push_back(out(a.dq, "dqkv"));
    if (grad == AttnGrad::Dq)
      r.pointers += "  auto *const dqp = dqkv;\n";
    if (grad == AttnGrad::Dkdv)
      r.pointers += "  auto *const dkp = dqkv + " + kc +
                    ", *const dvp = dqkv + " + vc + ";\n";
    return r;
  }
  r.args = {in(a.q, "q"), in(a.k, "k"), in(a.v, "v")};
  r.pointers = "  const auto *const qp = q, *const kp = k, *const vp = v;\n";
  if (grad == AttnGrad::Dq) {
    r.args.push_back(out(a.dq, "grad_q"));
    r.pointers += "  auto *const dqp = grad_q;\n";
  }
  if (grad == AttnGrad::Dkdv) {
    r.args.push_back(out(a.dk, "grad_k"));
    r.args.push_back(out(a.dv, "grad_v"));
    r.pointers += "  auto *const dkp = grad_k, *const dvp = grad_v;\n";
  }
  return r;
}

/// CpuExecutor's attention(): softmax(q k^T / sqrt(hd)) v per head, with an
/// online softmax over key tiles (flash-attention style, fp32).
bool Emitter::attention() {
  AttentionLayout s = attentionLayout(plan, *k);
  if (!s.error.empty())
    return fail(s.error);
  int y = s.y, lse = s.lse;
  if (tensorCoreAttention(s.hd, {s.q, s.k, s.v, y}))
    return flashAttention(s);
  float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  int64_t hdp = laneRowStride(s.hd);
  int64_t bq = pickQueryTile(4 * 2 * 32 * hdp, 4 * s.hd + 4 * 32);
  if (!bq)
    return fail("head size " + str(s.hd) +
                " is too large for the GPU attention kernel");
  int64_t qt = ceilDiv(s.t, bq);
  std::string consts = attnConsts(s, scale) + "constexpr int BQ = " + str(bq) +
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
  AttnArgs ops = attentionOperands(s, AttnGrad::None);
  ops.args.push_back(out(y, "y"));
  ops.args.push_back(out(lse, "lse"));
  launch("",
         "one block per " + str(bq) +
             " queries of one (batch, head): " + str(s.b * s.h * qt) +
             " tiles, online softmax over " + str(s.t) + " keys",
         ops.args, kWarpHelpers, consts,
         ops.pointers + attnQueryLoop(false, kForwardState,
                                      cuh::attention_online_softmax, finish),
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
  AttentionLayout s = attentionLayout(plan, *k);
  if (!s.error.empty())
    return fail(s.error);
  int dy = s.dy;
  if (tensorCoreAttention(s.hd, {dy, s.y, s.q, s.k, s.v, s.dq, s.dk, s.dv}))
    return flashAttentionGrad(s);
  float scale = static_cast<float>(1.0 / std::sqrt(double(s.hd)));
  int64_t hdp = laneRowStride(s.hd);
  needWorkspace(4 * 2 * s.b * s.h * s.t);
  std::string common = attnConsts(s, scale);
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
  AttnArgs ops = attentionOperands(s, AttnGrad::None);
  ops.args.insert(ops.args.begin(), in(dy, "dy"));
  ops.args.push_back(ws("float", "stats"));
  launch("stats",
         "forward recomputation, one block per " + str(bq) +
             " queries of one (batch, head); lse and dy.y per query to the "
             "workspace",
         ops.args, kWarpHelpers, consts,
         ops.pointers + attnQueryLoop(false, kForwardState,
                                      cuh::attention_online_softmax, finish),
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
  finish = R"CU(      auto *out = dqp + ((i64)b * T + t) * QROW + h * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD)
          out[lane + 32 * j] = acc[i][j];
)CU";
  ops = attentionOperands(s, AttnGrad::Dq);
  ops.args.insert(ops.args.begin(), in(dy, "dy"));
  ops.args.push_back(wsIn("float", "stats"));
  launch("dq",
         "one block per " + str(bq) +
             " queries of one (batch, head); dq = sum over keys of ds k",
         ops.args, kWarpHelpers, consts,
         ops.pointers + attnQueryLoop(true, state, perTile, finish),
         std::min(s.b * s.h * qt, kMaxRowGrid));

  // Pass 3: dk and dv. A block takes BKY keys of one (batch, key head),
  // each warp KPW of them (u = u0 + warp + 8 i); lanes take the 32 queries
  // of a query tile (t = t0 + lane) staged in qs and gs, of each query head
  // of the group in turn.
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
  ops = attentionOperands(s, AttnGrad::Dkdv);
  ops.args.insert(ops.args.begin(), in(dy, "dy"));
  ops.args.push_back(wsIn("float", "stats"));
  launch("dkdv",
         "one block per " + str(bk) +
             " keys of one (batch, key head); dk, dv = sums over the queries "
             "of its " +
             str(s.group()) + " query heads",
         ops.args, kWarpHelpers, consts, ops.pointers + cuh::attention_grad,
         std::min(s.b * s.hkv * kt, kMaxRowGrid));
  return true;
}
