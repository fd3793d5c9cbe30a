//===- async.cuh - Cp.async copies to shared memory ------------*- CUDA -*-===//
//
// Helpers (kAsyncHelpers): u32, smem_u32, cp_async, cp_async_zfill,
// copy_async and the commit and wait of cp.async groups.
//===----------------------------------------------------------------------===//

typedef unsigned u32;
// The shared-memory address of p (the compiler folds it into the
// instruction's address: no per-use conversion).
__device__ __forceinline__ u32 smem_u32(const void *p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared (dst a shared address or a pointer to shared
// memory), asynchronously, bypassing L1: the first n (0 to 16) from src,
// the rest zeros.
__device__ __forceinline__ void cp_async_zfill(u32 dst, const void *src, int n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_zfill(void *dst, const void *src, int n) {
  cp_async_zfill(smem_u32(dst), src, n);
}
// B (4, 8 or 16) bytes global -> shared, asynchronously; zeros when !ok.
template <int B>
__device__ __forceinline__ void cp_async(void *dst, const void *src, bool ok) {
  static_assert(B == 4 || B == 8 || B == 16, "cp.async copies 4, 8 or 16 bytes");
  if (B == 16)
    cp_async_zfill(dst, src, ok ? 16 : 0);
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(smem_u32(dst)), "l"(src), "n"(B), "r"(ok ? B : 0));
}
// V elements of T global -> shared, zeros when !ok: asynchronously where
// the copy is 4, 8 or 16 bytes, else (one 16-bit element) with a plain load.
template <int V, typename T>
__device__ __forceinline__ void copy_async(void *dst, const T *src, bool ok) {
  constexpr int B = V * (int)sizeof(T);
  if constexpr (B >= 4) {
    cp_async<B>(dst, src, ok);
  } else {
    static_assert(B == 2, "one 16-bit element");
    *reinterpret_cast<unsigned short *>(dst) =
        ok ? *reinterpret_cast<const unsigned short *>(src) : 0;
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N of the committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

