//===- gemm_hopper.cu - A Hopper GEMM with fused epilogues (experiment) ---===//
//
// An experiment of issue 37's route "epilogues that keep GEMMs at
// plain-GEMM speed": cuBLASLt's GELU-gradient GEMM runs as an older xmma
// kernel at 182 us where a plain GEMM of its shape takes 123 (GPT-2 124M,
// H100, test/bench/NOTES.md forty-fourth session), its GELU_AUX_BIAS
// forward at 170. This program times a GEMM of gtc's own against cuBLASLt
// at GPT-2's MLP shapes, checks its outputs against cuBLASLt's, and prints
// both. Its pingpong kernel with the GELU_AUX_BIAS epilogue is in gtc
// (compiler/lib/CodeGen/kernels/gemm_wgmma.cuh); test/bench/NOTES.md,
// forty-fifth session, has the measurements.
//
// The kernel: persistent (one block an SM), warp-specialized: warpgroup 0
// (40 registers) has one thread issue TMA copies of A and B tiles into
// STAGES stages of shared memory, each stage's mbarrier counting the
// bytes; warpgroups 1 and 2 (232 registers) each multiply 64 rows of the
// block's 128 x 256 tile on wgmma m64n256k16 (operands from shared memory
// in the 128-byte swizzle, the descriptors of flash_wgmma.cuh) and release
// a stage when its MMAs are done; then the epilogue from registers: plain,
// the GELU gradient by a saved bf16 input (DGELU), or bias + GELU saving
// its input (GELU_AUX_BIAS). A is K-major [M, K]; B either K-major [N, K]
// (nn.Linear's forward, "TN") or MN-major [K, N] (the input gradient
// dY W, "NN"). Its epilogue does not overlap the next tile's MMAs (the
// producer does prefetch its stages). A second kernel, gemm_pingpong, has
// the two consumer warpgroups take alternate 128 x 128 tiles (CUTLASS's
// "pingpong"), so that one's epilogue runs during the other's MMAs; a
// third, gemm_pingpong_smem_aux, has the producer copy each tile's saved
// DGELU inputs into shared memory during the tile's MMAs, and a fourth,
// gemm_pingpong_tma_epi, also writes the results there in the
// accumulators' layout (stmatrix), stores them by TMA and may sum each
// tile's columns (in gtc as gemm_wgmma.cuh's gemm_dgelu_sums), as
// gemm_pingpong_tma_gelu does for GELU_AUX_BIAS. The cases: plain,
// GELU_AUX_BIAS and BIAS with B K-major, plain and DGELU with B MN-major.
// Each prints the kernels' times and differences from cuBLASLt's output,
// then cuBLASLt's times with that epilogue and plain (test/bench/NOTES.md,
// forty-fifth, forty-sixth and forty-eighth sessions, has the figures).
//
// On a GPU machine:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a gemm_hopper.cu \
//        -lcublasLt -lcuda -o gemm_hopper
// (here -arch=sm_90a handed ptxas PTX for sm_90, which rejects wgmma.)
// Built so on this machine, ptxas reports 168 registers, nothing spilled.
//   ./gemm_hopper [M N K]     (default 16384 3072 768; exit status 1 when
//                              an output is not within 2e-2 of cuBLASLt's;
//                              GEMM_KERNEL=coop or ping runs only that one;
//                              GEMM_GROUP=G takes tiles by groups of G rows;
//                              GEMM_ENERGY=1 adds each kernel's energy)
// tools/dev.sh gpu-bundle builds it, test/gpu/run.sh BUNDLE gemm runs it.
//===----------------------------------------------------------------------===//
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <dlfcn.h>
#include <vector>

typedef unsigned u32;
typedef unsigned long long u64;
typedef unsigned short bf16_t;  // bf16 bits

#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
enum Epi { PLAIN = 0, DGELU = 1, GELU_AUX_BIAS = 2, BIAS = 3 };

__device__ __forceinline__ float bf2f(bf16_t b) { return __uint_as_float((u32)b << 16); }
__device__ __forceinline__ bf16_t f2bf(float f) {  // round to nearest even
  u32 u = __float_as_uint(f);
  return (bf16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ u32 smem_u32(const void *p) { return (u32)__cvta_generic_to_shared(p); }

// wgmma descriptors (as flash_wgmma.cuh): the 128-byte swizzle, SBO 1024.
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 lbo) {
  return (u64)(((addr & 0x3FFFF) >> 4) | (lbo >> 4) << 16) |
         ((u64)(1024 >> 4) | 1ull << 30) << 32;
}
// K-major: k step ks of rows `row` .. of an R-row tile (one 64-column slab).
template <int R> __device__ __forceinline__ u64 wg_kmajor(u32 tile, int row, int ks) {
  return wg_desc(tile + row * 128 + ks * 32, 0);
}
// MN-major: k step ks (16 rows) of a tile of 64 k-rows, slabs of 64 columns
// 64 * 128 bytes apart.
__device__ __forceinline__ u64 wg_mnmajor64(u32 tile, int ks) {
  return wg_desc(tile + ks * 2048, 64 * 128);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// d (64 x 256) = (accumulate ? d : 0) + A B for one k step of 16, both
// from shared memory by descriptor; TB: B is MN-major.
template <int TB>
__device__ __forceinline__ void wg_ss256(float (&d)[32][4], u64 da, u64 db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]), "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]), "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
               : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}
// The same for 64 x 128.
template <int TB>
__device__ __forceinline__ void wg_ss128(float (&d)[16][4], u64 da, u64 db, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
               : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}
