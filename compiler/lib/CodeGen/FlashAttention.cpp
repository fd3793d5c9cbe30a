//===- FlashAttention.cpp - Tensor-core attention and its gradient --------===//
//
// Attention on bf16/fp16 q, k, v with head size 64 or 128, on tensor cores
// (mma.sync m16n8k16, fp32 accumulation), after FlashAttention-2 (Dao,
// 2023): the T x T scores never leave registers; a warp owns 16 rows of a
// tile and keeps its softmax state (row max and sum) while key tiles stream
// through shared memory (cp.async, two stages). The forward pass also
// stores each query's log-sum-exp; the gradient reuses it in two launches,
// both deterministic (no atomics; every element of dqkv is written once by
// the thread that owns it):
//   dq:    per query tile, delta = dy . y (to the workspace, for dkdv) and
//          dq = scale * sum over keys of ds k, ds = p (dp - delta);
//   dkdv:  per key tile, dv = sum over queries of p dy, dk = scale * ds^T q.
// Other dtypes and head sizes take the CUDA-core kernels of
// AttentionKernels.cpp.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

namespace {

/// Warp-level tensor-core helpers (`MMA_T` is replaced by bf16 or f16).
/// Fragments follow the PTX ISA's m16n8k16 layouts: with g = lane / 4 and
/// c = lane % 4, an accumulator holds rows g and g + 8, columns 2c and
/// 2c + 1 of its 16 x 8 tile.
const char *kMmaHelpers = R"CU(
typedef unsigned u32;
__device__ __forceinline__ u32 smem_u32(const void *p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
      : "=r"(r) : "l"(p));
  return r;
}
// 16 bytes global -> shared, asynchronously; zeros when !ok.
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
// The A fragment of rows r0..r0+15, columns k0..k0+15 of a row-major tile.
__device__ __forceinline__ void ld_a(u32 (&a)[4], const E *tile, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + k0 + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(smem_u32(p)));
}
// B fragments of two 8-column tiles (n0..n0+15), k0..k0+15, from a tile
// stored [n][k] (B = tile^T): b[0], b[1] for n0; b[2], b[3] for n0 + 8.
__device__ __forceinline__ void ld_bt(u32 (&b)[4], const E *tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LDS + k0 + ((lane >> 3) & 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(smem_u32(p)));
}
// The same from a tile stored [k][n] (B = tile), transposed by ldmatrix.
__device__ __forceinline__ void ld_b(u32 (&b)[4], const E *tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + n0 + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(smem_u32(p)));
}
// c += a b for a 16 x 8 x 16 tile.
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.MMA_T.MMA_T.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.MMA_Tx2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The A fragment of columns 16 kc .. 16 kc + 15 of a 16-row accumulator
// (the layouts agree: no shuffles).
template <int NT>
__device__ __forceinline__ void acc_to_a(u32 (&a)[4], const float (&c)[NT][4], int kc) {
  a[0] = pack2(c[2 * kc][0], c[2 * kc][1]);
  a[1] = pack2(c[2 * kc][2], c[2 * kc][3]);
  a[2] = pack2(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = pack2(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}
// acc (16 x 8 NT) += A (16 x 16 KC, rows r0.. of a row-major tile) B, with B
// stored [n][k] (KN false: ld_bt) or [k][n] (KN true: ld_b).
template <int KC, int NT, bool KN>
__device__ __forceinline__ void mma_tiles(float (&acc)[NT][4], const E *a_tile, int r0,
                                          const E *b_tile) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[4];
    ld_a(a, a_tile, r0, kc * 16);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      u32 b[4];
      if (KN)
        ld_b(b, b_tile, kc * 16, np * 16);
      else
        ld_bt(b, b_tile, np * 16, kc * 16);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}
// acc (16 x 8 NT) += P (a 16 x 16 KC accumulator in registers) B, with B
// stored [k][n] in a tile.
template <int KC, int NT>
__device__ __forceinline__ void mma_regs(float (&acc)[NT][4], const float (&p)[2 * KC][4],
                                         const E *b_tile) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[4];
    acc_to_a(a, p, kc);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      u32 b[4];
      ld_b(b, b_tile, kc * 16, np * 16);
      mma(acc[2 * np], a, b[0], b[1]);
      mma(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}
// Stores half r (row g + 8 r of 16) of a warp's accumulator tile, times
// `scale`, as pairs of E at out[n * 8 + c2] (this thread's columns).
template <int NT>
__device__ __forceinline__ void store_row(E *out, const float (&c)[NT][4], int r,
                                          int c2, float scale) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
    *reinterpret_cast<u32 *>(out + n * 8 + c2) =
        pack2(c[n][2 * r] * scale, c[n][2 * r + 1] * scale);
}
template <int NT>
__device__ __forceinline__ void zero(float (&c)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
    c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.f;
}
// Rows r0.. r0 + ROWS - 1 (those < T; zeros past T) of one head's slice of a
// [B, T, stride] tensor (`src` at the batch and the head's first column)
// into a tile, by the whole block.
template <int ROWS>
__device__ __forceinline__ void load_tile(E *tile, const E *src, i64 stride, int r0) {
  for (int c = threadIdx.x; c < ROWS * (HD / 8); c += blockDim.x) {
    const int r = c / (HD / 8), k = c % (HD / 8) * 8;
    const bool ok = r0 + r < T;
    cp_async16(tile + r * LDS + k, src + (i64)(ok ? r0 + r : 0) * stride + k, ok);
  }
}
// The key-tile pipeline of the query-tile kernels (two buffers each of K
// and V): starts loading tile j + 1 into the other buffer, if there is one,
// and waits until tile j is in shared memory, for the whole block.
__device__ __forceinline__ void next_kv_tile(E *sk, E *sv, const E *base, int j, int nk) {
  if (j + 1 < nk) {
    const int next = (j + 1) & 1;
    load_tile<BK>(sk + next * BK * LDS, base + D, ROW, (j + 1) * BK);
    load_tile<BK>(sv + next * BK * LDS, base + 2 * D, ROW, (j + 1) * BK);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}
)CU";

