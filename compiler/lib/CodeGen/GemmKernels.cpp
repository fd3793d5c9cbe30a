//===- GemmKernels.cpp - cuBLASLt GEMMs for matmul and linear -------------===//
//
// matmul and linear become cuBLASLt GEMMs (no NVRTC source); linear may
// apply a fused ReLU in its epilogue (planReluFusion).
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

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
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Gemm;
  l.name = "k" + str(index) + "_matmul";
  l.a = a;
  l.b = b;
  l.c = y;
  l.transA = ta;
  l.transB = tb;
  l.n = n;
  l.k = kk;
  if (bs.size() == 2 && !ta) {
    l.m = batch * m;
    launches.push_back(l);
    return true;
  }
  int64_t aBatch = count(a) / (m * kk), bBatch = count(b) / (kk * n);
  auto batchStride = [&](int64_t opBatch, int64_t mat, int64_t &stride) {
    if (opBatch == batch)
      stride = mat;
    else if (opBatch == 1)
      stride = 0;
    else
      return false;
    return true;
  };
  if (!batchStride(aBatch, m * kk, l.strideA) ||
      !batchStride(bBatch, kk * n, l.strideB))
    return fail("matmul broadcasting " + shapeStr(as) + " x " + shapeStr(bs) +
                " -> " + shapeStr(ys) +
                " is not supported on the GPU: each operand's batch "
                "dimensions must equal the result's or be absent");
  if (batch == 1)
    l.strideA = l.strideB = 0;
  l.m = m;
  l.batch = batch;
  l.strideC = batch == 1 ? 0 : m * n;
  launches.push_back(l);
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
  CudaLaunch l;
  l.kind = CudaLaunch::Kind::Gemm;
  l.name = "k" + str(index) + "_linear";
  l.a = x;
  l.b = w;
  l.c = y;
  l.bias = k->inputs.size() > 2 ? k->inputs[2] : -1;
  l.transB = true;
  if (auto it = fusedRelu.find(index); it != fusedRelu.end()) {
    l.c = it->second; // the relu's output, through the ReLU epilogue
    l.relu = true;
    l.name += "_relu";
  }
  l.n = ws[0];
  l.k = ws[1];
  l.m = count(x) / ws[1];
  if (l.m * l.k != count(x) || l.m * l.n != count(y) ||
      (l.bias >= 0 && count(l.bias) != l.n))
    return fail("linear shapes do not agree");
  launches.push_back(l);
  return true;
}
