//===- small_gemm_fma.cuh - The small GEMM's fp32 multiply -----*- CUDA -*-===//
//
// The small GEMM's multiply at fp32 (mode 0): FMAs in the mma accumulator
// layout.
//===----------------------------------------------------------------------===//

// fp32: FMAs in the mma accumulator layout.
// acc[mi][ni][c]: rows wm + 16 mi + g (+8 for c >= 2), columns
// wn + 8 ni + 2 t (+1 for odd c): the mma accumulator layout.
template <typename TA, typename TB>
__device__ __forceinline__ void multiply(float (&acc)[2][NI][4], const S_T *as,
                                         const S_T *bs, int wm, int wn) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 4
  for (int k = 0; k < BK; ++k) {
    float a[2][2], b[NI][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        a[mi][h] = TA::at(as, wm + 16 * mi + g + 8 * h, k);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        b[ni][j] = TB::at(bs, wn + 8 * ni + 2 * t + j, k);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[mi][ni][c] = fmaf(a[mi][c >> 1], b[ni][c & 1], acc[mi][ni][c]);
  }
}


