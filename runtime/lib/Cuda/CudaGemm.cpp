//===- CudaGemm.cpp - The CUDA executor's cuBLASLt GEMMs ------------------===//
//
// A plan's GEMMs on cuBLASLt: epilogues (bias, GELU, their gradients), the
// layouts and the heuristic's choices, timed once on the device.
//===----------------------------------------------------------------------===//

#include "Cuda/CudaImpl.h"
#include "gtc/Runtime/Env.h"
#include <algorithm>
#include <chrono>

using namespace gtc::rt;
using namespace gtc::rt::cu;

/// cuBLASLt's epilogue for a launch. Row-major op(A) is cuBLASLt's B
/// (see setupGemm): its row sums over k are BGRADB.
cublasLtEpilogue_t CudaExecutor::Impl::epilogueOf(const CudaLaunch &s) {
  bool bias = s.bias >= 0, aux = s.aux >= 0;
  if (s.dgelu)
    return CUBLASLT_EPILOGUE_DGELU;
  if (s.biasGrad >= 0)
    return CUBLASLT_EPILOGUE_BGRADB;
  switch (s.act) {
  case CudaLaunch::Activation::Relu:
    return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  case CudaLaunch::Activation::Gelu:
    return aux    ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                          : CUBLASLT_EPILOGUE_GELU_AUX)
           : bias ? CUBLASLT_EPILOGUE_GELU_BIAS
                  : CUBLASLT_EPILOGUE_GELU;
  case CudaLaunch::Activation::None:
    break;
  }
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/// Points the GEMM's epilogue at this slot's bias (or bias gradient) and
/// saved GELU input.
void CudaExecutor::Impl::setEpiloguePointers(Launch &l, int slot) {
  const CudaLaunch &s = *l.spec;
  int bias = s.bias >= 0 ? s.bias : s.biasGrad;
  if (bias >= 0) {
    CUdeviceptr p = ptr(bias, slot);
    LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                      &p, sizeof p));
  }
  if (s.aux >= 0) {
    CUdeviceptr p = ptr(s.aux, slot);
    LT(cublasLtMatmulDescSetAttribute(
        l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p, sizeof p));
  }
}

