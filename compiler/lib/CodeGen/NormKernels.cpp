//===- NormKernels.cpp - Layer norm and softmax kernels -------------------===//
//
// Row-wise normalizations: layernorm and rmsnorm (one kernel: rmsnorm is
// layernorm without the mean and the bias), their gradients, softmax and
// its gradient (the row helpers are in EmitterImpl.h).
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

namespace {

/// A forward norm (layernorm, rmsnorm) and a norm's gradient.
bool isNorm(OpKind op) {
  return op == OpKind::LayerNorm || op == OpKind::RmsNorm;
}
bool isNormGrad(OpKind op) {
  return op == OpKind::LayerNormGrad || op == OpKind::RmsNormGrad;
}

/// Threads a layer norm's row takes, the row being held in registers: one
/// warp while a thread holds at most `perThread` columns (its reductions are
/// shuffles, with no block barriers), else the fewest warps that do.
int layernormThreads(int64_t d, int64_t perThread) {
  for (int rt : {32, 64, 128})
    if (ceilDiv(d, rt) <= perThread)
      return rt;
  return threadsPerRow(d);
}

/// Constants and helpers of the layer norm row kernels, after rowConsts():
/// each thread holds CPT = CPV * VEC columns of its row in registers, VEC
/// consecutive ones a load (4 when rows are a multiple of 4: 16-byte loads
/// of f32, 8-byte of 16-bit types, through cuh::pack's loadv and storev;
/// else 1); its c-th is column col(lane, c).
std::string normConsts(int64_t d, int rt, double eps, bool centered) {
  int vec = d % 4 == 0 ? 4 : 1;
  return "constexpr double EPS = " + dbl(eps) +
         ";\nconstexpr bool CENTERED = " + (centered ? "true" : "false") +
         ";  // layernorm; rmsnorm's mean is 0\nconstexpr int VEC = " +
         str(vec) + ";  // consecutive columns a load\nconstexpr int CPV = " +
         str(ceilDiv(d, int64_t(rt) * vec)) +
         ";  // loads a thread\nconstexpr int CPT = CPV * VEC;  // columns "
         "per thread\n" +
         R"CU(__device__ __forceinline__ int col(int lane, int c) {
  return (lane + c / VEC * RT) * VEC + c % VEC;
}
)CU";
}

/// A row's mean, variance and rstd, as CpuExecutor's layernorm, from the
/// row's elements in registers (xv[c] is column col(lane, c), zero past N):
/// each thread's terms and each warp's sums of those added in float, the
/// warps' sums in double (row_sum_wide). Without CENTERED (rmsnorm) the
/// mean is 0 and the variance the mean square.
/// Inside kRowLoop.
const char *kLayerNormStatistics = R"CU(    float sf = 0.0f;
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      sf += xv[c];
    const double mean = CENTERED ? row_sum_wide<RT>(sf, red) / N : 0.0;
    const float mf = (float)mean;
    float qf = 0.0f;
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      if (col(lane, c) < N) {
        const float e = xv[c] - mf;
        qf += e * e;
      }
    const double var = row_sum_wide<RT>(qf, red) / N;
    const float rstd = (float)(1.0 / sqrt(var + EPS));
)CU";

} // namespace

