//===- flash_rope.cuh - The gradient kernels' region stores ----*- CUDA -*-===//
//
// The gradient kernels' stores in an "attention_grad" region (gt-fuse),
// after flash_mma.cuh; ROPE, ROPE_THETA, ROPE_INTERLEAVED and COLSUM before
// it (with COLSUM also NC and COLS).
//
// Ropes: the gradient of attention over rope(q) and rope(k) is the inverse
// rope of the dq and dk the kernels compute, applied as each thread stores
// its own accumulators. A thread holds both elements of each of its pairs:
// (i, i + HD / 2) are chunks n and n + NT / 2 of its columns, (2i, 2i + 1)
// its two columns of a chunk. The angle of pair i at the row's position
// `pos` is pos * 2^(i * -2 log2(theta) / HD), reduced to [-pi, pi] in two
// parts of 2 pi, then __sincosf: within about 1e-4 of the rope kernel's
// precise powf and sincosf at position 1000 (a few 1e-7 near 0), far below
// the 16-bit dq and dk the region stores, where the precise functions made
// llama124m's dq kernel 25% slower (test/bench/NOTES.md, thirty-first
// session).
//
// Column sums (COLSUM): the sums over all rows of the packed gradient dqkv
// as stored, a linear's bias gradient (GPT-2's c_attn), which cuBLASLt's
// BGRADB epilogue would otherwise take in the weight gradient's GEMM by
// reading dqkv again. Each block sums its rows' columns by 64-row chunks
// into the workspace; a second launch adds the chunks in order, so the
// sums are the same at every run (no atomics).
//===----------------------------------------------------------------------===//

// With COLSUM: two values as store2 stores them (rounded to E) added to
// their columns' sums.
__device__ __forceinline__ void add_stored(float (&cs)[2], float lo, float hi) {
  if (!COLSUM)
    return;
  E l, h;
  l = lo;
  h = hi;
  cs[0] += (float)l;
  cs[1] += (float)h;
}

// store_row, the pairs turned by minus their angle when ROPE; with
// COLSUM each stored value, as stored (rounded to E), is added to its
// column's sum cs[n][e] (column n * 8 + c2 + e).
template <int NT>
__device__ __forceinline__ void store_row_rope(E *out, const float (&c)[NT][4], int r,
                                               int c2, float scale, int pos,
                                               float (&cs)[NT][2]) {
  float v[NT][2];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    v[n][0] = c[n][2 * r] * scale;
    v[n][1] = c[n][2 * r + 1] * scale;
  }
  if (ROPE) {
    const float l2 = -2.0f * log2f(ROPE_THETA) / (float)HD;
    auto turn_back = [&](float &x1, float &x2, int i) {
      const float a = (float)pos * exp2f((float)i * l2);
      const float k = rintf(a * 0.159154943f);  // 1 / (2 pi)
      const float red = fmaf(-k, -1.74845553e-7f, fmaf(-k, 6.28318548f, a));
      float sn, cn;
      __sincosf(red, &sn, &cn);
      const float y1 = x1;
      x1 = y1 * cn + x2 * sn;
      x2 = x2 * cn - y1 * sn;
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
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    store2(out + n * 8 + c2, v[n][0], v[n][1]);
    add_stored(cs[n], v[n][0], v[n][1]);
  }
}

// store_row with scale 1, its stored values added to cs with COLSUM (dv).
template <int NT>
__device__ __forceinline__ void store_row_sum(E *out, const float (&c)[NT][4], int r, int c2,
                                              float (&cs)[NT][2]) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    store2(out + n * 8 + c2, c[n][2 * r], c[n][2 * r + 1]);
    add_stored(cs[n], c[n][2 * r], c[n][2 * r + 1]);
  }
}

// With COLSUM, after the stores: the sums cs of a thread's stored rows, added
// over the lanes of its quad's column (g = 0 .. 7) and then over the warps
// of each 64-row chunk of the block's rows, in order, go to part[(b NC +
// chunk) COLS + col0 + column] (NC = ceil(T / 64)): one double a column
// and chunk, each written once (chunks from T on are not). A warp holds
// WROWS consecutive rows of the block's, from row0 + warp WROWS; `red` is
// shared memory of HD floats a warp that the block no longer uses.
template <int NT, int WROWS>
__device__ __forceinline__ void column_sums_out(float (&cs)[NT][2], double *part, float *red,
                                                int b, int row0, int col0) {
  constexpr int WPC = 64 / WROWS;  // warps a chunk
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = cs[n][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (lane < 4)
        red[warp * HD + n * 8 + lane * 2 + e] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < warps / WPC * HD; i += blockDim.x) {
    const int chunk = i / HD, c = i % HD, r = row0 + chunk * 64;
    if (r >= T)
      continue;
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < WPC; ++w)
      t += red[(chunk * WPC + w) * HD + c];
    part[((i64)b * NC + r / 64) * COLS + col0 + c] = (double)t;
  }
  __syncthreads();
}
