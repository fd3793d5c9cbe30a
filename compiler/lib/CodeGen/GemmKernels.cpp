//===- GemmKernels.cpp - GEMMs for matmul and linear ----------------------===//
//
// matmul and linear become cuBLASLt GEMMs (no NVRTC source), or gtc's own
// kernel when they have at most 64 rows or a K of at most 64 (see "gtc's own
// GEMM for few rows" below); a "gemm" fusion region becomes one GEMM with
// its epilogue.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

CudaLaunch &Emitter::gemm(const std::string &suffix, int a, int b, int c,
                          bool ta, bool tb, int64_t m, int64_t n,
                          int64_t kk) {
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Gemm;
  l.name = "k" + str(index) + "_" + suffix;
  l.a = a;
  l.b = b;
  l.c = c;
  l.transA = ta;
  l.transB = tb;
  l.m = m;
  l.n = n;
  l.k = kk;
  launches.push_back(l);
  return launches.back();
}

/// CpuExecutor's matmul(): a shared rank-2 b without transpose_a is one GEMM
/// over all rows of a; otherwise a (strided) batched GEMM where each operand
/// is either batched like the result or shared (stride 0).
bool Emitter::matmul() {
  int a = k->inputs[0], b = k->inputs[1], y = k->outputs[0];
  const auto &as = shape(a), &bs = shape(b), &ys = shape(y);
  bool wider = castOutput && plan.buffers[y].dtype == DType::F32;
  if (!isFloat(y) || plan.buffers[a].dtype != plan.buffers[b].dtype ||
      (plan.buffers[a].dtype != plan.buffers[y].dtype && !wider))
    return fail("matmul needs float operands of one type, got " +
                describe(a) + " x " + describe(b) + " -> " + describe(y));
  if (as.size() < 2 || bs.size() < 2 || ys.size() < 2)
    return fail("matmul operands need rank >= 2");
  bool ta = k->intAttr("transpose_a", 0), tb = k->intAttr("transpose_b", 0);
  int64_t m = ys[ys.size() - 2], n = ys.back();
  int64_t kk = ta ? as[as.size() - 2] : as.back();
  int64_t am = ta ? as.back() : as[as.size() - 2];
  int64_t bk = tb ? bs.back() : bs[bs.size() - 2];
  int64_t bn = tb ? bs[bs.size() - 2] : bs.back();
  if (am != m || bk != kk || bn != n)
    return fail("matmul shapes do not agree: " + shapeStr(as) + " x " +
                shapeStr(bs) + " -> " + shapeStr(ys));
  int64_t batch = count(y) / (m * n);
  if (bs.size() == 2 && !ta) {
    gemm("matmul", a, b, y, ta, tb, batch * m, n, kk);
    return true;
  }
  int64_t aBatch = count(a) / (m * kk), bBatch = count(b) / (kk * n);
  int64_t strideA = 0, strideB = 0;
  auto batchStride = [&](int64_t opBatch, int64_t mat, int64_t &stride) {
    if (opBatch == batch)
      stride = mat;
    else if (opBatch == 1)
      stride = 0;
    else
      return false;
    return true;
  };
  if (!batchStride(aBatch, m * kk, strideA) ||
      !batchStride(bBatch, kk * n, strideB))
    return fail("matmul broadcasting " + shapeStr(as) + " x " + shapeStr(bs) +
                " -> " + shapeStr(ys) +
                " is not supported on the GPU: each operand's batch "
                "dimensions must equal the result's or be absent");
  CudaLaunch &l = gemm("matmul", a, b, y, ta, tb, m, n, kk);
  l.batch = batch;
  if (batch > 1) {
    l.strideA = strideA;
    l.strideB = strideB;
    l.strideC = m * n;
  }
  return true;
}

/// y = x W^T + bias: one GEMM over all rows of x.
bool Emitter::linear() {
  int x = k->inputs[0], w = k->inputs[1], y = k->outputs[0];
  const auto &ws = shape(w);
  if (ws.size() != 2)
    return fail("linear weight must be rank 2");
  for (int id : k->inputs)
    if (!isFloat(y) || plan.buffers[id].dtype != plan.buffers[y].dtype)
      return fail("linear needs float operands of one type, got " +
                  describe(id) + " -> " + describe(y));
  int bias = k->inputs.size() > 2 ? k->inputs[2] : -1;
  int64_t m = count(x) / ws[1];
  if (m * ws[1] != count(x) || m * ws[0] != count(y) ||
      (bias >= 0 && count(bias) != ws[0]))
    return fail("linear shapes do not agree");
  gemm("linear", x, w, y, false, true, m, ws[0], ws[1]).bias = bias;
  return true;
}