/// CpuExecutor's layernorm(): statistics as kLayerNormStatistics, y in
/// float, the row read once into registers. In a norm region, x = residual
/// + addend is computed first and stored (rounded to x's type, as the CPU
/// stores it). rmsnorm is the same kernel without the mean and the bias.
bool Emitter::layernorm() {
  const bool centered = k->op == OpKind::LayerNorm;
  int x = k->inputs[0], w = k->inputs[1], b = centered ? k->inputs[2] : -1;
  int y = k->outputs[0];
  const NormFusion *f = normFusion;
  int64_t d = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / d;
  if (count(w) != d || (centered && count(b) != d) || count(y) != count(x))
    return fail(std::string(opName(k->op)) + " shapes do not agree");
  int rt = layernormThreads(d, 32);
  std::string consts =
      rowConsts(rows, d, rt) +
      normConsts(d, rt, k->floatAttr("epsilon", centered ? 1e-5 : 1e-6),
                 centered);
  std::string body = "  __shared__ double red[8];\n";
  body += kRowLoop;
  body += R"CU(    float xv[CPT];
#pragma unroll
    for (int p = 0; p < CPV; ++p) {
      const i64 j = (lane + p * RT) * VEC;
      float *v = xv + p * VEC;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        v[e] = 0.0f;
      if (active && j < N) {
)CU";
  std::vector<Arg> args = {in(w, "w")};
  if (centered)
    args.push_back(in(b, "b"));
  args.push_back(out(y, "y"));
  if (f) {
    // The addend may be a table of AR rows that repeats (the position
    // embedding): row i adds its row i % AR.
    int64_t tableRows = count(f->addend) / d;
    if (tableRows < 1 || tableRows * d != count(f->addend) ||
        rows % tableRows != 0 || count(f->residual) != rows * d)
      return fail("a norm region's add reads " + describe(f->addend) +
                  ", which is neither the rows' shape nor a table of rows");
    std::string addendRow =
        tableRows == rows ? "row" : "(row % " + str(tableRows) + ")";
    body += "        float ra[VEC], aa[VEC];\n"
            "        loadv<VEC>(r + row * N + j, ra);\n"
            "        loadv<VEC>(a + " + addendRow + " * N + j, aa);\n"
            "        pack_t<" +
            ctype(x) + R"CU(, VEC> t;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          t.e[e] = ra[e] + aa[e];
          v[e] = (float)t.e[e];
        }
        *reinterpret_cast<decltype(t) *>(x + row * N + j) = t;
)CU";
    args.insert(args.begin(), {in(f->residual, "r"), in(f->addend, "a"),
                               out(x, "x")});
  } else {
    body += "        loadv<VEC>(x + row * N + j, v);\n";
    args.insert(args.begin(), in(x, "x"));
  }
  body += "      }\n    }\n";
  body += kLayerNormStatistics;
  body += R"CU(#pragma unroll
    for (int p = 0; p < CPV; ++p) {
      const i64 j = (lane + p * RT) * VEC;
      if (active && j < N) {
        float wv[VEC], bv[VEC], yv[VEC];
        loadv<VEC>(w + j, wv);
BIAS#pragma unroll
        for (int e = 0; e < VEC; ++e)
          yv[e] = (xv[p * VEC + e] - mf) * rstd * wv[e] + bv[e];
        storev<VEC>(y + row * N + j, yv);
      }
    }
  }
)CU";
  body.replace(body.find("BIAS"), 4,
               centered ? "        loadv<VEC>(b + j, bv);\n"
                        : "        for (int e = 0; e < VEC; ++e)\n"
                          "          bv[e] = 0.0f;\n");
  launch("", (f ? "residual add, " : "") + rowWhat(rows, d, rt), args,
         kWarpHelpers | kRowHelpers | kPackHelpers, consts, body,
         rowGrid(rows, rt));
  return true;
}

