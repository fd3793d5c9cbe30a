//===- warp.cuh - Butterfly reductions over a warp -------------*- CUDA -*-===//
//
// Helpers (kWarpHelpers): warp_reduce, warp_sum, warp_max.
//===----------------------------------------------------------------------===//

// Butterfly reductions: every lane gets the same, deterministic result. Over
// the W lanes of an aligned group (W a power of two up to 32): the lanes of
// a warp all take part, each group reducing its own values.
struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <int W = 32, typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ double warp_sum(double v) { return warp_reduce(v, Add()); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, Max()); }