// mbarriers, as cluster.cuh's: that file defines them only where
// __CUDA_ARCH__ >= 900, so nvcc's host pass over this program's kernels
// would not see them (tried: "identifier mbar_init is undefined").
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
// A TMA copy of box (c0, c1) of `map` into shared memory, counted on `bar`.
__device__ __forceinline__ void tma_load(u32 dst, const CUtensorMap *map, int c0, int c1, u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// The same copy multicast to the CTAs of `mask` in this cluster (the same
// shared offsets and barrier in each).
__device__ __forceinline__ void tma_load_mc(u32 dst, const CUtensorMap *map, int c0, int c1, u32 bar,
                                            unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;\n"
               :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}
// Arrival on barrier `bar` (a shared offset) of CTA `cta` of this cluster.
__device__ __forceinline__ void mbar_arrive_cta(u32 bar, u32 cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" :: "r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of the cluster that has not exited meets here.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The epilogues' GELU on the hardware's tanh (tanh.approx.f32, relative
// error about 2^-11, below bf16's 2^-9): libm's tanhf, some twenty
// instructions, made the GELU epilogues compute-bound.
__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float gelu_tanh(float z) {
  const float t = tanh_fast(0.7978845608f * (z + 0.044715f * z * z * z));
  return 0.5f * z * (1.f + t);
}
__device__ __forceinline__ float gelu_tanh_grad(float z) {
  const float t = tanh_fast(0.7978845608f * (z + 0.044715f * z * z * z));
  return 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * z * z);
}
// Two floats to bf16 (round to nearest even), lo in the low half.
__device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Eight adjacent outputs (row, col .. col + 7) through the epilogue (`a`:
// their saved inputs for DGELU): a 16-byte load of the bias and a 16-byte
// store.
template <int EPI>
__device__ __forceinline__ void store8(bf16_t *c, const uint4 a, bf16_t *aux_out, const bf16_t *bias,
                                       int N, int row, int col, const float2 (&f)[4]) {
  const long long o = (long long)row * N + col;
  float v[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[2 * k] = f[k].x, v[2 * k + 1] = f[k].y;
  if (EPI == DGELU) {
    const u32 aw[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] *= gelu_tanh_grad(bf2f((bf16_t)(aw[k] & 0xFFFF)));
      v[2 * k + 1] *= gelu_tanh_grad(bf2f((bf16_t)(aw[k] >> 16)));
    }
  } else if (EPI == GELU_AUX_BIAS) {
    const uint4 b = *reinterpret_cast<const uint4 *>(bias + col);
    const u32 bw[4] = {b.x, b.y, b.z, b.w};
    u32 zw[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      zw[k] = pack_bf16(v[2 * k] + bf2f((bf16_t)(bw[k] & 0xFFFF)), v[2 * k + 1] + bf2f((bf16_t)(bw[k] >> 16)));
      v[2 * k] = gelu_tanh(bf2f((bf16_t)(zw[k] & 0xFFFF)));
      v[2 * k + 1] = gelu_tanh(bf2f((bf16_t)(zw[k] >> 16)));
    }
    *reinterpret_cast<uint4 *>(aux_out + o) = make_uint4(zw[0], zw[1], zw[2], zw[3]);
  } else if (EPI == BIAS) {
    const uint4 b = *reinterpret_cast<const uint4 *>(bias + col);
    const u32 bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] += bf2f((bf16_t)(bw[k] & 0xFFFF));
      v[2 * k + 1] += bf2f((bf16_t)(bw[k] >> 16));
    }
  }
  u32 w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = pack_bf16(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4 *>(c + o) = make_uint4(w[0], w[1], w[2], w[3]);
}

// DGELU: the warpgroup's threads prefetch the saved inputs of its R x C
// part of the tile (rows from row0, columns from col0) into L2 as its MMAs
// begin, so that the epilogue's loads, which every SM issues at about the
// same time, do not wait on DRAM.
template <int EPI, int R, int C>
__device__ __forceinline__ void prefetch_aux(const bf16_t *aux_in, int N, int row0, int col0) {
  if (EPI != DGELU) return;
  constexpr int LINES = C * 2 / 128;  // 128-byte lines a row
  const int t = threadIdx.x & 127;
#pragma unroll
  for (int i = t; i < R * LINES; i += 128)
    asm volatile("prefetch.global.L2 [%0];" :: "l"(aux_in + (long long)(row0 + i / LINES) * N + col0 + i % LINES * 64));
}

// The epilogue of a warpgroup's wgmma accumulators d (64 rows from row0, NJ
// groups of 8 columns from col0): a lane holds rows g and g + 8 of its
// warp's 16, columns 8 j + 2 q, + 1 (q = lane % 4). For each 4 groups the
// lanes of a quad trade values (a 4 x 4 transpose of float2s, two rounds
// of shuffles) so that lane q holds the 8 columns of group 4 jj + q, and a
// warp's store covers 64 contiguous bytes of each of its 8 rows.
// auxTile (DGELU, if not 0): the saved inputs of the 128 x 128 tile are in
// shared memory at that address, two swizzled slabs of 64 columns (a TMA
// copy, gemm_pingpong_smem_aux), rows from tileRow.
template <int EPI, int NJ>
__device__ __forceinline__ void epilogue(float (&d)[NJ][4], bf16_t *c, const bf16_t *aux_in, bf16_t *aux_out,
                                         const bf16_t *bias, int N, int row0, int col0, u32 auxTile = 0,
                                         int tileRow = 0) {
  const int lane = threadIdx.x & 31, q = lane & 3, warp = (threadIdx.x >> 5) & 3;
  const int row = row0 + warp * 16 + (lane >> 2);
  // DGELU's saved inputs from global memory, every load issued before the
  // first is needed (from shared memory, each where it is needed).
  uint4 ax[NJ / 4][2];
#pragma unroll
  for (int jj = 0; jj < NJ / 4; ++jj)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      ax[jj][h] = EPI == DGELU && !auxTile
                      ? *reinterpret_cast<const uint4 *>(aux_in + (long long)(row + 8 * h) * N + col0 +
                                                         (4 * jj + q) * 8)
                      : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int jj = 0; jj < NJ / 4; ++jj)
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
          float2 send = hi ? e[k0] : e[k1];
          float2 recv;
          recv.x = __shfl_xor_sync(0xffffffffu, send.x, s);
          recv.y = __shfl_xor_sync(0xffffffffu, send.y, s);
          if (hi) e[k0] = recv; else e[k1] = recv;
        }
      if (EPI == DGELU && auxTile) {
        const int rr = tileRow + warp * 16 + (lane >> 2) + 8 * h, g = 4 * jj + q;
        const u32 a = auxTile + (g >> 3) * (128 * 128) + rr * 128 + (((g & 7) ^ (rr & 7)) << 4);
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(ax[jj][h].x), "=r"(ax[jj][h].y), "=r"(ax[jj][h].z), "=r"(ax[jj][h].w) : "r"(a));
      }
      store8<EPI>(c, ax[jj][h], aux_out, bias, N, row + 8 * h, col0 + (4 * jj + q) * 8, e);
    }
}

// The order of the units (tiles, or a cluster's tiles) a block takes:
// GEMM_GROUP = 0 (the default) row by row, so at 1558M's 50 tiles a row a
// wave of 132 units spans 3 rows and all of B; G > 0 by groups of G rows,
// going down each column of the group first, so a wave spans G rows and
// 132 / G columns (CUTLASS's raster "along M" with a swizzle of G).
__constant__ int g_group;
__device__ __forceinline__ void unit_tile(int u, int units, int NT, int &ur, int &uc) {
  const int G = g_group;
  if (G <= 0) {
    ur = u / NT, uc = u % NT;
    return;
  }
  const int per = G * NT, g = u / per, first = g * G, w = u - g * per;
  const int rows = min(G, units / NT - first);
  ur = first + w % rows, uc = w / rows;
}

