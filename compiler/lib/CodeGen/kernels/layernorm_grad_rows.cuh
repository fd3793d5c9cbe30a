//===- layernorm_grad_rows.cuh - layer-norm backward over rows -*- CUDA -*-===//
//
// Fragment of Emitter::layernormGrad's launch 1 (NormKernels.cpp), after
// kRowLoop, the row's loads and kLayerNormStatistics: s1 and s2, dx, and the
// row's terms of the column sums. The emitter replaces STORE (dx, the
// residual's gradient, its cast; the bias gradient's terms). Buffers: dy, x,
// w, [dx, rg, tot, totc], part (workspace). Constants: rowConsts',
// normConsts', SLOTS, BLOCK_SUMS, NS, RG. The NS column sums are dw, db
// (layernorm's only) and the bias gradient's (in a norm region that has
// one), in that order; a sum not taken is dead code.
//===----------------------------------------------------------------------===//
    // s1 = mean(dxhat), s2 = mean(dxhat * xhat) with dxhat = dy * w, summed
    // as the statistics.
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int p = 0; p < CPV; ++p) {
      const int j = (lane + p * RT) * VEC;
      if (active && j < N) {
        float wv[VEC];
        loadv<VEC>(w + j, wv);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int c = p * VEC + e;
          const float xh = (xv[c] - mf) * rstd, g = gv[c] * wv[e];
          s1 += g;
          s2 += g * xh;
          aw[c] += gv[c] * xh;
          ab[c] += gv[c];
        }
      }
    }
    // (rmsnorm's dx has no mean(dxhat) term)
    const float s1f = CENTERED ? (float)(row_sum_wide<RT>(s1, red) / N) : 0.0f;
    const float s2f = (float)(row_sum_wide<RT>(s2, red) / N);
#pragma unroll
    for (int p = 0; p < CPV; ++p) {
      const int j = (lane + p * RT) * VEC;
      if (active && j < N) {
        const i64 o = row * N + j;
        float wv[VEC], dv[VEC], tv[VEC];
        loadv<VEC>(w + j, wv);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int c = p * VEC + e;
          const float xh = (xv[c] - mf) * rstd, g = gv[c] * wv[e];
          dv[e] = rstd * (g - s1f - xh * s2f);
        }
STORE      }
    }
  }
  if (BLOCK_SUMS) {
    // The block's row groups add their column sums in shared memory, in
    // group order; the block writes one slot.
    __shared__ float cs[BLOCK_SUMS ? RPB * N : 1];
    const int group = threadIdx.x / RT;
#pragma unroll
    for (int k = 0; k < NS; ++k) {
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        const int j = col(lane, c);
        if (j < N)
          cs[group * N + j] = sum_term(k, c, aw, ab, ag);
      }
      __syncthreads();
      for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float s = cs[j];
        for (int g = 1; g < RPB; ++g)
          s += cs[g * N + j];
        part[(k * SLOTS + blockIdx.x) * N + j] = s;
      }
      __syncthreads();
    }
  } else {
    const i64 slot = (i64)blockIdx.x * RPB + threadIdx.x / RT;
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      const int j = col(lane, c);
      if (j < N)
#pragma unroll
        for (int k = 0; k < NS; ++k)
          part[(k * SLOTS + slot) * N + j] = sum_term(k, c, aw, ab, ag);
    }
  }

