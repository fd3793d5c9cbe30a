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
// 2^x in one MUFU instruction (denormal results flush to zero).
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
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
// A warp's MW row atoms: acc[i] holds rows r0 + 16 i .. r0 + 16 i + 15 of
// its tile. One k step of 16: acc (MW x 16 x 8 NT) += a (the atoms' A
// fragments) B, with B stored [n][k] (KN false: ld_bt) or [k][n] (KN true:
// ld_b); each B fragment serves all MW atoms.
template <int MW, int NT, bool KN>
__device__ __forceinline__ void mma_kstep(float (&acc)[MW][NT][4], const u32 (&a)[MW][4],
                                          const E *b_tile, int k0) {
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    u32 b[4];
    if (KN)
      ld_b(b, b_tile, k0, np * 16);
    else
      ld_bt(b, b_tile, np * 16, k0);
#pragma unroll
    for (int i = 0; i < MW; ++i) {
      mma(acc[i][2 * np], a[i], b[0], b[1]);
      mma(acc[i][2 * np + 1], a[i], b[2], b[3]);
    }
  }
}
// The A fragments of a warp's MW atoms (rows r0.., all 16 KC columns) of a
// row-major tile, to keep in registers.
template <int MW, int KC>
__device__ __forceinline__ void ld_frags(u32 (&a)[KC][MW][4], const E *tile, int r0) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int i = 0; i < MW; ++i)
      ld_a(a[kc][i], tile, r0 + 16 * i, kc * 16);
}
// acc += A B with A's fragments in registers (ld_frags), B a [n][k] tile.
template <int MW, int KC, int NT>
__device__ __forceinline__ void mma_frags(float (&acc)[MW][NT][4], const u32 (&a)[KC][MW][4],
                                          const E *b_tile) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
    mma_kstep<MW, NT, false>(acc, a[kc], b_tile, kc * 16);
}
// acc += A B with A the rows r0.. of a row-major tile, B a [n][k] tile.
template <int MW, int KC, int NT>
__device__ __forceinline__ void mma_tiles(float (&acc)[MW][NT][4], const E *a_tile, int r0,
                                          const E *b_tile) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[MW][4];
#pragma unroll
    for (int i = 0; i < MW; ++i)
      ld_a(a[i], a_tile, r0 + 16 * i, kc * 16);
    mma_kstep<MW, NT, false>(acc, a, b_tile, kc * 16);
  }
}
// acc (MW x 16 x 8 NT) += P (MW x 16 x 16 KC accumulators in registers) B,
// with B stored [k][n] in a tile.
template <int MW, int KC, int NT>
__device__ __forceinline__ void mma_regs(float (&acc)[MW][NT][4], const float (&p)[MW][2 * KC][4],
                                         const E *b_tile) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    u32 a[MW][4];
#pragma unroll
    for (int i = 0; i < MW; ++i)
      acc_to_a(a[i], p[i], kc);
    mma_kstep<MW, NT, true>(acc, a, b_tile, kc * 16);
  }
}
// Stores half r (row g + 8 r of 16) of an accumulator atom, times `scale`,
// as pairs of E at out[n * 8 + c2] (this thread's columns).
template <int NT>
__device__ __forceinline__ void store_row(E *out, const float (&c)[NT][4], int r,
                                          int c2, float scale) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
    *reinterpret_cast<u32 *>(out + n * 8 + c2) =
        pack2(c[n][2 * r] * scale, c[n][2 * r + 1] * scale);
}
// f(i, n, e, row, col) for each element e of this thread's share of a
// warp's MW x NT accumulator tiles: row (of the warp's 16 MW) and column
// (of 8 NT) in the PTX ISA's m16n8 layout.
template <int MW, int NT, typename F>
__device__ __forceinline__ void for_each_acc(F f) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        f(i, n, e, 16 * i + g + 8 * (e >> 1), n * 8 + c2 + (e & 1));
}
template <int MW, int NT>
__device__ __forceinline__ void zero(float (&c)[MW][NT][4]) {
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int n = 0; n < NT; ++n)
      c[i][n][0] = c[i][n][1] = c[i][n][2] = c[i][n][3] = 0.f;
}
// Rows r0.. r0 + N - 1 (those < T; zeros past T) of one head's slice of a
// [B, T, stride] tensor (`src` at the batch and the head's first column)
// into a tile, by the whole block.
template <int N>
__device__ __forceinline__ void load_tile(E *tile, const E *src, i64 stride, int r0) {
  for (int c = threadIdx.x; c < N * (HD / 8); c += blockDim.x) {
    const int r = c / (HD / 8), k = c % (HD / 8) * 8;
    const bool ok = r0 + r < T;
    cp_async<16>(tile + r * LDS + k, src + (i64)(ok ? r0 + r : 0) * stride + k, ok);
  }
}
// The key-tile pipeline of the query-tile kernels (two buffers each of K
// and V, N keys a tile): starts loading tile j + 1 into the other
// buffer, if there is one, and waits until tile j is in shared memory, for
// the whole block.
template <int N>
__device__ __forceinline__ void next_kv_tile(E *sk, E *sv, const E *base, int j, int nk) {
  if (j + 1 < nk) {
    const int next = (j + 1) & 1;
    load_tile<N>(sk + next * N * LDS, base + D, ROW, (j + 1) * N);
    load_tile<N>(sv + next * N * LDS, base + 2 * D, ROW, (j + 1) * N);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}
)CU";

