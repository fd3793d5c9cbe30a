//===- flash_mma_16bit.cuh - Mma.sync fragments of bf16/fp16 ---*- CUDA -*-===//
//
// The fragments of the flash kernels' 16-bit element types (`MMA_T` is
// replaced by bf16 or f16), for flash_mma.cuh: the PTX ISA's m16n8k16
// layouts, loaded by ldmatrix (transposed for B stored [k][n]).
//===----------------------------------------------------------------------===//

constexpr int AW = 4, BW = 2;  // words of an A (16 x 16) and a B (16 x 8) fragment
constexpr int EV = 8;          // elements in 16 bytes
// The A fragment of rows r0..r0+15, columns k0..k0+15 of a row-major tile.
__device__ __forceinline__ void ld_a(u32 (&a)[4], const E *tile, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + k0 + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(smem_u32(p)));
}
// B fragments of two 8-column tiles (n0..n0+15), k0..k0+15, from a tile
// stored [n][k] (B = tile^T): b[0], b[1] for n0; b[2], b[3] for n0 + 8.
__device__ __forceinline__ void ld_bt(u32 (&b)[4], const E *tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LDS + k0 + ((lane >> 3) & 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(smem_u32(p)));
}
// The same from a tile stored [k][n] (B = tile), transposed by ldmatrix.
__device__ __forceinline__ void ld_b(u32 (&b)[4], const E *tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + n0 + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(smem_u32(p)));
}
// c += a b for a 16 x 8 x 16 tile.
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], const u32 *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.MMA_T.MMA_T.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.MMA_Tx2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The A fragment of columns 16 kc .. 16 kc + 15 of a 16-row accumulator
// (the layouts agree: no shuffles).
template <int NT>
__device__ __forceinline__ void acc_to_a(u32 (&a)[4], const float (&c)[NT][4], int kc) {
  a[0] = pack2(c[2 * kc][0], c[2 * kc][1]);
  a[1] = pack2(c[2 * kc][2], c[2 * kc][3]);
  a[2] = pack2(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = pack2(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}
// Two adjacent elements of a row, from f32.
__device__ __forceinline__ void store2(E *out, float lo, float hi) {
  *reinterpret_cast<u32 *>(out) = pack2(lo, hi);
}