/// A "gemm" region (gt-fuse's foldGemmEpilogues): its GEMM with what
/// cuBLASLt applies in the epilogue. The body's values between the ops are
/// Local (CPU only): the GEMM writes only the region's outputs. Follows the
/// chain of the GEMM's result through casts, reshapes (views), an activation
/// or a GELU gradient; a sum_to of the GEMM's first operand (and its cast)
/// is the bias gradient.
bool Emitter::gemmRegion() {
  const std::vector<Kernel> &body = k->body;
  if (body.empty() ||
      (body[0].op != OpKind::Matmul && body[0].op != OpKind::Linear))
    return fail("a gemm region starts with a matmul or linear");
  auto isOutput = [&](int id) {
    return std::count(k->outputs.begin(), k->outputs.end(), id) > 0;
  };
  int result = body[0].outputs[0], biasGrad = -1, aux = -1;
  int mask = -1, colSum = -1; // the ReLU gradient's input, column sums
  DType sumType = DType::F32, biasType = DType::F32;
  auto act = CudaLaunch::Activation::None;
  bool dgelu = false;
  for (size_t j = 1; j < body.size(); ++j) {
    const Kernel &sub = body[j];
    int in = sub.inputs.empty() ? -1 : sub.inputs[0];
    int out = sub.outputs.empty() ? -1 : sub.outputs[0];
    if (sub.op == OpKind::SumTo && in == body[0].inputs[0] && biasGrad < 0) {
      biasGrad = out;
      biasType = plan.buffers[out].dtype;
    } else if (sub.op == OpKind::Cast && in == biasGrad) {
      biasGrad = out;
    } else if (sub.op == OpKind::SumTo && in == result && colSum < 0) {
      colSum = out; // the column sums of the result (gtc's kernel only)
      sumType = plan.buffers[out].dtype;
    } else if (sub.op == OpKind::Cast && in == colSum) {
      colSum = out;
    } else if (in != result) {
      return fail(std::string("'") + opName(sub.op) +
                  "' in a gemm region does not read the GEMM's result");
    } else if (sub.op == OpKind::Cast || sub.op == OpKind::Reshape) {
      result = out;
    } else if ((sub.op == OpKind::Relu || sub.op == OpKind::Gelu) &&
               act == CudaLaunch::Activation::None && !dgelu) {
      act = sub.op == OpKind::Relu ? CudaLaunch::Activation::Relu
                                   : CudaLaunch::Activation::Gelu;
      if (sub.op == OpKind::Gelu && !sub.intAttr("approximate", 0))
        return fail("cuBLASLt's GELU epilogue is the tanh approximation");
      if (isOutput(result)) {
        if (sub.op == OpKind::Relu)
          return fail("a ReLU epilogue cannot also store its input");
        aux = result;
      }
      result = out;
    } else if (sub.op == OpKind::ActivationGrad &&
               sub.strAttr("kind", "") == "relu" && mask < 0 && !dgelu &&
               act == CudaLaunch::Activation::None) {
      mask = sub.inputs[1]; // gtc's kernel only
      result = out;
    } else if (sub.op == OpKind::ActivationGrad &&
               sub.strAttr("kind", "") == "gelu_tanh" && !dgelu &&
               act == CudaLaunch::Activation::None) {
      dgelu = true;
      aux = sub.inputs[1];
      result = out;
    } else {
      return fail(std::string("'") + opName(sub.op) +
                  "' cannot run in a GEMM epilogue");
    }
  }
  if (!isOutput(result) || (biasGrad >= 0 && !isOutput(biasGrad)) ||
      (colSum >= 0 && !isOutput(colSum)))
    return fail("a gemm region must yield the value its GEMM computes");
  int64_t n = shape(result).empty() ? 1 : shape(result).back();
  if (aux >= 0 && (n % 8 != 0 || count(aux) != count(result)))
    return fail("a GELU epilogue's saved input needs the result's size and "
                "rows of a multiple of 8 elements");
  // The GEMM as the body's first op (its own shapes), storing the chain's
  // last value: a cast changes only the stored type, a reshape nothing, and
  // the activation and its gradient keep the size.
  const Kernel *region = k;
  k = &body[0];
  bool ok = body[0].op == OpKind::Matmul ? matmul() : linear();
  k = region;
  if (!ok)
    return false;
  CudaLaunch &l = launches.back();
  l.name = "k" + str(index) + "_gemm";
  l.c = result;
  l.act = act;
  l.aux = aux;
  l.dgelu = dgelu;
  l.biasGrad = biasGrad;
  if (biasGrad >= 0 && (l.batch != 1 || count(biasGrad) != l.m))
    return fail("a bias gradient sums the rows of one GEMM's first operand");
  if (colSum >= 0 && count(colSum) != l.n)
    return fail("column sums in a gemm region sum the result to its last "
                "dimension");
  if (mask >= 0 && count(mask) != count(result))
    return fail("a ReLU gradient's input has the GEMM result's size");
  // Unless its epilogue needs the small-GEMM kernel, a GEMM of few rows
  // over a long K in f32 goes to cuBLASLt: the kernel's few tiles each walk
  // all of K (unsplit where it also sums a bias gradient). The head's dW of
  // examples/mlp.gt at batch 16384 (10 x 1024, K = 16384, tf32) took 439 us
  // against cuBLASLt's 67 (H100); in bf16 cuBLASLt was the slower there
  // (the step 0.91 -> 1.54 ms), so 16-bit operands stay.
  const bool longK =
      l.k > kSmallGemmLongK && plan.buffers[l.a].dtype == DType::F32;
  if (mask >= 0 || colSum >= 0 || (smallGemmFits(l) && !longK))
    return smallGemm(l, mask, colSum, sumType, biasType);
  return true;
}

