//===- layernorm_grad_columns.cuh - layer-norm backward, the column sums -*- CUDA -*-===//
//
// Body of Emitter::layernormGrad's launch 2 (NormKernels.cpp): 128 threads a
// column add the SLOTS sets of column sums in a fixed order. The emitter
// replaces STORE (layernorm's db, the bias gradient bg). Buffers: dw, [db],
// [bg], part.
//===----------------------------------------------------------------------===//
  __shared__ double sh[NS][32][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c = lane & 7, sub = lane >> 3;
  const i64 j = (i64)blockIdx.x * 8 + c;
  double acc[NS];
#pragma unroll
  for (int k = 0; k < NS; ++k)
    acc[k] = 0.0;
  if (j < N)
#pragma unroll 4
    for (i64 g = warp * 4 + sub; g < SLOTS; g += 128)
#pragma unroll
      for (int k = 0; k < NS; ++k)
        acc[k] += part[(k * SLOTS + g) * N + j];
#pragma unroll
  for (int k = 0; k < NS; ++k) {
    acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], 8);
    acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], 16);
    if (sub == 0)
      sh[k][warp][c] = acc[k];
  }
  __syncthreads();
  if (warp != 0)
    return;
#pragma unroll
  for (int k = 0; k < NS; ++k) {
    double t = 0.0;
    for (int w = sub; w < 32; w += 4)
      t += sh[k][w][c];
    t += __shfl_xor_sync(0xffffffffu, t, 8);
    acc[k] = t + __shfl_xor_sync(0xffffffffu, t, 16);
  }
  if (sub == 0 && j < N) {
    dw[j] = (float)acc[0];
STORE  }

