//===- row.cuh - Reductions over the threads of a row ----------*- CUDA -*-===//
//
// Helpers (kRowHelpers, after warp.cuh): row_sum and row_max over the RT
// threads of a row.
//===----------------------------------------------------------------------===//

// Reductions over the RT threads that share a row: part of a warp (RT a
// power of two below 32), one warp (RT = 32) or RT / 32 consecutive warps. Every thread of the block must call them (they
// synchronize the block when RT > 32); every thread of the row gets the
// result, combined in a fixed order. `sh` holds one value per warp.
//
// across_warps: the row's warps combine their reduced values (nothing when
// RT <= 32).
template <int RT, typename T, typename Op>
__device__ __forceinline__ T across_warps(T v, T *sh, Op op) {
  if (RT > 32) {
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
      sh[threadIdx.x >> 5] = v;
    __syncthreads();
    const int first = threadIdx.x / RT * (RT / 32);
    v = sh[first];
    for (int w = 1; w < RT / 32; ++w)
      v = op(v, sh[first + w]);
  }
  return v;
}
template <int RT, typename T, typename Op>
__device__ __forceinline__ T row_reduce(T v, T *sh, Op op) {
  return across_warps<RT>(warp_reduce<(RT < 32 ? RT : 32)>(v, op), sh, op);
}
template <int RT, typename T>
__device__ __forceinline__ T row_sum(T v, T *sh) { return row_reduce<RT>(v, sh, Add()); }
// A row's sum of float terms, as a double: each warp adds its lanes' terms
// in float, the warps' sums are added in double. (Double shuffles cost the
// layer norm gradient 7% of its time.)
template <int RT>
__device__ __forceinline__ double row_sum_wide(float v, double *sh) {
  return across_warps<RT>((double)warp_reduce<(RT < 32 ? RT : 32)>(v, Add()),
                          sh, Add());
}
template <int RT>
__device__ __forceinline__ float row_max(float v, float *sh) {
  return row_reduce<RT>(v, sh, Max());
}