/// The forward pass: a block of 4 warps takes ROWS queries of one (batch,
/// head), a warp MW atoms of 16 rows with their Q fragments in registers;
/// key tiles of STEP stream through shared memory.
const char *kForwardBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sk = sq + ROWS * LDS, *sv = sk + 2 * STEP * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // The longest causal tiles first.
  const int bh = blockIdx.x % (B * H), q0 = (NB - 1 - blockIdx.x / (B * H)) * ROWS;
  const int b = bh / H, h = bh % H, r0 = warp * 16 * MW;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const int nk = ((CAUSAL ? min(T, q0 + ROWS) : T) + STEP - 1) / STEP;
  load_tile<ROWS>(sq, base, ROW, q0);
  cp_async_commit();
  load_tile<STEP>(sk, base + D, ROW, 0);
  load_tile<STEP>(sv, base + 2 * D, ROW, 0);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  u32 qa[HD / 16][MW][4];
  ld_frags<MW, HD / 16>(qa, sq, r0);
  // Softmax state of the warp's rows g + 8 r of atom i: running max (base
  // 2, scaled) and sum.
  float o[MW][HD / 8][4], rmax[MW][2], rsum[MW][2];
  zero(o);
#pragma unroll
  for (int i = 0; i < MW; ++i)
    rmax[i][0] = rmax[i][1] = -GTC_INF, rsum[i][0] = rsum[i][1] = 0.f;
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * STEP * LDS, *vs = sv + (j & 1) * STEP * LDS;
    next_kv_tile<STEP>(sk, sv, base, j, nk);
    const int k0 = j * STEP;
    // Causal: a tile wholly after the warp's last query adds nothing.
    if (!CAUSAL || k0 <= q0 + r0 + 16 * MW - 1) {
      float s[MW][STEP / 8][4];
      zero(s);
      mma_frags<MW, HD / 16, STEP / 8>(s, qa, ks);
      // Masks only on the tiles that need them (warp-uniform).
      if (k0 + STEP > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int q = q0 + r0 + row, key = k0 + col;
          if (key >= T || (CAUSAL && key > q))
            s[i][n][e] = -GTC_INF;
        });
      // Online softmax in base 2 on unscaled scores (SCALE2 > 0 keeps the
      // max): p = 2^(s SCALE2 - max) in one FFMA and one MUFU op.
