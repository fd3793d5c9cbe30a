//===- cross_entropy_grad.cuh - a row's cross-entropy gradient -*- CUDA -*-===//
//
// Fragment of crossEntropyRows (LossKernels.cpp) after cross_entropy_row.cuh:
// the row's gradient dx = (softmax - onehot) * the loss's scale.
//===----------------------------------------------------------------------===//
      const bool owner = ok && (t / VEC) % RT == lane;
      const float vt = owner ? (float)xr[t] : 0.0f;
      const float scale = ok ? (float)(1.0 / sum) * gsf : GTC_NAN;
      const float mxl = mx * LOG2E;
      dt *dr = dx + row * N;
#pragma unroll 4
      for (int k = PPT - 1; k >= 0; --k) {
        const int j = (lane + k * RT) * VEC;
        if (j >= N)
          continue;
        const xpack p = KEEP ? kept[KEEP ? k : 0]
                             : *reinterpret_cast<const xpack *>(xr + j);
        float d[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          d[e] = exp2f(fmaf((float)p.e[e], LOG2E, -mxl)) * scale;
        store_pack(dr + j, d);
      }
      if (owner) {
        dr[t] = (float)((exp((double)vt - lse) - 1.0) * gs);