/// A "norm" region (gt-fuse's foldNorms): its layer norm's row kernel with
/// the region's casts and residual add. A widening cast of a region input is
/// no work (the kernel converts as it loads); the residual add feeds the
/// forward norm, or adds the backward norm's input gradient to the residual
/// gradient; a cast of a result is one more store.
bool Emitter::normRegion() {
  auto isOutput = [&](int id) {
    return std::count(k->outputs.begin(), k->outputs.end(), id) > 0;
  };
  std::map<int, int> loaded; // a widening cast's result -> what it reads
  auto source = [&](int id) {
    auto it = loaded.find(id);
    return it == loaded.end() ? id : it->second;
  };
  NormFusion f;
  const Kernel *norm = nullptr;
  int y = -1, dx = -1; // the norm's value and where it is stored
  for (const Kernel &sub : k->body) {
    int in0 = sub.inputs.empty() ? -1 : sub.inputs[0];
    int out0 = sub.outputs.empty() ? -1 : sub.outputs[0];
    if (isNorm(sub.op) || isNormGrad(sub.op)) {
      if (norm)
        return fail("a norm region has one layer norm");
      norm = &sub;
      y = out0;
    } else if (sub.op == OpKind::Cast && !norm &&
               plan.buffers[out0].dtype == DType::F32) {
      loaded[out0] = source(in0);
    } else if (sub.op == OpKind::Add && !norm && f.residual < 0 &&
               sub.inputs.size() == 2) {
      f.residual = source(sub.inputs[0]);
      f.addend = source(sub.inputs[1]);
      f.sum = out0;
      // A table of rows repeated along the leading dimensions (gt-fuse's
      // foldNorms) is the addend; f32 addition commutes.
      if (count(f.residual) < count(f.addend))
        std::swap(f.residual, f.addend);
    } else if (sub.op == OpKind::Add && norm && isNormGrad(norm->op) &&
               f.total < 0 && sub.inputs.size() == 2 &&
               (in0 == y || sub.inputs[1] == y)) {
      f.residualGrad = in0 == y ? sub.inputs[1] : in0;
      f.total = out0;
    } else if (sub.op == OpKind::Cast && norm && in0 == f.total &&
               f.totalCast < 0) {
      f.totalCast = out0;
    } else if (sub.op == OpKind::Cast && norm && isNormGrad(norm->op) &&
               in0 == y && f.total < 0 && f.totalCast < 0) {
      f.totalCast = out0; // dx's cast, with no residual add
    } else if (sub.op == OpKind::SumTo && norm && f.biasGrad < 0 &&
               isNormGrad(norm->op) &&
               ((in0 == f.total && in0 >= 0) ||
                (in0 == f.totalCast && in0 >= 0) ||
                (in0 == y && f.total < 0))) {
      f.biasGrad = out0;
      f.colSumOfCast = in0 == f.totalCast;
    } else if (sub.op == OpKind::Cast && f.biasGrad >= 0 && in0 == f.biasGrad) {
      f.biasGrad = out0;
    } else if (sub.op == OpKind::Cast && norm && isNorm(norm->op) && in0 == y) {
      y = out0;
    } else {
      return fail(std::string("'") + opName(sub.op) +
                  "' in a norm region is not a residual add, a cast or a "
                  "bias gradient");
    }
  }
  if (!norm)
    return fail("a norm region has one layer norm");
  Kernel op = *norm;
  for (int &id : op.inputs)
    id = source(id);
  bool forward = isNorm(norm->op);
  if (forward) {
    if (f.sum >= 0 && (op.inputs[0] != f.sum || !isOutput(f.sum)))
      return fail("the residual add of a norm region feeds its layer norm "
                  "and is stored");
    op.outputs = {y};
  } else {
    dx = isOutput(y) ? y : -1;
    if (f.biasGrad >= 0 &&
        (!isOutput(f.biasGrad) ||
         count(f.biasGrad) != (shape(y).empty() ? 1 : shape(y).back())))
      return fail("a norm region's column sums are stored, one a column");
    if (f.total >= 0 && !isOutput(f.total))
      f.total = -1; // only its cast is stored (or only its column sums)
    // With none of dx, the total and its cast stored (the norm of a model
    // input, which has no gradient) the kernel stores the column sums only.
    op.outputs[0] = dx;
  }
  for (int id : op.outputs)
    if (id >= 0 && !isOutput(id))
      return fail("a norm region must yield what its layer norm computes");
  // The kernel reads region inputs only (values between the ops are Local,
  // which the GPU does not have).
  for (int id : op.inputs)
    if (plan.buffers[id].region == Region::Local && id != f.sum)
      return fail("a norm region's layer norm reads " + describe(id) +
                  ", which only the CPU computes");
  for (int id : {f.residual, f.addend, f.residualGrad})
    if (id >= 0 && plan.buffers[id].region == Region::Local)
      return fail("a norm region's add reads " + describe(id) +
                  ", which only the CPU computes");
  const Kernel *region = k;
  k = &op;
  normFusion = f.sum >= 0 || f.total >= 0 || f.totalCast >= 0 ||
                       f.biasGrad >= 0
                   ? &f
                   : nullptr;
  bool ok = forward ? layernorm() : layernormGrad();
  normFusion = nullptr;
  k = region;
  return ok;
}