#pragma unroll
      for (int i = 0; i < MW; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -GTC_INF;
#pragma unroll
          for (int n = 0; n < STEP / 8; ++n)
            mx = fmaxf(mx, fmaxf(s[i][n][2 * r], s[i][n][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mn = fmaxf(rmax[i][r], mx * SCALE2), base2 = mn == -GTC_INF ? 0.f : mn;
          const float alpha = ex2(rmax[i][r] - base2);
          rmax[i][r] = mn;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < STEP / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float p = ex2(fmaf(s[i][n][2 * r + e], SCALE2, -base2));
              s[i][n][2 * r + e] = p;
              sum += p;
            }
          rsum[i][r] = rsum[i][r] * alpha + sum;
#pragma unroll
          for (int n = 0; n < HD / 8; ++n) {
            o[i][n][2 * r] *= alpha;
            o[i][n][2 * r + 1] *= alpha;
          }
        }
      mma_regs<MW, STEP / 16, HD / 8>(o, s, vs);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = rsum[i][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int q = q0 + r0 + 16 * i + g + 8 * r;
      if (q < T) {
        store_row(y + ((i64)b * T + q) * D + h * HD, o[i], r, c2, 1.f / l);
        if ((lane & 3) == 0)  // natural log, as the CPU's
          lse[((i64)b * H + h) * T + q] = (rmax[i][r] + log2f(l)) * LN2;
      }
    }
)CU";

/// dq: a block of 4 warps takes ROWS queries (a warp MW atoms, their Q and
/// dy fragments in registers) and streams key tiles of STEP.
const char *kDqBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sg = sq + ROWS * LDS;
  E *sk = sg + ROWS * LDS, *sv = sk + 2 * STEP * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  const int bh = blockIdx.x % (B * H), q0 = (NB - 1 - blockIdx.x / (B * H)) * ROWS;
  const int b = bh / H, h = bh % H, r0 = warp * 16 * MW;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const int nk = ((CAUSAL ? min(T, q0 + ROWS) : T) + STEP - 1) / STEP;
  load_tile<ROWS>(sq, base, ROW, q0);
  load_tile<ROWS>(sg, dy + (i64)b * T * D + h * HD, D, q0);
  cp_async_commit();
  load_tile<STEP>(sk, base + D, ROW, 0);
  load_tile<STEP>(sv, base + 2 * D, ROW, 0);
  cp_async_commit();
  // delta = dy . y for the warp's 16 MW rows, LPR lanes a row: stored for
  // dkdv, and spread to the lanes that hold the row's accumulators.
  constexpr int LPR = 2 / MW;
  float lse2[MW][2], delta[MW][2];
  {
    const int q = q0 + r0 + lane / LPR, c0 = (lane % LPR) * (HD / LPR);
    float d = 0.f;
    if (q < T) {  // 16-byte loads: 8 elements of each
      const uint4 *gr = reinterpret_cast<const uint4 *>(dy + ((i64)b * T + q) * D + h * HD + c0);
      const uint4 *yr = reinterpret_cast<const uint4 *>(y + ((i64)b * T + q) * D + h * HD + c0);
#pragma unroll
      for (int c = 0; c < HD / LPR / 8; ++c) {
        const uint4 gv = gr[c], yv = yr[c];
        const E *ge = reinterpret_cast<const E *>(&gv), *ye = reinterpret_cast<const E *>(&yv);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          d += (float)ge[e] * (float)ye[e];
      }
    }
    if (LPR == 2)
      d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (q < T && lane % LPR == 0)
      deltas[((i64)b * H + h) * T + q] = d;
#pragma unroll
    for (int i = 0; i < MW; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = 16 * i + g + 8 * r;
        delta[i][r] = __shfl_sync(0xffffffffu, d, row * LPR);
        lse2[i][r] = lse[((i64)b * H + h) * T + min(q0 + r0 + row, T - 1)] * LOG2E;  // base 2
      }
  }
  cp_async_wait<1>();
  __syncthreads();
  u32 qa[HD / 16][MW][4], ga[HD / 16][MW][4];
  ld_frags<MW, HD / 16>(qa, sq, r0);
  ld_frags<MW, HD / 16>(ga, sg, r0);
  float dq[MW][HD / 8][4];
  zero(dq);
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * STEP * LDS, *vs = sv + (j & 1) * STEP * LDS;
    next_kv_tile<STEP>(sk, sv, base, j, nk);
    const int k0 = j * STEP;
    if (!CAUSAL || k0 <= q0 + r0 + 16 * MW - 1) {
      float s[MW][STEP / 8][4], dp[MW][STEP / 8][4];
      zero(s);
      zero(dp);
      mma_frags<MW, HD / 16, STEP / 8>(s, qa, ks);
      mma_frags<MW, HD / 16, STEP / 8>(dp, ga, vs);
      for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int, int) {
        const float p = ex2(fmaf(s[i][n][e], SCALE2, -lse2[i][e >> 1]));
        s[i][n][e] = p * (dp[i][n][e] - delta[i][e >> 1]);
      });
      // Masks only on the tiles that need them (warp-uniform): keys past T
      // (zero rows of K, but p may overflow there), queries past T, the
      // causal diagonal.
      if (k0 + STEP > T || q0 + r0 + 16 * MW > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int q = q0 + r0 + row, key = k0 + col;
          if (key >= T || q >= T || (CAUSAL && key > q))
            s[i][n][e] = 0.f;
        });
      mma_regs<MW, STEP / 16, HD / 8>(dq, s, ks);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = q0 + r0 + 16 * i + g + 8 * r;
      if (q < T)
        store_row(dqkv + ((i64)b * T + q) * ROW + h * HD, dq[i], r, c2, SCALE);
    }
)CU";

