// cuBLASLt epilogue costs at GPT-2's MLP shapes (bf16), with the operands and
// layouts gtc's CUDA executor passes (row-major C = op(A) op(B) as
// column-major C^T, B first). Times cuBLASLt's first heuristic algorithm and
// the best of up to 8. The operands hold one constant (bytes 0x3c), so the
// GPUs' clocks may run higher than on real data; compare rows with each
// other, not with a training step's profile. With the argument `search` it
// also times every configuration cuBLASLt accepts (each algorithm id, tile,
// stage count, cluster shape and CTA swizzle, no split-K) on operands of
// pseudo-random values, to see whether some algorithm runs the epilogues
// faster than the heuristic's first. On a GPU machine (no gtc needed):
//   nvcc -O3 -arch=sm_90 -std=c++17 cublaslt_epilogues.cu -lcublasLt && ./a.out [search]
// Figures: test/bench/NOTES.md, fourteenth and fifteenth sessions.
#include <cstdio>
#include <string>
#include <cuda_runtime.h>
#include <cublasLt.h>

cublasLtHandle_t lt;
void *ws;
size_t wsb = 32 << 20;
bool search = false;

// Pseudo-random bf16 values in [-1, 1) (a hash of the index).
__global__ void fillRandom(unsigned short *p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    float f = (x & 0xffff) / 32768.f - 1.f;
    p[i] = (unsigned short)(__float_as_uint(f) >> 16);
  }
}

// Mean microseconds of `reps` runs after 2 warm-up runs; -1 when it fails.
template <typename F> float timeUs(F run, int reps) {
  for (int w = 0; w < 2; ++w)
    if (run() != CUBLAS_STATUS_SUCCESS)
      return -1;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int r = 0; r < reps; ++r)
    run();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return cudaGetLastError() == cudaSuccess ? ms * 1000.f / reps : -1;
}

