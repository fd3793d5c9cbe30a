//===- argmax.cuh - The largest value of a row and its index ---*- CUDA -*-===//
//
// Helpers (kArgmaxHelpers, after warp.cuh): row_argmax, a row's largest
// value and its first index.
//===----------------------------------------------------------------------===//

// The largest value of a row and its first index (ties: the smaller index
// wins, as std::max_element). Same calling rules as row_sum.
__device__ __forceinline__ void argmax_combine(float &v, int &i, float ov,
                                               int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}
template <int RT>
__device__ __forceinline__ void row_argmax(float &v, int &i, float *shv,
                                           int *shi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    argmax_combine(v, i, __shfl_xor_sync(0xffffffffu, v, o),
                   __shfl_xor_sync(0xffffffffu, i, o));
  if (RT > 32) {
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
      shv[threadIdx.x >> 5] = v;
      shi[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    const int first = threadIdx.x / RT * (RT / 32);
    v = shv[first];
    i = shi[first];
    for (int w = 1; w < RT / 32; ++w)
      argmax_combine(v, i, shv[first + w], shi[first + w]);
  }
}

