//===- small_gemm.cuh - The small GEMM with its epilogues ------*- CUDA -*-===//
//
// Body of Emitter::smallGemm (GemmKernels.cpp): a GEMM of few rows or a
// short K, STAGES slices of K in flight, partial tiles added across the
// cluster, then the epilogues the constants select. Buffers: a, b, [bias],
// [mask], c, [colsum], [rowsum]; constants: small_gemm_prelude.cuh's and the
// emitter's.
//===----------------------------------------------------------------------===//

  // STAGES slices of K in flight (cp.async); then the partial tiles.
  extern __shared__ __align__(16) unsigned char smem[];
  S_T *tiles = reinterpret_cast<S_T *>(smem); // [STAGES][A, B][TILE]
  float (*parts)[BM][CW] = reinterpret_cast<float (*)[BM][CW]>(smem + TILES_BYTES);
  const int tile = blockIdx.x / S, m0 = tile / NT * BM, n0 = tile % NT * BN;
#if CLUSTERS
  __shared__ __align__(8) unsigned long long bar; // the parts' arrival
  if (S > 1)
    push_begin(&bar, BM * BN * 4); // S parts of BM x CW floats
  const int rank = S > 1 ? (int)cluster_rank() : 0;
  const int kbegin = rank * KPER, kend = min(K, kbegin + KPER);
#else
  const int rank = blockIdx.x % S, kbegin = 0, kend = K;
#endif
  const int nk = kend > kbegin ? (kend - kbegin + BK - 1) / BK : 0;
  const int warp = threadIdx.x >> 5, wm = (warp >> 2) * 32, wn = (warp & 3) * 16;
  float acc[2][NI][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        acc[mi][ni][c] = 0.0f;
#if ROWSUM
  static_assert(S == 1, "the bias gradient's row sums are not split");
  double rowsum_part = 0.0; // row threadIdx.x / 4, its quarter of each slice
#endif
  auto issue = [&](int i) {
    S_T *st = tiles + (i % STAGES) * 2 * TILE;
    TileA::load(st, a, m0, kbegin + i * BK, kend);
    TileB::load(st + TILE, b, n0, kbegin + i * BK, kend);
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < nk)
      issue(i);
    cp_async_commit();
  }
  for (int i = 0; i < nk; ++i) {
    if (i + STAGES - 1 < nk)
      issue(i + STAGES - 1);
    cp_async_commit();
    cp_async_wait<STAGES - 1>(); // slice i has landed
    __syncthreads();
    const S_T *st = tiles + (i % STAGES) * 2 * TILE;
    multiply<TileA, TileB>(acc, st, st + TILE, wm, wn);
#if ROWSUM // the first column tile's CTAs: 4 threads a row of op(A)
    if (tile % NT == 0)
#pragma unroll
      for (int k = 0; k < BK / 4; ++k)
        rowsum_part += value(TileA::at(st, threadIdx.x / 4, threadIdx.x % 4 * (BK / 4) + k));
#endif
    __syncthreads();
  }
  // Each 8-column mma tile goes to the CTA that finishes its columns
  // (column / CW), as part `rank` of its sum: stores into the cluster's
  // shared memory need no round trip, once every CTA has started.
#if CLUSTERS
  if (S > 1)
    push_ready();
#endif
  {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = wm + 16 * mi + g + 8 * h, col = wn + 8 * ni + 2 * t;
          const int owner = col / CW;
          const float x = acc[mi][ni][2 * h], y = acc[mi][ni][2 * h + 1];
#if CLUSTERS
          if (S > 1) {
            push(&parts[rank][row][col % CW], &bar, owner, x, y);
            continue;
          }
#endif
          if (owner == rank) {
            parts[0][row][col % CW] = x;
            parts[0][row][col % CW + 1] = y;
          }
        }
  }
#if CLUSTERS
  if (S > 1)
    push_wait(&bar); // every part has arrived
  else
#endif
    __syncthreads();
  // This CTA's columns of the tile, EPT elements a thread, all in one
  // column (THREADS is a multiple of CW): the epilogue's operands loaded
  // first, then the parts added in rank order and the epilogue applied.
  const int c0 = rank * CW;
  constexpr int EPT = BM * CW / THREADS;
  static_assert(BM * CW % THREADS == 0 && THREADS % CW == 0, "whole columns");
  const int j = threadIdx.x % CW, col = n0 + c0 + j;
  LOAD_DECLS
#pragma unroll
  for (int q = 0; q < EPT; ++q) {
    const int r = threadIdx.x / CW + q * (THREADS / CW), row = m0 + r;
    const bool ok = row < M && col < N;
    LOADS
  }
#if COLSUM
  double sum = 0.0; // rows threadIdx.x / CW, + THREADS / CW, ...
#endif
#pragma unroll
  for (int q = 0; q < EPT; ++q) {
    const int r = threadIdx.x / CW + q * (THREADS / CW), row = m0 + r;
    const bool ok = row < M && col < N;
    float v = 0.0f;
#pragma unroll
    for (int s = 0; s < PARTS; ++s)
      v += parts[s][r][j];
    EPILOGUE
    if (ok) {
      c[(i64)row * N + col] = v;
#if COLSUM
      sum += (double)v;
#endif
    }
  }
#if ROWSUM // the 4 partial sums of each row of op(A), in order
  double *rows = reinterpret_cast<double *>(smem); // the slices are done
  rows[threadIdx.x] = rowsum_part;
  __syncthreads();
  if (tile % NT == 0 && threadIdx.x < BM && m0 + threadIdx.x < M) {
    double s = 0.0;
    for (int p = 0; p < 4; ++p)
      s += rows[threadIdx.x * 4 + p];
    ROWSUM_T t; // the sum's type, then the stored one (a folded cast)
    t = (float)s;
    rowsum[m0 + threadIdx.x] = (float)t;
  }
#endif
#if COLSUM // M <= BM: this CTA holds whole columns. THREADS / CW partial
           // sums a column, added in order.
  double *sums = reinterpret_cast<double *>(smem); // the slices are done
  sums[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x < CW && col < N) {
    double s = 0.0;
    for (int p = 0; p < THREADS / CW; ++p)
      s += sums[p * CW + threadIdx.x];
    SUM_T t; // the sum's type, then the stored one (a folded cast)
    t = (float)s;
    colsum[col] = (float)t;
  }
#endif