/// CpuExecutor's layernormGrad() in one pass over the rows (launch 1): each
/// group of RT threads loads a row of x and dy into registers once (VEC
/// columns a load), computes the row's statistics (kLayerNormStatistics;
/// s1 and s2 likewise) and dx, and adds the row's terms of
/// dw and db (and, in a norm region, of a bias gradient) to the sums it keeps
/// for its columns; at most 2 kMaxGrid row groups walk the rows, and their
/// sums go to the workspace, added up a block at a time where they fit in
/// shared memory. Launch 2 adds those in a fixed order (deterministic, like
/// the CPU's sums over all rows, in another order).
bool Emitter::layernormGrad() {
  const bool centered = k->op == OpKind::LayerNormGrad;
  int dy = k->inputs[0], x = k->inputs[1], w = k->inputs[2];
  int dx = k->outputs[0], dw = k->outputs[1],
      db = centered ? k->outputs[2] : -1;
  const NormFusion *f = normFusion;
  int64_t d = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / d;
  if (count(dy) != count(x) || (dx >= 0 && count(dx) != count(x)) ||
      count(w) != d || (centered && count(db) != d) || count(dw) != d)
    return fail(std::string(opName(k->op)) + " shapes do not agree");
  bool bias = f && f->biasGrad >= 0;
  bool residual = f && f->residualGrad >= 0;
  // The column sums taken: dw, layernorm's db, a norm region's bias
  // gradient.
  int ns = 1 + centered + bias;
  // Columns a thread at r threads a row (normConsts' CPT).
  const int64_t vec = d % 4 == 0 ? 4 : 1;
  auto columnsPerThread = [&](int r) { return ceilDiv(d, r * vec) * vec; };
  // Four values a column (x, dy and the dw, db sums): 16 columns a thread.
  int rt = layernormThreads(d, 16);
  // Over 1280 columns, as many threads a row as keep at most 48 values a
  // thread (x, dy, the residual gradient and the sums), so 3 blocks an SM
  // (below): GPT-2 1558M (D 1600) had 128 threads a row, 16 columns a
  // thread, 140 registers and one block an SM, 243 us a call where
  // torch.compile's took 138; with 256 threads a row its step took 336.7
  // against 341.3 ms, while at D 768 (124M) the same rule was slower (31.10
  // against 30.71 ms) and at 1024 and 1280 level (H100, test/bench/NOTES.md
  // forty-fourth session).
  if (d > 1280)
    for (int r : {128, 256})
      if (columnsPerThread(r) * (2 + residual + ns) <= 48) {
        rt = r;
        break;
      }
  // At most kMaxGrid * 2 row groups, whatever the threads a row: each
  // writes its column sums to the workspace. With at most 48 values a
  // thread in registers (x, dy, the residual gradient and the sums, CPT
  // each) the kernel takes 80 registers, so it asks for 3 blocks an SM and
  // its grid is that, one wave (llama124m's rmsnorm gradient, D 768 with
  // the residual's, 2 column sums and 101 registers before: 59.4 -> 52.8 us
  // on an H200, test/bench/NOTES.md forty-first session); beyond, 101 or
  // more registers and 2 blocks an SM, whose grid of 4 an SM runs in two
  // even waves.
  int64_t cpt = columnsPerThread(rt);
  int minBlocks = (2 + residual + ns) * cpt <= 48 ? 3 : 0;
  int64_t grid = std::min(rowGrid(rows, rt),
                          minBlocks ? kSMs * minBlocks : kMaxGrid * 2 * rt / kBlock);
  // Column sums go to the workspace a block at a time when the block's row
  // groups can add theirs in 16 KiB of shared memory, else a group at a time.
  bool blockSums = kBlock / rt > 1 && (kBlock / rt) * d * 4 <= 16384;
  int64_t slots = blockSums ? grid : grid * (kBlock / rt);
  std::string consts =
      rowConsts(rows, d, rt) +
      normConsts(d, rt, k->floatAttr("epsilon", centered ? 1e-5 : 1e-6),
                 centered) +
      "constexpr i64 SLOTS = " + str(slots) +
      ";  // sets of column sums in the workspace\n"
      "constexpr bool BLOCK_SUMS = " +
      (blockSums ? "true" : "false") + ";\n";
  std::string body = R"CU(  __shared__ double red[8];
  // This thread's share of dw, db and the bias gradient: columns
  // col(lane, c), over its rows (float; the sets in the workspace are
  // added in double).
  float aw[CPT], ab[CPT], ag[CPT];
#pragma unroll
  for (int c = 0; c < CPT; ++c)
    aw[c] = ab[c] = ag[c] = 0.0f;
  // Column sum k of the NS taken: dw, [db], [the bias gradient's].
  auto sum_term = [](int k, int c, const float *aw, const float *ab,
                     const float *ag) {
    return k == 0 ? aw[c] : CENTERED && k == 1 ? ab[c] : ag[c];
  };
)CU";
  body += kRowLoop;
  // The row's residual gradient, when there is one, is loaded with x and dy
  // (rv, PREFETCH): loaded with the stores, after the row's reductions, its
  // latency showed.
  body += R"CU(    float xv[CPT], gv[CPT], rv[RG ? CPT : 1];
