//===- flash_wgmma.cuh - Flash attention's swizzled tile loads --*- CUDA -*-===//
//
// After wgmma.cuh (whose header says how tiles lie in shared memory): the
// flash attention kernels' loads of a head's rows into a swizzled tile, by
// cp.async. Constants: HD, THREADS, T; E the element type.
//===----------------------------------------------------------------------===//
// Rows r0 .. r0 + R - 1 (zeros past T) of one head's slice of a [B, T,
// stride] tensor into the swizzled tile at shared address `tile`, by the
// whole block. A thread copies the same 16-byte column chunk k of rows
// rr, rr + RPP, ..., which share their swizzle: its addresses are one base
// and constant offsets, and only a tile that reaches past T tests its rows.
template <int R>
__device__ __forceinline__ void load_tile_sw(u32 tile, const E *src, i64 stride, int r0) {
  constexpr int CPR = HD / 8, RPP = THREADS / CPR;  // chunks a row, rows a pass
  static_assert(THREADS % CPR == 0 && RPP % 8 == 0 && R % RPP == 0,
                "whole passes of rows that share their swizzle");
  const int k = threadIdx.x % CPR, rr = threadIdx.x / CPR;
  const u32 dst = tile + (k >> 3) * (R * 128) + rr * 128 + (((k & 7) ^ (rr & 7)) << 4);
  const E *s = src + (i64)(r0 + rr) * stride + k * 8;
  if (r0 + R <= T) {
#pragma unroll
    for (int i = 0; i < R / RPP; ++i)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                   :: "r"(dst + i * RPP * 128), "l"(s + i * RPP * stride));
  } else {
#pragma unroll
    for (int i = 0; i < R / RPP; ++i) {
      const bool ok = r0 + rr + i * RPP < T;
      cp_async_zfill(dst + i * RPP * 128, ok ? s + i * RPP * stride : src, ok ? 16 : 0);
    }
  }
}
