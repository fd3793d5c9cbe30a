//===- gemm_wgmma.cuh - gtc's Hopper GEMM with fused epilogues --*- CUDA -*-===//
//
// Helpers (after async.cuh, cluster.cuh's mbarriers and wgmma.cuh, sm_90a)
// of Emitter::hopperGemm (GemmKernels.cpp), for the epilogues where
// cuBLASLt's cost more than gtc's (test/bench/gemm_hopper.cu, their
// experiment; test/bench/NOTES.md, forty-fifth to forty-eighth sessions):
//  - gemm_gelu_aux_bias: C [M, N] = gelu(A B^T + bias), storing the
//    pre-activation in aux (a GELU linear's forward);
//  - gemm_dgelu_sums: C [M, N] = (A B) * gelu'(aux), and each 128-row
//    tile's column sums of the stored C in part (a GELU linear's input
//    gradient and, reduced over the tiles in order by another launch, its
//    bias gradient, which cuBLASLt's BGRADB would compute from C again in
//    the weight gradient's GEMM).
// Constants: M, N, K (multiples of BM, BN and BK), STAGES, GROUP (the
// tiles' order: tile_origin) and BMN: B is [K, N] (MN-major) rather than
// [N, K] (K-major). A is [M, K], K-major. A, B, aux and C are read or
// written through TMA tensor maps (CudaLaunch::maps): A in boxes of 128
// rows x BK columns, B of 128 rows x BK (K-major) or BK rows x 64 columns
// (MN-major), aux and C of 128 rows x 64 columns.
//
// Persistent and warp-specialized, CUTLASS's "pingpong" schedule: one
// block an SM; warpgroup 0 (40 registers) has one thread copy the A and B
// tiles of the block's tiles, in order, into STAGES stages of shared
// memory, each stage's mbarrier counting its bytes; warpgroups 1 and 2
// (232 registers) take alternate 128 x 128 tiles, each multiplying its
// tile on wgmma m64n128k16 and releasing a stage when its MMAs are done. A
// warpgroup issues its tile's MMAs only after the other has issued all of
// its own (the `order` barriers), so one's epilogue runs while the other's
// MMAs do. GELU and its gradient are the tanh approximation on the
// hardware's tanh (tanh.approx.f32, relative error about 2^-11, below
// bf16's 2^-9), as cuBLASLt's epilogues are approximations of their own.
//
// gemm_gelu_aux_bias's epilogue works from registers: the lanes of a quad
// trade values so that each holds 8 adjacent columns, and it loads the bias
// and stores the output and aux 16 bytes at a time. gemm_dgelu_sums's
// producer also copies each tile's saved inputs into one of two 32 KB
// buffers (one a consumer warpgroup) during the tile's MMAs; the epilogue
// reads them there in the accumulators' own layout, writes the results over
// them (stmatrix), stores the tile by TMA and sums its columns from the
// buffer meanwhile (thread c of the warpgroup column c, rows in order).
//===----------------------------------------------------------------------===//
constexpr int BM = 128, BN = 128, BK = 64;
constexpr int A_BYTES = BM * BK * 2, STAGE_BYTES = A_BYTES + BN * BK * 2;
constexpr int NT = N / BN, TILES = M / BM * NT, KT = K / BK;
constexpr int TILE_BYTES = 128 * 128 * 2;  // a saved-input / result tile

// Tile t's first row m0 and column n0. GROUP 0: row by row. GROUP G > 0:
// by groups of G tile rows, down each column of a group first (CUTLASS's
// raster along M with a swizzle of G), so the tiles in flight at once read
// G rows of A and a band of B's columns rather than all of B (at GPT-2
// 1558M's c_fc, 50 tiles a row and B 20 MB, gemm_hopper.cu's kernels took
// 4-7% less time by groups of 8: test/bench/NOTES.md, forty-eighth session).
__device__ __forceinline__ void tile_origin(int t, int &m0, int &n0) {
  if (GROUP <= 0) {
    m0 = t / NT * BM, n0 = t % NT * BN;
    return;
  }
  constexpr int MT = M / BM;
  const int g = t / (GROUP * NT), first = g * GROUP, w = t - g * GROUP * NT;
  const int rows = min(GROUP, MT - first);
  m0 = (first + w % rows) * BM, n0 = w / rows * BN;
}

// A CUtensorMap (no CUDA headers under NVRTC).
struct __align__(64) gtc_tensor_map { unsigned long long opaque[16]; };

