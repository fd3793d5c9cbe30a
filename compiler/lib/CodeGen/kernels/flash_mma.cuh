//===- flash_mma.cuh - Mma.sync tiles of the flash kernels -----*- CUDA -*-===//
//
// Warp-level tensor-core helpers over the element type's fragments
// (flash_mma_16bit.cuh or flash_mma_tf32.cuh, put before this): A
// fragments of 16 x 16 in AW words, B fragments of 16 x 8 in BW words, a
// k step of 16 a call of mma(). Accumulators follow the PTX ISA's m16n8
// layout: with g = lane / 4 and c = lane % 4, one holds rows g and g + 8,
// columns 2c and 2c + 1 of its 16 x 8 tile.
//===----------------------------------------------------------------------===//

// 2^x in one MUFU instruction (denormal results flush to zero).
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// A warp's MW row atoms: acc[i] holds rows r0 + 16 i .. r0 + 16 i + 15 of
// its tile. One k step of 16: acc (MW x 16 x 8 NT) += a (the atoms' A
// fragments) B, with B stored [n][k] (KN false: ld_bt) or [k][n] (KN true:
// ld_b); each B fragment serves all MW atoms.
template <int MW, int NT, bool KN>
__device__ __forceinline__ void mma_kstep(float (&acc)[MW][NT][4], const u32 (&a)[MW][AW],
                                          const E *b_tile, int k0) {
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    u32 b[2 * BW];
    if (KN)
      ld_b(b, b_tile, k0, np * 16);
    else
      ld_bt(b, b_tile, np * 16, k0);
#pragma unroll
    for (int i = 0; i < MW; ++i) {
      mma(acc[i][2 * np], a[i], b);
      mma(acc[i][2 * np + 1], a[i], b + BW);
    }
  }
}
// The A fragments of a warp's MW atoms (rows r0.., all 16 KC columns) of a
// row-major tile, to keep in registers.
template <int MW, int KC>
__device__ __forceinline__ void ld_frags(u32 (&a)[KC][MW][AW], const E *tile, int r0) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc)
#pragma unroll
    for (int i = 0; i < MW; ++i)
      ld_a(a[kc][i], tile, r0 + 16 * i, kc * 16);
}
// acc += A B with A's fragments in registers (ld_frags), B a [n][k] tile.
template <int MW, int KC, int NT>
__device__ __forceinline__ void mma_frags(float (&acc)[MW][NT][4], const u32 (&a)[KC][MW][AW],
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
    u32 a[MW][AW];
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
    u32 a[MW][AW];
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
    store2(out + n * 8 + c2, c[n][2 * r] * scale, c[n][2 * r + 1] * scale);
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
  for (int c = threadIdx.x; c < N * (HD / EV); c += blockDim.x) {
    const int r = c / (HD / EV), k = c % (HD / EV) * EV;
    const bool ok = r0 + r < T;
    cp_async<16>(tile + r * LDS + k, src + (i64)(ok ? r0 + r : 0) * stride + k, ok);
  }
}
// The key-tile pipeline of the query-tile kernels (two buffers each of K
// and V, N keys a tile; kb and vb at the batch and the key head's first
// column): starts loading tile j + 1 into the other buffer, if there is
// one, and waits until tile j is in shared memory, for the whole block.
template <int N>
__device__ __forceinline__ void next_kv_tile(E *sk, E *sv, const E *kb, const E *vb, int j,
                                             int nk) {
  if (j + 1 < nk) {
    const int next = (j + 1) & 1;
    load_tile<N>(sk + next * N * LDS, kb, KVROW, (j + 1) * N);
    load_tile<N>(sv + next * N * LDS, vb, KVROW, (j + 1) * N);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}