//===----------------------------------------------------------------------===//
// gtc's own GEMM for few rows
//===----------------------------------------------------------------------===//
//
// At M <= 64 (a small batch's linears and their input gradients) cuBLASLt
// runs a split-K kernel plus a reduction kernel, about 5 us each on an H100
// whatever the work (test/bench/NOTES.md, eleventh session), and a BGRADB
// bias gradient is a kernel of its own. This kernel does the work in one
// launch: a 64 x 64 tile of C per cluster of S CTAs (sm_90 thread-block
// clusters), each CTA a slice of K, all of its slices in flight at once
// (cp.async). Each CTA sends the columns of its partial tile to the CTA
// that finishes them (st.async into the cluster's distributed shared
// memory, completing on that CTA's mbarrier), which adds the S parts in
// rank order (bitwise reproducible) and applies the epilogue: bias, ReLU,
// the ReLU gradient (times mask > 0), the column sums of the result, or the
// row sums of op(A) (bias gradients, summed in double as the CPU's sum_to).
// The same kernel takes the weight gradients of a small batch (K = the
// batch <= 64, many tiles, S = 1). test/bench/NOTES.md (twelfth session) has the measurements
// behind these choices. Products run on tensor cores
// (mma.sync m16n8k8 tf32 at --precision tf32, m16n8k16 for bf16/fp16) or,
// at fp32, as fp32 FMAs with the same register layout. Below sm_90 (no
// clusters) each CTA of a cluster computes all of K itself and finishes
// its columns: the same results, S times the products.