void bench(int64_t m, int64_t n, int64_t k, bool tA, bool tB,
           cublasLtEpilogue_t epi, cudaDataType_t outT, int biasT,
           const char *what, int64_t ldA = 0) {
  cudaDataType_t T = CUDA_R_16BF;
  void *A, *B, *C, *aux, *bias;
  if (!ldA) ldA = tA ? m : k;
  cudaMalloc(&A, (tA ? k : m) * ldA * 2);
  cudaMalloc(&B, k * n * 2);
  cudaMalloc(&C, m * n * 4);
  cudaMalloc(&aux, m * n * 2);
  cudaMalloc(&bias, 4 * (m + n));
  cudaMemset(A, 0x3c, (tA ? k : m) * ldA * 2);
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
  cublasLtMatrixLayoutCreate(&lb, T, cA, rA, ldA);
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
  auto runAlgo = [&](const cublasLtMatmulAlgo_t &algo) {
    return [&, algo] {
      return cublasLtMatmul(lt, d, &alpha, B, la, A, lb, &beta, C, lc, C, lc,
                            &algo, ws, wsb, 0);
    };
  };
  for (int i = 0; i < found; ++i) {
    float us = timeUs(runAlgo(res[i].algo), 20);
    if (us < 0)
      continue;
    if (i == 0)
      first = us;
    if (us < best) {
      best = us;
      bi = i;
    }
  }
  printf("%-50s heuristic[0] %7.1f us, best of %d %7.1f us (#%d) %s\n", what,
         first, found, best, bi, cudaGetErrorString(cudaGetLastError()));
  if (search) {
    // Real-looking operands, then the heuristic's first again and every
    // configuration cuBLASLt accepts.
    fillRandom<<<1024, 256>>>((unsigned short *)A, m * k, 1);
    fillRandom<<<1024, 256>>>((unsigned short *)B, k * n, 2);
    fillRandom<<<1024, 256>>>((unsigned short *)aux, m * n, 3);
    cudaDeviceSynchronize();
    float h0 = timeUs(runAlgo(res[0].algo), 20);
    cudaDataType_t scale = CUDA_R_32F;
    int ids[256], nIds = 0;
    cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, scale, T, T, outT, outT,
                             256, ids, &nIds);
    float bestS = 1e9;
    int tried = 0, valid = 0;
    char bestWhat[160] = "none";
    const int clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO,
                            CUBLASLT_CLUSTER_SHAPE_1x1x1,
                            CUBLASLT_CLUSTER_SHAPE_2x1x1,
                            CUBLASLT_CLUSTER_SHAPE_1x2x1};
    for (int a = 0; a < nIds; ++a) {
      cublasLtMatmulAlgo_t algo;
      if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, scale, T, T, outT,
                                 outT, ids[a], &algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      uint32_t tiles[128], stages[128];
      size_t tb = 0, sb = 0;
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS,
                                        tiles, sizeof tiles, &tb);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS,
                                        stages, sizeof stages, &sb);
      int nt = tb / 4 ? tb / 4 : 1, ns = sb / 4 ? sb / 4 : 1;
      if (!(tb / 4)) tiles[0] = CUBLASLT_MATMUL_TILE_UNDEFINED;
      if (!(sb / 4)) stages[0] = CUBLASLT_MATMUL_STAGES_UNDEFINED;
      int32_t swz = 0;
      cublasLtMatmulAlgoCapGetAttribute(
          &algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz, sizeof swz, &tb);
      for (int t = 0; t < nt; ++t)
        for (int st = 0; st < ns; ++st)
          for (int cl : clusters)
            for (uint32_t sw = 0; sw <= (swz ? 1u : 0u); ++sw) {
              cublasLtMatmulAlgo_t c = algo;
              cublasLtMatmulAlgoConfigSetAttribute(
                  &c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t], 4);
              cublasLtMatmulAlgoConfigSetAttribute(
                  &c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[st], 4);
              cublasLtMatmulAlgoConfigSetAttribute(
                  &c, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, 4);
              cublasLtMatmulAlgoConfigSetAttribute(
                  &c, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, 4);
              cublasLtMatmulHeuristicResult_t chk;
              if (cublasLtMatmulAlgoCheck(lt, d, la, lb, lc, lc, &c, &chk) !=
                      CUBLAS_STATUS_SUCCESS ||
                  chk.workspaceSize > wsb)
                continue;
              ++valid;
              if (++tried > 4000)
                continue;
              float us = timeUs(runAlgo(c), 5);
              if (us > 0 && us < bestS) {
                bestS = us;
                snprintf(bestWhat, sizeof bestWhat,
                         "id %d tile %u stages %u cluster %d swizzle %u", ids[a],
                         tiles[t], stages[st], cl, sw);
              }
            }
    }
    printf("%-50s random data: heuristic[0] %7.1f us; search over %d valid "
           "configurations: best %7.1f us (%s)\n",
           what, h0, valid, bestS, bestWhat);
  }
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(aux);
  cudaFree(bias);
}

int main(int argc, char **argv) {
  search = argc > 1 && std::string(argv[1]) == "search";
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
  if (std::string(argc > 1 ? argv[1] : "") == "ones") {
    // The bias gradient as one more column of the weight gradient: the GEMM's
    // input X [16384, 768] written with a column of ones (row stride 776 or
    // 832), dW_ext = dY^T X_ext. Row-major C = A^T B with A = dY, B = X_ext.
    for (int64_t n : {776, 784, 800, 832}) {
      char w[80];
      snprintf(w, sizeof w, "dW 768x3072x16384 as 3072x%lld f32", (long long)n);
      bench(3072, n, 16384, true, false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, -1, w);
      snprintf(w, sizeof w, "dW 768x2304x16384 as 2304x%lld f32", (long long)n);
      bench(2304, n, 16384, true, false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, -1, w);
    }
    // The forward GEMMs reading X with a row stride of 776.
    bench(16384, 3072, 768, false, true, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF, -1, "fwd 16384x3072x768 B^T BIAS, X ld 776", 776);
    bench(16384, 3072, 768, false, true, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF, -1, "fwd 16384x3072x768 B^T GELU_AUX_BIAS, X ld 776", 776);
    bench(16384, 2304, 768, false, true, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF, -1, "fwd 16384x2304x768 B^T BIAS");
    bench(16384, 2304, 768, false, true, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF, -1, "fwd 16384x2304x768 B^T BIAS, X ld 776", 776);
  }
}
