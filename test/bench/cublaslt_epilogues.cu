// cuBLASLt epilogue costs at GPT-2's MLP shapes (bf16), with the operands and
// layouts gtc's CUDA executor passes (row-major C = op(A) op(B) as
// column-major C^T, B first). Times cuBLASLt's first heuristic algorithm and
// the best of up to 8. The operands hold one constant (bytes 0x3c), so the
// GPUs' clocks may run higher than on real data; compare rows with each
// other, not with a training step's profile. On a GPU machine (no gtc needed):
//   nvcc -O3 -arch=sm_90 -std=c++17 cublaslt_epilogues.cu -lcublasLt && ./a.out
// Figures: test/bench/NOTES.md, fourteenth session.
#include <cstdio>
#include <cuda_runtime.h>
#include <cublasLt.h>

cublasLtHandle_t lt;
void *ws;
size_t wsb = 32 << 20;

void bench(int64_t m, int64_t n, int64_t k, bool tA, bool tB,
           cublasLtEpilogue_t epi, cudaDataType_t outT, int biasT,
           const char *what) {
  cudaDataType_t T = CUDA_R_16BF;
  void *A, *B, *C, *aux, *bias;
  cudaMalloc(&A, m * k * 2);
  cudaMalloc(&B, k * n * 2);
  cudaMalloc(&C, m * n * 4);
  cudaMalloc(&aux, m * n * 2);
  cudaMalloc(&bias, 4 * (m + n));
  cudaMemset(A, 0x3c, m * k * 2);
  cudaMemset(B, 0x3c, k * n * 2);
  cudaMemset(aux, 0x3c, m * n * 2);
  cublasLtMatmulDesc_t d;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t oa = tB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    ob = tA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  bool usesAux = epi == CUBLASLT_EPILOGUE_DGELU ||
                 epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
                 epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool usesBias = epi != CUBLASLT_EPILOGUE_DEFAULT &&
                  epi != CUBLASLT_EPILOGUE_DGELU;
  int64_t ld = n;
  if (usesAux) {
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
  }
  if (usesBias)
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  if (biasT >= 0) {
    cudaDataType_t bt = static_cast<cudaDataType_t>(biasT);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
  }
  int64_t rB = tB ? n : k, cB = tB ? k : n, rA = tA ? k : m, cA = tA ? m : k;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, T, cB, rB, cB);
  cublasLtMatrixLayoutCreate(&lb, T, cA, rA, cA);
  cublasLtMatrixLayoutCreate(&lc, outT, n, m, n);
  cublasLtMatmulPreference_t p;
  cublasLtMatmulPreferenceCreate(&p);
  cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  cublasLtMatmulHeuristicResult_t res[8];
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, 8, res, &found);
  if (!found) {
    printf("%-50s no algorithm\n", what);
    return;
  }
  float alpha = 1, beta = 0, first = 0, best = 1e9;
  int bi = 0;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < found; ++i) {
    auto run = [&] {
      return cublasLtMatmul(lt, d, &alpha, B, la, A, lb, &beta, C, lc, C, lc,
                            &res[i].algo, ws, wsb, 0);
    };
    if (run() != CUBLAS_STATUS_SUCCESS)
      continue;
    for (int w = 0; w < 3; ++w)
      run();
    cudaEventRecord(e0);
    for (int r = 0; r < 20; ++r)
      run();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ms *= 1000.f / 20;
    if (i == 0)
      first = ms;
    if (ms < best) {
      best = ms;
      bi = i;
    }
  }
  printf("%-50s heuristic[0] %7.1f us, best of %d %7.1f us (#%d) %s\n", what,
         first, found, best, bi, cudaGetErrorString(cudaGetLastError()));
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(aux);
  cudaFree(bias);
}

int main() {
  cublasLtCreate(&lt);
  cudaMalloc(&ws, wsb);
  // Backward of the MLP's c_proj: dH = dY @ W (16384x3072x768), then dGELU;
  // with the bias gradient of c_fc (DGELU_BGRAD).
  bench(16384, 3072, 768, false, false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF, -1, "dX 16384x3072x768");
  bench(16384, 3072, 768, false, false, CUBLASLT_EPILOGUE_DGELU, CUDA_R_16BF, -1, "dX 16384x3072x768 DGELU");
  bench(16384, 3072, 768, false, false, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF, -1, "dX 16384x3072x768 DGELU_BGRAD (bias bf16)");
  bench(16384, 3072, 768, false, false, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF, CUDA_R_32F, "dX 16384x3072x768 DGELU_BGRAD (bias f32)");
  // Weight gradients (A^T, f32 out), with and without the bias gradient.
  bench(3072, 768, 16384, true, false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, -1, "dW 3072x768x16384 A^T f32");
  bench(3072, 768, 16384, true, false, CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, -1, "dW 3072x768x16384 A^T f32 BGRADB");
  bench(2304, 768, 16384, true, false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, -1, "dW 2304x768x16384 A^T f32");
  bench(2304, 768, 16384, true, false, CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, -1, "dW 2304x768x16384 A^T f32 BGRADB");
  // Forward c_fc (B^T): bias; GELU saving its input; GELU alone.
  bench(16384, 3072, 768, false, true, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF, -1, "fwd 16384x3072x768 B^T BIAS");
  bench(16384, 3072, 768, false, true, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF, -1, "fwd 16384x3072x768 B^T GELU_AUX_BIAS");
  bench(16384, 3072, 768, false, true, CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16BF, -1, "fwd 16384x3072x768 B^T GELU_BIAS");
}
