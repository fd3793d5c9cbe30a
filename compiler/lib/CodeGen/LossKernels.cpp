//===- LossKernels.cpp - Cross-entropy and accuracy kernels ---------------===//
//
// cross_entropy (optionally fused with its gradient), cross_entropy_grad
// and accuracy.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

namespace {

/// The row loop shared by the cross-entropy kernels: each row's max and
/// sum of exponentials (double), then optionally the gradient
/// (softmax - onehot) * grad / ROWS, as CpuExecutor's crossEntropyGrad()
/// (the label's entry, p - 1, in double: it cancels when p -> 1), and
/// optionally the row's loss, lse + max - x[label], stored with `lossStore`
/// (e.g. "loss[row] = "). An out-of-range label (an error on the CPU) gives
/// NaN.
static std::string crossEntropyRows(bool grad, const std::string &lossStore) {
  std::string body = kRowLoop + rowMax("redf");
  body += R"CU(    double s = 0.0;
    if (active)
      for (int j = lane; j < N; j += RT)
        s += (double)expf(xr[j] - m);
    s = row_sum<RT>(s, red);
    if (active) {
      const int t = labels[row];
      const bool ok = t >= 0 && t < N;
)CU";
  if (grad)
    body += R"CU(      const float sf = (float)s;
      const double lse = (double)m + log(s);
      for (int j = lane; j < N; j += RT)
        dx[row * N + j] = !ok ? GTC_NAN
                          : j == t ? (float)((exp((double)xr[j] - lse) - 1.0) * gs)
                                   : expf(xr[j] - m) / sf * gsf;
)CU";
  if (!lossStore.empty())
    body += "      if (lane == 0)\n        " + lossStore +
            "ok ? log(s) + (double)m - (double)xr[t] : (double)GTC_NAN;\n";
  body += "    }\n  }\n";
  return body;
}

/// Sums the ROWS row losses in shared `rl` in a fixed order into y[0].
static const char *kMeanOfRowLosses = "  __syncthreads();\n"
                                      "  double total = 0.0;\n"
                                      "  for (i64 i = threadIdx.x; i < ROWS; "
                                      "i += blockDim.x)\n"
                                      "    total += rl[i];\n"
                                      "  total = row_sum<256>(total, red);\n"
                                      "  if (threadIdx.x == 0)\n"
                                      "    y[0] = (float)(total / ROWS);\n";

static const char *kCrossEntropyShared = "  __shared__ double red[8];\n"
                                         "  __shared__ float redf[8];\n";
static const char *kGradScale = "  const double gs = (double)grad[0] / ROWS;\n"
                                "  const float gsf = (float)gs;\n";

} // namespace

/// CpuExecutor's crossEntropy(): per row lse + max - x[label], then their
/// mean. Few rows: one block, the row losses in shared memory (fused with
/// the gradient when planCrossEntropyFusion() found it); many rows: the row
/// losses to the workspace (launch 1), then their mean (launch 2).
bool Emitter::crossEntropy() {
  int x = k->inputs[0], lab = k->inputs[1], y = k->outputs[0];
  if (isF32(lab) || !isF32(x))
    return fail("cross_entropy takes f32 logits and i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows)
    return fail("labels do not match the logits' rows");
  int rt = threadsPerRow(c);
  std::string sharedLosses = "  __shared__ double rl[" + str(rows) + "];\n";
  if (auto it = fusedCrossEntropy.find(index); it != fusedCrossEntropy.end()) {
    const Kernel &gk = plan.kernels[it->second];
    int g = gk.inputs[0], dx = gk.outputs[0];
    std::string body = kCrossEntropyShared + sharedLosses + kGradScale +
                       crossEntropyRows(true, "rl[row] = ") +
                       kMeanOfRowLosses;
    launch("", rowWhat(rows, c, rt) +
                   " in one block: loss and gradient (fused with kernel " +
                   str(it->second) + ")",
           {in(g, "grad"), in(x, "x"), in(lab, "labels"), out(y, "y"),
            out(dx, "dx")},
           kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt), body, 1);
    return true;
  }
  if (rows <= kOneBlockRows && count(x) <= kOneBlockLogits) {
    std::string body = kCrossEntropyShared + sharedLosses +
                       crossEntropyRows(false, "rl[row] = ") +
                       kMeanOfRowLosses;
    launch("", rowWhat(rows, c, rt) + " in one block, then their mean",
           {in(x, "x"), in(lab, "labels"), out(y, "y")},
           kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt), body, 1);
    return true;
  }
  needWorkspace(8 * rows);
  launch("rows", rowWhat(rows, c, rt) + "; row losses to the workspace",
         {in(x, "x"), in(lab, "labels"), ws("double", "loss")},
         kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt),
         kCrossEntropyShared + crossEntropyRows(false, "loss[row] = "),
         rowGrid(rows, rt));
  finalSum("mean", y, rows, "double", "(float)(s / " + str(rows) + ")");
  return true;
}

/// CpuExecutor's crossEntropyGrad(): (softmax - onehot) * g / rows.
bool Emitter::crossEntropyGrad() {
  int g = k->inputs[0], x = k->inputs[1], lab = k->inputs[2];
  int dx = k->outputs[0];
  if (isF32(lab) || !isF32(x) || count(g) != 1)
    return fail("cross_entropy_grad takes a scalar, f32 logits, i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows || count(dx) != count(x))
    return fail("labels do not match the logits' rows");
  int rt = threadsPerRow(c);
  launch("", rowWhat(rows, c, rt),
         {in(g, "grad"), in(x, "x"), in(lab, "labels"), out(dx, "dx")},
         kWarpHelpers | kRowHelpers, rowConsts(rows, c, rt),
         std::string(kCrossEntropyShared) + kGradScale +
             crossEntropyRows(true, ""),
         rowGrid(rows, rt));
  return true;
}

/// CpuExecutor's accuracy(): per row argmax == label (launch 1, to the
/// workspace), then the fraction (launch 2).
bool Emitter::accuracy() {
  int x = k->inputs[0], lab = k->inputs[1], y = k->outputs[0];
  if (isF32(lab) || !isF32(x))
    return fail("accuracy takes f32 logits and i32 labels");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows)
    return fail("labels do not match the logits' rows");
  needWorkspace(4 * rows);
  int rt = threadsPerRow(c);
  std::string body = "  __shared__ float shv[8];\n"
                     "  __shared__ int shi[8];\n";
  body += kRowLoop;
  body += R"CU(    const auto *xr = x + row * N;
    float v = -GTC_INF;
    int best = 0x7fffffff;
    if (active)
      for (int j = lane; j < N; j += RT)
        argmax_combine(v, best, xr[j], j);
    row_argmax<RT>(v, best, shv, shi);
    if (active && lane == 0)
      right[row] = best == labels[row] ? 1 : 0;
  }
)CU";
  launch("rows", rowWhat(rows, c, rt) + "; hits to the workspace",
         {in(x, "x"), in(lab, "labels"), ws("int", "right")},
         kWarpHelpers | kArgmaxHelpers, rowConsts(rows, c, rt), body,
         rowGrid(rows, rt));
  finalSum("mean", y, rows, "int", "(float)(s / " + str(rows) + ")");
  return true;
}