/// The forward pass: a block of 4 warps takes BQ = 64 queries of one
/// (batch, head), a warp 16 of them.
const char *kForwardBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sk = sq + BQ * LDS, *sv = sk + 2 * BK * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // The longest causal tiles first.
  const int bh = blockIdx.x % (B * H), q0 = (QT - 1 - blockIdx.x / (B * H)) * BQ;
  const int b = bh / H, h = bh % H, r0 = warp * 16;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const int nk = ((CAUSAL ? min(T, q0 + BQ) : T) + BK - 1) / BK;
  load_tile<BQ>(sq, base, ROW, q0);
  load_tile<BK>(sk, base + D, ROW, 0);
  load_tile<BK>(sv, base + 2 * D, ROW, 0);
  cp_async_commit();
  float o[HD / 8][4], m[2] = {-GTC_INF, -GTC_INF}, l[2] = {0.f, 0.f};
  zero(o);
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * BK * LDS, *vs = sv + (j & 1) * BK * LDS;
    next_kv_tile(sk, sv, base, j, nk);
    float s[BK / 8][4];
    zero(s);
    mma_tiles<HD / 16, BK / 8, false>(s, sq, r0, ks);
    const int k0 = j * BK;
    const bool edge = k0 + BK > T || (CAUSAL && k0 + BK - 1 > q0 + r0);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = q0 + r0 + g + 8 * r;
      float mx = -GTC_INF;
#pragma unroll
      for (int n = 0; n < BK / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + n * 8 + c2 + e;
          float v = s[n][2 * r + e] * SCALE2;
          if (edge && (key >= T || (CAUSAL && key > q)))
            v = -GTC_INF;
          s[n][2 * r + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[r], mx), base2 = mn == -GTC_INF ? 0.f : mn;
      const float alpha = exp2f(m[r] - base2);
      m[r] = mn;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BK / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(s[n][2 * r + e] - base2);
          s[n][2 * r + e] = p;
          sum += p;
        }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
    }
    mma_regs<BK / 16, HD / 8>(o, s, vs);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int q = q0 + r0 + g + 8 * r;
    const float inv = 1.f / l[r];
    if (q < T) {
      store_row(y + ((i64)b * T + q) * D + h * HD, o, r, c2, inv);
      if ((lane & 3) == 0)  // natural log, as the CPU's
        lse[((i64)b * H + h) * T + q] = (m[r] + log2f(l[r])) * LN2;
    }
  }
)CU";

