//===- flash_forward_wgmma.cuh - Attention forward on wgmma ----*- CUDA -*-===//
//
// flash_forward for Hopper (sm_90a): a block of warpgroups takes ROWS
// queries of one (batch, head), a warpgroup 64 of them, a warp 16;
// key tiles of STEP keys of the head's key head stream through shared
// memory (cp.async; K two stages deep, V three) in wgmma's swizzled layout.
// S = Q K^T takes Q and K from shared memory; O += P V takes P from
// registers (the accumulator's layout is the A fragments') and V as an
// MN-major operand. Software-pipelined across tiles (FlashAttention-3's
// overlap within a warpgroup): tile j's S is issued before tile j - 1's
// P V, so the tensor cores run P V while the warps take tile j's softmax;
// P waits in registers (pa) a tile.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  // Q, then two stages of K and three of V, 1024-byte aligned (the swizzle).
  const u32 sq = (smem_u32(smem) + 1023) & ~1023u, sk = sq + ROWS * HD * 2,
            sv = sk + 2 * STEP * HD * 2;
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
  auto load_keys = [&](int j) {
    load_tile_sw<STEP>(sk + (j & 1) * STEP * HD * 2, kb, KVROW, j * STEP);
    load_tile_sw<STEP>(sv + j % 3 * STEP * HD * 2, vb, KVROW, j * STEP);
  };
  load_tile_sw<ROWS>(sq, qb, QROW, q0);
  load_keys(0);
  cp_async_commit();
  // Softmax state of the thread's rows g and g + 8 (base 2, scaled).
  float o[1][HD / 8][4], rmax[1][2], rsum[1][2];
  zero(o);
  rmax[0][0] = rmax[0][1] = -GTC_INF, rsum[0][0] = rsum[0][1] = 0.f;
  float s[1][STEP / 8][4];
  u32 pa[STEP / 16][4];  // the last tile's P, until its P V is done
  // Waits until tile j's K and V are in shared memory, having started
  // tile j + 1's: stages (j + 1) & 1 of K and (j + 1) % 3 of V were last
  // read by tile j - 1's S and tile j - 2's P V, which every warp has
  // waited for.
  auto next_tile = [&](int j) {
    if (j + 1 < nk)
      load_keys(j + 1);
    cp_async_commit();
    cp_async_wait<1>();
    // cp.async writes are generic-proxy writes; wgmma reads through the
    // async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  };
  auto issue_s = [&](int j) {  // S = Q K^T of tile j
    wg_fence();
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc)
      wg_ss<0>(s[0], wg_kmajor<ROWS>(sq, wg * 64, kc),
               wg_kmajor<STEP>(sk + (j & 1) * STEP * HD * 2, 0, kc), kc > 0);
    wg_commit();
  };
  auto issue_pv = [&](int j) {  // O += P V of tile j
    wg_fence();
#pragma unroll
    for (int kc = 0; kc < STEP / 16; ++kc)
      wg_rs<1>(o[0], pa[kc], wg_mnmajor<STEP>(sv + j % 3 * STEP * HD * 2, kc), 1);
    wg_commit();
  };
  // S's row maxima into the running ones and S into P (base 2); alpha
  // rescales what was summed before. A tile past every query of the
  // warpgroup (causal) is all masked: P = 0 and alpha = 1.
  auto softmax = [&](int j, float (&alpha)[2]) {
    const int k0 = j * STEP;
    if (k0 + STEP > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
      for_each_acc<1, STEP / 8>([&](int i, int n, int e, int row, int col) {
        const int q = q0 + r0 + row, key = k0 + col;
        if (key >= T || (CAUSAL && key > q))
          s[i][n][e] = -GTC_INF;
      });
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -GTC_INF;
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n)
        mx = fmaxf(mx, fmaxf(s[0][n][2 * r], s[0][n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(rmax[0][r], mx * SCALE2), base2 = mn == -GTC_INF ? 0.f : mn;
      alpha[r] = ex2(rmax[0][r] - base2);
      rmax[0][r] = mn;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < STEP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = ex2(fmaf(s[0][n][2 * r + e], SCALE2, -base2));
          s[0][n][2 * r + e] = p;
          sum += p;
        }
      rsum[0][r] = rsum[0][r] * alpha[r] + sum;
    }
  };
  float alpha[2];
  next_tile(0);
  issue_s(0);
  wg_wait<0>();
  wg_hold(s[0]);
  softmax(0, alpha);
#pragma unroll
  for (int kc = 0; kc < STEP / 16; ++kc)
    acc_to_a(pa[kc], s[0], kc);
  __syncthreads();
  for (int j = 1; j < nk; ++j) {
    next_tile(j);
    issue_s(j);
    issue_pv(j - 1);
    wg_wait<1>();
    wg_hold(s[0]);
    softmax(j, alpha);
    // Tile j - 1's P V is done: o, pa and its V stage are free.
    wg_wait<0>();
    wg_hold(o[0]);
    wg_hold(pa);
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        o[0][n][2 * r] *= alpha[r];
        o[0][n][2 * r + 1] *= alpha[r];
      }
#pragma unroll
    for (int kc = 0; kc < STEP / 16; ++kc)
      acc_to_a(pa[kc], s[0], kc);
    __syncthreads();
  }
  issue_pv(nk - 1);
  wg_wait<0>();
  wg_hold(o[0]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = rsum[0][r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int q = q0 + r0 + g + 8 * r;
    if (q < T) {
      store_row(y + ((i64)b * T + q) * D + h * HD, o[0], r, c2, 1.f / l);
      if ((lane & 3) == 0)  // natural log, as the CPU's
        lse[((i64)b * H + h) * T + q] = (rmax[0][r] + log2f(l)) * LN2;
    }
  }