// Thread 0 makes S stages' barriers (full: the producer's arrival and its
// bytes; empty: `consumers` arrivals), the other `extra` ones (count 1) and,
// given auxFull, two pairs of saved-input buffer barriers (full: 1; empty:
// `auxReaders`).
template <int S>
__device__ __forceinline__ void init_barriers(u64 *full, u64 *empty, u32 consumers, u64 *extra, int nextra,
                                              u64 *auxFull = nullptr, u64 *auxEmpty = nullptr,
                                              u32 auxReaders = 0) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), consumers);
    }
    for (int i = 0; i < nextra; ++i)
      mbar_init(smem_u32(&extra[i]), 1);
    for (int b = 0; auxFull && b < 2; ++b) {  // a consumer warpgroup's saved-input buffer
      mbar_init(smem_u32(&auxFull[b]), 1);
      mbar_init(smem_u32(&auxEmpty[b]), auxReaders);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The producer warpgroup: 40 registers, and its thread 0 copies the block's
// tiles in order, KT stages each, into the ring of S stages at `base` (A's
// TM x BK, then B's TN x BK). The tiles: unit u of this cluster (from the
// cluster's index, by the number of clusters) is the CL tiles (TM rows each)
// of rows u / NT * CL .. and columns u % NT; CTA `rank` takes the rank-th.
// With CL = 2 each CTA loads half of the B tile that both use and
// multicasts it to both.
// taux (DGELU's saved inputs, CL = 1, TM = TN = 128): after a unit's
// stages, its 128 x 128 tile of them into buffer i % 2 at auxBase (two
// slabs of 64 columns), counted on auxFull, once the epilogue of unit i - 2
// has read that buffer (auxEmpty).
template <bool BMN, int TM, int TN, int S, int CL>
__device__ __forceinline__ void produce(const CUtensorMap *ta, const CUtensorMap *tb, u32 base, u64 *full,
                                        u64 *empty, int units, int NT, int KT,
                                        const CUtensorMap *taux = nullptr, u32 auxBase = 0,
                                        u64 *auxFull = nullptr, u64 *auxEmpty = nullptr) {
  constexpr int A_SIZE = TM * BK * 2, STAGE_SIZE = A_SIZE + TN * BK * 2;
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
  if (threadIdx.x != 0)
    return;
  const u32 rank = CL > 1 ? cluster_rank() : 0;
  long long pos = 0;
  int i = 0;
  for (int u = blockIdx.x / CL; u < units; u += gridDim.x / CL, ++i) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = (ur * CL + (int)rank) * TM, n0 = uc * TN;
    for (int kt = 0; kt < KT; ++kt, ++pos) {
      const int stage = (int)(pos % S);
      mbar_wait(smem_u32(&empty[stage]), ((u32)(pos / S) & 1) ^ 1);
      const u32 bar = smem_u32(&full[stage]), sa = base + stage * STAGE_SIZE, sb = sa + A_SIZE;
      mbar_expect_tx(bar, STAGE_SIZE);
      tma_load(sa, ta, kt * BK, m0, bar);
      if (BMN) {  // slabs of 64 columns, 64 * 128 bytes apart
        constexpr int SL = TN / 64 / CL;
#pragma unroll
        for (int s = rank * SL; s < (int)(rank + 1) * SL; ++s)
          if (CL > 1)
            tma_load_mc(sb + s * 64 * 128, tb, n0 + s * 64, kt * BK, bar, (1 << CL) - 1);
          else
            tma_load(sb + s * 64 * 128, tb, n0 + s * 64, kt * BK, bar);
      } else if (CL > 1) {  // rows of 128 bytes
        tma_load_mc(sb + rank * (TN / CL) * 128, tb, kt * BK, n0 + rank * (TN / CL), bar, (1 << CL) - 1);
      } else {
        tma_load(sb, tb, kt * BK, n0, bar);
      }
    }
    if (taux) {
      const int buf = i & 1;
      mbar_wait(smem_u32(&auxEmpty[buf]), ((u32)(i >> 1) & 1) ^ 1);
      const u32 bar = smem_u32(&auxFull[buf]), dst = auxBase + buf * (128 * 128 * 2);
      mbar_expect_tx(bar, 128 * 128 * 2);
      tma_load(dst, taux, n0, m0, bar);
      tma_load(dst + 128 * 128, taux, n0 + 64, m0, bar);
    }
  }
}

// A consumer warpgroup's leader frees `stage` of the ring: in each CTA of
// the cluster, since the stage's B half came from each.
template <int CL>
__device__ __forceinline__ void release_stage(u64 *empty, int stage) {
  if ((threadIdx.x & 127) != 0) return;
  if (CL > 1) {
#pragma unroll
    for (int r = 0; r < CL; ++r) mbar_arrive_cta(smem_u32(&empty[stage]), r);
  } else {
    mbar_arrive(smem_u32(&empty[stage]));
  }
}

// C [M, N] = A [M, K] B (+ epilogue); BMN: B is [K, N] (MN-major), else
// [N, K]. CL: the CTAs of a cluster (1 or 2, launched with that cluster
// dimension), which share each B tile (produce).
template <bool BMN, int EPI, int CL>
__global__ void __launch_bounds__(384, 1)
gemm(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
     bf16_t *__restrict__ c, const bf16_t *__restrict__ aux_in, bf16_t *__restrict__ aux_out,
     const bf16_t *__restrict__ bias, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
  const u32 base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const int wg = threadIdx.x >> 7;
  const int NT = N / BN, units = (M / BM / CL) * NT, KT = K / BK;
  // A stage is free when both consumer warpgroups of every CTA that it was
  // multicast to are done with it.
  init_barriers<STAGES>(full, empty, 2 * CL, nullptr, 0);
  if (CL > 1)
    cluster_sync();  // the peer's barriers exist before anything arrives on them
  if (wg == 0) {
    produce<BMN, BM, BN, STAGES, CL>(&ta, &tb, base, full, empty, units, NT, KT);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const u32 rank = CL > 1 ? cluster_rank() : 0;
  int stage = 0;
  u32 phase = 0;
  for (int u = blockIdx.x / CL; u < units; u += gridDim.x / CL) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = (ur * CL + (int)rank) * BM, n0 = uc * BN;
    prefetch_aux<EPI, 64, BN>(aux_in, N, m0 + w * 64, n0);
    float d[32][4];
    int prev = -1;
    for (int kt = 0; kt < KT; ++kt) {
      mbar_wait(smem_u32(&full[stage]), phase);
      const u32 sa = base + stage * STAGE_BYTES, sb = sa + A_BYTES;
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks)
        wg_ss256<BMN ? 1 : 0>(d, wg_kmajor<BM>(sa, w * 64, ks),
                              BMN ? wg_mnmajor64(sb, ks) : wg_kmajor<BN>(sb, 0, ks),
                              kt > 0 || ks > 0);
      wg_commit();
      wg_wait<1>();  // the last stage's MMAs are done: release it
      if (prev >= 0) release_stage<CL>(empty, prev);
      prev = stage;
      if (++stage == STAGES) stage = 0, phase ^= 1;
    }
    wg_wait<0>();
    release_stage<CL>(empty, prev);
    epilogue<EPI, 32>(d, c, aux_in, aux_out, bias, N, m0 + w * 64, n0);
  }
  if (CL > 1)
    cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
}

