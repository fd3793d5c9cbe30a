//===- GemmKernels.cpp - cuBLASLt GEMMs for matmul and linear -------------===//
//
// matmul and linear become cuBLASLt GEMMs (no NVRTC source); a "gemm"
// fusion region becomes one GEMM with a cuBLASLt epilogue.
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
  auto act = CudaLaunch::Activation::None;
  bool dgelu = false;
  for (size_t j = 1; j < body.size(); ++j) {
    const Kernel &sub = body[j];
    int in = sub.inputs.empty() ? -1 : sub.inputs[0];
    int out = sub.outputs.empty() ? -1 : sub.outputs[0];
    if (sub.op == OpKind::SumTo && in == body[0].inputs[0] && biasGrad < 0) {
      biasGrad = out;
    } else if (sub.op == OpKind::Cast && in == biasGrad) {
      biasGrad = out;
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
  if (!isOutput(result) || (biasGrad >= 0 && !isOutput(biasGrad)))
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
  return true;
}