namespace {

const char *const kSmallGemmSource = R"CU(
constexpr int BM = 64, BN = 64, BK = 32, THREADS = 256;
// 8 warps, 2 x 4 over the tile: 32 rows x 16 columns each, NI = 2 mma
// tiles of 8 columns.
constexpr int NI = 2;
// Shared tiles hold float, or the raw 16 bits of bf16/fp16, in the layout
// of the global matrix: a tile of op(A) (rows m) or op(B) (rows n) is
// [row][k] when k is contiguous in memory (KC), else [k][row].
typedef SMEM_T S_T;
constexpr int PAD = sizeof(S_T) == 4 ? 4 : 8; // no bank conflicts
constexpr int LDK = BK + PAD, LDR = 64 + 8;
constexpr int TILE = 64 * LDK > BK * LDR ? 64 * LDK : BK * LDR; // elements
constexpr int CHUNKS = (K + BK - 1) / BK;
constexpr int KPER = (CHUNKS + S - 1) / S * BK; // K of one CTA
constexpr int STAGES = KPER / BK < 4 ? KPER / BK : 4;
constexpr int NT = (N + BN - 1) / BN;           // column tiles
constexpr int CW = BN / S;                      // columns a CTA finishes
// Without clusters (below sm_90) each CTA has the whole sum itself.
#if __CUDA_ARCH__ >= 900
constexpr int PARTS = S;
#else
constexpr int PARTS = 1;
#endif
// The slices' bytes (the emitter's figure), then the partial tiles that
// the cluster's CTAs send this one: [PARTS][BM][CW] floats, and the column
// sums' partial sums.
static_assert(TILES_BYTES >= STAGES * 2 * TILE * (int)sizeof(S_T), "slices");

// A 64-row x BK tile of a matrix whose element (r, k) is at g[r * LD + k]
// (KC) or g[k * LD + r]; V elements a copy along the contiguous side.
template <bool KC, int V, int LD, int ROWS> struct Tile {
  static constexpr int PER = (KC ? BK : 64) / V; // copies per line
  static constexpr int COPIES = 64 * BK / V / THREADS;
  static __device__ __forceinline__ void load(S_T *s, const E *g, int r0,
                                              int k0, int kend) {
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int q = threadIdx.x + i * THREADS;
      const int line = q / PER, at = q % PER * V;
      const int r = KC ? line : at, k = KC ? at : line;
      const bool ok = r0 + r < ROWS && k0 + k < kend;
      const i64 off = KC ? (i64)(r0 + r) * LD + k0 + k : (i64)(k0 + k) * LD + r0 + r;
      copy_async<V>(s + (KC ? r * LDK + k : k * LDR + r), g + (ok ? off : 0), ok);
    }
  }
  // Element (r, k) of a float tile.
  static __device__ __forceinline__ S_T at(const S_T *s, int r, int k) {
    return s[KC ? r * LDK + k : k * LDR + r];
  }
  // Elements (r, k) and (r, k + 1) of a 16-bit tile, k even: one mma register.
  static __device__ __forceinline__ u32 pair(const S_T *s, int r, int k) {
    if (KC)
      return *reinterpret_cast<const u32 *>(s + r * LDK + k);
    return (u32)s[k * LDR + r] | (u32)s[(k + 1) * LDR + r] << 16;
  }
};

// A shared-memory element as float.
__device__ __forceinline__ float value(float v) { return v; }
template <typename T, typename EE = E>
__device__ __forceinline__ float value(T raw) {
  EE e;
  e.u = raw;
  return (float)e;
}
__device__ __forceinline__ u32 tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

)CU";

const char *const kMultiplyFma = R"CU(
// fp32: FMAs in the mma accumulator layout.
// acc[mi][ni][c]: rows wm + 16 mi + g (+8 for c >= 2), columns
// wn + 8 ni + 2 t (+1 for odd c): the mma accumulator layout.
template <typename TA, typename TB>
__device__ __forceinline__ void multiply(float (&acc)[2][NI][4], const S_T *as,
                                         const S_T *bs, int wm, int wn) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll 4
  for (int k = 0; k < BK; ++k) {
    float a[2][2], b[NI][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        a[mi][h] = TA::at(as, wm + 16 * mi + g + 8 * h, k);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        b[ni][j] = TB::at(bs, wn + 8 * ni + 2 * t + j, k);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[mi][ni][c] = fmaf(a[mi][c >> 1], b[ni][c & 1], acc[mi][ni][c]);
  }
}

)CU";

// Tensor cores: per mode (below) KSTEP, the k of one mma; KT, the k of one
// register's element(s); frag<Tile>(s, r, k), one register of a fragment
// from a shared tile; and mma().
const char *const kMultiplyMma = R"CU(
// acc[mi][ni][c]: rows wm + 16 mi + g (+8 for c >= 2), columns
// wn + 8 ni + 2 t (+1 for odd c): the mma accumulator layout. A register
// of a fragment holds k = KT t (+ KSTEP / 2 for the second half).
template <typename TA, typename TB>
__device__ __forceinline__ void multiply(float (&acc)[2][NI][4], const S_T *as,
                                         const S_T *bs, int wm, int wn) {
  const int lane = threadIdx.x & 31, g = lane >> 2, kt = (lane & 3) * KT;
  constexpr int H = KSTEP / 2;
#pragma unroll
  for (int k = 0; k < BK; k += KSTEP) {
    u32 a[2][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const int r = wm + 16 * mi + g;
      a[mi][0] = frag<TA>(as, r, k + kt);
      a[mi][1] = frag<TA>(as, r + 8, k + kt);
      a[mi][2] = frag<TA>(as, r, k + kt + H);
      a[mi][3] = frag<TA>(as, r + 8, k + kt + H);
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int c = wn + 8 * ni + g;
      const u32 b0 = frag<TB>(bs, c, k + kt), b1 = frag<TB>(bs, c, k + kt + H);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        mma(acc[mi][ni], a[mi], b0, b1);
    }
  }
}
)CU";

