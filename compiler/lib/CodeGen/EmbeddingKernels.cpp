//===- EmbeddingKernels.cpp - Embeddings of tokens and positions ----------===//
//
// embedding (a gather of table rows), embedding_grad (a deterministic
// scatter-add without atomics) and rope (rotary position embedding).
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
/// scatter-add without atomics in the CPU's summation order. Block p owns the
/// table rows id % P == p: it reads the indices a chunk at a time, lists the
/// tokens of its rows in token order (a prefix sum over the lanes, then the
/// warps' offsets), and its threads add those tokens' gradient rows column
/// by column. Each index is read by P blocks from L2 instead of by every
/// thread, as the earlier kernel did; indices outside the table are skipped,
/// as on the CPU.
bool Emitter::embeddingGrad() {
  return scatterRows(k->inputs[0], k->inputs[1], k->outputs[0], true);
}

/// A "scatter_add" region (gt-fuse's foldScatterAdds): the embedding
/// gradient's rows scattered onto the value the region adds, in place when
/// the plan made the sum a view of it (PlanBuilder's viewOf), else
/// after a copy of that value to the sum.
bool Emitter::scatterAddRegion() {
  if (k->body.size() != 2 || k->body[0].op != OpKind::EmbeddingGrad ||
      k->body[1].op != OpKind::Add || k->body[0].inputs.size() != 2 ||
      k->body[1].inputs.size() != 2 || k->outputs.size() != 1)
    return fail("a scatter_add region is an embedding_grad and an add");
  const Kernel &scatter = k->body[0], &add = k->body[1];
  int e = scatter.outputs[0], sum = k->outputs[0];
  int onto = add.inputs[0] == e ? add.inputs[1] : add.inputs[0];
  if (count(onto) != count(sum) || !isF32(onto) || !isF32(sum))
    return fail("a scatter_add region adds an f32 table of its size");
  if (!plan.buffers[sum].overlaps(plan.buffers[onto])) {
    if (!elementwise({{onto, "x"}}, sum, "r = x;",
                     "copy of the table the scatter adds to"))
      return false;
  } else if (plan.buffers[sum].offset != plan.buffers[onto].offset) {
    return fail("the sum of a scatter_add region overlaps the table it "
                "adds but is not it");
  }
  return scatterRows(scatter.inputs[0], scatter.inputs[1], sum, false);
}

