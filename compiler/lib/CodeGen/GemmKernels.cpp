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
/// chain of the GEMM's result through casts, reshapes (views), an activation,
/// a GELU gradient or an add of another value (cuBLASLt's C); a sum_to of the
/// GEMM's first operand (and its cast) is the bias gradient.
bool Emitter::gemmRegion() {
  const std::vector<Kernel> &body = k->body;
  if (body.empty() ||
      (body[0].op != OpKind::Matmul && body[0].op != OpKind::Linear))
    return fail("a gemm region starts with a matmul or linear");
  auto isOutput = [&](int id) {
    return std::count(k->outputs.begin(), k->outputs.end(), id) > 0;
  };
  int result = body[0].outputs[0], biasGrad = -1, aux = -1, addend = -1;
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
    } else if (sub.op == OpKind::Add && sub.inputs.size() == 2 && addend < 0 &&
               act == CudaLaunch::Activation::None && !dgelu && mask < 0 &&
               (in == result || sub.inputs[1] == result)) {
      // result + addend: cuBLASLt's C, read as the GEMM stores D.
      addend = in == result ? sub.inputs[1] : in;
      if (plan.buffers[addend].dtype != plan.buffers[out].dtype ||
          count(addend) != count(out) ||
          plan.buffers[result].dtype != plan.buffers[out].dtype)
        return fail("a gemm region adds a value of its result's type and "
                    "size");
      result = out;
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
  if (addend >= 0 &&
      (mask >= 0 || colSum >= 0 || act != CudaLaunch::Activation::None ||
       dgelu || plan.buffers[addend].dtype != plan.buffers[result].dtype))
    return fail("a gemm region's add comes last, in the stored type, with "
                "no other epilogue");
  int64_t n = shape(result).empty() ? 1 : shape(result).back();
  if (aux >= 0 && (!gemmAuxFits(n) || count(aux) != count(result)))
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
  if (addend >= 0) {
    l.addend = addend;
    l.beta = 1.0f;
  }
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
  if (colSum >= 0 && dgelu) // never a small GEMM's (smallGemmFits)
    return dgeluColumnSums(colSum);
  if (mask >= 0 || colSum >= 0 || (smallGemmFits(l) && !longK))
    return smallGemm(l, mask, colSum, sumType, biasType);
  // At --precision tf32, cuBLASLt's DGELU epilogue held an f32 GEMM to a
  // third of its plain speed (GPT-2 124M's dh on an H200: 631 us, 122
  // TFLOP/s, where plain GEMMs of its size ran at 320-365): the plain GEMM
  // then stores the product and an elementwise kernel multiplies it by
  // gelu'(x) in place (each element read, then written, by one thread).
  if (dgelu && plan.buffers[result].dtype == DType::F32 &&
      plan.config.precision == Precision::Tf32) {
    l.dgelu = false;
    l.aux = -1;
    const Kernel *grad = nullptr;
    for (const Kernel &sub : body)
      if (sub.op == OpKind::ActivationGrad)
        grad = &sub;
    ElementFn fn;
    if (!grad || !elementFn(*grad, fn))
      return false;
    return elementwise({{result, "dy"}, {aux, "x"}}, result, fn.expr,
                       "dy * gelu_tanh'(x) over " + str(count(result)) +
                           " elements, in place after the GEMM");
  }
  hopperGemm(l);
  return true;
}

//===----------------------------------------------------------------------===//
// gtc's own GEMM on Hopper
//===----------------------------------------------------------------------===//
//
// cuBLASLt's GELU_AUX_BIAS epilogue costs a GPT-2 c_fc forward (16384 x
// 3072 x 768, bf16) about 41 us over its plain GEMM, gemm_wgmma.cuh's about
// 33: 146.0 against 154.4 us alone on an H100, where cuBLASLt's plain GEMM
// took 113.1 and gtc's 119-121 (test/bench/gemm_hopper.cu, NOTES.md
// forty-fifth session). In GPT-2 124M's step it took 160 us against
// cuBLASLt's 178 (H100, forty-sixth session). Its GELU gradient alone
// (DGELU) is slower than cuBLASLt's (161.9 against 153.1 us), but it sums
// each tile's columns as it stores them at no cost (161.7 us, forty-eighth
// session), which spares the weight gradient's GEMM cuBLASLt's BGRADB
// (c_fc's: 167 us in the step against 119 for a plain GEMM of its size):
// so gt-fuse gives a bf16 GELU gradient its column sums where this kernel
// fits (rt::dgeluSumsFit) and the emitter's launches compute them anyway.
// Where B is over 12 MiB (GPT-2 774M's and 1558M's c_fc: 13 and 20 MB) its
// tiles go by groups of 8 tile rows (gemm_wgmma.cuh's tile_origin): row by
// row, at 1558M's shape (16384 x 6400 x 1600) the GELU forward took 620 us
// against cuBLASLt's 529, each wave of tiles reading all of B.
// GTC_HOPPER_GEMM=0 keeps cuBLASLt's (to compare).

