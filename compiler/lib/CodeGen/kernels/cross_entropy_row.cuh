//===- cross_entropy_row.cuh - A row's cross entropy -----------*- CUDA -*-===//
//
// Fragment of crossEntropyRows (LossKernels.cpp), inside kRowLoop: a row's
// max and sum of exponentials, the row's values kept in registers when
// KEEP, and with ARGMAX its first largest logit's index (bi). Buffers: x,
// labels. Constants: lossConsts'.
//===----------------------------------------------------------------------===//
    const xt *xr = x + row * N;
    xpack kept[KEEP ? PPT : 1];
    float m = -GTC_INF, s = 0.0f;
    float bv = -GTC_INF;   // ARGMAX: the thread's first largest logit
    int bi = 0x7fffffff;   // and its index (the accuracy kernel's rule)
#pragma unroll 4
    for (int k = 0; k < PPT; ++k) {
      const int j = (lane + k * RT) * VEC;
      if (active && j < N) {
        const xpack p = *reinterpret_cast<const xpack *>(xr + j);
        if (KEEP)
          kept[KEEP ? k : 0] = p;
        if (ARGMAX) {
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            if ((float)p.e[e] > bv) {
              bv = p.e[e];
              bi = j + e;
            }
        }
        float mv = p.e[0];
#pragma unroll
        for (int e = 1; e < VEC; ++e)
          mv = fmaxf(mv, (float)p.e[e]);
        if (mv > m) {
          s *= exp2f((m - mv) * LOG2E);
          m = mv;
        }
        const float ml = m == -GTC_INF ? 0.0f : m * LOG2E;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          s += exp2f(fmaf((float)p.e[e], LOG2E, -ml));
      }
    }
    if (ARGMAX)
      row_argmax<RT>(bv, bi, redf, shi);
    const float mx = row_max<RT>(m, redf);
    const double sum = row_sum<RT>(
        m == -GTC_INF ? 0.0 : (double)(s * exp2f((m - mx) * LOG2E)), red);
    const double lse = (double)mx + log(sum);
    if (active) {
      const int t = labels[row];
      const bool ok = t >= 0 && t < N;

