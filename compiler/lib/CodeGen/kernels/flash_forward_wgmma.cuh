//===- flash_forward_wgmma.cuh - Attention forward on wgmma ----*- CUDA -*-===//
//
// flash_forward for Hopper (sm_90a): a block of warpgroups takes ROWS
// queries of one (batch, head), a warpgroup 64 of them, a warp 16;
// key tiles of STEP keys of the head's key head stream through shared
// memory (cp.async, two stages) in wgmma's swizzled layout. S = Q K^T
// takes Q and K from shared memory; O += P V takes P from registers (the
// accumulator's layout is the A fragments') and V as an MN-major operand.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  // Q, then two stages each of K and V, 1024-byte aligned (the swizzle).
  const u32 sq = (smem_u32(smem) + 1023) & ~1023u, sk = sq + ROWS * HD * 2,
            sv = sk + 2 * STEP * HD * 2;
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, c2 = (lane & 3) * 2;
  // The longest causal tiles first.
  const int bh = blockIdx.x % (B * H), q0 = (NB - 1 - blockIdx.x / (B * H)) * ROWS;
  const int b = bh / H, h = bh % H, r0 = wg * 64 + warp * 16;
  const E *qb = qp + (i64)b * T * QROW + h * HD;
  const E *kb = kp + (i64)b * T * KVROW + h / G * HD, *vb = vp + (i64)b * T * KVROW + h / G * HD;
  const int nk = ((CAUSAL ? min(T, q0 + ROWS) : T) + STEP - 1) / STEP;
  load_tile_sw<ROWS>(sq, qb, QROW, q0);
  load_tile_sw<STEP>(sk, kb, KVROW, 0);
  load_tile_sw<STEP>(sv, vb, KVROW, 0);
  cp_async_commit();
  // Softmax state of the thread's rows g and g + 8 (base 2, scaled).
  float o[1][HD / 8][4], rmax[1][2], rsum[1][2];
  zero(o);
  rmax[0][0] = rmax[0][1] = -GTC_INF, rsum[0][0] = rsum[0][1] = 0.f;
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
    // cp.async writes are generic-proxy writes; wgmma reads through the
    // async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int k0 = j * STEP;
    // Causal: a tile wholly after the warpgroup's last query adds nothing
    // (warpgroup-uniform, as wgmma must be).
    if (!CAUSAL || k0 <= q0 + wg * 64 + 63) {
      float s[1][STEP / 8][4];
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc)
        wg_ss<0>(s[0], wg_kmajor<ROWS>(sq, wg * 64, kc), wg_kmajor<STEP>(ks, 0, kc), kc > 0);
      wg_commit();
      wg_wait<0>();
      wg_hold(s[0]);
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
        const float alpha = ex2(rmax[0][r] - base2);
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
        rsum[0][r] = rsum[0][r] * alpha + sum;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) {
          o[0][n][2 * r] *= alpha;
          o[0][n][2 * r + 1] *= alpha;
        }
      }
      u32 pa[STEP / 16][4];
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        acc_to_a(pa[kc], s[0], kc);
      wg_fence();
#pragma unroll
      for (int kc = 0; kc < STEP / 16; ++kc)
        wg_rs<1>(o[0], pa[kc], wg_mnmajor<STEP>(vs, kc), 1);
      wg_commit();
      wg_wait<0>();
      wg_hold(o[0]);
    }
    __syncthreads();
  }
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
