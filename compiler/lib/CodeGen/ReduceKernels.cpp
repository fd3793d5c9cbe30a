//===- ReduceKernels.cpp - Reductions: sum, mean, sum_to ------------------===//
//
// Deterministic reductions accumulated in double: sum, mean and sum_to.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

//===----------------------------------------------------------------------===//
// Reductions: sum, mean, sum_to
//===----------------------------------------------------------------------===//

/// reduce()'s [R]: every element into one value, by one block, or by P
/// blocks and a final sum.
bool Emitter::reduceAll(int x, int y, int64_t r, double scale,
                        const std::string &what) {
  std::string sc = "constexpr double SCALE = " + dbl(scale) + ";\n";
  if (r <= 65536) {
    std::string body = "  __shared__ double red[8];\n"
                       "  double s = 0.0;\n"
                       "  for (i64 i = threadIdx.x; i < N; i += blockDim.x)\n"
                       "    s += (double)x[i];\n"
                       "  s = row_sum<256>(s, red);\n"
                       "  if (threadIdx.x == 0)\n"
                       "    y[0] = (float)(s * SCALE);\n";
    launch("", "one block sums " + str(r) + " elements (" + what + ")",
           {in(x, "x"), out(y, "y")}, kWarpHelpers | kRowHelpers,
           "constexpr i64 N = " + str(r) + ";\n" + sc, body, 1);
    return true;
  }
  int64_t parts = std::min<int64_t>(1024, ceilDiv(r, 8192));
  int64_t chunk = alignUp(ceilDiv(r, parts), 4);
  parts = ceilDiv(r, chunk);
  needWorkspace(8 * parts);
  std::string consts = "constexpr i64 N = " + str(r) +
                       ";\nconstexpr i64 CHUNK = " + str(chunk) +
                       ";\nconstexpr i64 PARTS = " + str(parts) + ";\n";
  std::string body = R"CU(  __shared__ double red[8];
  for (i64 p = blockIdx.x; p < PARTS; p += gridDim.x) {
    const i64 end = min(N, (p + 1) * CHUNK);
    double s = 0.0;
    for (i64 i = p * CHUNK + threadIdx.x; i < end; i += blockDim.x)
      s += (double)x[i];
    s = row_sum<256>(s, red);
    if (threadIdx.x == 0)
      part[p] = s;
  }
)CU";
  launch("partial",
         "one block per chunk of " + str(chunk) + " elements (" + what + ")",
         {in(x, "x"), ws("double", "part")}, kWarpHelpers | kRowHelpers, consts,
         body, std::min(parts, kMaxRowGrid));
  finalSum("final", y, parts, "double", "(float)(s * " + dbl(scale) + ")");
  return true;
}

/// reduce()'s [A, R, K]: column sums, one thread an output (and a chunk of
/// R when R is long, then a final pass over the chunks), or columnTiles.
bool Emitter::reduceColumns(int x, int y, int64_t a, int64_t r, int64_t kk,
                            const std::string &sc, const std::string &what) {
  int vec = isF32(x) ? 4 : 8; // elements in 16 bytes
  if (r > 512 && kk % vec == 0)
    return columnTiles(x, y, a, r, kk, vec, sc, what);
  // Short columns take one launch (latency matters more than parallelism
  // there); long ones are split so that no thread adds more than ~R/16.
  int64_t chunks = r <= 512
                       ? 1
                       : std::max<int64_t>(1, std::min(ceilDiv(r, 16),
                                                       ceilDiv(65536, a * kk)));
  int64_t chunk = ceilDiv(r, chunks);
  chunks = ceilDiv(r, chunk);
  std::string consts = "constexpr i64 A = " + str(a) +
                       ";\nconstexpr i64 R = " + str(r) +
                       ";\nconstexpr i64 K = " + str(kk) +
                       ";\nconstexpr i64 CHUNKS = " + str(chunks) +
                       ";\nconstexpr i64 CHUNK = " + str(chunk) + ";\n" + sc;
  std::string body =
      R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < CHUNKS * A * K;
       i += (i64)gridDim.x * blockDim.x) {
    const i64 kk = i % K, a = i / K % A, c = i / (K * A);
    const auto *src = x + a * R * K + kk;
    const i64 end = min(R, (c + 1) * CHUNK);
    double s = 0.0;
    for (i64 r = c * CHUNK; r < end; ++r)
      s += (double)src[r * K];
)CU";
  if (chunks == 1) {
    body += "    y[a * K + kk] = (float)(s * SCALE);\n  }\n";
    launch("",
           "one thread per output, summing " + str(r) + " rows (" + what + ")",
           {in(x, "x"), out(y, "y")}, 0, consts, body,
           std::min(ceilDiv(a * kk, kBlock), kMaxGrid));
    return true;
  }
  needWorkspace(8 * chunks * a * kk);
  body += "    part[i] = s;\n  }\n";
  launch("partial",
         "one thread per (chunk of " + str(chunk) + " rows, output) (" + what +
             ")",
         {in(x, "x"), ws("double", "part")}, 0, consts, body,
         std::min(ceilDiv(chunks * a * kk, kBlock), kMaxGrid));
  finalColumns(y, a * kk, consts);
  return true;
}