// The box at (column c0, row c1) of `map` into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load(u32 dst, const gtc_tensor_map *map, int c0, int c1, u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// Shared memory at `src` to the box at (column c0, row c1) of `map`.
__device__ __forceinline__ void tma_store(const gtc_tensor_map *map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               :: "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(src) : "memory");
}

__device__ __forceinline__ float tanh_fast(float x) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));
  return t;
}
__device__ __forceinline__ float gelu_tanh_fast(float z) {
  const float t = tanh_fast(0.7978845608f * (z + 0.044715f * z * z * z));
  return 0.5f * z * (1.f + t);
}
// d/dz of gelu_tanh_fast's function.
__device__ __forceinline__ float gelu_tanh_grad_fast(float z) {
  const float t = tanh_fast(0.7978845608f * (z + 0.044715f * z * z * z));
  return 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * z * z);
}
// Two floats as bf16 (round to nearest even), lo in the low half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float bf16_lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(u32 w) { return __uint_as_float(w & 0xFFFF0000u); }

// The barriers: each stage's `full` (the producer's arrival and its bytes)
// and `empty` (the warpgroup that used it), the two `order` barriers and,
// given auxFull, each saved-input buffer's `auxFull` (the producer's copy)
// and `auxEmpty` (its warpgroup's TMA store has read it).
__device__ __forceinline__ void gemm_barriers(unsigned long long *full, unsigned long long *empty,
                                              unsigned long long *order, unsigned long long *auxFull,
                                              unsigned long long *auxEmpty) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), 1);
    }
    for (int b = 0; b < 2; ++b) {
      mbar_init(smem_u32(&order[b]), 1);
      if (auxFull) {
        mbar_init(smem_u32(&auxFull[b]), 1);
        mbar_init(smem_u32(&auxEmpty[b]), 1);
      }
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// Warpgroup 0, the producer: its thread 0 copies the block's tiles, KT
// stages each, into the ring at `base`; given taux, after a tile's stages
// its 128 x 128 saved inputs into buffer i % 2 at auxBase (two slabs of 64
// columns), once the epilogue of the block's tile i - 2 is done with it.
__device__ __forceinline__ void gemm_produce(const gtc_tensor_map *ta, const gtc_tensor_map *tb, u32 base,
                                             unsigned long long *full, unsigned long long *empty,
                                             const gtc_tensor_map *taux = nullptr, u32 auxBase = 0,
                                             unsigned long long *auxFull = nullptr,
                                             unsigned long long *auxEmpty = nullptr) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
  if (threadIdx.x != 0)
    return;
  long long pos = 0;
  int i = 0;
  for (int t = blockIdx.x; t < TILES; t += gridDim.x, ++i) {
    int m0, n0;
    tile_origin(t, m0, n0);
    for (int kt = 0; kt < KT; ++kt, ++pos) {
      const int stage = (int)(pos % STAGES);
      mbar_wait(smem_u32(&empty[stage]), ((u32)(pos / STAGES) & 1) ^ 1);
      const u32 bar = smem_u32(&full[stage]), sa = base + stage * STAGE_BYTES;
      mbar_expect_tx(bar, STAGE_BYTES);
      tma_load(sa, ta, kt * BK, m0, bar);
      if (BMN) {  // BK rows of two 64-column slabs, 64 * 128 bytes apart
        tma_load(sa + A_BYTES, tb, n0, kt * BK, bar);
        tma_load(sa + A_BYTES + 64 * 128, tb, n0 + 64, kt * BK, bar);
      } else {
        tma_load(sa + A_BYTES, tb, kt * BK, n0, bar);
      }
    }
    if (taux) {
      const int buf = i & 1;
      mbar_wait(smem_u32(&auxEmpty[buf]), ((u32)(i >> 1) & 1) ^ 1);
      const u32 bar = smem_u32(&auxFull[buf]), dst = auxBase + buf * TILE_BYTES;
      mbar_expect_tx(bar, TILE_BYTES);
      tma_load(dst, taux, n0, m0, bar);
      tma_load(dst + TILE_BYTES / 2, taux, n0 + 64, m0, bar);
    }
  }
}