/// dq: a block of 4 warps takes BQ = 64 queries, streams key tiles.
const char *kDqBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sg = sq + BQ * LDS;
  E *sk = sg + BQ * LDS, *sv = sk + 2 * BK * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  const int bh = blockIdx.x % (B * H), q0 = (QT - 1 - blockIdx.x / (B * H)) * BQ;
  const int b = bh / H, h = bh % H, r0 = warp * 16;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const int nk = ((CAUSAL ? min(T, q0 + BQ) : T) + BK - 1) / BK;
  load_tile<BQ>(sq, base, ROW, q0);
  load_tile<BQ>(sg, dy + (i64)b * T * D + h * HD, D, q0);
  load_tile<BK>(sk, base + D, ROW, 0);
  load_tile<BK>(sv, base + 2 * D, ROW, 0);
  cp_async_commit();
  // delta = dy . y for the warp's 16 rows: two lanes a row, half of it
  // each; stored for dkdv, and spread to the lanes that hold the row.
  float lse2[2], delta[2];
  {
    const int q = q0 + r0 + lane / 2, c0 = (lane & 1) * (HD / 2);
    float d = 0.f;
    if (q < T) {  // 16-byte loads: 8 elements of each
      const uint4 *gr = reinterpret_cast<const uint4 *>(dy + ((i64)b * T + q) * D + h * HD + c0);
      const uint4 *yr = reinterpret_cast<const uint4 *>(y + ((i64)b * T + q) * D + h * HD + c0);
#pragma unroll
      for (int c = 0; c < HD / 16; ++c) {
        const uint4 gv = gr[c], yv = yr[c];
        const E *ge = reinterpret_cast<const E *>(&gv), *ye = reinterpret_cast<const E *>(&yv);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          d += (float)ge[e] * (float)ye[e];
      }
    }
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (q < T && (lane & 1) == 0)
      deltas[((i64)b * H + h) * T + q] = d;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      delta[r] = __shfl_sync(0xffffffffu, d, 2 * (g + 8 * r));
      const int qr = min(q0 + r0 + g + 8 * r, T - 1);
      lse2[r] = lse[((i64)b * H + h) * T + qr] * LOG2E;  // base 2
    }
  }
  float dq[HD / 8][4];
  zero(dq);
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * BK * LDS, *vs = sv + (j & 1) * BK * LDS;
    next_kv_tile(sk, sv, base, j, nk);
    float s[BK / 8][4], dp[BK / 8][4];
    zero(s);
    zero(dp);
    mma_tiles<HD / 16, BK / 8, false>(s, sq, r0, ks);
    mma_tiles<HD / 16, BK / 8, false>(dp, sg, r0, vs);
    const int k0 = j * BK;
#pragma unroll
    for (int n = 0; n < BK / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, q = q0 + r0 + g + 8 * r, key = k0 + n * 8 + c2 + (e & 1);
        const bool ok = key < T && q < T && (!CAUSAL || key <= q);
        const float p = ok ? exp2f(s[n][e] * SCALE2 - lse2[r]) : 0.f;
        s[n][e] = p * (dp[n][e] - delta[r]);
      }
    mma_regs<BK / 16, HD / 8>(dq, s, ks);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = q0 + r0 + g + 8 * r;
    if (q >= T)
      continue;
    store_row(dqkv + ((i64)b * T + q) * ROW + h * HD, dq, r, c2, SCALE);
  }
)CU";

