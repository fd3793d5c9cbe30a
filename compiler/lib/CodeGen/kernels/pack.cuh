//===- pack.cuh - Vectorized loads and stores ------------------*- CUDA -*-===//
//
// Helpers (kPackHelpers): pack_t<T, V>, loadv and storev, V elements in one
// aligned access.
//===----------------------------------------------------------------------===//

// V consecutive elements of type T in one aligned access of V * sizeof(T)
// bytes (callers index them at multiples of V from an aligned start).
template <typename T, int V> struct alignas(sizeof(T) * V) pack_t { T e[V]; };
template <int V, typename T>
__device__ __forceinline__ void loadv(const T *p, float *v) {
  const pack_t<T, V> q = *reinterpret_cast<const pack_t<T, V> *>(p);
#pragma unroll
  for (int e = 0; e < V; ++e)
    v[e] = (float)q.e[e];
}
template <int V, typename T>
__device__ __forceinline__ void storev(T *p, const float *v) {
  pack_t<T, V> q;
#pragma unroll
  for (int e = 0; e < V; ++e)
    q.e[e] = v[e];
  *reinterpret_cast<pack_t<T, V> *>(p) = q;
}

