//===- attention_weighted.cuh - a warp's weighted sum of value rows -*- CUDA -*-===//
//
// `weighted<R>(acc, w, tile)`: acc[i][j] += sum_v w[i][v] * tile[v][c] for
// the lane's head dimensions c = lane + 32 j, 32 rows v of `tile` (row
// stride HDP) and weights w (R rows of 32, in shared memory).
//===----------------------------------------------------------------------===//

template <int R>
__device__ __forceinline__ void weighted(float (&acc)[R][NC],
                                         const float (*w)[32],
                                         const float *tile, int lane) {
#pragma unroll 2
  for (int v = 0; v < 32; v += 4) {
    float4 p[R];
#pragma unroll
    for (int i = 0; i < R; ++i)
      p[i] = *reinterpret_cast<const float4 *>(&w[i][v]);
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      const int c = lane + 32 * j;
      if (c < HD) {
        const float x0 = tile[v * HDP + c], x1 = tile[(v + 1) * HDP + c];
        const float x2 = tile[(v + 2) * HDP + c], x3 = tile[(v + 3) * HDP + c];
#pragma unroll
        for (int i = 0; i < R; ++i)
          acc[i][j] += p[i].x * x0 + p[i].y * x1 + p[i].z * x2 + p[i].w * x3;
      }
    }
  }
}

