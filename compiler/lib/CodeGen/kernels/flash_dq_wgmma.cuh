//===- flash_dq_wgmma.cuh - Attention's dq on wgmma ------------*- CUDA -*-===//
//
// flash_dq for Hopper (sm_90a): a block of warpgroups takes ROWS queries of
// one (batch, head), a warpgroup 64; key tiles of STEP stream
// through shared memory in wgmma's swizzled layout. S = Q K^T and
// dP = dy V^T take both operands from shared memory; dq += dS K takes dS
// from registers and K as an MN-major operand.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  // Q, dy, then two stages each of K and V, 1024-byte aligned.
  const u32 sq = (smem_u32(smem) + 1023) & ~1023u, sg = sq + ROWS * HD * 2,
            sk = sg + ROWS * HD * 2, sv = sk + 2 * STEP * HD * 2;
  // A block of one warpgroup has wg 0 as a constant (uniform addresses).
  const int wg = THREADS > 128 ? threadIdx.x >> 7 : 0, warp = (threadIdx.x >> 5) & 3,
            lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  int bh, tile;
  flash_block(B * H, bh, tile);
  const int q0 = (NB - 1 - tile) * ROWS;  // the longest causal tiles first
  const int b = bh / H, h = bh % H, r0 = wg * 64 + warp * 16;
  const E *qb = qp + (i64)b * T * QROW + h * HD;
  const E *kb = kp + (i64)b * T * KVROW + h / G * HD, *vb = vp + (i64)b * T * KVROW + h / G * HD;
  const int nk = ((CAUSAL ? min(T, q0 + ROWS) : T) + STEP - 1) / STEP;
  load_tile_sw<ROWS>(sq, qb, QROW, q0);
  load_tile_sw<ROWS>(sg, dy + (i64)b * T * D + h * HD, D, q0);
  load_tile_sw<STEP>(sk, kb, KVROW, 0);
  load_tile_sw<STEP>(sv, vb, KVROW, 0);
  cp_async_commit();
  // delta = dy . y for the warp's 16 rows, 2 lanes a row: stored for dkdv,
  // and spread to the lanes that hold the row's accumulators.
  float lse2[2], delta[2];
  {
    const int q = q0 + r0 + lane / 2, c0 = (lane % 2) * (HD / 2);
    float d = 0.f;
    if (q < T) {  // 16-byte loads: 8 elements of each
      const uint4 *gr = reinterpret_cast<const uint4 *>(dy + ((i64)b * T + q) * D + h * HD + c0);
      const uint4 *yr = reinterpret_cast<const uint4 *>(y + ((i64)b * T + q) * D + h * HD + c0);
#pragma unroll
      for (int c = 0; c < HD / 2 / 8; ++c) {
        const uint4 gv = gr[c], yv = yr[c];
        const E *ge = reinterpret_cast<const E *>(&gv), *ye = reinterpret_cast<const E *>(&yv);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          d += (float)ge[e] * (float)ye[e];
      }
    }
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (q < T && lane % 2 == 0)
      deltas[((i64)b * H + h) * T + q] = d;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      delta[r] = __shfl_sync(0xffffffffu, d, row * 2);
      lse2[r] = lse[((i64)b * H + h) * T + min(q0 + r0 + row, T - 1)] * LOG2E;  // base 2
    }
  }
  float dq[1][HD / 8][4];
  zero(dq);
  for (int j = 0; j < nk; ++j) {
    const u32 ks = sk + (j & 1) * STEP * HD * 2, vs = sv + (j & 1) * STEP * HD * 2;
    if (j + 1 < nk) {
      const int next = (j + 1) & 1;
      load_tile_sw<STEP>(sk + next * STEP * HD * 2, kb, KVROW, (j + 1) * STEP);
      load_tile_sw<STEP>(sv + next * STEP * HD * 2, vb, KVROW, (j + 1) * STEP);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int k0 = j * STEP;
    if (!CAUSAL || k0 <= q0 + wg * 64 + 63) {  // warpgroup-uniform
      // S and dP in two groups: the exponentials of P run while dP's
      // MMAs do.
      float s[1][STEP / 8][4], dp[1][STEP / 8][4];
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
        wg_ss<0>(s[0], wg_kmajor<ROWS>(sq, wg * 64, kc), wg_kmajor<STEP>(ks, 0, kc), kc > 0);
      wg_commit();
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
        wg_ss<0>(dp[0], wg_kmajor<ROWS>(sg, wg * 64, kc), wg_kmajor<STEP>(vs, 0, kc), kc > 0);
      wg_commit();
      wg_wait<1>();
      wg_hold(s[0]);
      for_each_acc<1, STEP / 8>([&](int i, int n, int e, int, int) {
        s[i][n][e] = ex2(fmaf(s[i][n][e], SCALE2, -lse2[e >> 1]));
      });
      wg_wait<0>();
      wg_hold(dp[0]);
      for_each_acc<1, STEP / 8>([&](int i, int n, int e, int, int) {
        s[i][n][e] *= dp[i][n][e] - delta[e >> 1];
      });
      // Masks only on the tiles that need them (warp-uniform): keys past T,
      // queries past T, the causal diagonal.
      if (k0 + STEP > T || q0 + r0 + 16 > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
        for_each_acc<1, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int q = q0 + r0 + row, key = k0 + col;
          if (key >= T || q >= T || (CAUSAL && key > q))
            s[i][n][e] = 0.f;
        });
      u32 da[STEP / 16][4];
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        acc_to_a(da[kc], s[0], kc);
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        wg_rs<1>(dq[0], da[kc], wg_mnmajor<STEP>(ks, kc), 1);
      wg_commit();
      wg_wait<0>();
      wg_hold(dq[0]);
    }
    __syncthreads();
  }
  float cs[HD / 8][2] = {};  // COLSUM: the stored columns' sums
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int q = q0 + r0 + g + 8 * r;
    if (q < T)
      store_row_rope(dqp + ((i64)b * T + q) * QROW + h * HD, dq[0], r, c2, SCALE, q, cs);
  }
  if (COLSUM)
    column_sums_out<HD / 8, 16>(cs, part, reinterpret_cast<float *>(smem), b, q0, QCOL + h * HD);