// The pingpong schedule (CUTLASS's KernelTmaWarpSpecializedPingpong): each
// consumer warpgroup takes whole 128 x 128 tiles, the two alternately
// (tiles i of the block: warpgroup 1 the even i, 2 the odd), from one ring
// of stages that the producer fills in tile order; a warpgroup issues its
// tile's MMAs only after the other has issued all of its own (the `order`
// barriers), so one's epilogue runs while the other's MMAs do.
constexpr int PBM = 128, PBN = 128, PSTAGES = 6;
constexpr int PA_BYTES = PBM * BK * 2, PB_BYTES = PBN * BK * 2, PSTAGE_BYTES = PA_BYTES + PB_BYTES;
// A consumer warpgroup's tile: its KT k-stages from the ring of S stages at
// `base` (the tile's first at ring position pos) into d0 (rows 0-63) and d1
// (64-127), each stage released when its MMAs are done; once all are
// issued, `next` (the leader's: the other warpgroup's order barrier) may
// issue its own.
template <bool BMN, int S, int CL>
__device__ __forceinline__ void mma_tile(float (&d0)[16][4], float (&d1)[16][4], u32 base, u64 *full, u64 *empty,
                                         u64 *next, long long pos, int KT) {
  int prev = -1;
  for (int kt = 0; kt < KT; ++kt, ++pos) {
    const int stage = (int)(pos % S);
    mbar_wait(smem_u32(&full[stage]), (u32)(pos / S) & 1);
    const u32 sa = base + stage * PSTAGE_BYTES, sb = sa + PA_BYTES;
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      const u64 db = BMN ? wg_mnmajor64(sb, ks) : wg_kmajor<PBN>(sb, 0, ks);
      wg_ss128<BMN ? 1 : 0>(d0, wg_kmajor<PBM>(sa, 0, ks), db, kt > 0 || ks > 0);
      wg_ss128<BMN ? 1 : 0>(d1, wg_kmajor<PBM>(sa, 64, ks), db, kt > 0 || ks > 0);
    }
    wg_commit();
    wg_wait<1>();  // the last stage's MMAs are done: release it
    if (prev >= 0) release_stage<CL>(empty, prev);
    prev = stage;
  }
  if (next)  // the other warpgroup may issue its MMAs
    mbar_arrive(smem_u32(next));
  wg_wait<0>();
  release_stage<CL>(empty, prev);
}
template <bool BMN, int EPI, int CL>
__global__ void __launch_bounds__(384, 1)
gemm_pingpong(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
              bf16_t *__restrict__ c, const bf16_t *__restrict__ aux_in, bf16_t *__restrict__ aux_out,
              const bf16_t *__restrict__ bias, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[PSTAGES], empty[PSTAGES], order[2];
  const u32 base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const int wg = threadIdx.x >> 7;
  const int NT = N / PBN, units = (M / PBM / CL) * NT, KT = K / BK;
  // A stage: the one warpgroup that used it, in each CTA it was multicast to.
  init_barriers<PSTAGES>(full, empty, CL, order, 2);
  if (CL > 1)
    cluster_sync();
  if (wg == 0) {
    produce<BMN, PBM, PBN, PSTAGES, CL>(&ta, &tb, base, full, empty, units, NT, KT);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  const u32 rank = CL > 1 ? cluster_rank() : 0;
  const int clusters = gridDim.x / CL;
  u32 turns = 0;
  int i = w;  // the unit's index among the CTA's units
  for (int u = blockIdx.x / CL + w * clusters; u < units; u += 2 * clusters, i += 2) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = (ur * CL + (int)rank) * PBM, n0 = uc * PBN;
    prefetch_aux<EPI, PBM, PBN>(aux_in, N, m0, n0);
    // Warpgroup 1's first wait passes (a new barrier's phase "1" is done).
    mbar_wait(smem_u32(&order[w]), (turns++ & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    mma_tile<BMN, PSTAGES, CL>(d0, d1, base, full, empty, leader ? &order[1 - w] : nullptr,
                                   (long long)i * KT, KT);
    epilogue<EPI, 16>(d0, c, aux_in, aux_out, bias, N, m0, n0);
    epilogue<EPI, 16>(d1, c, aux_in, aux_out, bias, N, m0 + 64, n0);
  }
  if (CL > 1)
    cluster_sync();
}

// The pingpong kernel for DGELU with the saved inputs in shared memory: the
// producer copies each tile's 128 x 128 of them by TMA (two buffers, one a
// warpgroup) while the tile's MMAs run, so the epilogue reads them from
// shared memory instead of waiting on global loads. 4 stages (128 KB) and
// the two 32 KB buffers.
constexpr int QSTAGES = 4, AUX_TILE = 128 * 128 * 2;
template <bool BMN>
__global__ void __launch_bounds__(384, 1)
gemm_pingpong_smem_aux(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                       const __grid_constant__ CUtensorMap taux, bf16_t *__restrict__ c, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[QSTAGES], empty[QSTAGES], order[2], auxFull[2], auxEmpty[2];
  const u32 base = (smem_u32(smem_raw) + 1023) & ~1023u, auxBase = base + QSTAGES * PSTAGE_BYTES;
  const int wg = threadIdx.x >> 7;
  const int NT = N / PBN, units = (M / PBM) * NT, KT = K / BK;
  // auxEmpty: every thread of the warpgroup has read the buffer.
  init_barriers<QSTAGES>(full, empty, 1, order, 2, auxFull, auxEmpty, 128);
  if (wg == 0) {
    produce<BMN, PBM, PBN, QSTAGES, 1>(&ta, &tb, base, full, empty, units, NT, KT, &taux, auxBase, auxFull,
                                        auxEmpty);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  u32 turns = 0;
  int i = w;
  for (int u = blockIdx.x + w * gridDim.x; u < units; u += 2 * gridDim.x, i += 2) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = ur * PBM, n0 = uc * PBN;
    mbar_wait(smem_u32(&order[w]), (turns & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    mma_tile<BMN, QSTAGES, 1>(d0, d1, base, full, empty, leader ? &order[1 - w] : nullptr,
                                   (long long)i * KT, KT);
    // This warpgroup's buffer (w) holds the tile's saved inputs at its turn.
    mbar_wait(smem_u32(&auxFull[w]), turns & 1);
    const u32 at = auxBase + w * AUX_TILE;
    epilogue<DGELU, 16>(d0, c, nullptr, nullptr, nullptr, N, m0, n0, at, 0);
    epilogue<DGELU, 16>(d1, c, nullptr, nullptr, nullptr, N, m0 + 64, n0, at, 64);
    mbar_arrive(smem_u32(&auxEmpty[w]));
    ++turns;
  }
}

// The same with the epilogue through shared memory, as CUTLASS's: each
// thread reads its saved inputs in the accumulators' own layout (rows g and
// g + 8 of its warp's 16, columns 8 j + 2 q, + 1; conflict-free in the
// 128-byte swizzle), multiplies, and writes the bf16 results over them
// with stmatrix (four 8 x 8 matrices a call, the mma fragment layout);
// then one thread stores the tile by TMA. No shuffles, no 16-byte global
// stores from registers; the producer reloads the buffer only after the
// store has read it.
__device__ __forceinline__ void tma_store(const CUtensorMap *map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               :: "l"((u64)map), "r"(c0), "r"(c1), "r"(src) : "memory");
}
// Shared address of element (row rr, column c) of a tile of two swizzled
// 64-column slabs of 128 rows.
__device__ __forceinline__ u32 tile_at(u32 tile, int rr, int c) {
  return tile + (c >> 6) * (128 * 128) + rr * 128 + ((((c >> 3) & 7) ^ (rr & 7)) << 4) + (c & 7) * 2;
}
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
        r[2 * t + h] = pack_bf16(d[j][2 * h] * gelu_tanh_grad(bf2f((bf16_t)(a & 0xFFFF))),
                                 d[j][2 * h + 1] * gelu_tanh_grad(bf2f((bf16_t)(a >> 16))));
      }
    // Matrix m = 2 t + h: lane l gives the address of its row l % 8.
    const int m = lane >> 3, t = m >> 1, h = m & 1;
    const u32 dst = tile_at(tile, tileRow + warp * 16 + (lane & 7) + 8 * h, 8 * (2 * jj + t));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
  }
}
// part (if not null): also each tile's column sums of the stored bf16
// results, part[m0 / 128][n0 + c] (f32; a fixed-order reduction over the
// row tiles gives the bias gradient), thread c of the warpgroup summing
// column c from shared memory while the TMA store reads the tile.
template <bool BMN>
__global__ void __launch_bounds__(384, 1)
gemm_pingpong_tma_epi(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                      const __grid_constant__ CUtensorMap taux, const __grid_constant__ CUtensorMap tc, int M,
                      int N, int K, float *__restrict__ part) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[QSTAGES], empty[QSTAGES], order[2], auxFull[2], auxEmpty[2];
  const u32 base = (smem_u32(smem_raw) + 1023) & ~1023u, auxBase = base + QSTAGES * PSTAGE_BYTES;
  const int wg = threadIdx.x >> 7;
  const int NT = N / PBN, units = (M / PBM) * NT, KT = K / BK;
  // auxEmpty: the warpgroup's TMA store has read the buffer.
  init_barriers<QSTAGES>(full, empty, 1, order, 2, auxFull, auxEmpty, 1);
  if (wg == 0) {
    produce<BMN, PBM, PBN, QSTAGES, 1>(&ta, &tb, base, full, empty, units, NT, KT, &taux, auxBase, auxFull,
                                        auxEmpty);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1;
  const bool leader = (threadIdx.x & 127) == 0;
  u32 turns = 0;
  int i = w;
  for (int u = blockIdx.x + w * gridDim.x; u < units; u += 2 * gridDim.x, i += 2) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = ur * PBM, n0 = uc * PBN;
    mbar_wait(smem_u32(&order[w]), (turns & 1) ^ (w == 0 ? 1u : 0u));
    float d0[16][4], d1[16][4];
    mma_tile<BMN, QSTAGES, 1>(d0, d1, base, full, empty, leader ? &order[1 - w] : nullptr,
                                   (long long)i * KT, KT);
    mbar_wait(smem_u32(&auxFull[w]), turns & 1);
    const u32 at = auxBase + w * AUX_TILE;
    dgelu_in_place(d0, at, 0);
    dgelu_in_place(d1, at, 64);
    // The generic proxy's writes, visible to the TMA store; the warpgroup's
    // 128 threads done (named barrier 1 + w).
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");
    if (leader) {
      tma_store(&tc, at, n0, m0);
      tma_store(&tc, at + 128 * 128, n0 + 64, m0);
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
    if (part) {
      const int c = threadIdx.x & 127;
      float sum = 0.f;
#pragma unroll 8
      for (int r = 0; r < 128; ++r) {
        unsigned short v;
        asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(tile_at(at, r, c)));
        sum += bf2f(v);
      }
      part[(long long)(m0 / PBM) * N + n0 + c] = sum;
      asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");  // every sum read the tile
    }
    if (leader) {
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      mbar_arrive(smem_u32(&auxEmpty[w]));
    }
    ++turns;
  }
  if (leader)  // the last stores complete before the kernel does
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// GELU_AUX_BIAS with the epilogue through shared memory: per 64-row half
// of the tile, z = product + bias (rounded to bf16, the saved input) and
// gelu(z) go by stmatrix into two 64 x 128 buffers of the warpgroup (two
// swizzled slabs of 64 rows each) and one thread stores both by TMA (boxes
// of 64 x 64); a half waits until the previous half's store has read the
// buffers. 4 stages and 32 KB a warpgroup.
__device__ __forceinline__ u32 half_at(u32 buf, int rr, int c) {  // 64-row slabs
  return buf + (c >> 6) * (64 * 128) + rr * 128 + ((((c >> 3) & 7) ^ (rr & 7)) << 4);
}
template <bool BMN>
__global__ void __launch_bounds__(384, 1)
gemm_pingpong_tma_gelu(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                       const __grid_constant__ CUtensorMap tc, const __grid_constant__ CUtensorMap tz,
                       const bf16_t *__restrict__ bias, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) u64 full[QSTAGES], empty[QSTAGES], order[2];
  const u32 base = (smem_u32(smem_raw) + 1023) & ~1023u, bufBase = base + QSTAGES * PSTAGE_BYTES;
  const int wg = threadIdx.x >> 7;
  const int NT = N / PBN, units = (M / PBM) * NT, KT = K / BK;
  init_barriers<QSTAGES>(full, empty, 1, order, 2);
  if (wg == 0) {
    produce<BMN, PBM, PBN, QSTAGES, 1>(&ta, &tb, base, full, empty, units, NT, KT);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int w = wg - 1, lane = threadIdx.x & 31, q = lane & 3, warp = (threadIdx.x >> 5) & 3;
  const bool leader = (threadIdx.x & 127) == 0;
  const u32 zt = bufBase + w * AUX_TILE, yt = zt + 64 * 128 * 2;
  u32 turns = 0;
  int i = w;
  for (int u = blockIdx.x + w * gridDim.x; u < units; u += 2 * gridDim.x, i += 2) {
    int ur, uc;
    unit_tile(u, units, NT, ur, uc);
    const int m0 = ur * PBM, n0 = uc * PBN;
    mbar_wait(smem_u32(&order[w]), (turns & 1) ^ (w == 0 ? 1u : 0u));
    float d[2][16][4];
    mma_tile<BMN, QSTAGES, 1>(d[0], d[1], base, full, empty, leader ? &order[1 - w] : nullptr,
                                   (long long)i * KT, KT);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (leader)  // the previous store has read the buffers
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        u32 z[4], y[4];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int j = 2 * jj + t;
          const u32 b = *reinterpret_cast<const u32 *>(bias + n0 + 8 * j + 2 * q);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const u32 zw = pack_bf16(d[half][j][2 * h] + bf2f((bf16_t)(b & 0xFFFF)),
                                     d[half][j][2 * h + 1] + bf2f((bf16_t)(b >> 16)));
            z[2 * t + h] = zw;
            y[2 * t + h] = pack_bf16(gelu_tanh(bf2f((bf16_t)(zw & 0xFFFF))), gelu_tanh(bf2f((bf16_t)(zw >> 16))));
          }
        }
        const int m = lane >> 3, t = m >> 1, h = m & 1;
        const int rr = warp * 16 + (lane & 7) + 8 * h, c = 8 * (2 * jj + t);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                     :: "r"(half_at(zt, rr, c)), "r"(z[0]), "r"(z[1]), "r"(z[2]), "r"(z[3]) : "memory");
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                     :: "r"(half_at(yt, rr, c)), "r"(y[0]), "r"(y[1]), "r"(y[2]), "r"(y[3]) : "memory");
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" :: "r"(1 + w) : "memory");
      if (leader) {
        const int row = m0 + 64 * half;
        tma_store(&tz, zt, n0, row);
        tma_store(&tz, zt + 64 * 128, n0 + 64, row);
        tma_store(&tc, yt, n0, row);
        tma_store(&tc, yt + 64 * 128, n0 + 64, row);
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
    }
    ++turns;
  }
  if (leader)
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Pseudo-random bf16 values in [-scale, scale) (a hash of the index).
__global__ void fill(bf16_t *p, long long n, u32 seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    u32 x = (u32)i * 2654435761u ^ seed;
    x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
    p[i] = f2bf(((x & 0xffff) / 32768.f - 1.f) * scale);
  }
}

