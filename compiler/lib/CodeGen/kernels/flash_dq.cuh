//===- flash_dq.cuh - The tensor-core attention backward, dq ---*- CUDA -*-===//
//
// dq: a block of 4 warps takes ROWS queries (a warp MW atoms, their Q and
// dy fragments in registers) and streams key tiles of STEP.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sg = sq + ROWS * LDS;
  E *sk = sg + ROWS * LDS, *sv = sk + 2 * STEP * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  int bh, tile;
  flash_block(B * H, bh, tile);
  const int q0 = (NB - 1 - tile) * ROWS;  // the longest causal tiles first
  const int b = bh / H, h = bh % H, r0 = warp * 16 * MW;
  const E *qb = qp + (i64)b * T * QROW + h * HD;
  const E *kb = kp + (i64)b * T * KVROW + h / G * HD, *vb = vp + (i64)b * T * KVROW + h / G * HD;
  const int nk = ((CAUSAL ? min(T, q0 + ROWS) : T) + STEP - 1) / STEP;
  load_tile<ROWS>(sq, qb, QROW, q0);
  load_tile<ROWS>(sg, dy + (i64)b * T * D + h * HD, D, q0);
  cp_async_commit();
  load_tile<STEP>(sk, kb, KVROW, 0);
  load_tile<STEP>(sv, vb, KVROW, 0);
  cp_async_commit();
  // delta = dy . y for the warp's 16 MW rows, LPR lanes a row: stored for
  // dkdv, and spread to the lanes that hold the row's accumulators.
  constexpr int LPR = 2 / MW;
  float lse2[MW][2], delta[MW][2];
  {
    const int q = q0 + r0 + lane / LPR, c0 = (lane % LPR) * (HD / LPR);
    float d = 0.f;
    if (q < T) {  // 16-byte loads: EV elements of each
      const uint4 *gr = reinterpret_cast<const uint4 *>(dy + ((i64)b * T + q) * D + h * HD + c0);
      const uint4 *yr = reinterpret_cast<const uint4 *>(y + ((i64)b * T + q) * D + h * HD + c0);
#pragma unroll
      for (int c = 0; c < HD / LPR / EV; ++c) {
        const uint4 gv = gr[c], yv = yr[c];
        const E *ge = reinterpret_cast<const E *>(&gv), *ye = reinterpret_cast<const E *>(&yv);
#pragma unroll
        for (int e = 0; e < EV; ++e)
          d += (float)ge[e] * (float)ye[e];
      }
    }
    if (LPR == 2)
      d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (q < T && lane % LPR == 0)
      deltas[((i64)b * H + h) * T + q] = d;
#pragma unroll
    for (int i = 0; i < MW; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = 16 * i + g + 8 * r;
        delta[i][r] = __shfl_sync(0xffffffffu, d, row * LPR);
        lse2[i][r] = lse[((i64)b * H + h) * T + min(q0 + r0 + row, T - 1)] * LOG2E;  // base 2
      }
  }
  cp_async_wait<1>();
  __syncthreads();
  u32 qa[HD / 16][MW][AW], ga[HD / 16][MW][AW];
  ld_frags<MW, HD / 16>(qa, sq, r0);
  ld_frags<MW, HD / 16>(ga, sg, r0);
  float dq[MW][HD / 8][4];
  zero(dq);
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * STEP * LDS, *vs = sv + (j & 1) * STEP * LDS;
    next_kv_tile<STEP>(sk, sv, kb, vb, j, nk);
    const int k0 = j * STEP;
    if (!CAUSAL || k0 <= q0 + r0 + 16 * MW - 1) {
      float s[MW][STEP / 8][4], dp[MW][STEP / 8][4];
      zero(s);
      zero(dp);
      mma_frags<MW, HD / 16, STEP / 8>(s, qa, ks);
      mma_frags<MW, HD / 16, STEP / 8>(dp, ga, vs);
      for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int, int) {
        const float p = ex2(fmaf(s[i][n][e], SCALE2, -lse2[i][e >> 1]));
        s[i][n][e] = p * (dp[i][n][e] - delta[i][e >> 1]);
      });
      // Masks only on the tiles that need them (warp-uniform): keys past T
      // (zero rows of K, but p may overflow there), queries past T, the
      // causal diagonal.
      if (k0 + STEP > T || q0 + r0 + 16 * MW > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int q = q0 + r0 + row, key = k0 + col;
          if (key >= T || q >= T || (CAUSAL && key > q))
            s[i][n][e] = 0.f;
        });
      mma_regs<MW, STEP / 16, HD / 8>(dq, s, ks);
    }
    __syncthreads();
  }
  float cs[HD / 8][2] = {};  // COLSUM: the stored columns' sums
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int q = q0 + r0 + 16 * i + g + 8 * r;
      if (q < T)
        store_row_rope(dqp + ((i64)b * T + q) * QROW + h * HD, dq[i], r, c2, SCALE, q, cs);
    }
  if (COLSUM)
    column_sums_out<HD / 8, 16 * MW>(cs, part, reinterpret_cast<float *>(smem), b, q0, QCOL + h * HD);