#pragma unroll
    for (int p = 0; p < CPV; ++p) {
      const int j = (lane + p * RT) * VEC;
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        xv[p * VEC + e] = gv[p * VEC + e] = 0.0f;
      if (active && j < N) {
        loadv<VEC>(x + row * N + j, xv + p * VEC);
        loadv<VEC>(dy + row * N + j, gv + p * VEC);
PREFETCH      }
    }
)CU";
  body += kLayerNormStatistics;
  body += cuh::layernorm_grad_rows;
  // dx, and in a norm region dx plus the residual gradient (in f32 and/or
  // the type of its cast).
  std::vector<Arg> args = {in(dy, "dy"), in(x, "x"), in(w, "w")};
  std::string store;
  if (dx >= 0) {
    store += "        storev<VEC>(dx + o, dv);\n";
    args.push_back(out(dx, "dx"));
  }
  if (f) {
    // t = the residual gradient + dx.
    if (residual) {
      store += "#pragma unroll\n"
               "        for (int e = 0; e < VEC; ++e)\n"
               "          tv[e] = rv[p * VEC + e] + dv[e];\n";
      args.push_back(in(f->residualGrad, "rg"));
    } else {
      store += "#pragma unroll\n"
               "        for (int e = 0; e < VEC; ++e)\n"
               "          tv[e] = dv[e];\n";
    }
    if (f->total >= 0) {
      store += "        storev<VEC>(tot + o, tv);\n";
      args.push_back(out(f->total, "tot"));
    }
    if (f->totalCast >= 0) {
      // The bias gradient sums what its sum_to reads: the stored cast's
      // values, or t.
      store += "        pack_t<" + ctype(f->totalCast) + ", VEC> tc;\n" +
               "#pragma unroll\n"
               "        for (int e = 0; e < VEC; ++e) {\n"
               "          tc.e[e] = tv[e];\n" +
               (bias && f->colSumOfCast
                    ? "          ag[p * VEC + e] += (float)tc.e[e];\n"
                    : "") +
               "        }\n"
               "        *reinterpret_cast<decltype(tc) *>(totc + o) = tc;\n";
      args.push_back(out(f->totalCast, "totc"));
    }
    if (bias && !f->colSumOfCast)
      store += "#pragma unroll\n"
               "        for (int e = 0; e < VEC; ++e)\n"
               "          ag[p * VEC + e] += tv[e];\n";
  }
  consts += "constexpr int NS = " + str(ns) + ";  // column sums\n"
            "constexpr bool RG = " +
            (residual ? "true" : "false") + ";  // a residual gradient rg\n";
  needWorkspace(4 * ns * slots * d);
  args.push_back(ws("float", "part"));
  body.replace(body.find("STORE"), 5, store);
  body.replace(body.find("PREFETCH"), 8,
               residual
                   ? "        loadv<VEC>(rg + row * N + j, rv + p * VEC);\n"
                   : "");
  launch("dx",
         rowWhat(rows, d, rt) +
             (residual ? "; plus the residual gradient" : "") + "; dw" +
             (centered ? bias ? ", db and a bias gradient's" : " and db"
                       : bias ? " and a bias gradient's" : "") +
             " sums to the workspace (" + str(slots) + " sets)",
         args, kWarpHelpers | kRowHelpers | kPackHelpers, consts, body, grid,
         kBlock, minBlocks);

  // 8 columns a block of 32 warps, 128 groups: lane = column + 8 * sub,
  // group 4 * warp + sub sums the sets g, g + 128, ... of its column (32-byte
  // reads); the four groups of a warp are added by shuffles, then warp 0
  // adds the 32 warps' sums the same way: a fixed order. (32 columns a
  // block took 8.6 us for GPT-2's 768 columns, 24 blocks on 132 SMs.)
  std::string b2 = cuh::layernorm_grad_columns;
  std::vector<Arg> args2 = {out(dw, "dw")};
  std::string store2;
  if (centered) {
    store2 = "    db[j] = (float)acc[1];\n";
    args2.push_back(out(db, "db"));
  }
  if (bias) {
    store2 += "    bg[j] = (float)acc[NS - 1];\n";
    args2.push_back(out(f->biasGrad, "bg"));
  }
  b2.replace(b2.find("STORE"), 5, store2);
  args2.push_back(wsIn("float", "part"));
  launch("dwdb",
         std::string(bias ? "dw, db and the bias gradient" : "dw and db") +
             ": 128 threads a column add the " + str(slots) +
             " sets of sums, in a fixed order",
         args2, 0, consts, b2, ceilDiv(d, 8), 1024);
  return true;
}