CUtensorMap tensorMap(const void *p, u64 inner, u64 outer, u32 boxInner, u32 boxOuter) {
  CUtensorMap m;
  cuuint64_t dims[2] = {inner, outer}, strides[1] = {inner * 2};
  cuuint32_t box[2] = {boxInner, boxOuter}, es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(p), dims, strides, box, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

cublasLtHandle_t lt;
void *ws;
bool wrong = false;  // an output differs from cuBLASLt's
size_t wsb = 32 << 20;

// cuBLASLt's C = A op(B) with gtc's layouts (runtime/lib/Cuda/CudaGemm.cpp):
// row-major C is column-major C^T = op(B)^T A^T, B passed first.
struct Lt {
  cublasLtMatmulDesc_t d;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  const void *a, *b;
  void *c;
  int ok = 0;
  Lt(int64_t m, int64_t n, int64_t k, bool bKmajor, cublasLtEpilogue_t epi, const void *A, const void *B, void *C,
     const void *aux, const void *bias) : a(A), b(B), c(C) {
    CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t oa = bKmajor ? CUBLAS_OP_T : CUBLAS_OP_N, ob = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (aux) {
      int64_t ld = n;
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    }
    if (bias)
      cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    int64_t rB = bKmajor ? n : k, cB = bKmajor ? k : n;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, cB, rB, cB));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t p;
    cublasLtMatmulPreferenceCreate(&p);
    cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t r[1];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, 1, r, &found);
    ok = found > 0;
    if (ok) algo = r[0].algo;
  }
  void run() {
    float alpha = 1, beta = 0;
    CK(cublasLtMatmul(lt, d, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &algo, ws, wsb, 0));
  }
};