/// Adds row i of dy into row ids[i] of dt (zeroed first when `zero`).
bool Emitter::scatterRows(int dy, int ids, int dt, bool zero) {
  const auto &ts = shape(dt);
  if (isF32(ids) || ts.size() != 2)
    return fail("embedding_grad takes i32 indices and gives a [V, D] table");
  int64_t v = ts[0], d = ts[1], n = count(ids);
  if (count(dy) != n * d)
    return fail("embedding_grad gradient size does not match");
  if (zero) {
    CudaLaunch clear;
    clear.kind = CudaLaunch::Kind::Memset;
    clear.name = "k" + str(index) + "_embedding_grad_zero";
    clear.c = dt;
    launches.push_back(clear);
  }

  int vec = d % 4 == 0 ? 4 : 1;
  int64_t dv = d / vec;
  int64_t parts = std::min<int64_t>(v, 1024);
  std::string t = vec == 4 ? "float4" : "float";
  std::string consts = "constexpr i64 NTOK = " + str(n) +
                       ";\nconstexpr int V = " + str(v) +
                       ";\nconstexpr i64 DV = " + str(dv) + ";  // " + t +
                       "s per row\nconstexpr int P = " + str(parts) +
                       ";  // row partitions: block p owns ids % P == p\n"
                       "constexpr int WARPS = " + str(kBlock / 32) +
                       ";\nconstexpr int IPT = 8;  // indices a thread per "
                       "pass\n";
  std::string add = vec == 4 ? "        acc.x += g.x;\n        acc.y += g.y;\n"
                               "        acc.z += g.z;\n        acc.w += g.w;\n"
                             : "        acc += g;\n";
  // Each pass takes IPT indices a thread (IPT x blockDim.x tokens): their
  // tokens of block p, in token order, go to hit (and their rows to hrow).
  std::string body =
      "  __shared__ int hit[IPT * WARPS * 32], hrow[IPT * WARPS * 32];\n"
      "  __shared__ int counts[WARPS];\n"
      "  const " + t + " *gv = reinterpret_cast<const " + t + " *>(dy);\n"
      "  " + t + " *tv = reinterpret_cast<" + t + " *>(dt);\n"
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
      "  for (int p = blockIdx.x; p < P; p += gridDim.x)\n"
      "  for (i64 t0 = 0; t0 < NTOK; t0 += IPT * blockDim.x) {\n"
      "    // Thread i reads tokens t0 + IPT * i .. + IPT - 1.\n"
      "    int id[IPT], mine = 0;\n"
      "#pragma unroll\n"
      "    for (int q = 0; q < IPT; ++q) {\n"
      "      const i64 tok = t0 + (i64)IPT * threadIdx.x + q;\n"
      "      id[q] = tok < NTOK ? ids[tok] : -1;\n"
      "      mine += id[q] >= 0 && id[q] < V && id[q] % P == p;\n"
      "    }\n"
      "    // This thread's first slot: the hits of the lanes and warps before.\n"
      "    int before = mine;\n"
      "    for (int o = 1; o < 32; o <<= 1) {\n"
      "      const int n = __shfl_up_sync(0xffffffffu, before, o);\n"
      "      if (lane >= o)\n"
      "        before += n;\n"
      "    }\n"
      "    if (lane == 31)\n"
      "      counts[warp] = before;\n"
      "    before -= mine;\n"
      "    __syncthreads();\n"
      "    int found = 0;\n"
      "    for (int w = 0; w < WARPS; ++w) {\n"
      "      before += w < warp ? counts[w] : 0;\n"
      "      found += counts[w];\n"
      "    }\n"
      "#pragma unroll\n"
      "    for (int q = 0; q < IPT; ++q)\n"
      "      if (id[q] >= 0 && id[q] < V && id[q] % P == p) {\n"
      "        hit[before] = (int)(t0 + (i64)IPT * threadIdx.x + q);\n"
      "        hrow[before++] = id[q];\n"
      "      }\n"
      "    __syncthreads();\n"
      "    for (int h = 0; h < found; ++h) {\n"
      "      const i64 tk = hit[h], row = hrow[h];\n"
      "      for (i64 c = threadIdx.x; c < DV; c += blockDim.x) {\n"
      "        const " + t + " g = gv[tk * DV + c];\n"
      "        " + t + " acc = tv[row * DV + c];\n" +
      add +
      "        tv[row * DV + c] = acc;\n"
      "      }\n"
      "    }\n"
      "    __syncthreads();  // hit, hrow and counts are rewritten next\n"
      "  }\n";
  launch("scatter",
         "scatter-add of " + str(n) + " rows into [" + str(v) + ", " +
             str(d) + "]: block p owns the rows id % " + str(parts) +
             " == p",
         {in(dy, "dy"), in(ids, "ids"), out(dt, "dt")}, 0, consts, body,
         parts);
  return true;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

/// CpuExecutor's rope(): a block per position. Its head_dim / 2 angles are
/// computed once (in shared memory), as the CPU's f32 run computes them
/// (precise powf and sincosf), for all heads and rows (batches) of the
/// position; then each thread turns V consecutive pairs of one head of one
/// row at a time (one vector access of each half, or of 2V interleaved
/// elements), read and written in the buffers' type, turned in float.
/// llama124m's q (16 x 1024 x 12 x 64 bf16) on an H200: 15.3 us, a
/// device-to-device copy's 13.7, where a thread a pair computing its angle
/// took 21.8 (test/bench/NOTES.md, twenty-sixth session).
bool Emitter::rope() {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &s = shape(x);
  if (s.size() < 3 || s.back() % 2 != 0 || count(y) != count(x))
    return fail("rope takes [..., T, heads, head_dim] with an even head_dim");
  const int64_t d = s.back(), heads = s[s.size() - 2],
                positions = s[s.size() - 3], pairs = count(x) / 2;
  const int64_t rows = pairs / (positions * heads * (d / 2));
  if (count(x) / positions > (int64_t(1) << 31) - 1)
    return fail("rope's rows of one position exceed 2^31 elements");
  const int64_t v = (d / 2) % 4 == 0 ? 4 : (d / 2) % 2 == 0 ? 2 : 1;
  const bool interleaved = k->intAttr("interleaved", 0) != 0;
  const int64_t rotated = k->intAttr("rotated", heads);
  std::string consts =
      "constexpr int HALF = " + str(d / 2) + ";\nconstexpr int D = " + str(d) +
      ";\nconstexpr int HEADS = " + str(heads) +
      ";\nconstexpr int POSITIONS = " + str(positions) +
      ";\nconstexpr int OUTER = " + str(rows) +
      ";  // rows of a position (the dimensions before T)\nconstexpr int V = " +
      str(v) + ";  // pairs a thread\nconstexpr float THETA = " +
      flt(k->floatAttr("theta", 10000.0)) + ";\nconstexpr float SIGN = " +
      (k->intAttr("inverse", 0) ? "-1.0f" : "1.0f") +
      ";  // -1: the inverse rotation (the gradient)\n"
      "constexpr bool INTERLEAVED = " +
      (interleaved ? "true" : "false") +
      ";  // pairs (2i, 2i + 1), else (i, i + HALF)\nconstexpr int ROTATED = " +
      str(rotated) + ";  // heads from here on pass unchanged\n";
  std::string body =
      R"CU(  __shared__ float cs[HALF], ss[HALF];
  constexpr int ITEMS = OUTER * HEADS * (HALF / V), U = 2;
  for (int t = blockIdx.x; t < POSITIONS; t += gridDim.x) {
    // The position's HALF angles, once for all its heads and rows.
    for (int i = threadIdx.x; i < HALF; i += blockDim.x) {
      const float inv = 1.0f / powf(THETA, (float)(2 * i) / (float)D);
      float sn, c;
      sincosf((float)t * inv, &sn, &c);
      cs[i] = c;
      ss[i] = sn * SIGN;
    }
    __syncthreads();
    // Items of V pairs of one head of one row, U a thread at once with
    // their loads first, in int indices (one item at a time in i64 indices
    // took 32.3 us on the q above, 2x).
    for (int e0 = threadIdx.x; e0 < ITEMS; e0 += blockDim.x * U) {
      float a[U][2 * V];
      i64 r[U];
      int i0[U];
      bool turn[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int e = e0 + u * blockDim.x;
        const int o = e / (HEADS * (HALF / V)), h = e / (HALF / V) % HEADS;
        i0[u] = e % (HALF / V) * V;
        turn[u] = h < ROTATED;
        r[u] = ((i64)o * POSITIONS + t) * (HEADS * D) + h * D;
        if (e >= ITEMS)
          continue;
        if (INTERLEAVED) {
          loadv<2 * V>(x + r[u] + 2 * i0[u], a[u]);
        } else {
          loadv<V>(x + r[u] + i0[u], a[u]);
          loadv<V>(x + r[u] + i0[u] + HALF, a[u] + V);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (e0 + u * blockDim.x >= ITEMS)
          continue;
        float *v = a[u];
#pragma unroll
        for (int p = 0; p < V && turn[u]; ++p) {
          // The pair: (2p, 2p + 1) interleaved, else (p, V + p).
          float &x1 = v[INTERLEAVED ? 2 * p : p];
          float &x2 = v[INTERLEAVED ? 2 * p + 1 : V + p];
          const float c = cs[i0[u] + p], sn = ss[i0[u] + p], y1 = x1;
          x1 = y1 * c - x2 * sn;
          x2 = x2 * c + y1 * sn;
        }
        if (INTERLEAVED) {
          storev<2 * V>(y + r[u] + 2 * i0[u], v);
        } else {
          storev<V>(y + r[u] + i0[u], v);
          storev<V>(y + r[u] + i0[u] + HALF, v + V);
        }
      }
    }
    __syncthreads();
  }
)CU";
  launch("",
         "a block per position of " + str(positions) +
             ", its angles once, a thread per " + str(v) +
             " pairs of a head of a row (head_dim " + str(d) +
             (interleaved ? ", interleaved" : ", rotate-half") +
             (rotated < heads ? ", heads from " + str(rotated) + " copied"
                              : std::string()) +
             "; " + str(rows) + " rows a position)",
         {in(x, "x"), out(y, "y")}, kPackHelpers, consts, body,
         std::min(positions, kMaxGrid),
         std::min<int64_t>(256, alignUp(rows * heads * (d / 2) / v, 32)));
  return true;
}
