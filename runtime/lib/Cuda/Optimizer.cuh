// The runtime's kernels of the training step's end, compiled with NVRTC
// after ScalarOps.h's text (runtime/CMakeLists.txt embeds both): gradient
// accumulation, the global gradient norm, and the optimizers' update; and
// the parameters' initialization.
// Everything constant for a run is a kernel argument (captured once in the
// graph); what changes per step (the learning rate of the schedule, Adam's
// bias corrections) is computed on the device from a step counter the
// update advances itself, so a replay needs no transfer from the host.
struct Hyper {
  double lr, final, beta1, beta2, eps, weightDecay, maxNorm, momentum,
      dampening;
  long long warmup, total;
  int nesterov, kind, schedule; // kind: 0 sgd, 1 adam, 2 adamw;
                                // schedule: 0 constant, 1 linear, 2 cosine
  int scaling;                  // dynamic loss scaling (LossScaler's rule)
};
#define CHUNK 4096
// Parameter initialization: element i of a parameter of n takes
// gtc_scalar::init_value, as initParameters on the CPU (bit for bit).
extern "C" __global__ void gtc_init(float *__restrict__ p, long long n,
                                    int kind, double a, double c,
                                    unsigned long long seed) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    p[i] = (float)gtc_scalar::init_value(kind, a, c, seed, i);
}
// Gradient accumulation (Plan::microBatches): after micro-batch 0
// acc = g, after the middle ones acc += g, after the last
// g = (acc + g) * scale (scale = 1 / micro-batches), the loss likewise
// (the last writes the mean into the loss buffer). Without lossAcc, the
// gradients alone: the executor's finishMean makes one bucket's mean so.
extern "C" __global__ void gtc_accumulate(float *__restrict__ acc,
                                          float *__restrict__ g, long long n,
                                          int mode, float scale,
                                          float *lossAcc, float *loss) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    if (mode == 0)
      acc[i] = g[i];
    else if (mode == 1)
      acc[i] += g[i];
    else
      g[i] = (acc[i] + g[i]) * scale;
  if (lossAcc && blockIdx.x == 0 && threadIdx.x == 0) {
    if (mode == 0)
      *lossAcc = *loss;
    else if (mode == 1)
      *lossAcc += *loss;
    else
      *loss = (*lossAcc + *loss) * scale;
  }
}
// One block a CHUNK of g: its sum of squares, in double (scaled fp16
// gradients may be large), added in a fixed order into partial[block].
extern "C" __global__ void gtc_sumsq(const float *__restrict__ g, long long n,
                                     float *__restrict__ partial) {
  __shared__ double s[8];
  const long long base = (long long)blockIdx.x * CHUNK;
  double acc = 0.0;
  if ((n & 3) == 0) {
    // 16-byte loads (regions start 64-byte aligned), all issued before the
    // first is used: 4.3 TB/s on an H200, against 2.3 a float at a time.
    const float4 *g4 = reinterpret_cast<const float4 *>(g + base);
    const long long left = (n - base) / 4;
    float4 v[CHUNK / 1024];
#pragma unroll
    for (int k = 0; k < CHUNK / 1024; ++k) {
      const long long i = threadIdx.x + k * 256;
      v[k] = i < left ? g4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < CHUNK / 1024; ++k)
      acc += (double)v[k].x * v[k].x + (double)v[k].y * v[k].y +
             (double)v[k].z * v[k].z + (double)v[k].w * v[k].w;
  } else {
    for (long long i = base + threadIdx.x; i < base + CHUNK && i < n; i += 256)
      acc += (double)g[i] * g[i];
  }
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < 8; ++w) t += s[w];
    partial[blockIdx.x] = (float)t;
  }
}
// One block of 1024 threads, each loading 8 partial sums before it adds
// them (one at a time, 256 threads took 10.8 us for GPT-2's).
extern "C" __global__ void gtc_norm(const float *__restrict__ partial, int n,
                                    float *__restrict__ norm) {
  __shared__ double s[32];
  double acc = 0;
  for (int i0 = threadIdx.x; i0 < n; i0 += 8 * 1024) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i0 + u * 1024 < n ? partial[i0 + u * 1024] : 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += v[u];
  }
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < 32; ++w) t += s[w];
    norm[0] = (float)sqrt(t);
  }
}
// counter[0]: steps done (the schedule's position); counter[1]: blocks
// finished in this update; counter[2]: updates applied (Adam's t);
// counter[3]: steps skipped; counter[4]: finite steps since the loss scale
// last changed. `lossScale` (with h.scaling) is the seed of the backward
// pass: gradients arrive multiplied by it.
extern "C" __global__ void gtc_update(float *__restrict__ p,
                                      const float *__restrict__ g,
                                      float *__restrict__ m,
                                      float *__restrict__ v, long long n,
                                      const Hyper h,
                                      unsigned long long *counter,
                                      const float *__restrict__ norm,
                                      float *lossScale,
                                      unsigned short *__restrict__ copy,
                                      int copyType) {
  const float ls = h.scaling ? lossScale[0] : 1.f;
  // The norm of the scaled gradients is finite iff every gradient is.
  const bool apply = !h.scaling || isfinite(norm[0]);
  const unsigned long long t = counter[2] + 1;
  // The schedule and the update of one element: ScalarOps.h's, as the CPU's
  // (in double where it computes in double).
  const double lr = gtc_scalar::scheduled_lr(
      h.lr, h.final, h.warmup, h.schedule, (long long)counter[0], h.total);
  const double stepSize = lr / (1.0 - pow(h.beta1, (double)t));
  const double bc2Sqrt = sqrt(1.0 - pow(h.beta2, (double)t));
  float scale = 1.f;
  if (h.maxNorm > 0.0) {
    float c = (float)h.maxNorm / (norm[0] / ls + 1e-6f);
    scale = c < 1.f ? c : 1.f;
  }
  scale /= ls;
  auto one = [&](float &pe, float ge, float &me, float &ve) {
    const float gi = ge * scale;
    if (h.kind == 0)
      gtc_scalar::sgd_update(pe, gi, me, lr, h.weightDecay, h.momentum,
                             h.dampening, h.nesterov != 0, t == 1);
    else
      gtc_scalar::adam_update(pe, gi, me, ve, lr, h.weightDecay, h.kind == 2,
                              h.beta1, h.beta2, h.eps, stepSize, bc2Sqrt);
  };
  // The parameter's 16-bit copy (Plan::paramCopies): copyType 1 bf16, 2
  // f16, rounded to nearest even as the generated casts round (PTX cvt.rn;
  // no CUDA headers under NVRTC).
  auto low = [&](float x) -> unsigned short {
    unsigned short u;
    if (copyType == 1)
      asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(u) : "f"(x));
    else
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(x));
    return u;
  };
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (!apply) {
    // Skipped: no update.
  } else if ((n & 3) == 0) {
    // 16-byte accesses: every region starts 64-byte aligned and holds a
    // multiple of 16 elements.
    float4 *p4 = reinterpret_cast<float4 *>(p);
    const float4 *g4 = reinterpret_cast<const float4 *>(g);
    float4 *m4 = reinterpret_cast<float4 *>(m);
    float4 *v4 = reinterpret_cast<float4 *>(v);
    for (long long i = first; i < n / 4; i += stride) {
      // SGD has no second moment (Plan::memory: its state is m alone).
      float4 pv = p4[i], gv = g4[i], mv = m4[i],
             vv = h.kind != 0 ? v4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
      one(pv.x, gv.x, mv.x, vv.x);
      one(pv.y, gv.y, mv.y, vv.y);
      one(pv.z, gv.z, mv.z, vv.z);
      one(pv.w, gv.w, mv.w, vv.w);
      p4[i] = pv;
      m4[i] = mv;
      if (h.kind != 0) v4[i] = vv;
      if (copyType) {
        ushort4 c4 = make_ushort4(low(pv.x), low(pv.y), low(pv.z), low(pv.w));
        reinterpret_cast<ushort4 *>(copy)[i] = c4;
      }
    }
  } else {
    for (long long i = first; i < n; i += stride) {
      float vi = h.kind != 0 ? v[i] : 0.f, mi = m[i];
      one(p[i], g[i], mi, vi);
      m[i] = mi;
      if (h.kind != 0) v[i] = vi;
      if (copyType) copy[i] = low(p[i]);
    }
  }
  // The last block to finish advances the step: every block has read it.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&counter[1], 1ULL) == gridDim.x - 1) {
      counter[0] += 1;
      counter[1] = 0;
      if (apply)
        counter[2] = t;
      if (h.scaling) {
        if (!apply) {
          lossScale[0] = ls * 0.5f;
          counter[3] += 1;
          counter[4] = 0;
        } else if (++counter[4] == 2000) {
          lossScale[0] = ls * 2.f;
          counter[4] = 0;
        }
      }
      __threadfence();
    }
  }
}