template <typename F> float timeUs(F f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  CK(cudaGetLastError());
  return ms * 1000.f / reps;
}

// GEMM_ENERGY=1: each kernel also runs back to back for about a second,
// and NVML's energy counter (libnvidia-ml.so.1, loaded here; the toolkit
// has no nvml.h) gives its joules a launch and a FLOP: the step is
// power-limited on an H100 (test/bench/NOTES.md, forty-ninth session), so
// a kernel's energy, not its time, decides what it costs the step.
bool energyMode = false;
struct Nvml {
  int (*energy)(void *, unsigned long long *) = nullptr;  // mJ since the driver loaded
  void *dev = nullptr;
  bool ok = false;
  Nvml() {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) return;
    auto init = (int (*)())dlsym(h, "nvmlInit_v2");
    auto byBus = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    energy = (int (*)(void *, unsigned long long *))dlsym(h, "nvmlDeviceGetTotalEnergyConsumption");
    char bus[32] = {};
    ok = init && byBus && energy && init() == 0 && cudaDeviceGetPCIBusId(bus, sizeof bus, 0) == cudaSuccess &&
         byBus(bus, &dev) == 0;
  }
};
template <typename F> void energyOf(F f, float us, const char *what, const char *kernel, double flops) {
  static Nvml nvml;
  if (!nvml.ok) { printf("%-24s %-11s no NVML energy counter\n", what, kernel); return; }
  const int reps = us > 0 ? (int)fmax(50.0, 1e6 / us) : 50;  // about a second
  for (int i = 0; i < 20; ++i) f();
  CK(cudaDeviceSynchronize());
  unsigned long long e0 = 0, e1 = 0;
  nvml.energy(nvml.dev, &e0);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0); cudaEventCreate(&t1);
  cudaEventRecord(t0);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(t1);
  CK(cudaEventSynchronize(t1));
  nvml.energy(nvml.dev, &e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0); cudaEventDestroy(t1);
  const double j = (e1 - e0) / 1000.0 / reps;
  printf("%-24s %-11s %8.2f mJ a launch, %5.3f pJ/FLOP, %4.0f W, %7.1f us a launch over %d\n", what, kernel,
         j * 1e3, j / flops * 1e12, (e1 - e0) / ms, ms * 1e3 / reps, reps);
}

