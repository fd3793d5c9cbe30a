//===- flash_dkdv.cuh - the tensor-core attention backward, dk and dv -*- CUDA -*-===//
//
// dk and dv: a block of 4 warps takes ROWS keys of one (batch, key head),
// a warp MW atoms of 16, and streams query tiles of STEP (with their dy
// rows and statistics) of each of the G query heads that read the key head,
// one head after the other: dk and dv sum over them in registers.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  E *sk = reinterpret_cast<E *>(smem), *sv = sk + ROWS * LDS;
  E *sq = sv + ROWS * LDS, *sg = sq + 2 * STEP * LDS;
  float *sl = reinterpret_cast<float *>(sg + 2 * STEP * LDS), *sd = sl + 2 * STEP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // Causal: the first key tiles see the most queries; they go first.
  int bh, tile;
  flash_block(B * HKV, bh, tile);
  const int k0 = tile * ROWS;
  const int b = bh / HKV, hk = bh % HKV, r0 = warp * 16 * MW;
  const E *kb = kp + (i64)b * T * KVROW + hk * HD, *vb = vp + (i64)b * T * KVROW + hk * HD;
  const int first = CAUSAL ? k0 / STEP * STEP : 0;
  const int nq = (T - first + STEP - 1) / STEP;  // query tiles a head
  // Iteration j: query tile j % nq of head hk G + j / nq.
  auto load_queries = [&](int j) {
    const int h = hk * G + j / nq, q = first + j % nq * STEP, s = j & 1;
    const float *ls = lse + ((i64)b * H + h) * T, *ds = deltas + ((i64)b * H + h) * T;
    load_tile<STEP>(sq + s * STEP * LDS, qp + (i64)b * T * QROW + h * HD, QROW, q);
    load_tile<STEP>(sg + s * STEP * LDS, dy + (i64)b * T * D + h * HD, D, q);
    for (int i = threadIdx.x; i < STEP; i += blockDim.x) {  // zeros past T
      const bool ok = q + i < T;
      cp_async<4>(sl + s * STEP + i, ls + (ok ? q + i : 0), ok);
      cp_async<4>(sd + s * STEP + i, ds + (ok ? q + i : 0), ok);
    }
  };
  load_tile<ROWS>(sk, kb, KVROW, k0);
  load_tile<ROWS>(sv, vb, KVROW, k0);
  load_queries(0);
  cp_async_commit();
  float dk[MW][HD / 8][4], dv[MW][HD / 8][4];
  zero(dk);
  zero(dv);
  for (int j = 0; j < G * nq; ++j) {
    const int q0 = first + j % nq * STEP, s0 = j & 1;
    const E *qs = sq + s0 * STEP * LDS, *gs = sg + s0 * STEP * LDS;
    if (j + 1 < G * nq) {
      load_queries(j + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // Causal: a query tile wholly before the warp's first key adds nothing.
    if (!CAUSAL || q0 + STEP - 1 >= k0 + r0) {
      // Transposed scores: rows are the warp's keys, columns the queries.
      float s[MW][STEP / 8][4], dp[MW][STEP / 8][4];
      zero(s);
      zero(dp);
      mma_tiles<MW, HD / 16, STEP / 8>(s, sk, r0, qs);
      mma_tiles<MW, HD / 16, STEP / 8>(dp, sv, r0, gs);
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = n * 8 + c2 + e;
          const float l2 = sl[s0 * STEP + c] * LOG2E, dl = sd[s0 * STEP + c];  // base 2
#pragma unroll
          for (int i = 0; i < MW; ++i)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const float p = ex2(fmaf(s[i][n][2 * r + e], SCALE2, -l2));
              s[i][n][2 * r + e] = p;
              dp[i][n][2 * r + e] = p * (dp[i][n][2 * r + e] - dl);
            }
        }
      // Masks only on the tiles that need them (warp-uniform): queries past
      // T, the causal diagonal. Keys past T only touch their own rows of
      // dk and dv, which are not stored.
      if (q0 + STEP > T || (CAUSAL && k0 + r0 + 16 * MW - 1 > q0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int key = k0 + r0 + row, q = q0 + col;
          if (q >= T || (CAUSAL && key > q))
            s[i][n][e] = dp[i][n][e] = 0.f;
        });
      mma_regs<MW, STEP / 16, HD / 8>(dv, s, gs);
      mma_regs<MW, STEP / 16, HD / 8>(dk, dp, qs);
    }
    __syncthreads();
  }
  float csk[HD / 8][2] = {}, csv[HD / 8][2] = {};  // COLSUM: the stored columns' sums
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = k0 + r0 + 16 * i + g + 8 * r;
      if (key >= T)
        continue;
      const i64 at = ((i64)b * T + key) * KVROW + hk * HD;
      store_row_rope(dkp + at, dk[i], r, c2, SCALE, key, csk);
      store_row_sum(dvp + at, dv[i], r, c2, csv);
    }
  if (COLSUM) {
    float *red = reinterpret_cast<float *>(smem);
    column_sums_out<HD / 8, 16 * MW>(csk, part, red, b, k0, KCOL + hk * HD);
    column_sums_out<HD / 8, 16 * MW>(csv, part, red, b, k0, VCOL + hk * HD);
  }

