//===- flash_dkdv_wgmma.cuh - Attention's dk and dv on wgmma ---*- CUDA -*-===//
//
// flash_dkdv for Hopper (sm_90a): a block of warpgroups takes ROWS keys of
// one (batch, key head), a warpgroup 64, and streams query
// tiles of STEP (with their dy rows and statistics) of each of the G query
// heads that read the key head. S^T = K Q^T and dP^T = V dy^T take both
// operands from shared memory (two MMA groups: P^T's exponentials while
// dP^T's run); dv += P^T dy and dk += dS^T Q take P^T and dS^T from
// registers and dy and Q as MN-major operands.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  // K, V, then two stages each of Q and dy, 1024-byte aligned; then two
  // stages of the queries' lse and delta.
  const u32 sk = (smem_u32(smem) + 1023) & ~1023u, sv = sk + ROWS * HD * 2,
            sq = sv + ROWS * HD * 2, sg = sq + 2 * STEP * HD * 2;
  float *sl = reinterpret_cast<float *>(smem + (sg + 2 * STEP * HD * 2 - smem_u32(smem))),
        *sd = sl + 2 * STEP;
  // A block of one warpgroup has wg 0 as a constant (uniform addresses).
  const int wg = THREADS > 128 ? threadIdx.x >> 7 : 0, warp = (threadIdx.x >> 5) & 3,
            lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // Causal: the first key tiles see the most queries; they go first.
  int bh, tile;
  flash_block(B * HKV, bh, tile);
  const int k0 = tile * ROWS;
  const int b = bh / HKV, hk = bh % HKV, r0 = wg * 64 + warp * 16;
  const E *kb = kp + (i64)b * T * KVROW + hk * HD, *vb = vp + (i64)b * T * KVROW + hk * HD;
  const int first = CAUSAL ? k0 / STEP * STEP : 0;
  const int nq = (T - first + STEP - 1) / STEP;  // query tiles a head
  // The tiles in order: query tiles 0 .. nq - 1 of head hk G, of hk G + 1,
  // ...; (nh, nt) the next to load into stage s.
  int nh = 0, nt = 0;
  auto load_queries = [&](int s) {
    const int h = hk * G + nh, q = first + nt * STEP;
    if (++nt == nq)
      nt = 0, ++nh;
    const float *ls = lse + ((i64)b * H + h) * T, *ds = deltas + ((i64)b * H + h) * T;
    load_tile_sw<STEP>(sq + s * STEP * HD * 2, qp + (i64)b * T * QROW + h * HD, QROW, q);
    load_tile_sw<STEP>(sg + s * STEP * HD * 2, dy + (i64)b * T * D + h * HD, D, q);
    if constexpr (T % 4 == 0) {  // 4 queries a thread, zeros past T
      if (threadIdx.x < STEP / 2) {
        const bool l = threadIdx.x < STEP / 4;
        const int i = threadIdx.x % (STEP / 4) * 4, n = max(0, min(4, T - q - i));
        cp_async_zfill((l ? sl : sd) + s * STEP + i, (l ? ls : ds) + (n > 0 ? q + i : 0), 4 * n);
      }
    } else {
      for (int i = threadIdx.x; i < STEP; i += THREADS) {  // zeros past T
        const bool ok = q + i < T;
        cp_async<4>(sl + s * STEP + i, ls + (ok ? q + i : 0), ok);
        cp_async<4>(sd + s * STEP + i, ds + (ok ? q + i : 0), ok);
      }
    }
  };
  load_tile_sw<ROWS>(sk, kb, KVROW, k0);
  load_tile_sw<ROWS>(sv, vb, KVROW, k0);
  load_queries(0);
  cp_async_commit();
  int ct = 0;  // the current tile's query tile
  float dk[1][HD / 8][4], dv[1][HD / 8][4];
  zero(dk);
  zero(dv);
  for (int j = 0; j < G * nq; ++j) {
    const int q0 = first + ct * STEP, s0 = j & 1;
    ct = ct + 1 == nq ? 0 : ct + 1;
    const u32 qs = sq + s0 * STEP * HD * 2, gs = sg + s0 * STEP * HD * 2;
    if (j + 1 < G * nq) {
      load_queries((j + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    // Causal: a query tile wholly before the warpgroup's first key adds
    // nothing (warpgroup-uniform).
    if (!CAUSAL || q0 + STEP - 1 >= k0 + wg * 64) {
      // Transposed scores: rows are the warpgroup's keys, columns queries.
      // S^T and dP^T in two groups: P's exponentials run while dP's MMAs
      // do (as in dq; alone 2.7-2.9% faster at T 4096 and level at T 1024,
      // in llama124m's steps within their spread: test/bench/NOTES.md,
      // fortieth session).
      float s[1][STEP / 8][4], dp[1][STEP / 8][4];
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
        wg_ss<0>(s[0], wg_kmajor<ROWS>(sk, wg * 64, kc), wg_kmajor<STEP>(qs, 0, kc), kc > 0);
      wg_commit();
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
        wg_ss<0>(dp[0], wg_kmajor<ROWS>(sv, wg * 64, kc), wg_kmajor<STEP>(gs, 0, kc), kc > 0);
      wg_commit();
      wg_wait<1>();
      wg_hold(s[0]);
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n) {
        // The thread's two columns' lse (8 bytes), in base 2.
        const float2 l = *reinterpret_cast<const float2 *>(sl + s0 * STEP + n * 8 + c2);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float l2 = (e ? l.y : l.x) * LOG2E;
#pragma unroll
          for (int r = 0; r < 2; ++r)
            s[0][n][2 * r + e] = ex2(fmaf(s[0][n][2 * r + e], SCALE2, -l2));
        }
      }
      wg_wait<0>();
      wg_hold(dp[0]);
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n) {
        // Their delta: dS = P (dP - delta).
        const float2 d = *reinterpret_cast<const float2 *>(sd + s0 * STEP + n * 8 + c2);
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            dp[0][n][2 * r + e] = s[0][n][2 * r + e] * (dp[0][n][2 * r + e] - (e ? d.y : d.x));
      }
      // Masks only on the tiles that need them (warp-uniform): queries past
      // T, the causal diagonal. Keys past T only touch their own rows of
      // dk and dv, which are not stored.
      if (q0 + STEP > T || (CAUSAL && k0 + r0 + 15 > q0))
        for_each_acc<1, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int key = k0 + r0 + row, q = q0 + col;
          if (q >= T || (CAUSAL && key > q))
            s[i][n][e] = dp[i][n][e] = 0.f;
        });
      u32 pa[STEP / 16][4], da[STEP / 16][4];
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc) {
        acc_to_a(pa[kc], s[0], kc);
        acc_to_a(da[kc], dp[0], kc);
      }
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        wg_rs<1>(dv[0], pa[kc], wg_mnmajor<STEP>(gs, kc), 1);
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        wg_rs<1>(dk[0], da[kc], wg_mnmajor<STEP>(qs, kc), 1);
      wg_commit();
      wg_wait<0>();
      wg_hold(dv[0]);
      wg_hold(dk[0]);
    }
    __syncthreads();
  }
  float csk[HD / 8][2] = {}, csv[HD / 8][2] = {};  // COLSUM: the stored columns' sums
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = k0 + r0 + g + 8 * r;
    if (key >= T)
      continue;
    const i64 at = ((i64)b * T + key) * KVROW + hk * HD;
    store_row_rope(dkp + at, dk[0], r, c2, SCALE, key, csk);
    store_row_sum(dvp + at, dv[0], r, c2, csv);
  }
  if (COLSUM) {
    float *red = reinterpret_cast<float *>(smem);
    column_sums_out<HD / 8, 16>(csk, part, red, b, k0, KCOL + hk * HD);
    column_sums_out<HD / 8, 16>(csv, part, red, b, k0, VCOL + hk * HD);
  }