// Max |x - y| over max |y| (bf16 buffers of n elements).
float relDiff(const bf16_t *x, const bf16_t *y, long long n) {
  std::vector<bf16_t> hx(n), hy(n);
  CK(cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
  auto f = [](bf16_t b) { u32 u = (u32)b << 16; float v; memcpy(&v, &u, 4); return v; };
  double dmax = 0, ymax = 0;
  for (long long i = 0; i < n; ++i) {
    dmax = fmax(dmax, fabs((double)f(hx[i]) - f(hy[i])));
    ymax = fmax(ymax, fabs((double)f(hy[i])));
  }
  return (float)(dmax / fmax(ymax, 1e-30));
}

// GEMM_KERNEL=coop or ping: run only that kernel (0: both).
int which = 0;

template <bool BMN, int EPI>
void runCase(const char *what, int M, int N, int K, cublasLtEpilogue_t epi) {
  bf16_t *A, *B, *C, *Cref, *aux, *auxRef, *bias;
  CK(cudaMalloc(&A, (size_t)M * K * 2)); CK(cudaMalloc(&B, (size_t)K * N * 2));
  CK(cudaMalloc(&C, (size_t)M * N * 2)); CK(cudaMalloc(&Cref, (size_t)M * N * 2));
  CK(cudaMalloc(&aux, (size_t)M * N * 2)); CK(cudaMalloc(&auxRef, (size_t)M * N * 2));
  CK(cudaMalloc(&bias, (size_t)N * 2));
  fill<<<1024, 256>>>(A, (long long)M * K, 1, 1.f);
  fill<<<1024, 256>>>(B, (long long)K * N, 2, 0.1f);
  fill<<<1024, 256>>>(aux, (long long)M * N, 3, 2.f);
  fill<<<64, 256>>>(bias, N, 4, 0.5f);
  CK(cudaDeviceSynchronize());
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  bf16_t *auxOut = EPI == GELU_AUX_BIAS ? aux : nullptr;
  // The cooperative kernel: 128 x 256 tiles, alone or by clusters of 2.
  CUtensorMap ta = tensorMap(A, K, M, BK, BM);
  CUtensorMap tb = BMN ? tensorMap(B, N, K, 64, BK) : tensorMap(B, K, N, BK, BN);
  CUtensorMap tb2 = BMN ? tb : tensorMap(B, K, N, BK, BN / 2);
  const int smem = STAGES * STAGE_BYTES + 1024;
  auto coop = gemm<BMN, EPI, 1>;
  CK(cudaFuncSetAttribute(coop, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tiles = (M / BM) * (N / BN), grid = tiles < sms ? tiles : sms;
  auto ours = [&] { coop<<<grid, 384, smem>>>(ta, tb, C, aux, auxOut, bias, M, N, K); };
  auto coop2 = gemm<BMN, EPI, 2>;
  CK(cudaFuncSetAttribute(coop2, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = smem, cfg.attrs = attr, cfg.numAttrs = 1;
  cfg.gridDim = dim3(2 * 66);
  int clusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&clusters, coop2, &cfg));
  cfg.gridDim = dim3(2 * (tiles / 2 < clusters ? tiles / 2 : clusters));
  static bool said = false;
  if (!said) printf("clusters of 2 at once: %d\n", clusters), said = true;
  auto ours2 = [&] { CK(cudaLaunchKernelEx(&cfg, coop2, ta, tb2, C, (const bf16_t *)aux, auxOut,
                                           (const bf16_t *)bias, M, N, K)); };
  // The pingpong kernel: 128 x 128 tiles a warpgroup, alone or by clusters of 2.
  CUtensorMap pa = tensorMap(A, K, M, BK, PBM);
  CUtensorMap pb = BMN ? tensorMap(B, N, K, 64, BK) : tensorMap(B, K, N, BK, PBN);
  CUtensorMap pb2 = BMN ? pb : tensorMap(B, K, N, BK, PBN / 2);
  auto pp = gemm_pingpong<BMN, EPI, 1>;
  const int psmem = PSTAGES * PSTAGE_BYTES + 1024;
  CK(cudaFuncSetAttribute(pp, cudaFuncAttributeMaxDynamicSharedMemorySize, psmem));
  const int ptiles = (M / PBM) * (N / PBN), pgrid = ptiles < sms ? ptiles : sms;
  auto ping = [&] { pp<<<pgrid, 384, psmem>>>(pa, pb, C, aux, auxOut, bias, M, N, K); };
  auto pp2 = gemm_pingpong<BMN, EPI, 2>;
  CK(cudaFuncSetAttribute(pp2, cudaFuncAttributeMaxDynamicSharedMemorySize, psmem));
  cudaLaunchConfig_t pcfg = cfg;
  pcfg.dynamicSmemBytes = psmem, pcfg.gridDim = dim3(2 * 66);
  int pclusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&pclusters, pp2, &pcfg));
  pcfg.gridDim = dim3(2 * (ptiles / 2 < pclusters ? ptiles / 2 : pclusters));
  auto ping2 = [&] { CK(cudaLaunchKernelEx(&pcfg, pp2, pa, pb2, C, (const bf16_t *)aux, auxOut,
                                           (const bf16_t *)bias, M, N, K)); };
  // cuBLASLt: the same epilogue (GELU_AUX_BIAS writes its own aux copy).
  Lt ref(M, N, K, !BMN, epi, A, B, Cref, EPI == DGELU ? aux : EPI == GELU_AUX_BIAS ? auxRef : nullptr,
         EPI == GELU_AUX_BIAS || EPI == BIAS ? bias : nullptr);
  Lt plain(M, N, K, !BMN, CUBLASLT_EPILOGUE_DEFAULT, A, B, Cref, nullptr, nullptr);
  if (!ref.ok || !plain.ok) { printf("%s: cuBLASLt has no algorithm\n", what); return; }
  const long long mn = (long long)M * N;
  auto check = [&](auto run, const char *kernel) {
    CK(cudaMemset(C, 0, mn * 2));
    run();
    CK(cudaDeviceSynchronize());
    float diff = relDiff(C, Cref, mn);
    float auxDiff = EPI == GELU_AUX_BIAS ? relDiff(aux, auxRef, mn) : 0.f;
    float us = timeUs(run);
    printf("%-24s %-11s %7.1f us (%5.0f TF/s), max |diff| / max |ref| %.2e%s\n", what, kernel, us,
           2.0 * M * N * K / 1e6 / us, diff, auxDiff < 1e-2 ? "" : " (aux differs)");
    wrong |= !(diff <= 2e-2f) || !(auxDiff < 1e-2f);
    if (energyMode) energyOf(run, us, what, kernel, 2.0 * M * N * K);
  };
  ref.run();
  CK(cudaDeviceSynchronize());
  if (which != 2) check(ours, "cooperative");
  if (which != 2) check(ours2, "coop x2");
  if (which != 1) check(ping, "pingpong");
  if (which != 1) check(ping2, "pingpong x2");
  if (EPI == GELU_AUX_BIAS && !BMN) {  // the epilogue through shared memory
    auto qg = gemm_pingpong_tma_gelu<BMN>;
    const int qsmem = QSTAGES * PSTAGE_BYTES + 2 * AUX_TILE + 1024;
    CK(cudaFuncSetAttribute(qg, cudaFuncAttributeMaxDynamicSharedMemorySize, qsmem));
    CUtensorMap tc = tensorMap(C, N, M, 64, 64), tz = tensorMap(aux, N, M, 64, 64);
    auto pingGelu = [&] { qg<<<pgrid, 384, qsmem>>>(pa, pb, tc, tz, bias, M, N, K); };
    check(pingGelu, "ping TMA epi");
  }
  if (EPI == DGELU) {  // the saved inputs through shared memory
    auto qk = gemm_pingpong_smem_aux<BMN>;
    const int qsmem = QSTAGES * PSTAGE_BYTES + 2 * AUX_TILE + 1024;
    CK(cudaFuncSetAttribute(qk, cudaFuncAttributeMaxDynamicSharedMemorySize, qsmem));
    CUtensorMap taux = tensorMap(aux, N, M, 64, PBM);
    auto pingAux = [&] { qk<<<pgrid, 384, qsmem>>>(pa, pb, taux, C, M, N, K); };
    check(pingAux, "ping smem aux");
    auto qe = gemm_pingpong_tma_epi<BMN>;
    CK(cudaFuncSetAttribute(qe, cudaFuncAttributeMaxDynamicSharedMemorySize, qsmem));
    CUtensorMap tc = tensorMap(C, N, M, 64, PBM);
    auto pingEpi = [&] { qe<<<pgrid, 384, qsmem>>>(pa, pb, taux, tc, M, N, K, nullptr); };
    check(pingEpi, "ping TMA epi");
    // And the column sums (c_fc's bias gradient) of the values it stored.
    float *part;
    CK(cudaMalloc(&part, (size_t)(M / PBM) * N * 4));
    auto pingEpiSums = [&] { qe<<<pgrid, 384, qsmem>>>(pa, pb, taux, tc, M, N, K, part); };
    check(pingEpiSums, "+ col sums");
    std::vector<float> hp((size_t)(M / PBM) * N);
    std::vector<bf16_t> hc((size_t)M * N);
    CK(cudaMemcpy(hp.data(), part, hp.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), C, hc.size() * 2, cudaMemcpyDeviceToHost));  // what it stored
    auto f = [](bf16_t b) { u32 u = (u32)b << 16; float v; memcpy(&v, &u, 4); return v; };
    double dmax = 0, ymax = 0;
    for (int n = 0; n < N; ++n) {
      double got = 0, want = 0;
      for (int t = 0; t < M / PBM; ++t) got += hp[(size_t)t * N + n];
      for (int m = 0; m < M; ++m) want += f(hc[(size_t)m * N + n]);
      dmax = fmax(dmax, fabs(got - want)), ymax = fmax(ymax, fabs(want));
    }
    printf("%-24s column sums: max |diff| / max |ref| %.2e\n", what, dmax / fmax(ymax, 1e-30));
    wrong |= !(dmax / fmax(ymax, 1e-30) <= 1e-3);
    cudaFree(part);
  }
  float tRef = timeUs([&] { ref.run(); }), tPlain = timeUs([&] { plain.run(); });
  printf("%-24s cuBLASLt    %7.1f us with this epilogue, %7.1f us plain\n", what, tRef, tPlain);
  if (energyMode) {
    energyOf([&] { ref.run(); }, tRef, what, "cuBLASLt", 2.0 * M * N * K);
    energyOf([&] { plain.run(); }, tPlain, what, "cuBLASLt pl", 2.0 * M * N * K);
  }
  cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(Cref); cudaFree(aux); cudaFree(auxRef); cudaFree(bias);
}

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a hang killed by timeout
  energyMode = getenv("GEMM_ENERGY") && atoi(getenv("GEMM_ENERGY")) != 0;
  if (const char *k = getenv("GEMM_KERNEL")) which = !strcmp(k, "coop") ? 1 : !strcmp(k, "ping") ? 2 : 0;
  const int group = getenv("GEMM_GROUP") ? atoi(getenv("GEMM_GROUP")) : 0;
  int M = argc > 3 ? atoi(argv[1]) : 16384, N = argc > 3 ? atoi(argv[2]) : 3072, K = argc > 3 ? atoi(argv[3]) : 768;
  if (M % BM || N % BN || K % BK) { printf("M, N, K must be multiples of %d, %d, %d\n", BM, BN, BK); return 1; }
  CK(cuInit(0));
  CK(cudaMemcpyToSymbol(g_group, &group, sizeof group));
  cublasLtCreate(&lt);
  CK(cudaMalloc(&ws, wsb));
  printf("C [%d, %d] = A [%d, %d] B, bf16, f32 accumulation, units by groups of %d rows (0: row by row)\n", M, N,
         M, K, group);
  runCase<false, PLAIN>("TN plain (B [N, K])", M, N, K, CUBLASLT_EPILOGUE_DEFAULT);
  runCase<false, GELU_AUX_BIAS>("TN GELU_AUX_BIAS", M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  runCase<false, BIAS>("TN BIAS", M, N, K, CUBLASLT_EPILOGUE_BIAS);
  runCase<true, PLAIN>("NN plain (B [K, N])", M, N, K, CUBLASLT_EPILOGUE_DEFAULT);
  runCase<true, DGELU>("NN DGELU", M, N, K, CUBLASLT_EPILOGUE_DGELU);
  return wrong ? 1 : 0;
}
