//===- attention_grad.cuh - the attention backward on CUDA cores -*- CUDA -*-===//
//
// Body of Emitter::attentionGrad's pass 3 (AttentionKernels.cpp): a block
// takes BKY keys of one (batch, key head) and adds dk and dv over every
// query of the G query heads that read it.
// Buffers: dy, stats (workspace: lse and dy.y per query); pointers qp, kp,
// vp (operands) and dkp, dvp (gradients) at head 0's column.
// Constants: attnConsts' B, T, D, H, HKV, G, HD, HDP, NC, QROW, KVROW,
// CAUSAL, SCALE; KPW, BKY, KT; dots<R> and weighted<R>.
//===----------------------------------------------------------------------===//
  __shared__ __align__(16) float kk[BKY * HD];
  __shared__ __align__(16) float vv[BKY * HD];
  __shared__ __align__(16) float qs[32 * HDP];
  __shared__ __align__(16) float gs[32 * HDP];
  __shared__ __align__(16) float ps[8][KPW][32];
  __shared__ __align__(16) float dss[8][KPW][32];
  __shared__ float lses[32], deltas[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int tile = blockIdx.x; tile < B * HKV * KT; tile += gridDim.x) {
    const int kt = tile % KT;  // the longest causal tiles first
    const int hk = tile / KT % HKV, b = tile / KT / HKV;
    const int u0 = kt * BKY;
    __syncthreads();
    for (int e = threadIdx.x; e < BKY * HD; e += blockDim.x) {
      const int r = e / HD, c = e % HD;
      const bool ok = u0 + r < T;
      const i64 at = ((i64)b * T + u0 + r) * KVROW + hk * HD + c;
      kk[e] = ok ? kp[at] : 0.f;
      vv[e] = ok ? vp[at] : 0.f;
    }
    float dk[KPW][NC], dv[KPW][NC];
#pragma unroll
    for (int i = 0; i < KPW; ++i)
#pragma unroll
      for (int j = 0; j < NC; ++j)
        dk[i][j] = dv[i][j] = 0.f;
    for (int h = hk * G; h < hk * G + G; ++h) {
      const auto *qb = qp + (i64)b * T * QROW + h * HD;
      const float *st = stats + ((i64)b * H + h) * T * 2;
      for (int t0 = CAUSAL ? u0 / 32 * 32 : 0; t0 < T; t0 += 32) {
        __syncthreads();
        for (int e = threadIdx.x; e < 32 * HD; e += blockDim.x) {
          const int r = e / HD, c = e % HD;
          const bool ok = t0 + r < T;
          qs[r * HDP + c] = ok ? qb[(i64)(t0 + r) * QROW + c] : 0.f;
          gs[r * HDP + c] = ok ? dy[((i64)b * T + t0 + r) * D + h * HD + c] : 0.f;
        }
        if (threadIdx.x < 32) {
          const bool ok = t0 + threadIdx.x < T;
          lses[threadIdx.x] = ok ? st[(t0 + threadIdx.x) * 2] : 0.f;
          deltas[threadIdx.x] = ok ? st[(t0 + threadIdx.x) * 2 + 1] : 0.f;
        }
        __syncthreads();
        if (CAUSAL && t0 + 31 < u0 + warp)
          continue;  // every query of the tile precedes the warp's keys
        const int t = t0 + lane;
        float s[KPW], dp[KPW];
        dots<KPW>(s, kk + warp * HD, 8 * HD, qs + lane * HDP);
        dots<KPW>(dp, vv + warp * HD, 8 * HD, gs + lane * HDP);
#pragma unroll
        for (int i = 0; i < KPW; ++i) {
          const int u = u0 + warp + 8 * i;
          const bool valid = u < T && t < T && (!CAUSAL || t >= u);
          const float p = valid ? expf(s[i] * SCALE - lses[lane]) : 0.f;
          ps[warp][i][lane] = p;
          dss[warp][i][lane] = p * (dp[i] - deltas[lane]) * SCALE;
        }
        __syncwarp();
        weighted<KPW>(dv, ps[warp], gs, lane);
        weighted<KPW>(dk, dss[warp], qs, lane);
        __syncwarp();
      }
    }
#pragma unroll
    for (int i = 0; i < KPW; ++i) {
      const int u = u0 + warp + 8 * i;
      if (u >= T)
        continue;
      const i64 at = ((i64)b * T + u) * KVROW + hk * HD;
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (lane + 32 * j < HD) {
          dkp[at + lane + 32 * j] = dk[i][j];
          dvp[at + lane + 32 * j] = dv[i][j];
        }
    }
  }
