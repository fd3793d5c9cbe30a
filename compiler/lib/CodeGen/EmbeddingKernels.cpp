//===- EmbeddingKernels.cpp - Embedding lookup and its gradient -----------===//
//
// embedding (a gather of table rows) and embedding_grad (a deterministic
// scatter-add without atomics).
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

/// y[i, :] = table[ids[i], :]; an index outside the table gives NaNs.
bool Emitter::embedding() {
  int ids = k->inputs[0], table = k->inputs[1], y = k->outputs[0];
  const auto &ts = shape(table);
  if (isF32(ids) || ts.size() != 2)
    return fail("embedding takes i32 indices and a [V, D] table");
  int64_t v = ts[0], d = ts[1], n = count(ids);
  if (count(y) != n * d)
    return fail("embedding result size does not match");
  int vec = d % 4 == 0 ? 4 : 1;
  std::string t = vec == 4 ? "float4" : "float";
  std::string consts = "constexpr i64 NTOK = " + str(n) +
                       ";\nconstexpr i64 V = " + str(v) +
                       ";\nconstexpr i64 DV = " + str(d / vec) + ";  // " +
                       t + "s per row\n";
  std::string body = "  const " + t + " *tv = reinterpret_cast<const " + t +
                     " *>(table);\n  " + t + " *yv = reinterpret_cast<" + t +
                     " *>(y);\n";
  std::string nan = vec == 4 ? "make_float4(GTC_NAN, GTC_NAN, GTC_NAN, GTC_NAN)"
                             : "GTC_NAN";
  body += "  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < NTOK "
          "* DV;\n       e += (i64)gridDim.x * blockDim.x) {\n"
          "    const i64 i = e / DV, c = e % DV;\n"
          "    const int id = ids[i];\n"
          "    yv[e] = id >= 0 && id < V ? tv[id * DV + c] : " +
          nan + ";\n  }\n";
  launch("", "one thread per " + t + " of " + str(n) + " rows of " + str(d),
         {in(ids, "ids"), in(table, "table"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(n * d / vec, kBlock), kMaxGrid));
  return true;
}

/// CpuExecutor's embeddingGrad(): a zeroed table (memset), then a
/// scatter-add where each thread owns the rows id % P == p of one column
/// group and adds the gradient rows in token order, exactly the CPU's
/// summation order (and no atomics). Indices outside the table are skipped,
/// as on the CPU.
bool Emitter::embeddingGrad() {
  int dy = k->inputs[0], ids = k->inputs[1], dt = k->outputs[0];
  const auto &ts = shape(dt);
  if (isF32(ids) || ts.size() != 2)
    return fail("embedding_grad takes i32 indices and gives a [V, D] table");
  int64_t v = ts[0], d = ts[1], n = count(ids);
  if (count(dy) != n * d)
    return fail("embedding_grad gradient size does not match");
  CudaLaunch clear;
  clear.kind = CudaLaunch::Kind::Memset;
  clear.name = "k" + str(index) + "_embedding_grad_zero";
  clear.c = dt;
  launches.push_back(clear);

  int vec = d % 4 == 0 ? 4 : 1;
  int64_t dv = d / vec;
  int64_t parts = 1;
  while (parts * 2 <= v && parts * 2 * dv <= 32768)
    parts *= 2;
  std::string t = vec == 4 ? "float4" : "float";
  std::string consts = "constexpr i64 NTOK = " + str(n) +
                       ";\nconstexpr int V = " + str(v) +
                       ";\nconstexpr i64 DV = " + str(dv) + ";  // " + t +
                       "s per row\nconstexpr int P = " + str(parts) +
                       ";  // row partitions (a power of two)\n"
                       "constexpr int CHUNK = 2048;  // indices staged in "
                       "shared memory\n";
  std::string add = vec == 4 ? "      acc.x += g.x;\n      acc.y += g.y;\n"
                               "      acc.z += g.z;\n      acc.w += g.w;\n"
                             : "      acc += g;\n";
  std::string body =
      "  __shared__ int sid[CHUNK];\n"
      "  const " + t + " *gv = reinterpret_cast<const " + t + " *>(dy);\n"
      "  " + t + " *tv = reinterpret_cast<" + t + " *>(dt);\n"
      "  // Thread (p, c) owns column group c of the rows with id % P == p.\n"
      "  const i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  const bool owner = item < P * DV;\n"
      "  const int p = (int)(item / DV);\n"
      "  const i64 c = item % DV;\n"
      "  for (i64 t0 = 0; t0 < NTOK; t0 += CHUNK) {\n"
      "    const int len = (int)min((i64)CHUNK, NTOK - t0);\n"
      "    __syncthreads();\n"
      "    for (int i = threadIdx.x; i < len; i += blockDim.x)\n"
      "      sid[i] = ids[t0 + i];\n"
      "    __syncthreads();\n"
      "    if (!owner)\n"
      "      continue;\n"
      "    for (int i = 0; i < len; ++i) {\n"
      "      const int id = sid[i];\n"
      "      if (id < 0 || id >= V || (id & (P - 1)) != p)\n"
      "        continue;\n"
      "      const " + t + " g = gv[(t0 + i) * DV + c];\n"
      "      " + t + " acc = tv[(i64)id * DV + c];\n" +
      add +
      "      tv[(i64)id * DV + c] = acc;\n"
      "    }\n"
      "  }\n";
  launch("scatter",
         "scatter-add of " + str(n) + " rows into [" + str(v) + ", " +
             str(d) + "]: " + str(parts) + " row partitions x " + str(dv) +
             " column groups",
         {in(dy, "dy"), in(ids, "ids"), out(dt, "dt")}, 0, consts, body,
         ceilDiv(parts * dv, kBlock));
  return true;
}
