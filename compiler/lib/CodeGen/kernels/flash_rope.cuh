//===- flash_rope.cuh - dq and dk turned back by a rope --------*- CUDA -*-===//
//
// The gradient kernels' stores in an "attention_grad" region (gt-fuse): the
// gradient of attention over rope(q) and rope(k) is the inverse rope of the
// dq and dk the kernels compute, applied here as each thread stores its own
// accumulators (after flash_mma.cuh; ROPE, ROPE_THETA and ROPE_INTERLEAVED
// before it). A thread holds both elements of each of its pairs: (i, i +
// HD / 2) are chunks n and n + NT / 2 of its columns, (2i, 2i + 1) its two
// columns of a chunk. The angle of pair i at the row's position `pos` is
// pos * 2^(i * -2 log2(theta) / HD), reduced to [-pi, pi] in two parts
// of 2 pi, then __sincosf: within about 1e-4 of the rope kernel's precise
// powf and sincosf at position 1000 (a few 1e-7 near 0), far below the
// 16-bit dq and dk the region stores, where the precise functions made
// llama124m's dq kernel 25% slower (test/bench/NOTES.md, thirty-first
// session).
//===----------------------------------------------------------------------===//

// store_row, the pairs turned by minus their angle when ROPE.
template <int NT>
__device__ __forceinline__ void store_row_rope(E *out, const float (&c)[NT][4], int r,
                                               int c2, float scale, int pos) {
  if (!ROPE) {
    store_row(out, c, r, c2, scale);
    return;
  }
  float v[NT][2];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    v[n][0] = c[n][2 * r] * scale;
    v[n][1] = c[n][2 * r + 1] * scale;
  }
  const float l2 = -2.0f * log2f(ROPE_THETA) / (float)HD;
  auto turn_back = [&](float &x1, float &x2, int i) {
    const float a = (float)pos * exp2f((float)i * l2);
    const float k = rintf(a * 0.159154943f);  // 1 / (2 pi)
    const float red = fmaf(-k, -1.74845553e-7f, fmaf(-k, 6.28318548f, a));
    float sn, cs;
    __sincosf(red, &sn, &cs);
    const float y1 = x1;
    x1 = y1 * cs + x2 * sn;
    x2 = x2 * cs - y1 * sn;
  };
#pragma unroll
  for (int n = 0; n < (ROPE_INTERLEAVED ? NT : NT / 2); ++n) {
    if (ROPE_INTERLEAVED) {
      turn_back(v[n][0], v[n][1], (n * 8 + c2) / 2);
    } else {
#pragma unroll
      for (int e = 0; e < 2; ++e)
        turn_back(v[n][e], v[n + NT / 2][e], n * 8 + c2 + e);
    }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
    store2(out + n * 8 + c2, v[n][0], v[n][1]);
}