/// dk and dv: a block of 4 warps takes BKV = 64 keys, a warp 16 of them,
/// and streams query tiles of BQ2 (with their dy rows and statistics).
const char *kDkdvBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sk = reinterpret_cast<E *>(smem), *sv = sk + BKV * LDS;
  E *sq = sv + BKV * LDS, *sg = sq + 2 * BQ2 * LDS;
  float *sl = reinterpret_cast<float *>(sg + 2 * BQ2 * LDS), *sd = sl + 2 * BQ2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // Causal: the first key tiles see the most queries; they go first.
  const int bh = blockIdx.x % (B * H), k0 = blockIdx.x / (B * H) * BKV;
  const int b = bh / H, h = bh % H, r0 = warp * 16;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const E *gbase = dy + (i64)b * T * D + h * HD;
  const float *ls = lse + ((i64)b * H + h) * T, *ds = deltas + ((i64)b * H + h) * T;
  const int first = CAUSAL ? k0 / BQ2 * BQ2 : 0;
  const int nq = (T - first + BQ2 - 1) / BQ2;
  auto load_queries = [&](int j) {
    const int q = first + j * BQ2, s = j & 1;
    load_tile<BQ2>(sq + s * BQ2 * LDS, base, ROW, q);
    load_tile<BQ2>(sg + s * BQ2 * LDS, gbase, D, q);
    for (int i = threadIdx.x; i < BQ2; i += blockDim.x) {
      const bool ok = q + i < T;
      sl[s * BQ2 + i] = ok ? ls[q + i] * LOG2E : 0.f;  // base 2
      sd[s * BQ2 + i] = ok ? ds[q + i] : 0.f;
    }
  };
  load_tile<BKV>(sk, base + D, ROW, k0);
  load_tile<BKV>(sv, base + 2 * D, ROW, k0);
  load_queries(0);
  cp_async_commit();
  float dk[HD / 8][4], dv[HD / 8][4];
  zero(dk);
  zero(dv);
  for (int j = 0; j < nq; ++j) {
    const int q0 = first + j * BQ2, s0 = j & 1;
    const E *qs = sq + s0 * BQ2 * LDS, *gs = sg + s0 * BQ2 * LDS;
    if (j + 1 < nq) {
      load_queries(j + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // Transposed scores: rows are the warp's keys, columns the queries.
    float s[BQ2 / 8][4], dp[BQ2 / 8][4];
    zero(s);
    zero(dp);
    mma_tiles<HD / 16, BQ2 / 8, false>(s, sk, r0, qs);
    mma_tiles<HD / 16, BQ2 / 8, false>(dp, sv, r0, gs);
#pragma unroll
    for (int n = 0; n < BQ2 / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + r0 + g + 8 * (e >> 1), i = n * 8 + c2 + (e & 1), q = q0 + i;
        const bool ok = q < T && (!CAUSAL || key <= q);
        const float p = ok ? exp2f(s[n][e] * SCALE2 - sl[s0 * BQ2 + i]) : 0.f;
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - sd[s0 * BQ2 + i]);
      }
    mma_regs<BQ2 / 16, HD / 8>(dv, s, gs);
    mma_regs<BQ2 / 16, HD / 8>(dk, dp, qs);
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = k0 + r0 + g + 8 * r;
    if (key >= T)
      continue;
    E *out = dqkv + ((i64)b * T + key) * ROW + h * HD;
    store_row(out + D, dk, r, c2, SCALE);
    store_row(out + 2 * D, dv, r, c2, 1.f);
  }
)CU";

constexpr int64_t kBQ = 64, kBK = 64;

} // namespace

bool Emitter::tensorCoreAttention(int64_t hd, std::initializer_list<int> ids) {
  DType t = plan.buffers[*ids.begin()].dtype;
  if ((t != DType::BF16 && t != DType::F16) || (hd != 64 && hd != 128))
    return false;
  for (int id : ids)
    if (plan.buffers[id].dtype != t)
      return false;
  return true;
}