bool Emitter::hopperGemm(CudaLaunch &l, bool sums) {
  auto bf16 = [&](int id) {
    return id >= 0 && plan.buffers[id].dtype == DType::BF16;
  };
  const bool gelu = !sums && l.act == CudaLaunch::Activation::Gelu &&
                    !l.dgelu && l.bias >= 0 && bf16(l.bias) && l.transB;
  const bool dgelu = sums && l.dgelu && l.act == CudaLaunch::Activation::None &&
                     l.bias < 0;
  if ((!gelu && !dgelu) || l.aux < 0 || !bf16(l.aux) || l.biasGrad >= 0 ||
      l.addend >= 0 || l.transA || l.batch != 1 || l.alpha != 1.0f ||
      l.beta != 0.0f || l.offsetA || l.offsetB || l.offsetC || !bf16(l.a) ||
      !bf16(l.b) || !bf16(l.c) || !hopperGemmFits(l.m, l.n, l.k))
    return false;
  const int64_t m = l.m, n = l.n, kk = l.k, tiles = m / 128 * (n / 128);
  // 6 stages of a 128 x 64 A and B tile; for the GELU gradient 4, and two
  // 128 x 128 tiles of saved inputs (gemm_wgmma.cuh).
  const int stages = gelu ? 6 : 4;
  const int64_t shared =
      stages * (128 * 64 * 2 * 2) + (gelu ? 0 : 2 * 128 * 128 * 2) + 1024;
  const int group = n * kk * 2 > (int64_t(12) << 20) ? 8 : 0;
  const std::string consts =
      "constexpr int M = " + str(m) + ", N = " + str(n) + ", K = " + str(kk) +
      ", STAGES = " + str(stages) + ", GROUP = " + str(group) +
      ";\nconstexpr bool BMN = " +
      (l.transB ? "false" : "true") + ";  // B is [K, N], else [N, K]\n" +
      mmaTyped(cuh::wgmma, true) + "\n" + cuh::gemm_wgmma;
  const std::string how =
      "gtc's Hopper GEMM (TMA, wgmma, two warpgroups in turn on 128 x 128 "
      "tiles" + (group ? ", by groups of " + str(group) + " tile rows" : "") +
      "), " + str(m) + " x " + str(n) + " x " + str(kk);
  const Arg ta = tensorMap(l.a, "ta", m, kk, 128),
            tb = l.transB ? tensorMap(l.b, "tb", n, kk, 128)
                          : tensorMap(l.b, "tb", kk, n, 64);
  const int c = l.c, aux = l.aux, bias = l.bias;
  if (gelu)
    launch("gemm",
           how + ", + bias, GELU storing its input: " + str(tiles) +
               " tiles, one persistent block an SM",
           {ta, tb, out(c, "c"), out(aux, "aux"), in(bias, "bias")},
           kAsyncHelpers | kClusterHelpers, consts,
           "  extern __shared__ __align__(1024) unsigned char smem[];\n"
           "  gemm_gelu_aux_bias(&ta, &tb, c, aux, bias, smem);\n",
           tiles, 384, 1);
  else
    launch("gemm",
           how + ", times gelu'(saved input), and each tile's column sums "
                 "to the workspace: " + str(tiles) +
               " tiles, one persistent block an SM",
           {ta, tb, tensorMap(aux, "taux", m, n, 128),
            tensorMap(c, "tc", m, n, 128), ws("double", "part")},
           kAsyncHelpers | kClusterHelpers, consts,
           "  extern __shared__ __align__(1024) unsigned char smem[];\n"
           "  gemm_dgelu_sums(&ta, &tb, &taux, &tc, part, smem);\n",
           tiles, 384, 1);
  CudaLaunch &k = launches.back();
  k.shared = shared;
  k.persistent = true;
  k.tensorCores = true;
  asVariant(9, 0, "sm_90a");
  return true;
}

/// cuBLASLt's DGELU GEMM, then its result's column sums by chunks of 128
/// rows to the workspace and the chunks added in order (columnSumTiles).
/// On sm_90 (where it fits) gtc's Hopper GEMM computes the gradient and
/// the chunks' sums in place of the first two launches: the column-sum
/// kernel's variant there is none (not launched, with gtc's GEMMs: a
/// variant taken with the GEMM's, CudaLaunch::Variant::withOwnGemm).
bool Emitter::dgeluColumnSums(int colSum) {
  const int c = launches.back().c;
  const int64_t m = launches.back().m, n = launches.back().n;
  const bool own = hopperGemm(launches.back(), true);
  if (!columnSumTiles({Operand(c, "g")}, {}, {}, {{colSum, "g"}}, {m, n},
                      "the GELU gradient's column sums", 128))
    return false;
  if (own) {
    CudaLaunch::Variant none;
    none.major = 9;
    none.minor = 0;
    none.arch = "sm_90a";
    none.what = "// not launched: gtc's Hopper GEMM summed the chunks";
    none.withOwnGemm = true;
    launches[launches.size() - 2].variants.push_back(std::move(none));
  }
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
  while (l.biasGrad < 0 && s < 8 && tiles * s * 2 <= kSMs && chunks >= 4 * s)
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
      "constexpr int TILES_BYTES = " + str(tilesBytes) + ";\n" + "typedef " +
      et + " E;\n" + "#define SMEM_T " +
      std::string(bytes == 4 ? "float" : "unsigned short") + "\n" +
      "#define COLSUM " + (colSum >= 0 ? "1" : "0") + "\n" +
      (colSum >= 0 ? "typedef " + ctypeOf(sumType) + " SUM_T;\n" : "") +
      "#define ROWSUM " + (l.biasGrad >= 0 ? "1" : "0") + "\n" +
      (l.biasGrad >= 0 ? "typedef " + ctypeOf(rowSumType) + " ROWSUM_T;\n"
                       : "") +
      cuh::small_gemm_prelude +
      (mode == 0 ? cuh::small_gemm_fma
                 : std::string(mode == 1 ? cuh::small_gemm_tf32
                                         : cuh::small_gemm_16bit) +
                       cuh::small_gemm_mma) +
      "typedef Tile<" + (aK ? "true, " : "false, ") + str(va) + ", " +
      str(aK ? l.k : l.m) + ", M> TileA;\n" + "typedef Tile<" +
      (bK ? "true, " : "false, ") + str(vb) + ", " + str(bK ? l.k : l.n) +
      ", N> TileB;\n";
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
  std::string body = cuh::small_gemm;
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