// tf32: mma.sync m16n8k8, one float a register (rounded to tf32).
const char *const kMmaTf32 = R"CU(
constexpr int KSTEP = 8, KT = 1;
template <typename T>
__device__ __forceinline__ u32 frag(const S_T *s, int r, int k) {
  return tf32(T::at(s, r, k));
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
)CU";

// bf16 / fp16: mma.sync m16n8k16, two elements of k a register.
const char *const kMma16 = R"CU(
constexpr int KSTEP = 16, KT = 2;
template <typename T>
__device__ __forceinline__ u32 frag(const S_T *s, int r, int k) {
  return T::pair(s, r, k);
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.MMA_T.MMA_T.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
)CU";

const char *const kSmallGemmBody = R"CU(
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
)CU";

} // namespace

bool Emitter::smallGemmFits(const CudaLaunch &l) const {
  DType a = plan.buffers[l.a].dtype;
  // Few rows (a small batch's linears and dX GEMMs), or a short K (their
  // dW GEMMs: K is the batch) over at most 512 tiles.
  const bool fewRows = l.m <= kSmallGemmRows,
             shortK = l.k <= kSmallGemmRows &&
                      ceilDiv(l.m, 64) * ceilDiv(l.n, 64) <= 512;
  return l.kind == CudaLaunch::Kind::Gemm && l.m >= 1 &&
         (fewRows || shortK) && l.n >= 1 && l.k >= 1 && l.batch == 1 &&
         l.aux < 0 && !l.dgelu &&
         l.act != CudaLaunch::Activation::Gelu && l.alpha == 1.0f &&
         l.beta == 0.0f && l.offsetA == 0 && l.offsetB == 0 &&
         l.offsetC == 0 && rt::isFloat(a) && plan.buffers[l.b].dtype == a &&
         isFloat(l.c) && (l.bias < 0 || isFloat(l.bias));
}

