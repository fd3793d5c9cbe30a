//===- small_gemm_16bit.cuh - Mma.sync at bf16 and fp16 --------*- CUDA -*-===//
//
// bf16 / fp16: mma.sync m16n8k16, two elements of k a register.
//===----------------------------------------------------------------------===//

constexpr int KSTEP = 16, KT = 2;
template <typename T>
__device__ __forceinline__ u32 frag(const S_T *s, int r, int k) {
  return T::pair(s, r, k);
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.MMA_T.MMA_T.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