/// Sums x into y, where y's shape (`kept`, same rank as x or shorter)
/// broadcasts to x's; `scale` multiplies the result (CpuExecutor's
/// reduceInto). The dimensions are classified as reduced or kept and merged;
/// the common layouts get dedicated kernels:
///   [R]        one block, or P blocks and a final sum (two-stage);
///   [K, R]     a row reduction;
///   [A, R, K]  column sums: threads over (chunk of R, a, k) and a final
///              pass over the chunks when there is more than one;
///   otherwise  one warp per output element.
/// Accumulation is in double, as on the CPU.
bool Emitter::reduce(int inBuf, int outBuf, const std::vector<int64_t> &kept,
                     double scale) {
  const auto &xs = shape(inBuf);
  std::vector<int64_t> ys = kept;
  while (ys.size() > xs.size() && ys.front() == 1)
    ys.erase(ys.begin());
  if (ys.size() > xs.size())
    return fail("the result has a higher rank than the input");
  ys.insert(ys.begin(), xs.size() - ys.size(), 1);
  if (!isFloat(inBuf) || !isFloat(outBuf))
    return fail("reductions need float tensors");
  if (product(ys) != count(outBuf))
    return fail("the result shape does not match");
  // Segments of merged dimensions: (size, reduced).
  std::vector<std::pair<int64_t, bool>> seg;
  std::vector<int64_t> keptDims, keptStrides, redDims, redStrides;
  int64_t stride = 1;
  std::vector<int64_t> xStrides(xs.size());
  for (size_t d = xs.size(); d-- > 0;) {
    xStrides[d] = stride;
    stride *= xs[d];
  }
  for (size_t d = 0; d < xs.size(); ++d) {
    if (xs[d] == 1)
      continue;
    bool reduced = ys[d] == 1;
    if (!reduced && ys[d] != xs[d])
      return fail("shape " + shapeStr(kept) + " does not broadcast to " +
                  shapeStr(xs));
    (reduced ? redDims : keptDims).push_back(xs[d]);
    (reduced ? redStrides : keptStrides).push_back(xStrides[d]);
    if (!seg.empty() && seg.back().second == reduced)
      seg.back().first *= xs[d];
    else
      seg.push_back({xs[d], reduced});
  }
  int64_t nx = count(inBuf), ny = count(outBuf);
  std::string sc = "constexpr double SCALE = " + dbl(scale) + ";\n";
  std::string what = shapeStr(xs) + " -> " + shapeStr(kept);
  int x = inBuf, y = outBuf;

  bool anyReduced = false;
  for (auto &s : seg)
    anyReduced |= s.second;
  if (!anyReduced) {
    std::string expr = "r = (float)((double)x * " + dbl(scale) + ");";
    if (scale == 1.0)
      expr = "r = x;";
    return elementwise({{x, "x"}}, y, expr, "no reduced dimension: " + what);
  }

  if (seg.size() == 1)
    return reduceAll(x, y, seg[0].first, scale, what);

  if (seg.size() == 2 && !seg[0].second) {
    // Rows: [K, R].
    int64_t rows = seg[0].first, n = seg[1].first;
    int rt = threadsPerRow(n);
    std::string body = "  __shared__ double red[8];\n";
    body += kRowLoop;
    body += R"CU(    double s = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += (double)x[row * N + j];
    s = row_sum<RT>(s, red);
    if (active && lane == 0)
      y[row] = (float)(s * SCALE);
  }
)CU";
    launch("", rowWhat(rows, n, rt) + " (" + what + ")",
           {in(x, "x"), out(y, "y")}, kWarpHelpers | kRowHelpers,
           rowConsts(rows, n, rt) + sc, body, rowGrid(rows, rt));
    return true;
  }

  if ((seg.size() == 2 && seg[0].second) || (seg.size() == 3 && !seg[0].second))
    // Columns: [A, R, K] (A = 1 for [R, K]).
    return reduceColumns(x, y, seg.size() == 3 ? seg[0].first : 1,
                         seg[seg.size() - 2].first, seg.back().first, sc, what);

  // General: one warp per output element.
  int64_t count = nx / ny;
  // Output o -> x offset of its first term (kept dimensions, in x's order,
  // which is y's element order); term r -> offset over the reduced ones.
  Gather gk = makeGather(keptDims, {keptStrides});
  Gather gr = makeGather(redDims, {redStrides});
  std::string consts = "constexpr i64 NY = " + str(ny) +
                       ";\nconstexpr i64 COUNT = " + str(count) + ";\n" + sc;
  std::string body =
      "  const int lane = threadIdx.x & 31;\n"
      "  for (i64 o = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < "
      "NY;\n       o += ((i64)gridDim.x * blockDim.x) >> 5) {\n";
  body += emitGather(gk, "o", {"base"}, "i64", "    ");
  body += "    double s = 0.0;\n"
          "    for (i64 r = lane; r < COUNT; r += 32) {\n";
  body += emitGather(gr, "r", {"off"}, "i64", "      ");
  body += "      s += (double)x[base + off];\n    }\n"
          "    s = warp_sum(s);\n"
          "    if (lane == 0)\n"
          "      y[o] = (float)(s * SCALE);\n  }\n";
  launch("", "one warp per output element, " + str(count) + " terms each (" +
                 what + ")",
         {in(x, "x"), out(y, "y")}, kWarpHelpers, consts, body,
         std::min(ceilDiv(ny * 32, kBlock), kMaxRowGrid));
  return true;
}