bool Emitter::smallGemm(const CudaLaunch &l, int mask, int colSum,
                        DType sumType, DType rowSumType) {
  if (!smallGemmFits(l))
    return fail("the GEMM " + str(l.m) + "x" + str(l.n) + "x" + str(l.k) +
                " with a ReLU gradient or column sums in its epilogue needs "
                "gtc's small-GEMM kernel (at most " + str(kSmallGemmRows) +
                " rows or a K of at most " + str(kSmallGemmRows) +
                ", one matrix, no other epilogue)");
  const DType dt = plan.buffers[l.a].dtype;
  const int bytes = dt == DType::F32 ? 4 : 2;
  const bool tf32 = plan.config.precision == Precision::Tf32;
  const int mode = dt != DType::F32 ? 2 : tf32 ? 1 : 0;
  auto vec = [&](int64_t extent) {
    int v = 16 / bytes;
    while (v > 1 && extent % v != 0)
      v /= 2;
    return v;
  };
  // op(A) is m x k: stored [m][k], or [k][m] when transposed; op(B) is
  // k x n: stored [n][k] when transposed (a linear's weight), else [k][n].
  const bool aK = !l.transA, bK = l.transB;
  const int va = vec(aK ? l.k : l.m), vb = vec(bK ? l.k : l.n);
  // Clusters of S CTAs split K while the grid stays within one wave and
  // each CTA keeps at least two 32-wide slices of K.
  const int64_t tiles = ceilDiv(l.m, 64) * ceilDiv(l.n, 64);
  const int64_t chunks = ceilDiv(l.k, 32);
  if (colSum >= 0 && l.m > 64)
    return fail("column sums in a GEMM's epilogue need at most 64 rows");
  // (The bias gradient's row sums are not split.)
  int s = 1;
  while (l.biasGrad < 0 && s < 8 && tiles * s * 2 <= 132 && chunks >= 4 * s)
    s *= 2;
  // The kernel's shared memory (its constants, computed alike): STAGES
  // slices of K for A and B, each 64 x BK in either layout (at least the
  // 256 partial sums, in double, of column or row sums, which reuse them),
  // then the parts the cluster's CTAs send: 64 x 64 floats in all.
  const int64_t ldk = 32 + (bytes == 4 ? 4 : 8), ldr = 64 + 8;
  const int64_t tile = std::max(64 * ldk, 32 * ldr);
  const int64_t stages = std::min<int64_t>(ceilDiv(chunks, s), 4);
  const int64_t tilesBytes =
      std::max<int64_t>(stages * 2 * tile * bytes,
                        colSum >= 0 || l.biasGrad >= 0 ? 256 * 8 : 0);
  const std::string et = ctype(l.a);
  std::string consts =
      "constexpr int M = " + str(l.m) + ", N = " + str(l.n) +
      ", K = " + str(l.k) + ", S = " + str(s) + ";\n" +
      "constexpr int TILES_BYTES = " + str(tilesBytes) + ";\n" +
      "typedef " + et + " E;\n" +
      "#define SMEM_T " + std::string(bytes == 4 ? "float" : "unsigned short") +
      "\n" +
      "#define COLSUM " + (colSum >= 0 ? "1" : "0") + "\n" +
      (colSum >= 0 ? "typedef " + ctypeOf(sumType) + " SUM_T;\n" : "") +
      "#define ROWSUM " + (l.biasGrad >= 0 ? "1" : "0") + "\n" +
      (l.biasGrad >= 0 ? "typedef " + ctypeOf(rowSumType) + " ROWSUM_T;\n"
                       : "") +
      kSmallGemmSource +
      (mode == 0 ? kMultiplyFma
                 : std::string(mode == 1 ? kMmaTf32 : kMma16) + kMultiplyMma) +
      "typedef Tile<" + (aK ? "true, " : "false, ") + str(va) + ", " +
      str(aK ? l.k : l.m) + ", M> TileA;\n" +
      "typedef Tile<" + (bK ? "true, " : "false, ") + str(vb) + ", " +
      str(bK ? l.k : l.n) + ", N> TileB;\n";
  for (size_t at; (at = consts.find("MMA_T")) != std::string::npos;)
    consts.replace(at, 5, dt == DType::BF16 ? "bf16" : "f16");
  // The epilogue on v, the element (row, col) of the product, which ends
  // stored in c's type (and summed as stored).
  std::string epi;
  std::vector<Arg> args = {in(l.a, "a"), in(l.b, "b")};
  std::string what = "gtc's small GEMM " + str(l.m) + "x" + str(l.n) +
                     "x" + str(l.k) + " (" + dtypeName(dt) +
                     (mode == 1 ? ", tf32" : "") + "), " + str(tiles) +
                     " tile(s) of 64x64";
  if (s > 1)
    what += ", K split over clusters of " + str(s) + " CTAs";
  std::string decls, loads;
  if (l.bias >= 0) {
    args.push_back(in(l.bias, "bias"));
    decls += "float bv[EPT];\n";
    loads += "    bv[q] = ok ? (float)bias[col] : 0.0f;\n";
    epi += "    v += bv[q];\n";
    what += " +bias";
  }
  if (l.act == CudaLaunch::Activation::Relu) {
    epi += "    v = fmaxf(v, 0.0f);\n";
    what += " +relu";
  }
  if (mask >= 0) {
    args.push_back(in(mask, "mask"));
    decls += "float mv[EPT];\n";
    loads += "    mv[q] = ok ? (float)mask[(i64)row * N + col] : 0.0f;\n";
    epi += "    v *= mv[q] > 0.f ? 1.f : 0.f;\n";
    what += " *relu'";
  }
  epi += "    { " + ctype(l.c) + " t; t = v; v = (float)t; }\n";
  args.push_back(out(l.c, "c"));
  if (colSum >= 0) {
    args.push_back(out(colSum, "colsum"));
    what += " +column sums";
  }
  if (l.biasGrad >= 0) {
    args.push_back(out(l.biasGrad, "rowsum"));
    what += " +bias gradient (row sums of A)";
  }
  std::string body = kSmallGemmBody;
  body.replace(body.find("LOAD_DECLS"), 10, decls);
  body.replace(body.find("LOADS"), 5, loads);
  body.replace(body.find("EPILOGUE"), 8, epi);
  const int64_t m = l.m, n = l.n, kk = l.k;
  launches.pop_back(); // the cuBLASLt description it replaces
  launch("gemm", what, args, kPackHelpers | kAsyncHelpers | kClusterHelpers,
         consts, body,
         tiles * s, 256, 0,
         "GTC_CLUSTER");
  CudaLaunch &own = launches.back();
  own.shared = tilesBytes + 64 * 64 * 4; // + the parts: S x 64 x 64 / S
  own.m = m;
  own.n = n;
  own.k = kk;
  own.tensorCores = mode != 0;
  return true;
}