/// CpuExecutor's softmax() and softmaxGrad() along `axis`.
bool Emitter::softmax(bool grad) {
  int x = k->inputs[0], y = k->outputs[0];
  const auto &xs = shape(x);
  int64_t axis = k->intAttr("axis", -1);
  if (axis < 0)
    axis += static_cast<int64_t>(xs.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size()))
    return fail("axis out of range");
  int64_t outer = 1, n = xs[axis], inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= xs[i];
  for (size_t i = axis + 1; i < xs.size(); ++i)
    inner *= xs[i];
  if (grad && count(k->inputs[1]) != count(x))
    return fail("softmax_grad operands of different sizes");
  std::vector<Arg> args;
  if (grad)
    args = {in(k->inputs[0], "dy"), in(k->inputs[1], "y"), out(y, "dx")};
  else
    args = {in(x, "x"), out(y, "y")};

  if (inner > 1) {
    // One thread per (outer, inner) column, walking the axis with stride
    // INNER (consecutive threads read consecutive addresses).
    std::string consts = "constexpr i64 OUTER = " + str(outer) +
                         ";\nconstexpr i64 N = " + str(n) +
                         ";\nconstexpr i64 INNER = " + str(inner) + ";\n";
    std::string body =
        "  for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < OUTER "
        "* INNER;\n       c += (i64)gridDim.x * blockDim.x) {\n"
        "    const i64 base = c / INNER * N * INNER + c % INNER;\n";
    if (!grad)
      body += R"CU(    float m = x[base];
    for (i64 j = 1; j < N; ++j)
      m = fmaxf(m, x[base + j * INNER]);
    float s = 0.f;
    for (i64 j = 0; j < N; ++j)
      s += expf(x[base + j * INNER] - m);
    for (i64 j = 0; j < N; ++j)
      y[base + j * INNER] = expf(x[base + j * INNER] - m) / s;
  }
)CU";
    else
      body += R"CU(    double dot = 0.0;
    for (i64 j = 0; j < N; ++j)
      dot += (double)dy[base + j * INNER] * y[base + j * INNER];
    for (i64 j = 0; j < N; ++j) {
      const i64 i = base + j * INNER;
      dx[i] = (float)(y[i] * ((double)dy[i] - dot));
    }
  }
)CU";
    launch("", "one thread per column of " + str(n) + " (stride " +
                   str(inner) + "), " + str(outer * inner) + " columns",
           args, 0, consts, body,
           std::min(ceilDiv(outer * inner, kBlock), kMaxGrid));
    return true;
  }

  int64_t rows = outer;
  int rt = threadsPerRow(n);
  std::string consts = rowConsts(rows, n, rt);
  std::string body = grad ? "  __shared__ double red[8];\n"
                          : "  __shared__ float red[8];\n";
  body += kRowLoop;
  if (!grad)
    body += rowMax("red") + R"CU(    float s = 0.f;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += expf(xr[j] - m);
    s = row_sum<RT>(s, red);
    if (active)
      for (int j = lane; j < N; j += RT)
        y[row * N + j] = expf(xr[j] - m) / s;
  }
)CU";
  else
    body += R"CU(    double dot = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        dot += (double)dy[row * N + j] * y[row * N + j];
    dot = row_sum<RT>(dot, red);
    if (active)
      for (int j = lane; j < N; j += RT) {
        const i64 i = row * N + j;
        dx[i] = (float)(y[i] * ((double)dy[i] - dot));
      }
  }
)CU";
  launch("", rowWhat(rows, n, rt), args, kWarpHelpers | kRowHelpers, consts,
         body, rowGrid(rows, rt));
  return true;
}