void CudaExecutor::Impl::setupGemm(Launch &l) {
  const CudaLaunch &s = *l.spec;
  Libs &L = libs();
  cublasComputeType_t compute =
      tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // 16-bit operands (gt-autocast) accumulate in f32 too; the bias has the
  // output's type, the output the operands' or f32 (a folded cast).
  auto dataType = [](DType d) {
    return d == DType::BF16  ? CUDA_R_16BF
           : d == DType::F16 ? CUDA_R_16F
                             : CUDA_R_32F;
  };
  DType dt = plan.buffers[s.a].dtype, out = plan.buffers[s.c].dtype;
  cudaDataType_t type = dataType(dt), outType = dataType(out);
  // Every epilogue buffer has the output's type; only the bias gradient
  // goes with an output wider than the operands (a folded cast).
  bool plain = s.bias < 0 && s.act == CudaLaunch::Activation::None && !s.dgelu;
  bool ok = plan.buffers[s.b].dtype == dt &&
            (out == dt || (out == DType::F32 && plain));
  for (int id : {s.bias, s.aux, s.biasGrad, s.addend})
    ok = ok && (id < 0 || plan.buffers[id].dtype == out);
  ok = ok && (s.addend < 0 ||
              (s.beta == 1.0f && s.offsetC == 0 &&
               plan.buffers[s.addend].slots() == plan.buffers[s.c].slots()));
  if (!ok)
    throw RuntimeError("GEMM operands of element types cuBLASLt is not "
                       "given here ('" +
                       plan.buffers[s.a].name + "', '" +
                       plan.buffers[s.c].name + "')");
  LT(cublasLtMatmulDescCreate(&l.desc, compute, CUDA_R_32F));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: pass B
  // first. In column-major terms B (row-major rowsB x colsB) is colsB x rowsB.
  cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                    sizeof opA));
  LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                    sizeof opB));
  if (cublasLtEpilogue_t epi = epilogueOf(s);
      epi != CUBLASLT_EPILOGUE_DEFAULT) {
    LT(cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                      &epi, sizeof epi));
    // The saved GELU input has C's layout (column-major n x m).
    if (s.aux >= 0) {
      int64_t ld = s.n;
      LT(cublasLtMatmulDescSetAttribute(
          l.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
  }
  int64_t rowsB = s.transB ? s.n : s.k, colsB = s.transB ? s.k : s.n;
  int64_t rowsA = s.transA ? s.k : s.m, colsA = s.transA ? s.m : s.k;
  LT(cublasLtMatrixLayoutCreate(&l.la, type, colsB, rowsB, colsB));
  LT(cublasLtMatrixLayoutCreate(&l.lb, type, colsA, rowsA, colsA));
  LT(cublasLtMatrixLayoutCreate(&l.lc, outType, s.n, s.m, s.n));
  if (s.batch > 1) {
    int32_t count = static_cast<int32_t>(s.batch);
    for (auto [layout, stride] :
         {std::pair{l.la, s.strideB}, std::pair{l.lb, s.strideA},
          std::pair{l.lc, s.strideC}}) {
      LT(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      LT(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof stride));
    }
  }
  cublasLtMatmulPreference_t pref;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof workspaceBytes));
  // cuBLASLt's heuristic assumes 256-byte aligned operands; the memory
  // plan places every buffer so (PlanBuilder's kAlign).
  for (auto [id, off] :
       {std::pair{s.a, s.offsetA}, std::pair{s.b, s.offsetB},
        std::pair{s.c, s.offsetC}, std::pair{s.addend, int64_t{0}}})
    for (int slot = 0; slot < 2; ++slot)
      if (id >= 0 && (ptr(id, slot) + off) % 256 != 0)
        throw RuntimeError("GEMM operand '" + plan.buffers[id].name +
                           "' is not 256-byte aligned; the plan was not "
                           "made by this gtc (recompile it)");
  cublasLtMatmulHeuristicResult_t results[8] = {};
  int found = 0;
  LT(cublasLtMatmulAlgoGetHeuristic(lt, l.desc, l.la, l.lb, l.lc, l.lc, pref, 8,
                                    results, &found));
  if (found == 0)
    throw RuntimeError("cuBLASLt has no algorithm for a " +
                       std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                       std::to_string(s.k) + " GEMM");
  l.algo = results[0].algo;
  // Timing the candidates (GTC_AUTOTUNE=1) can pick another algorithm in
  // another process, with another summation order: results would then
  // differ between two runs of one plan (seen as 5e-6 between gtc run and
  // a compiled executable once GEMMs wrote f32 gradients). Reproducible
  // by default; large GEMMs only, as small ones (latency-bound, inside a
  // graph) measured no faster (test/bench/NOTES.md).
  if (found > 1 && s.m * s.n * s.k * s.batch >= (int64_t(1) << 28) &&
      envFlag("GTC_AUTOTUNE"))
    autotune(l, results, found);
  (void)L;
}

/// Times each candidate algorithm on this GEMM's own buffers (CUDA
/// events, after a warm-up) and keeps the fastest. The output buffer gets
/// scratch values; every step writes it again before reading it.
void CudaExecutor::Impl::autotune(
    Launch &l, const cublasLtMatmulHeuristicResult_t *results, int found) {
  const CudaLaunch &s = *l.spec;
  setEpiloguePointers(l, 0);
  float alpha = s.alpha, beta = s.beta;
  auto run = [&](const cublasLtMatmulAlgo_t &algo) {
    return libs().cublasLtMatmul(
        lt, l.desc, &alpha, reinterpret_cast<void *>(ptr(s.b, 0) + s.offsetB),
        l.la, reinterpret_cast<void *>(ptr(s.a, 0) + s.offsetA), l.lb, &beta,
        reinterpret_cast<void *>(s.addend >= 0 ? ptr(s.addend, 0)
                                               : ptr(s.c, 0) + s.offsetC),
        l.lc, reinterpret_cast<void *>(ptr(s.c, 0) + s.offsetC), l.lc, &algo,
        reinterpret_cast<void *>(workspace), workspaceBytes, compute);
  };
  float best = -1;
  for (int i = 0; i < found; ++i) {
    if (run(results[i].algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    CU(cuEventRecord(start, compute));
    for (int r = 0; r < 5; ++r)
      run(results[i].algo);
    CU(cuEventRecord(stop, compute));
    CU(cuEventSynchronize(stop));
    float ms = 0;
    CU(cuEventElapsedTime(&ms, start, stop));
    if (best < 0 || ms < best) {
      best = ms;
      l.algo = results[i].algo;
    }
  }
}
