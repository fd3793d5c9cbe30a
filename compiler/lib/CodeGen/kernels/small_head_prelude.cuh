//===- small_head_prelude.cuh - the small classifier head's constants -*- CUDA -*-===//
//
// The small classifier head's constants and the cast helper as<T>, before
// small_head.cuh.
//===----------------------------------------------------------------------===//

constexpr int THREADS = 512;
constexpr int KQ = THREADS / 64; // threads a row of the logits' part
constexpr float LOG2E = 1.4426950408889634f;
#if CLUSTERS
constexpr int PASSES = 1;
#else
constexpr int PASSES = S;
#endif
constexpr int CPR = (N + KQ - 1) / KQ; // classes a thread of phase 2
// Phase 3: CT threads across the slice, CPT columns each; RG groups of rows.
constexpr int CT = KC / CPT;
constexpr int RG = THREADS / CT, RPG = (M + RG - 1) / RG;
static_assert(KC % 32 == 0 && CT <= THREADS, "slices of whole 32 columns");
// Shared memory: the slices of h and W ([M + N][LD] of E), the parts of the
// logits ([S][M][NP] floats; phase 3's partial dW rows after: AREA), the
// gradient of the logits ([M][NP]), the row losses and the row groups'
// partial column sums.
constexpr int SLICE_BYTES = ((M + N) * LD * (int)sizeof(E) + 15) / 16 * 16;
static_assert(AREA >= S * M * NP && AREA >= RG * N * KC, "area");

// v rounded to the type T (an op's result type) and back.
template <typename T> __device__ __forceinline__ float as(float v) {
  T t;
  t = v;
  return (float)t;
}