// A consumer warpgroup's tile: its KT stages from ring position pos into
// d0 (rows 0-63) and d1 (64-127), each stage released when its MMAs are
// done; once all are issued, the leader lets the other warpgroup (`next`)
// issue its own.
__device__ __forceinline__ void gemm_mma_tile(float (&d0)[16][4], float (&d1)[16][4], u32 base,
                                              unsigned long long *full, unsigned long long *empty,
                                              unsigned long long *next, long long pos, bool leader) {
  int prev = -1;
  for (int kt = 0; kt < KT; ++kt, ++pos) {
    const int stage = (int)(pos % STAGES);
    mbar_wait(smem_u32(&full[stage]), (u32)(pos / STAGES) & 1);
    const u32 sa = base + stage * STAGE_BYTES, sb = sa + A_BYTES;
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      const unsigned long long db = BMN ? wg_mnmajor<64>(sb, ks) : wg_kmajor<BN>(sb, 0, ks);
      wg_ss<BMN ? 1 : 0>(d0, wg_kmajor<BM>(sa, 0, ks), db, kt > 0 || ks > 0);
      wg_ss<BMN ? 1 : 0>(d1, wg_kmajor<BM>(sa, 64, ks), db, kt > 0 || ks > 0);
    }
    wg_commit();
    wg_wait<1>();  // the last stage's MMAs are done: release it
    if (prev >= 0 && leader)
      mbar_arrive(smem_u32(&empty[prev]));
    prev = stage;
  }
  if (leader)
    mbar_arrive(smem_u32(next));
  wg_wait<0>();
  if (leader)
    mbar_arrive(smem_u32(&empty[prev]));
}

// The epilogue of a warpgroup's accumulators d (64 rows from row0, 16
// groups of 8 columns from col0): a lane holds rows g and g + 8 of its
// warp's 16, columns 8 j + 2 q, + 1 (q = lane % 4). For each 4 groups the
// lanes of a quad trade float2s (a 4 x 4 transpose, two rounds of
// shuffles) so that lane q holds the 8 columns of group 4 jj + q; then
// z = product + bias to aux and gelu(z) to c, 16 bytes each.
__device__ __forceinline__ void gelu_aux_bias_epilogue(float (&d)[16][4], bf16_t *c, bf16_t *aux,
                                                       const bf16_t *bias, int row0, int col0) {
  const int lane = threadIdx.x & 31, q = lane & 3, warp = (threadIdx.x >> 5) & 3;
  const int row = row0 + warp * 16 + (lane >> 2);
#pragma unroll
  for (int jj = 0; jj < 4; ++jj)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float2 e[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) e[k] = make_float2(d[4 * jj + k][2 * h], d[4 * jj + k][2 * h + 1]);
#pragma unroll
      for (int s = 1; s <= 2; s <<= 1)
#pragma unroll
        for (int k0 = 0; k0 < 4; ++k0) {
          if (k0 & s) continue;
          const int k1 = k0 | s;
          const bool hi = q & s;
          const float2 send = hi ? e[k0] : e[k1];
          float2 recv;
          recv.x = __shfl_xor_sync(0xffffffffu, send.x, s);
          recv.y = __shfl_xor_sync(0xffffffffu, send.y, s);
          if (hi) e[k0] = recv; else e[k1] = recv;
        }
      const int col = col0 + (4 * jj + q) * 8;
      const i64 o = (i64)(row + 8 * h) * N + col;
      const uint4 b = *reinterpret_cast<const uint4 *>(bias + col);
      const u32 bw[4] = {b.x, b.y, b.z, b.w};
      u32 zw[4], yw[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        zw[k] = pack_bf16x2(e[k].x + bf16_lo(bw[k]), e[k].y + bf16_hi(bw[k]));
        yw[k] = pack_bf16x2(gelu_tanh_fast(bf16_lo(zw[k])), gelu_tanh_fast(bf16_hi(zw[k])));
      }
      *reinterpret_cast<uint4 *>(aux + o) = make_uint4(zw[0], zw[1], zw[2], zw[3]);
      *reinterpret_cast<uint4 *>(c + o) = make_uint4(yw[0], yw[1], yw[2], yw[3]);
    }
}

