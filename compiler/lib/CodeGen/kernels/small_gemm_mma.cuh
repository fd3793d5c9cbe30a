//===- small_gemm_mma.cuh - the small GEMM's tensor-core multiply -*- CUDA -*-===//
//
// Tensor cores: per mode (below) KSTEP, the k of one mma; KT, the k of one
// register's element(s); frag<Tile>(s, r, k), one register of a fragment
// from a shared tile; and mma().
//===----------------------------------------------------------------------===//

// acc[mi][ni][c]: rows wm + 16 mi + g (+8 for c >= 2), columns
// wn + 8 ni + 2 t (+1 for odd c): the mma accumulator layout. A register
// of a fragment holds k = KT t (+ KSTEP / 2 for the second half).
template <typename TA, typename TB>
__device__ __forceinline__ void multiply(float (&acc)[2][NI][4], const S_T *as,
                                         const S_T *bs, int wm, int wn) {
  const int lane = threadIdx.x & 31, g = lane >> 2, kt = (lane & 3) * KT;
  constexpr int H = KSTEP / 2;
#pragma unroll
  for (int k = 0; k < BK; k += KSTEP) {
    u32 a[2][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int r = wm + 16 * mi + g;
      a[mi][0] = frag<TA>(as, r, k + kt);
      a[mi][1] = frag<TA>(as, r + 8, k + kt);
      a[mi][2] = frag<TA>(as, r, k + kt + H);
      a[mi][3] = frag<TA>(as, r + 8, k + kt + H);
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int c = wn + 8 * ni + g;
      const u32 b0 = frag<TB>(bs, c, k + kt), b1 = frag<TB>(bs, c, k + kt + H);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        mma(acc[mi][ni], a[mi], b0, b1);
    }
  }
}

