//===- small_head.cuh - A small classifier head and its loss ---*- CUDA -*-===//
//
// Body of Emitter::smallHead (LossKernels.cpp): a small classifier head,
// its logits, loss and gradients in one launch a slice of rows. Buffers
// grad, h, w, [bias], labels, y (the loss), dx, [colsum].
//===----------------------------------------------------------------------===//

  extern __shared__ __align__(16) unsigned char smem[];
  E *hs = reinterpret_cast<E *>(smem); // h's rows of the slice, then W's
  float *area = reinterpret_cast<float *>(smem + SLICE_BYTES);
  float *dl = area + AREA;
  double *rl = reinterpret_cast<double *>(dl + M * NP);
  double *dsum = rl + M;
#if CLUSTERS
  __shared__ __align__(8) unsigned long long bar; // the parts' arrival
  if (S > 1)
    push_begin(&bar, S * M * NP * 4);
  const int rank = S > 1 ? (int)cluster_rank() : 0;
#else
  const int rank = blockIdx.x;
#endif
  // 1. The parts of the logits, a slice of K each.
  const int prow = threadIdx.x / KQ, kq = threadIdx.x % KQ;
  for (int p = 0; p < PASSES; ++p) {
    const int slice = PASSES == 1 ? rank : (rank + 1 + p) % S;
    const int k0 = slice * KC;
    if (p > 0)
      __syncthreads(); // the last slice is read
    for (int q = threadIdx.x; q < (M + N) * (KC / V); q += THREADS) {
      const int r = q / (KC / V), c = q % (KC / V) * V;
      const bool ok = k0 + c < K;
      const E *src = (r < M ? h + (i64)r * K : w + (i64)(r - M) * K) + (ok ? k0 + c : 0);
      copy_async<V>(hs + r * LD + c, src, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float acc[NP]; // N sums, then zeros (whole 16-byte stores)
#pragma unroll
    for (int j = 0; j < NP; ++j)
      acc[j] = 0.0f;
    if (prow < M)
#pragma unroll
      for (int i = 0; i < KC / (4 * KQ); ++i) {
        const int c = (kq + i * KQ) * 4;
        float hv[4];
        loadv<4>(hs + prow * LD + c, hv);
#pragma unroll
        for (int j = 0; j < N; ++j) {
          float wv[4];
          loadv<4>(hs + (M + j) * LD + c, wv);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[j] = fmaf(hv[e], wv[e], acc[j]);
        }
      }
#pragma unroll
    for (int j = 0; j < N; ++j)
      acc[j] = warp_reduce<KQ>(acc[j], Add());
    // Part `slice` of the row's logits, into every CTA (KQ threads share
    // the stores, 16 bytes each).
#if CLUSTERS
    if (S > 1) {
      push_ready();
      if (prow < M)
        for (int dst = kq; dst < S; dst += KQ)
#pragma unroll
          for (int q = 0; q < NP; q += 4)
            push(&area[(slice * M + prow) * NP + q], &bar, dst, acc[q],
                 acc[q + 1], acc[q + 2], acc[q + 3]);
      continue;
    }
#endif
    if (prow < M && kq == 0)
#pragma unroll
      for (int j = 0; j < N; ++j)
        area[(slice * M + prow) * NP + j] = acc[j];
  }
#if CLUSTERS
  if (S > 1)
    push_wait(&bar); // every part has arrived
  else
#endif
    __syncthreads();
  // 2. Every row's logits, loss and gradient: the KQ threads of row prow
  // take classes kq, kq + KQ, ... (as the row kernel's threads of a row).
  {
    const int row = prow;
    float x[CPR];
    float mx = -GTC_INF;
#pragma unroll
    for (int i = 0; i < CPR; ++i) {
      const int j = kq + i * KQ;
      x[i] = -GTC_INF;
      if (j < N && row < M) {
        float v = 0.0f;
        for (int s = 0; s < S; ++s)
          v += area[(s * M + row) * NP + j];
        BIAS_ADD
        x[i] = as<LOGIT_T>(v);
        mx = fmaxf(mx, x[i]);
      }
    }
    mx = warp_reduce<KQ>(mx, Max());
    const float mxl = mx * LOG2E;
    float se = 0.0f;
#pragma unroll
    for (int i = 0; i < CPR; ++i)
      if (kq + i * KQ < N)
        se += exp2f(fmaf(x[i], LOG2E, -mxl));
    const double sum = warp_reduce<KQ>((double)se, Add());
    const double lse = (double)mx + log(sum);
    const int t = row < M ? labels[row] : 0;
    const bool ok = t >= 0 && t < N;
    float mine = 0.0f; // the label's logit, from the thread that has it
#pragma unroll
    for (int i = 0; i < CPR; ++i)
      mine = kq + i * KQ == t ? x[i] : mine;
    const float vt = warp_reduce<KQ>(mine, Add());
    if (row < M && kq == 0) {
      rl[row] = ok ? lse - (double)vt : (double)GTC_NAN;
      for (int j = N; j < NP; ++j) // phase 3 reads whole 16-byte groups
        dl[row * NP + j] = 0.0f;
    }
    const double gs = (double)grad[0] / M;
    const float scale = ok ? (float)(1.0 / sum) * (float)gs : GTC_NAN;
#pragma unroll
    for (int i = 0; i < CPR; ++i) {
      const int j = kq + i * KQ;
      if (j < N && row < M) {
        const float d = j == t ? (float)((exp((double)vt - lse) - 1.0) * gs)
                               : exp2f(fmaf(x[i], LOG2E, -mxl)) * scale;
        dl[row * NP + j] = as<GRAD_T>(d);
      }
    }
  }
  __syncthreads();
  // 3. This CTA's columns of dh and dW: the thread for columns c.. (CPT of
  // them) of row group g walks the group's rows, with W's columns and
  // dW's partial sums in registers.
  const int c = threadIdx.x % CT * CPT, g = threadIdx.x / CT, k = rank * KC + c;
  float wc[CPT][N], aw[CPT][N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    float wv[CPT];
    loadv<CPT>(hs + (M + j) * LD + c, wv);
#pragma unroll
    for (int p = 0; p < CPT; ++p) {
      wc[p][j] = wv[p];
      aw[p][j] = 0.0f;
    }
  }
  double cs[CPT] = {}; // the group's part of dh's column sums
  if (g < RG)
#pragma unroll
    for (int i = 0; i < RPG; ++i) {
      const int r = g * RPG + i;
      if (r >= M)
        break;
      float hv[CPT], v[CPT];
      loadv<CPT>(hs + r * LD + c, hv);
#pragma unroll
      for (int p = 0; p < CPT; ++p)
        v[p] = 0.0f;
#pragma unroll
      for (int q = 0; q < NP / 4; ++q) {
        const float4 d4 = reinterpret_cast<const float4 *>(dl + r * NP)[q];
        const float d[4] = {d4.x, d4.y, d4.z, d4.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = q * 4 + e;
          if (j < N)
#pragma unroll
            for (int p = 0; p < CPT; ++p) {
              v[p] = fmaf(d[e], wc[p][j], v[p]);
              aw[p][j] = fmaf(d[e], hv[p], aw[p][j]);
            }
        }
      }
#pragma unroll
      for (int p = 0; p < CPT; ++p) {
        v[p] = as<DH_T>(v[p]);
        RELU_GRAD
        v[p] = as<DX_T>(v[p]); // as stored, and summed
        cs[p] += (double)v[p];
      }
      if (k < K)
        storev<CPT>(dx + (i64)r * K + k, v);
    }
  // The row groups' partial sums, added in group order.
  if (g < RG)
#pragma unroll
    for (int p = 0; p < CPT; ++p) {
#pragma unroll
      for (int j = 0; j < N; ++j)
        area[(g * N + j) * KC + c + p] = aw[p][j];
      dsum[g * KC + c + p] = cs[p];
    }
  __syncthreads();
  for (int q = threadIdx.x; q < N * KC; q += THREADS) {
    const int j = q / KC, cc = q % KC;
    if (rank * KC + cc < K) {
      float s = 0.0f;
      for (int gg = 0; gg < RG; ++gg)
        s += area[(gg * N + j) * KC + cc];
      dw[(i64)j * K + rank * KC + cc] = as<DW_T>(s);
    }
  }
  COLSUM_STORE
  // CTA 0: the bias gradient (a warp a class) and the mean of the row
  // losses (the last warp), each summed over the rows in a fixed tree.
  if (rank == 0) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    BIAS_GRAD_STORE
    if (warp == THREADS / 32 - 1) {
      double total = 0.0;
      for (int r = lane; r < M; r += 32)
        total += rl[r];
      total = warp_reduce(total, Add());
      if (lane == 0)
        y[0] = (float)(total / M);
    }
  }