/// dk and dv: a block of 4 warps takes ROWS keys, a warp MW atoms of 16,
/// and streams query tiles of STEP (with their dy rows and
/// statistics).
const char *kDkdvBody = R"CU(  extern __shared__ __align__(16) unsigned char smem[];
  E *sk = reinterpret_cast<E *>(smem), *sv = sk + ROWS * LDS;
  E *sq = sv + ROWS * LDS, *sg = sq + 2 * STEP * LDS;
  float *sl = reinterpret_cast<float *>(sg + 2 * STEP * LDS), *sd = sl + 2 * STEP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // Causal: the first key tiles see the most queries; they go first.
  const int bh = blockIdx.x % (B * H), k0 = blockIdx.x / (B * H) * ROWS;
  const int b = bh / H, h = bh % H, r0 = warp * 16 * MW;
  const E *base = qkv + (i64)b * T * ROW + h * HD;
  const E *gbase = dy + (i64)b * T * D + h * HD;
  const float *ls = lse + ((i64)b * H + h) * T, *ds = deltas + ((i64)b * H + h) * T;
  const int first = CAUSAL ? k0 / STEP * STEP : 0;
  const int nq = (T - first + STEP - 1) / STEP;
  auto load_queries = [&](int j) {
    const int q = first + j * STEP, s = j & 1;
    load_tile<STEP>(sq + s * STEP * LDS, base, ROW, q);
    load_tile<STEP>(sg + s * STEP * LDS, gbase, D, q);
    for (int i = threadIdx.x; i < STEP; i += blockDim.x) {  // zeros past T
      const bool ok = q + i < T;
      cp_async<4>(sl + s * STEP + i, ls + (ok ? q + i : 0), ok);
      cp_async<4>(sd + s * STEP + i, ds + (ok ? q + i : 0), ok);
    }
  };
  load_tile<ROWS>(sk, base + D, ROW, k0);
  load_tile<ROWS>(sv, base + 2 * D, ROW, k0);
  load_queries(0);
  cp_async_commit();
  float dk[MW][HD / 8][4], dv[MW][HD / 8][4];
  zero(dk);
  zero(dv);
  for (int j = 0; j < nq; ++j) {
    const int q0 = first + j * STEP, s0 = j & 1;
    const E *qs = sq + s0 * STEP * LDS, *gs = sg + s0 * STEP * LDS;
    if (j + 1 < nq) {
      load_queries(j + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // Causal: a query tile wholly before the warp's first key adds nothing.
    if (!CAUSAL || q0 + STEP - 1 >= k0 + r0) {
      // Transposed scores: rows are the warp's keys, columns the queries.
      float s[MW][STEP / 8][4], dp[MW][STEP / 8][4];
      zero(s);
      zero(dp);
      mma_tiles<MW, HD / 16, STEP / 8>(s, sk, r0, qs);
      mma_tiles<MW, HD / 16, STEP / 8>(dp, sv, r0, gs);
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = n * 8 + c2 + e;
          const float l2 = sl[s0 * STEP + c] * LOG2E, dl = sd[s0 * STEP + c];  // base 2
#pragma unroll
          for (int i = 0; i < MW; ++i)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const float p = ex2(fmaf(s[i][n][2 * r + e], SCALE2, -l2));
              s[i][n][2 * r + e] = p;
              dp[i][n][2 * r + e] = p * (dp[i][n][2 * r + e] - dl);
            }
        }
      // Masks only on the tiles that need them (warp-uniform): queries past
      // T, the causal diagonal. Keys past T only touch their own rows of
      // dk and dv, which are not stored.
      if (q0 + STEP > T || (CAUSAL && k0 + r0 + 16 * MW - 1 > q0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int key = k0 + r0 + row, q = q0 + col;
          if (q >= T || (CAUSAL && key > q))
            s[i][n][e] = dp[i][n][e] = 0.f;
        });
      mma_regs<MW, STEP / 16, HD / 8>(dv, s, gs);
      mma_regs<MW, STEP / 16, HD / 8>(dk, dp, qs);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = k0 + r0 + 16 * i + g + 8 * r;
      if (key >= T)
        continue;
      E *out = dqkv + ((i64)b * T + key) * ROW + h * HD;
      store_row(out + D, dk[i], r, c2, SCALE);
      store_row(out + 2 * D, dv[i], r, c2, 1.f);
    }
)CU";