bool Emitter::sumOrMean(bool mean) {
  const auto &xs = shape(k->inputs[0]);
  std::vector<int64_t> kept(xs);
  int64_t reduced = 1;
  std::vector<int64_t> axes = k->intsAttr("axes");
  for (size_t i = 0; i < xs.size(); ++i) {
    bool r = axes.empty();
    for (int64_t a : axes)
      r |= (a < 0 ? a + static_cast<int64_t>(xs.size()) : a) ==
           static_cast<int64_t>(i);
    if (r) {
      reduced *= kept[i];
      kept[i] = 1;
    }
  }
  return reduce(k->inputs[0], k->outputs[0], kept,
                mean ? 1.0 / double(reduced) : 1.0);
}

bool Emitter::sumTo() {
  return reduce(k->inputs[0], k->outputs[0], shape(k->outputs[0]), 1.0);
}

/// Long columns of rows of a multiple of 16 bytes ([A, R, K], R > 512): a
/// block takes a tile of 32 x VEC columns (a warp's 16-byte loads) and a
/// chunk of rows, its eight warps every eighth row of it; each thread adds
/// its rows in float, the warps' sums are added in order in double and
/// stored per chunk, and a final pass adds the chunks in order. This reads
/// at close to the memory's bandwidth where one thread a column, walking
/// its column alone, did not (a linear's bias gradient over GPT-2's 16384
/// rows: 28% of it).
bool Emitter::columnTiles(int x, int y, int64_t a, int64_t r, int64_t kk,
                          int vec, const std::string &sc,
                          const std::string &what) {
  constexpr int64_t kWarps = kBlock / 32;
  int64_t tiles = ceilDiv(kk / vec, 32);
  // About four blocks an SM of an H100 in all, each warp at least 16 rows.
  int64_t chunks = std::clamp<int64_t>(4 * kSMs / (a * tiles), 1,
                                       ceilDiv(r, 16 * kWarps));
  int64_t chunk = ceilDiv(r, chunks);
  chunks = ceilDiv(r, chunk);
  needWorkspace(8 * chunks * a * kk);
  std::string consts =
      "constexpr i64 A = " + str(a) + ";\nconstexpr i64 R = " + str(r) +
      ";\nconstexpr i64 K = " + str(kk) + ";\nconstexpr int VEC = " +
      str(vec) + ";\nconstexpr i64 TILES = " + str(tiles) +
      ";\nconstexpr i64 CHUNKS = " + str(chunks) +
      ";\nconstexpr i64 CHUNK = " + str(chunk) + ";\nconstexpr int WARPS = " +
      str(kWarps) + ";\ntypedef " + ctype(x) +
      " xt;\nstruct __align__(16) xpack { xt e[VEC]; };\n" + sc;
  std::string body = cuh::column_tiles;
  launch("partial",
         "a block per (tile of " + str(32 * vec) + " columns, chunk of " +
             str(chunk) + " rows), 16-byte loads (" + what + ")",
         {in(x, "x"), ws("double", "part")}, 0, consts, body,
         a * tiles * chunks);
  finalColumns(y, a * kk, consts);
  return true;
}

/// Adds the column sums of CHUNKS chunks (part[c * A * K + i]) in order.
void Emitter::finalColumns(int y, int64_t outputs,
                           const std::string &consts) {
  std::string body = R"CU(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < A * K;
       i += (i64)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (i64 c = 0; c < CHUNKS; ++c)
      s += part[c * A * K + i];
    y[i] = (float)(s * SCALE);
  }
)CU";
  launch("final", "one thread per output sums the chunks in order",
         {wsIn("double", "part"), out(y, "y")}, 0, consts, body,
         std::min(ceilDiv(outputs, kBlock), kMaxGrid));
}
