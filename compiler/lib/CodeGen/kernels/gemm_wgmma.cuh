//===- gemm_wgmma.cuh - gtc's Hopper GEMM with a GELU epilogue --*- CUDA -*-===//
//
// Helpers (after async.cuh, cluster.cuh's mbarriers and wgmma.cuh, sm_90a)
// of Emitter::hopperGemm (GemmKernels.cpp): gemm_gelu_aux_bias, C [M, N] =
// gelu(A B^T + bias) storing the pre-activation in aux, where cuBLASLt's
// GELU_AUX_BIAS epilogue is slower than the GEMM (test/bench/gemm_hopper.cu, its
// experiment; test/bench/NOTES.md, forty-fifth session). Constants: M, N, K
// (multiples of BM, BN and BK). A is [M, K] and B [N, K], both K-major and
// read through TMA tensor maps (CudaLaunch::maps) in boxes of BK columns.
//
// Persistent and warp-specialized, CUTLASS's "pingpong" schedule: one
// block an SM; warpgroup 0 (40 registers) has one thread copy the A and B
// tiles of the block's tiles, in order, into STAGES stages of shared
// memory, each stage's mbarrier counting its bytes; warpgroups 1 and 2
// (232 registers) take alternate 128 x 128 tiles, each multiplying its
// tile on wgmma m64n128k16 and releasing a stage when its MMAs are done. A
// warpgroup issues its tile's MMAs only after the other has issued all of
// its own (the `order` barriers), so one's epilogue runs while the other's
// MMAs do. The epilogue works from registers: the lanes of a quad trade
// values so that each holds 8 adjacent columns, and it loads the bias and
// stores the output and aux 16 bytes at a time. GELU is the tanh
// approximation on the hardware's tanh (tanh.approx.f32, relative error
// about 2^-11), as cuBLASLt's epilogue is an approximation of its own.
//===----------------------------------------------------------------------===//
constexpr int BM = 128, BN = 128, BK = 64, STAGES = 6;
constexpr int A_BYTES = BM * BK * 2, STAGE_BYTES = A_BYTES + BN * BK * 2;
constexpr int NT = N / BN, TILES = M / BM * NT, KT = K / BK;
// What the kernel's dynamic shared memory holds: the stages, 1024-aligned.
constexpr int GEMM_SHARED = STAGES * STAGE_BYTES + 1024;

// A CUtensorMap (no CUDA headers under NVRTC).
struct __align__(64) gtc_tensor_map { unsigned long long opaque[16]; };

// The box at (column c0, row c1) of `map` into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load(u32 dst, const gtc_tensor_map *map, int c0, int c1, u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

__device__ __forceinline__ float gelu_tanh_fast(float z) {
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(0.7978845608f * (z + 0.044715f * z * z * z)));
  return 0.5f * z * (1.f + t);
}
// Two floats as bf16 (round to nearest even), lo in the low half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float bf16_lo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(u32 w) { return __uint_as_float(w & 0xFFFF0000u); }

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

// The whole kernel (see the header); `smem` the dynamic shared memory.
__device__ __forceinline__ void gemm_gelu_aux_bias(const gtc_tensor_map *ta, const gtc_tensor_map *tb,
                                                   bf16_t *c, bf16_t *aux, const bf16_t *bias,
                                                   unsigned char *smem) {
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES], order[2];
  const u32 base = (smem_u32(smem) + 1023) & ~1023u;
  const int wg = threadIdx.x >> 7;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full[s]), 1);   // the producer's arrival and its bytes
      mbar_init(smem_u32(&empty[s]), 1);  // the warpgroup that used it
    }
    mbar_init(smem_u32(&order[0]), 1);
    mbar_init(smem_u32(&order[1]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x != 0)
      return;
    long long pos = 0;
    for (int t = blockIdx.x; t < TILES; t += gridDim.x) {
      const int m0 = t / NT * BM, n0 = t % NT * BN;
      for (int kt = 0; kt < KT; ++kt, ++pos) {
        const int stage = (int)(pos % STAGES);
        mbar_wait(smem_u32(&empty[stage]), ((u32)(pos / STAGES) & 1) ^ 1);
        const u32 bar = smem_u32(&full[stage]), sa = base + stage * STAGE_BYTES;
        mbar_expect_tx(bar, STAGE_BYTES);
        tma_load(sa, ta, kt * BK, m0, bar);
        tma_load(sa + A_BYTES, tb, kt * BK, n0, bar);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  u32 turns = 0;
  int i = w;  // the tile's index among the block's tiles
  for (int t = blockIdx.x + w * gridDim.x; t < TILES; t += 2 * gridDim.x, i += 2) {
    const int m0 = t / NT * BM, n0 = t % NT * BN;
    // Warpgroup 1's first wait passes (a new barrier's phase "1" is done).
    mbar_wait(smem_u32(&order[w]), (turns++ & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    long long pos = (long long)i * KT;
    int prev = -1;
    for (int kt = 0; kt < KT; ++kt, ++pos) {
      const int stage = (int)(pos % STAGES);
      mbar_wait(smem_u32(&full[stage]), (u32)(pos / STAGES) & 1);
      const u32 sa = base + stage * STAGE_BYTES, sb = sa + A_BYTES;
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks) {
        const unsigned long long db = wg_kmajor<BN>(sb, 0, ks);
        wg_ss<0>(d0, wg_kmajor<BM>(sa, 0, ks), db, kt > 0 || ks > 0);
        wg_ss<0>(d1, wg_kmajor<BM>(sa, 64, ks), db, kt > 0 || ks > 0);
      }
      wg_commit();
      wg_wait<1>();  // the last stage's MMAs are done: release it
      if (prev >= 0 && leader)
        mbar_arrive(smem_u32(&empty[prev]));
      prev = stage;
    }
    if (leader)  // the other warpgroup may issue its MMAs
      mbar_arrive(smem_u32(&order[1 - w]));
    wg_wait<0>();
    if (leader)
      mbar_arrive(smem_u32(&empty[prev]));
    gelu_aux_bias_epilogue(d0, c, aux, bias, m0, n0);
    gelu_aux_bias_epilogue(d1, c, aux, bias, m0 + 64, n0);
  }
}