/// A flash kernel's tiles: its block of 4 warps owns ROWS = 64 MW rows
/// (queries in the forward and dq, keys in dkdv), a warp MW atoms of 16, and
/// streams tiles of STEP rows of the other side through shared memory.
/// Two atoms a warp (heads of 64) let each B fragment loaded from shared
/// memory serve two MMAs; heads of 128 take one, their accumulators being
/// twice as wide. dq keeps Q, dy and dq in registers, so its key tiles are
/// short; dkdv keeps dk and dv.
struct FlashTiles {
  int64_t mw, step;
  int64_t rows() const { return 64 * mw; }
  std::string consts() const {
    return "constexpr int MW = " + str(mw) + ", ROWS = 64 * MW, STEP = " +
           str(step) +
           ";  // 16-row atoms a warp, rows a block, streamed tile rows\n"
           "constexpr int NB = (T + ROWS - 1) / ROWS;  // blocks a head\n";
  }
};
enum class FlashKernel { Forward, Dq, Dkdv };
FlashTiles flashTiles(FlashKernel kernel, int64_t hd) {
  int64_t mw = hd == 64 ? 2 : 1;
  switch (kernel) {
  case FlashKernel::Forward:
    return {mw, 64};
  case FlashKernel::Dq:
    return {mw, 32};
  case FlashKernel::Dkdv:
    return {mw, 32};
  }
  return {1, 32};
}

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
         "ldmatrix\n" + helpers;
}

/// The forward pass on tensor cores (see the file comment).
bool Emitter::flashAttention(int64_t b, int64_t t, int64_t d, int64_t h,
                             bool causal) {
  int qkv = k->inputs[0], y = k->outputs[0], lse = k->outputs[1];
  int64_t hd = d / h, lds = hd + 8;
  FlashTiles f = flashTiles(FlashKernel::Forward, hd);
  int64_t blocks = b * h * ceilDiv(t, f.rows());
  launch("", "tensor cores (mma.sync), one block of 4 warps per " +
                 str(f.rows()) + " queries of one (batch, head): " +
                 str(blocks) + " tiles, online softmax over key tiles of " +
                 str(f.step) + "; the rows' log-sum-exp to lse",
         {in(qkv, "qkv"), out(y, "y"), out(lse, "lse")}, kAsyncHelpers,
         flashConsts(qkv, b, t, d, h, causal) + f.consts(), kForwardBody,
         blocks, 128);
  launches.back().shared = (f.rows() + 4 * f.step) * lds * 2;
  launches.back().tensorCores = true;
  return true;
}

/// The gradient on tensor cores in two launches (see the file comment).
bool Emitter::flashAttentionGrad(int64_t b, int64_t t, int64_t d, int64_t h,
                                 bool causal) {
  int dy = k->inputs[0], qkv = k->inputs[1], y = k->inputs[2],
      lse = k->inputs[3], dq = k->outputs[0];
  int64_t hd = d / h, lds = hd + 8;
  needWorkspace(4 * b * h * t);
  std::string consts = flashConsts(qkv, b, t, d, h, causal);
  FlashTiles fq = flashTiles(FlashKernel::Dq, hd);
  launch("dq",
         "tensor cores: one block per " + str(fq.rows()) +
             " queries of one (batch, head), key tiles of " + str(fq.step) +
             "; delta = dy.y to the workspace, dq = scale * sum over keys of "
             "ds k",
         {in(dy, "dy"), in(qkv, "qkv"), in(y, "y"), in(lse, "lse"),
          ws("float", "deltas"), out(dq, "dqkv")},
         kAsyncHelpers, consts + fq.consts(), kDqBody, b * h * ceilDiv(t, fq.rows()), 128);
  launches.back().shared = (2 * fq.rows() + 4 * fq.step) * lds * 2;
  launches.back().tensorCores = true;
  FlashTiles fk = flashTiles(FlashKernel::Dkdv, hd);
  launch("dkdv",
         "tensor cores: one block per " + str(fk.rows()) +
             " keys of one (batch, head), query tiles of " + str(fk.step) +
             "; dk, dv = sums over queries",
         {in(dy, "dy"), in(qkv, "qkv"), in(lse, "lse"),
          wsIn("float", "deltas"), out(dq, "dqkv")},
         kAsyncHelpers, consts + fk.consts(), kDkdvBody, b * h * ceilDiv(t, fk.rows()),
         128);
  launches.back().shared = (2 * fk.rows() + 4 * fk.step) * lds * 2 + 4 * 4 * fk.step;
  launches.back().tensorCores = true;
  return true;
}