// gemm_gelu_aux_bias (see the header); `smem` the dynamic shared memory.
__device__ __forceinline__ void gemm_gelu_aux_bias(const gtc_tensor_map *ta, const gtc_tensor_map *tb,
                                                   bf16_t *c, bf16_t *aux, const bf16_t *bias,
                                                   unsigned char *smem) {
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES], order[2];
  const u32 base = (smem_u32(smem) + 1023) & ~1023u;
  const int wg = threadIdx.x >> 7;
  gemm_barriers(full, empty, order, nullptr, nullptr);
  if (wg == 0) {
    gemm_produce(ta, tb, base, full, empty);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  u32 turns = 0;
  int i = w;  // the tile's index among the block's tiles
  for (int t = blockIdx.x + w * gridDim.x; t < TILES; t += 2 * gridDim.x, i += 2) {
    int m0, n0;
    tile_origin(t, m0, n0);
    // Warpgroup 1's first wait passes (a new barrier's phase "1" is done).
    mbar_wait(smem_u32(&order[w]), (turns++ & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    gemm_mma_tile(d0, d1, base, full, empty, &order[1 - w], (long long)i * KT, leader);
    gelu_aux_bias_epilogue(d0, c, aux, bias, m0, n0);
    gelu_aux_bias_epilogue(d1, c, aux, bias, m0 + 64, n0);
  }
}

// The shared address of element (row r, column c) of a 128 x 128 tile in
// two swizzled slabs of 64 columns (as TMA writes and reads them).
__device__ __forceinline__ u32 tile_at(u32 tile, int r, int c) {
  return tile + (c >> 6) * (TILE_BYTES / 2) + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4) + (c & 7) * 2;
}
// Rows tileRow .. + 63 of the tile at `tile` (the saved inputs) become
// d * gelu'(saved input) in bf16: each thread reads its elements in the
// accumulators' layout (conflict-free in the swizzle) and writes the
// results over them with stmatrix (four 8 x 8 matrices a call).
__device__ __forceinline__ void dgelu_in_place(float (&d)[16][4], u32 tile, int tileRow) {
  const int lane = threadIdx.x & 31, q = lane & 3, warp = (threadIdx.x >> 5) & 3;
  const int r0 = tileRow + warp * 16 + (lane >> 2);
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    u32 r[4];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * jj + t;
        u32 a;
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(a) : "r"(tile_at(tile, r0 + 8 * h, 8 * j + 2 * q)));
        r[2 * t + h] = pack_bf16x2(d[j][2 * h] * gelu_tanh_grad_fast(bf16_lo(a)),
                                   d[j][2 * h + 1] * gelu_tanh_grad_fast(bf16_hi(a)));
      }
    // Matrix m = 2 t + h: lane l gives the address of its row l % 8.
    const int m = lane >> 3, t = m >> 1, h = m & 1;
    const u32 dst = tile_at(tile, tileRow + warp * 16 + (lane & 7) + 8 * h, 8 * (2 * jj + t));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  }
}

// gemm_dgelu_sums (see the header): part[m0 / 128 * N + n0 + c] the sum of
// column n0 + c of the stored tile at rows m0 .. m0 + 127, in the stored
// bf16 values' order of rows (the layout of Emitter::columnSumTiles' chunks
// of 128 rows, which columnSumsFinal adds in order).
__device__ __forceinline__ void gemm_dgelu_sums(const gtc_tensor_map *ta, const gtc_tensor_map *tb,
                                                const gtc_tensor_map *taux, const gtc_tensor_map *tc,
                                                double *part, unsigned char *smem) {
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES], order[2], auxFull[2], auxEmpty[2];
  const u32 base = (smem_u32(smem) + 1023) & ~1023u, auxBase = base + STAGES * STAGE_BYTES;
  const int wg = threadIdx.x >> 7;
  gemm_barriers(full, empty, order, auxFull, auxEmpty);
  if (wg == 0) {
    gemm_produce(ta, tb, base, full, empty, taux, auxBase, auxFull, auxEmpty);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  u32 turns = 0;
  int i = w;
  for (int t = blockIdx.x + w * gridDim.x; t < TILES; t += 2 * gridDim.x, i += 2, ++turns) {
    int m0, n0;
    tile_origin(t, m0, n0);
    mbar_wait(smem_u32(&order[w]), (turns & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    gemm_mma_tile(d0, d1, base, full, empty, &order[1 - w], (long long)i * KT, leader);
    // This warpgroup's buffer (w) holds the tile's saved inputs at its turn.
    mbar_wait(smem_u32(&auxFull[w]), turns & 1);
    const u32 at = auxBase + w * TILE_BYTES;
    dgelu_in_place(d0, at, 0);
    dgelu_in_place(d1, at, 64);
    // The generic proxy's writes, visible to the TMA store; the
    // warpgroup's 128 threads done (named barrier 1 + w).
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");
    if (leader) {
      tma_store(tc, at, n0, m0);
      tma_store(tc, at + TILE_BYTES / 2, n0 + 64, m0);
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
    const int c = threadIdx.x & 127;
    float sum = 0.f;
#pragma unroll 8
    for (int r = 0; r < 128; ++r) {
      unsigned short v;
      asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(tile_at(at, r, c)));
      sum += __uint_as_float((u32)v << 16);
    }
    part[(i64)(m0 / BM) * N + n0 + c] = (double)sum;
    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");  // every sum has read the tile
    if (leader) {
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      mbar_arrive(smem_u32(&auxEmpty[w]));
    }
  }
  if (leader)  // the last stores complete before the kernel does
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
