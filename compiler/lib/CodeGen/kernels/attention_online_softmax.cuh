//===- attention_online_softmax.cuh - a key tile into the online softmax -*- CUDA -*-===//
//
// Scores of the warp's queries against the lane's key, masked, folded into
// the running max m and sum l (online softmax); the weights go to ws and
// acc is rescaled.
//===----------------------------------------------------------------------===//
      float s[QPW];
      dots<QPW>(s, qs + warp * HD, 8 * HD, ks + lane * HDP);
#pragma unroll
      for (int i = 0; i < QPW; ++i) {
        const int t = q0 + warp + 8 * i;
        const bool valid = u < T && t < T && (!CAUSAL || u <= t);
        const float sc = valid ? s[i] * SCALE : -GTC_INF;
        const float mx = fmaxf(m[i], warp_max(sc));
        const float alpha = mx == -GTC_INF ? 1.f : expf(m[i] - mx);
        const float p = valid ? expf(sc - mx) : 0.f;
        l[i] = l[i] * alpha + warp_sum(p);
        m[i] = mx;
        ws[warp][i][lane] = p;
#pragma unroll
        for (int j = 0; j < NC; ++j)
          acc[i][j] *= alpha;
      }
      __syncwarp();
      weighted<QPW>(acc, ws[warp], vs, lane);
      __syncwarp();

