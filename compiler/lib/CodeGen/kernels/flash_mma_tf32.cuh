//===- flash_mma_tf32.cuh - Mma.sync fragments of f32 at tf32 --*- CUDA -*-===//
//
// The fragments of the flash kernels' f32 tiles at --precision tf32, for
// flash_mma.cuh: a k step of 16 is two mma.sync m16n8k8 tf32, every
// operand rounded to tf32 (cvt.rna) as it is loaded. In the PTX ISA's
// m16n8k8 tf32 layouts, with g = lane / 4 and c = lane % 4, an A fragment
// holds (g, c), (g + 8, c), (g, c + 4), (g + 8, c + 4) of its 16 x 8 and a
// B fragment (k = c, n = g), (k = c + 4, n = g) of its 8 x 8; a k step's
// A is a[0..3] for k0..k0+7 and a[4..7] for k0+8..k0+15, its B b[0..1] and
// b[2..3] likewise.
//
// Where A comes from an accumulator (acc_to_a: P and dS), whose thread holds
// columns 2c and 2c + 1, the k slots c and c + 4 of each group of 8 stand
// for columns 2c and 2c + 1: the layouts then agree without shuffles, and
// ld_b, which loads the B of those products (a [k][n] tile), reads its rows
// in the same order. The sum over k is the same in any order.
//===----------------------------------------------------------------------===//

constexpr int AW = 8, BW = 4;  // words of an A (16 x 16) and a B (16 x 8) fragment
constexpr int EV = 4;          // elements in 16 bytes
__device__ __forceinline__ u32 to_tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// Four 8 x 4 f32 matrices (8 x 8 of b16 to ldmatrix) at the lanes' row
// addresses, each rounded to tf32: thread (g, c) gets element (g, c) of each.
__device__ __forceinline__ void ld_x4(u32 *r, const E *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
#pragma unroll
  for (int i = 0; i < 4; ++i)
    r[i] = to_tf32(__uint_as_float(r[i]));
}
// The A fragment of rows r0..r0+15, columns k0..k0+15 of a row-major tile.
__device__ __forceinline__ void ld_a(u32 (&a)[8], const E *tile, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + k0 + (lane >> 4) * 4;
  ld_x4(a, p);
  ld_x4(a + 4, p + 8);
}
// B fragments of two 8-column tiles (n0..n0+15), k0..k0+15, from a tile
// stored [n][k] (B = tile^T): b[0..3] for n0, b[4..7] for n0 + 8.
__device__ __forceinline__ void ld_bt(u32 (&b)[8], const E *tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const E *p = tile + (n0 + (lane & 7)) * LDS + k0 + (lane >> 3) * 4;
  ld_x4(b, p);
  ld_x4(b + 4, p + 8 * LDS);
}
// The same from a tile stored [k][n] (B = tile), its rows in acc_to_a's
// order: slot c of a group of 8 is row 2c, slot c + 4 row 2c + 1.
__device__ __forceinline__ void ld_b(u32 (&b)[8], const E *tile, int k0, int n0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const E *p = tile + (k0 + 8 * h + 2 * c) * LDS + n0 + 8 * n + g;
      b[4 * n + 2 * h] = to_tf32(p[0]);
      b[4 * n + 2 * h + 1] = to_tf32(p[LDS]);
    }
}
// c += a b for a 16 x 8 x 16 tile: two m16n8k8.
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[8], const u32 *b) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[4 * h]), "r"(a[4 * h + 1]), "r"(a[4 * h + 2]), "r"(a[4 * h + 3]),
                   "r"(b[2 * h]), "r"(b[2 * h + 1]));
}
// The A fragment of columns 16 kc .. 16 kc + 15 of a 16-row accumulator, in
// the slot order above.
template <int NT>
__device__ __forceinline__ void acc_to_a(u32 (&a)[8], const float (&c)[NT][4], int kc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float(&t)[4] = c[2 * kc + h];
    a[4 * h] = to_tf32(t[0]);
    a[4 * h + 1] = to_tf32(t[2]);
    a[4 * h + 2] = to_tf32(t[1]);
    a[4 * h + 3] = to_tf32(t[3]);
  }
}
// Two adjacent elements of a row.
__device__ __forceinline__ void store2(E *out, float lo, float hi) {
  *reinterpret_cast<float2 *>(out) = make_float2(lo, hi);
}
