//===- flash_forward.cuh - The tensor-core attention forward ---*- CUDA -*-===//
//
// The forward pass: a block of 4 warps takes ROWS queries of one (batch,
// head), a warp MW atoms of 16 rows with their Q fragments in registers;
// key tiles of STEP of the head's key head stream through shared memory.
//===----------------------------------------------------------------------===//
  extern __shared__ __align__(16) unsigned char smem[];
  E *sq = reinterpret_cast<E *>(smem), *sk = sq + ROWS * LDS, *sv = sk + 2 * STEP * LDS;
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
  cp_async_commit();
  load_tile<STEP>(sk, kb, KVROW, 0);
  load_tile<STEP>(sv, vb, KVROW, 0);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  u32 qa[HD / 16][MW][AW];
  ld_frags<MW, HD / 16>(qa, sq, r0);
  // Softmax state of the warp's rows g + 8 r of atom i: running max (base
  // 2, scaled) and sum.
  float o[MW][HD / 8][4], rmax[MW][2], rsum[MW][2];
  zero(o);
#pragma unroll
  for (int i = 0; i < MW; ++i)
    rmax[i][0] = rmax[i][1] = -GTC_INF, rsum[i][0] = rsum[i][1] = 0.f;
  for (int j = 0; j < nk; ++j) {
    const E *ks = sk + (j & 1) * STEP * LDS, *vs = sv + (j & 1) * STEP * LDS;
    next_kv_tile<STEP>(sk, sv, kb, vb, j, nk);
    const int k0 = j * STEP;
    // Causal: a tile wholly after the warp's last query adds nothing.
    if (!CAUSAL || k0 <= q0 + r0 + 16 * MW - 1) {
      float s[MW][STEP / 8][4];
      zero(s);
      mma_frags<MW, HD / 16, STEP / 8>(s, qa, ks);
      // Masks only on the tiles that need them (warp-uniform).
      if (k0 + STEP > T || (CAUSAL && k0 + STEP - 1 > q0 + r0))
        for_each_acc<MW, STEP / 8>([&](int i, int n, int e, int row, int col) {
          const int q = q0 + r0 + row, key = k0 + col;
          if (key >= T || (CAUSAL && key > q))
            s[i][n][e] = -GTC_INF;
        });
      // Online softmax in base 2 on unscaled scores (SCALE2 > 0 keeps the
      // max): p = 2^(s SCALE2 - max) in one FFMA and one MUFU op.
#pragma unroll
      for (int i = 0; i < MW; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -GTC_INF;
#pragma unroll
          for (int n = 0; n < STEP / 8; ++n)
            mx = fmaxf(mx, fmaxf(s[i][n][2 * r], s[i][n][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mn = fmaxf(rmax[i][r], mx * SCALE2), base2 = mn == -GTC_INF ? 0.f : mn;
          const float alpha = ex2(rmax[i][r] - base2);
          rmax[i][r] = mn;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < STEP / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float p = ex2(fmaf(s[i][n][2 * r + e], SCALE2, -base2));
              s[i][n][2 * r + e] = p;
              sum += p;
            }
          rsum[i][r] = rsum[i][r] * alpha + sum;
#pragma unroll
          for (int n = 0; n < HD / 8; ++n) {
            o[i][n][2 * r] *= alpha;
            o[i][n][2 * r + 1] *= alpha;
          }
        }
      mma_regs<MW, STEP / 16, HD / 8>(o, s, vs);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = rsum[i][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int q = q0 + r0 + 16 * i + g + 8 * r;
      if (q < T) {
        store_row(y + ((i64)b * T + q) * D + h * HD, o[i], r, c2, 1.f / l);
        if ((lane & 3) == 0)  // natural log, as the CPU's
          lse[((i64)b * H + h) * T + q] = (rmax[i][r] + log2f(l)) * LN2;
      }
    }

