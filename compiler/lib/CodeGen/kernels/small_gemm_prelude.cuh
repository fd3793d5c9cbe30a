//===- small_gemm_prelude.cuh - the small GEMM's tiles and loads -*- CUDA -*-===//
//
// The small GEMM's tiles (BM, BN, BK, THREADS), its shared-memory loads and
// tf32 rounding; before small_gemm_fma.cuh or small_gemm_mma.cuh.
//===----------------------------------------------------------------------===//

constexpr int BM = 64, BN = 64, BK = 32, THREADS = 256;
// 8 warps, 2 x 4 over the tile: 32 rows x 16 columns each, NI = 2 mma
// tiles of 8 columns.
constexpr int NI = 2;
// Shared tiles hold float, or the raw 16 bits of bf16/fp16, in the layout
// of the global matrix: a tile of op(A) (rows m) or op(B) (rows n) is
// [row][k] when k is contiguous in memory (KC), else [k][row].
typedef SMEM_T S_T;
constexpr int PAD = sizeof(S_T) == 4 ? 4 : 8; // no bank conflicts
constexpr int LDK = BK + PAD, LDR = 64 + 8;
constexpr int TILE = 64 * LDK > BK * LDR ? 64 * LDK : BK * LDR; // elements
constexpr int CHUNKS = (K + BK - 1) / BK;
constexpr int KPER = (CHUNKS + S - 1) / S * BK; // K of one CTA
constexpr int STAGES = KPER / BK < 4 ? KPER / BK : 4;
constexpr int NT = (N + BN - 1) / BN;           // column tiles
constexpr int CW = BN / S;                      // columns a CTA finishes
// Without clusters (below sm_90) each CTA has the whole sum itself.
#if __CUDA_ARCH__ >= 900
constexpr int PARTS = S;
#else
constexpr int PARTS = 1;
#endif
// The slices' bytes (the emitter's figure), then the partial tiles that
// the cluster's CTAs send this one: [PARTS][BM][CW] floats, and the column
// sums' partial sums.
static_assert(TILES_BYTES >= STAGES * 2 * TILE * (int)sizeof(S_T), "slices");

// A 64-row x BK tile of a matrix whose element (r, k) is at g[r * LD + k]
// (KC) or g[k * LD + r]; V elements a copy along the contiguous side.
template <bool KC, int V, int LD, int ROWS> struct Tile {
  static constexpr int PER = (KC ? BK : 64) / V; // copies per line
  static constexpr int COPIES = 64 * BK / V / THREADS;
  static __device__ __forceinline__ void load(S_T *s, const E *g, int r0,
                                              int k0, int kend) {
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int q = threadIdx.x + i * THREADS;
      const int line = q / PER, at = q % PER * V;
      const int r = KC ? line : at, k = KC ? at : line;
      const bool ok = r0 + r < ROWS && k0 + k < kend;
      const i64 off = KC ? (i64)(r0 + r) * LD + k0 + k : (i64)(k0 + k) * LD + r0 + r;
      copy_async<V>(s + (KC ? r * LDK + k : k * LDR + r), g + (ok ? off : 0), ok);
    }
  }
  // Element (r, k) of a float tile.
  static __device__ __forceinline__ S_T at(const S_T *s, int r, int k) {
    return s[KC ? r * LDK + k : k * LDR + r];
  }
  // Elements (r, k) and (r, k + 1) of a 16-bit tile, k even: one mma register.
  static __device__ __forceinline__ u32 pair(const S_T *s, int r, int k) {
    if (KC)
      return *reinterpret_cast<const u32 *>(s + r * LDK + k);
    return (u32)s[k * LDR + r] | (u32)s[(k + 1) * LDR + r] << 16;
  }
};

// A shared-memory element as float.
__device__ __forceinline__ float value(float v) { return v; }
template <typename T, typename EE = E>
__device__ __forceinline__ float value(T raw) {
  EE e;
  e.u = raw;
  return (float)e;
}
__device__ __forceinline__ u32 tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}