std::string Emitter::flashConsts(int qkv, int64_t b, int64_t t, int64_t d,
                                 int64_t h, bool causal) {
  int64_t hd = d / h;
  bool bf16 = plan.buffers[qkv].dtype == DType::BF16;
  double scale = 1.0 / std::sqrt(double(hd));
  std::string helpers = kMmaHelpers;
  for (size_t at; (at = helpers.find("MMA_T")) != std::string::npos;)
    helpers.replace(at, 5, bf16 ? "bf16" : "f16");
  return "typedef " + std::string(bf16 ? "bf16_t" : "f16_t") +
         " E;\nconstexpr int B = " + str(b) + ", T = " + str(t) +
         ", D = " + str(d) + ", H = " + str(h) + ", HD = " + str(hd) +
         ";\nconstexpr i64 ROW = 3 * D;  // elements per position in qkv\n"
         "constexpr bool CAUSAL = " +
         (causal ? "true" : "false") + ";\nconstexpr float SCALE = " +
         flt(static_cast<float>(scale)) + ";  // 1 / sqrt(HD)\n" +
         "constexpr float SCALE2 = " +
         flt(static_cast<float>(scale / std::log(2.0))) +
         ";  // SCALE * log2(e): softmax in base 2\n"
         "constexpr float LOG2E = 1.44269504f, LN2 = 0.693147181f;\n"
         "constexpr int LDS = HD + 8;  // tile row stride: conflict-free "
         "ldmatrix\nconstexpr int BQ = " +
         str(kBQ) + ", BK = " + str(kBK) +
         ", QT = (T + BQ - 1) / BQ;  // query and key tile rows\n" + helpers;
}

/// The forward pass on tensor cores (see the file comment).
bool Emitter::flashAttention(int64_t b, int64_t t, int64_t d, int64_t h,
                             bool causal) {
  int qkv = k->inputs[0], y = k->outputs[0], lse = k->outputs[1];
  int64_t hd = d / h, lds = hd + 8, qt = ceilDiv(t, kBQ);
  std::string body = kForwardBody;
  launch("", "tensor cores (mma.sync), one block of 4 warps per 64 queries of "
             "one (batch, head): " + str(b * h * qt) +
                 " tiles, online softmax over key tiles of 64; the rows' "
                 "log-sum-exp to lse",
         {in(qkv, "qkv"), out(y, "y"), out(lse, "lse")}, 0,
         flashConsts(qkv, b, t, d, h, causal), body, b * h * qt, 128);
  launches.back().shared = (kBQ + 4 * kBK) * lds * 2;
  launches.back().tensorCores = true;
  return true;
}

/// The gradient on tensor cores in two launches (see the file comment).
bool Emitter::flashAttentionGrad(int64_t b, int64_t t, int64_t d, int64_t h,
                                 bool causal) {
  int dy = k->inputs[0], qkv = k->inputs[1], y = k->inputs[2],
      lse = k->inputs[3], dq = k->outputs[0];
  int64_t hd = d / h, lds = hd + 8, qt = ceilDiv(t, kBQ);
  needWorkspace(4 * b * h * t);
  std::string consts = flashConsts(qkv, b, t, d, h, causal);
  launch("dq",
         "tensor cores: one block per 64 queries of one (batch, head); "
         "delta = dy.y to the workspace, dq = scale * sum over keys of ds k",
         {in(dy, "dy"), in(qkv, "qkv"), in(y, "y"), in(lse, "lse"),
          ws("float", "deltas"), out(dq, "dqkv")},
         0, consts, kDqBody, b * h * qt, 128);
  launches.back().shared = (2 * kBQ + 4 * kBK) * lds * 2;
  launches.back().tensorCores = true;
  // A 128-wide head keeps dk and dv (128 registers a thread) with query
  // tiles of 32.
  int64_t bq2 = hd == 128 ? 32 : 64, kvt = ceilDiv(t, kBQ);
  launch("dkdv",
         "tensor cores: one block per 64 keys of one (batch, head), query "
         "tiles of " + str(bq2) + "; dk, dv = sums over queries",
         {in(dy, "dy"), in(qkv, "qkv"), in(lse, "lse"),
          wsIn("float", "deltas"), out(dq, "dqkv")},
         0,
         consts + "constexpr int BKV = 64, BQ2 = " + str(bq2) +
             ";  // keys per block, queries per tile\n",
         kDkdvBody, b * h * kvt, 128);
  launches.back().shared = (2 * 64 + 4 * bq2) * lds * 2 + 4 * 4 * bq2;
  launches.back().tensorCores = true;
  return true;
}
