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

/// What a cross-entropy row kernel computes besides each row's
/// log-sum-exp.
struct RowLoss {
  /// Where the row's loss goes (e.g. "loss[row] = "), or empty.
  std::string lossStore;
  /// Whether it writes the gradient (softmax - onehot) * grad / GRAD_ROWS to dx.
  bool grad = false;
  /// Where whether the row's first largest logit is its label goes, as 1.0
  /// or 0.0 (e.g. "loss[ROWS + row] = "; the kernel's ARGMAX), or empty.
  std::string hitStore = {};
};

/// The shape of a cross-entropy row kernel: RT threads a row, VEC elements
/// a 16-byte load (1 when rows are not a multiple of it), and PPT loads a
/// thread. Long rows, such as a vocabulary, take a block of 512 threads a
/// row, at most 42 registers a thread so that an SM holds three (minBlocks):
/// 396 rows in flight on an H100, 40 MB for GPT-2's 100 KB rows, so a row's
/// second pass finds it in L2 (50 MB). Measured on an H200 in a standalone
/// harness over 4096 x 50304 bf16 logits (before the backward pass 2 and
/// the streaming stores below): 336 us, against 346 with two blocks an SM
/// and 394 with one of 1024 threads.
struct LossShape {
  int rt, block, vec, minBlocks;
  int64_t ppt;
  LossShape(int64_t n, bool f32) {
    bool longRows = n >= 8192;
    rt = longRows ? 512 : threadsPerRow(n);
    block = std::max(rt, kBlock);
    minBlocks = longRows ? 3 : 0;
    vec = n % (f32 ? 4 : 8) == 0 ? (f32 ? 4 : 8) : 1;
    ppt = ceilDiv(n, int64_t(rt) * vec);
  }
  /// The shape of the one-block kernel over all `rows` (at most 1024): every
  /// row in flight at once, in up to 1024 threads, each row's threads fewer
  /// (a power of two, down to one) where rows x threads would not fit. The
  /// row loop is latency-bound there, a few dependent global loads a pass:
  /// examples/mlp.gt's 64 rows of 10 logits took 8 passes of a warp a row in
  /// 256 threads, 11.6 us (15 with the gradient) on an H100.
  static LossShape oneBlock(int64_t rows, int64_t n, bool f32) {
    LossShape ls(n, f32);
    while (ls.rt > 1 && rows * ls.rt > 1024)
      ls.rt /= 2;
    int64_t threads = ceilDiv(rows * ls.rt, int64_t(32)) * 32;
    ls.block = static_cast<int>(std::clamp<int64_t>(threads, 32, 1024));
    ls.ppt = ceilDiv(n, int64_t(ls.rt) * ls.vec);
    return ls;
  }
};

/// Constants of the cross-entropy row kernels: the row loop's, the block
/// size, the logits' and gradient's element types (xt, dt), VEC and PPT,
/// and KEEP: whether each thread keeps its loads of the row in registers
/// for the gradient pass (at most 4 loads, 16 registers: more would cut the
/// rows in flight on an SM to one, measured slower than reading the row
/// again from L2). GRAD_ROWS, the count of the mean that the gradient
/// scales by, is the kernel's rows, or all rows when it covers a chunk.
/// store_pack() writes VEC gradient values, bf16 two at a time (one
/// cvt.rn.bf16x2, rounding as two cvt.rn.bf16); 16-byte packs are written
/// with st.global.cs (evict first): they are not read again soon, and
/// leaving L2 to the rows pass 2 re-reads took GPT-2's classifier row kernel
/// from 374 to 344 us on an H100.
std::string lossConsts(int64_t rows, int64_t n, const LossShape &ls,
                       const std::string &xt, const std::string &dt,
                       int64_t gradRows = 0, bool argmax = false) {
  std::string s =
      rowConsts(rows, n, ls.rt, ls.block) +
      "constexpr bool ARGMAX = " + (argmax ? "true" : "false") +
      ";  // the accuracy's argmax too\nconstexpr i64 GRAD_ROWS = " +
      str(gradRows ? gradRows : rows) + ";\n" +
      "constexpr int BLOCK = " + str(ls.block) + ";\ntypedef " + xt +
      " xt;\ntypedef " + dt + " dt;\nconstexpr int VEC = " + str(ls.vec) +
      ";  // elements per load\nconstexpr int PPT = " + str(ls.ppt) +
      ";  // loads per thread\nconstexpr bool KEEP = PPT <= 4;\n"
      "constexpr float LOG2E = 1.4426950408889634f;\n"
      "typedef pack_t<xt, VEC> xpack;\n";
  if (dt == "bf16_t" && ls.vec == 8)
    return s + R"CU(__device__ __forceinline__ void store_pack(dt *p, const float *v) {
  unsigned w[4];
#pragma unroll
  for (int e = 0; e < 8; e += 2)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[e / 2]) : "f"(v[e + 1]), "f"(v[e]));
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" :: "l"(p),
               "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
}
)CU";
  if (dt == "float" && ls.vec == 4)
    return s + R"CU(__device__ __forceinline__ void store_pack(dt *p, const float *v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p),
               "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3]) : "memory");
}
)CU";
  return s + "__device__ __forceinline__ void store_pack(dt *p, const float "
             "*v) {\n  storev<VEC>(p, v);\n}\n";
}

/// The row loop shared by the cross-entropy kernels. Pass 1 reads the row
/// once (VEC elements a load, kept in registers when KEEP) with a running
/// maximum, taken a load at a time, and the sum of exponentials scaled to
/// it (the online softmax), combined over the row's threads (the sum in
/// double). Pass 2, for the gradient, writes (softmax - onehot) * grad /
/// GRAD_ROWS, as CpuExecutor's crossEntropyGrad(), walking the row
/// backwards: what pass 1 read last is likeliest still in L2 (GPT-2's
/// classifier row kernel on an H100: 413 -> 376 us). It writes softmax *
/// grad / GRAD_ROWS everywhere, then the thread whose loads hold the label
/// overwrites its entry with (p - 1) * grad / GRAD_ROWS in double (it
/// cancels when p -> 1), from the logit it read before the row was written.
/// The row's loss is lse - x[label], stored by that thread with the
/// gradient, so dx may be x itself (written in place: each element is read
/// before it is overwritten, by the same thread). An out-of-range label (an
/// error on the CPU) gives NaN.
std::string crossEntropyRows(const RowLoss &what) {
  std::string body = kRowLoop;
  body += cuh::cross_entropy_row;
  if (!what.hitStore.empty())
    body += "      if (lane == 0)\n        " + what.hitStore +
            "(bi == t ? 1.0 : 0.0);\n";
  const std::string &store = what.lossStore;
  if (what.grad) {
    body += cuh::cross_entropy_grad;
    if (!store.empty())
      body += "        " + store + "lse - (double)vt;\n";
    body += "      }\n";
    if (!store.empty())
      body += "      if (!ok && lane == 0)\n        " + store +
              "(double)GTC_NAN;\n";
  } else if (!store.empty()) {
    body += "      if (lane == 0)\n        " + store +
            "ok ? lse - (double)(float)xr[t] : (double)GTC_NAN;\n";
  }
  body += "    }\n  }\n";
  return body;
}

/// Sums the ROWS row losses in shared `rl` in a fixed order into y[0].
const char *kMeanOfRowLosses = "  __syncthreads();\n"
                               "  double total = 0.0;\n"
                               "  for (i64 i = threadIdx.x; i < ROWS; "
                               "i += blockDim.x)\n"
                               "    total += rl[i];\n"
                               "  total = row_sum<BLOCK>(total, red);\n"
                               "  if (threadIdx.x == 0)\n"
                               "    y[0] = (float)(total / ROWS);\n";

const char *kCrossEntropyShared = "  __shared__ double red[32];\n"
                                  "  __shared__ float redf[32];\n"
                                  "  __shared__ int shi[32];  // ARGMAX\n";
const char *kInPlace = "  auto *dx = x;  // the gradient overwrites the logits\n";
/// The helpers of the cross-entropy row kernels.
constexpr unsigned kLossHelpers =
    kWarpHelpers | kRowHelpers | kPackHelpers | kArgmaxHelpers;

const char *kGradScale = "  const double gs = (double)grad[0] / GRAD_ROWS;\n"
                         "  const float gsf = (float)gs;\n";

} // namespace

/// The cross-entropy of the logits x against the labels into the loss y
/// (or none), with the gradient scaled by g into dx (or none; it may be x
/// itself).
/// Few rows: one block, the row losses in shared memory, then their mean
/// (one launch); many rows: one or a few rows a block, the row losses to the
/// workspace (launch 1), then their mean (launch 2).
bool Emitter::crossEntropyKernel(const LossBuffers &b) {
  const int x = b.logits, lab = b.labels, y = b.loss, g = b.grad,
            dx = b.dlogits, acc = b.accuracy;
  if (isF32(lab) || !isFloat(x) || (dx >= 0 && !isFloat(dx)) ||
      (g >= 0 && (!isF32(g) || count(g) != 1)))
    return fail("cross_entropy takes float logits and i32 labels (and a "
                "scalar f32 gradient)");
  if (acc >= 0 && y < 0)
    return fail("a loss region's accuracy comes with the loss");
  int64_t c = shape(x).empty() ? 1 : shape(x).back();
  int64_t rows = count(x) / c;
  if (count(lab) != rows || (dx >= 0 && count(dx) != count(x)))
    return fail("labels do not match the logits' rows");
  bool inPlace = dx >= 0 && plan.buffers[dx].overlaps(plan.buffers[x]);
  if (inPlace && (plan.buffers[dx].offset != plan.buffers[x].offset ||
                  plan.buffers[dx].dtype != plan.buffers[x].dtype))
    return fail("the gradient of the logits overlaps them but is not them");
  const bool f32 = isF32(x) && (dx < 0 || isF32(dx));
  const bool oneBlock =
      y >= 0 && acc < 0 && rows <= kOneBlockRows && count(x) <= kOneBlockLogits;
  LossShape ls = oneBlock ? LossShape::oneBlock(rows, c, f32) : LossShape(c, f32);
  int rt = ls.rt;
  std::string consts =
      lossConsts(rows, c, ls, ctype(x), ctype(dx >= 0 ? dx : x), 0, acc >= 0);
  std::vector<Arg> args;
  if (g >= 0)
    args.push_back(in(g, "grad"));
  args.push_back(inPlace ? out(x, "x") : in(x, "x"));
  args.push_back(in(lab, "labels"));
  std::string head = kCrossEntropyShared;
  if (g >= 0)
    head += kGradScale;
  if (inPlace)
    head += kInPlace;
  else if (dx >= 0)
    args.push_back(out(dx, "dx"));
  std::string what = rowWhat(rows, c, rt) +
                     (dx < 0      ? ""
                      : y < 0     ? ": the gradient"
                      : inPlace   ? ": loss and gradient, over the logits"
                                  : ": loss and gradient");
  if (y < 0) {
    launch("", what, args, kLossHelpers, consts,
           head + crossEntropyRows({"", true}), rowGrid(rows, rt, ls.block),
           ls.block, ls.minBlocks);
    return true;
  }
  if (oneBlock) {
    args.push_back(out(y, "y"));
    launch("", what + ", in one block, then the mean", args, kLossHelpers,
           consts,
           head + "  __shared__ double rl[" + str(rows) + "];\n" +
               crossEntropyRows({"rl[row] = ", dx >= 0}) + kMeanOfRowLosses,
           1, ls.block, ls.minBlocks);
    return true;
  }
  // The row losses, then (with the accuracy) the rows' hits.
  needWorkspace(8 * rows * (acc >= 0 ? 2 : 1));
  args.push_back(ws("double", "loss"));
  launch("rows",
         what +
             (acc >= 0 ? " and argmax; row losses and hits" : "; row losses") +
             " to the workspace",
         args, kLossHelpers, consts,
         head + crossEntropyRows({"loss[row] = ", dx >= 0,
                                  acc >= 0 ? "loss[ROWS + row] = " : ""}),
         rowGrid(rows, rt, ls.block), ls.block, ls.minBlocks);
  finalSum("mean", y, rows, "double", "(float)(s / " + str(rows) + ")");
  if (acc >= 0)
    finalSum("accuracy", acc, rows, "double", "(float)(s / " + str(rows) + ")",
             rows);
  return true;
}

/// CpuExecutor's crossEntropy(): per row lse - x[label], then their mean.
bool Emitter::crossEntropy() {
  LossBuffers b{k->inputs[0], k->inputs[1]};
  b.loss = k->outputs[0];
  return crossEntropyKernel(b);
}

/// CpuExecutor's crossEntropyGrad(): (softmax - onehot) * g / rows.
bool Emitter::crossEntropyGrad() {
  LossBuffers b{k->inputs[1], k->inputs[2]};
  b.grad = k->inputs[0];
  b.dlogits = k->outputs[0];
  return crossEntropyKernel(b);
}

/// A "loss" region (gt-fuse's foldLosses): the cross-entropy and its
/// gradient (none in an evaluation, which may have the accuracy instead)
/// in one row kernel. A widening cast of
/// the logits is no work (the kernel converts as it loads), the cast of the
/// gradient one store of its type; the gradient may overwrite the logits
/// (PlanBuilder's inPlaceLoss).
bool Emitter::lossRegion() {
  std::map<int, int> loaded; // a widening cast's result -> what it reads
  const Kernel *ce = nullptr, *grad = nullptr, *accuracy = nullptr;
  int dx = -1;
  for (const Kernel &sub : k->body) {
    if (sub.inputs.empty() || sub.outputs.empty())
      return fail("a loss region's ops read and write buffers");
    if (sub.op == OpKind::Cast && !ce)
      loaded[sub.outputs[0]] = sub.inputs[0];
    else if (sub.op == OpKind::CrossEntropy && !ce && sub.inputs.size() == 2)
      ce = &sub;
    else if (sub.op == OpKind::CrossEntropyGrad && ce && !grad &&
             sub.inputs.size() == 3)
      grad = &sub, dx = sub.outputs[0];
    else if (sub.op == OpKind::Cast && grad && sub.inputs[0] == dx)
      dx = sub.outputs[0];
    else if (sub.op == OpKind::Accuracy && ce && !accuracy &&
             sub.inputs.size() == 2)
      accuracy = &sub;
    else
      return fail(std::string("'") + opName(sub.op) +
                  "' in a loss region is not a cross-entropy, its gradient, "
                  "its accuracy or a cast");
  }
  if (!ce || (grad && (grad->inputs[1] != ce->inputs[0] ||
                      grad->inputs[2] != ce->inputs[1])))
    return fail("a loss region is a cross_entropy and the "
                "cross_entropy_grad of its logits");
  auto it = loaded.find(ce->inputs[0]);
  int x = it == loaded.end() ? ce->inputs[0] : it->second;
  LossBuffers b{x, ce->inputs[1]};
  b.loss = ce->outputs[0];
  b.grad = grad ? grad->inputs[0] : -1;
  b.dlogits = dx;
  if (accuracy) {
    // Of the logits the cross-entropy reads (before any widening cast).
    auto acc = loaded.find(accuracy->inputs[0]);
    if ((acc == loaded.end() ? accuracy->inputs[0] : acc->second) != x ||
        accuracy->inputs[1] != ce->inputs[1])
      return fail("a loss region's accuracy reads the cross-entropy's "
                  "logits and labels");
    b.accuracy = accuracy->outputs[0];
  }
  return crossEntropyKernel(b);
}

/// A "classifier" region (gt-fuse's foldClassifiers): logits = h W^T, the
/// cross-entropy and its gradient, dh = dlogits W and dW = dlogits^T h, a
/// chunk of rows at a time in the plan's `chunk_buffer` (PlanBuilder's
/// addClassifierChunk), so the logits and their gradient never exist in
/// full. For each chunk of rows [r0, r0 + rc): the logits GEMM into the
/// chunk; the row kernel of the loss region, which writes each row's loss to
/// the workspace and the gradient (scaled by 1 / all rows) over the chunk's
/// logits; dh's rows; dW += the chunk's share (beta = 1 after the first).
/// Then the mean of the row losses. Each element of the result is computed
/// by the same GEMMs and row kernel as the unchunked ops, in a fixed order.
/// A small head (isSmallHead) is one kernel instead (smallHead), which also
/// takes a bias and its gradient and the ReLU gradient of dh.
bool Emitter::classifierRegion() {
  int h = -1, w = -1, labels = -1, g = -1, loss = -1, dh = -1, dw = -1;
  SmallHead head;
  bool seenGemm = false;      // the logits GEMM, the body's first op
  int logits = -1, grad = -1; // body values (Local on the CPU)
  std::set<int> gradForms, hForms;
  auto isOutput = [&](int id) {
    return std::count(k->outputs.begin(), k->outputs.end(), id) > 0;
  };
  for (const Kernel &sub : k->body) {
    if (sub.inputs.empty() || sub.outputs.empty())
      return fail("a classifier region's ops read and write buffers");
    int in0 = sub.inputs[0], out0 = sub.outputs[0];
    if (!seenGemm) {
      bool tb = sub.op == OpKind::Linear || sub.intAttr("transpose_b", 0);
      const size_t n = sub.inputs.size();
      if ((sub.op != OpKind::Matmul && sub.op != OpKind::Linear) || !tb ||
          sub.intAttr("transpose_a", 0) || n < 2 ||
          n > (sub.op == OpKind::Linear ? 3u : 2u))
        return fail("a classifier region starts with the logits' GEMM h W^T");
      h = in0, w = sub.inputs[1], logits = out0, seenGemm = true;
      head.bias = sub.inputs.size() == 3 ? sub.inputs[2] : -1;
      head.logitType = plan.buffers[out0].dtype;
      hForms.insert(h);
    } else if (sub.op == OpKind::Cast && in0 == logits && grad < 0) {
      logits = out0;
    } else if (sub.op == OpKind::CrossEntropy && in0 == logits && loss < 0) {
      labels = sub.inputs[1], loss = out0;
    } else if (sub.op == OpKind::CrossEntropyGrad && loss >= 0 && grad < 0 &&
               sub.inputs[1] == logits && sub.inputs[2] == labels) {
      g = in0, grad = out0;
      gradForms.insert(grad);
    } else if ((sub.op == OpKind::Cast || sub.op == OpKind::Reshape) &&
               gradForms.count(in0)) {
      gradForms.insert(out0);
    } else if (sub.op == OpKind::Reshape && hForms.count(in0)) {
      hForms.insert(out0);
    } else if (sub.op == OpKind::Matmul && gradForms.count(in0) &&
               sub.inputs[1] == w && !sub.intAttr("transpose_a", 0) &&
               !sub.intAttr("transpose_b", 0) && dh < 0) {
      dh = out0;
      head.gradType = plan.buffers[in0].dtype;
      head.dhType = plan.buffers[out0].dtype;
    } else if (sub.op == OpKind::Matmul && gradForms.count(in0) &&
               hForms.count(sub.inputs[1]) && sub.intAttr("transpose_a", 0) &&
               !sub.intAttr("transpose_b", 0) && dw < 0) {
      dw = out0;
      head.dwType = plan.buffers[out0].dtype;
    } else if (sub.op == OpKind::Cast && in0 == dw) {
      dw = out0;
    } else if (sub.op == OpKind::SumTo && gradForms.count(in0) &&
               head.biasGrad < 0) {
      head.biasGrad = out0;
      head.biasGradType = plan.buffers[out0].dtype;
    } else if (sub.op == OpKind::Cast && in0 == head.biasGrad) {
      head.biasGrad = out0;
    } else if (sub.op == OpKind::ActivationGrad && in0 == dh && dh >= 0 &&
               sub.strAttr("kind", "") == "relu" &&
               hForms.count(sub.inputs[1]) && !head.reluGrad) {
      dh = out0; // dh * (h > 0)
      head.reluGrad = true;
    } else if (sub.op == OpKind::SumTo && in0 == dh && head.reluGrad &&
               head.colSum < 0) {
      head.colSum = out0;
      head.colSumType = plan.buffers[out0].dtype;
    } else if (sub.op == OpKind::Cast && in0 == head.colSum) {
      head.colSum = out0;
    } else {
      return fail(std::string("'") + opName(sub.op) +
                  "' in a classifier region is not the logits' GEMM, the "
                  "cross-entropy, its gradient, their GEMMs, a bias "
                  "gradient or a ReLU gradient");
    }
  }
  if (loss < 0 || dh < 0 || dw < 0 || !isOutput(loss) || !isOutput(dh) ||
      !isOutput(dw) || (head.biasGrad >= 0 && !isOutput(head.biasGrad)) ||
      (head.colSum >= 0 && !isOutput(head.colSum)))
    return fail("a classifier region yields its loss, dh and dW (and the "
                "bias gradients it computes)");
  const int64_t d = shape(w).back(), rows = count(labels);
  const int64_t v = shape(w).size() == 2 ? shape(w)[0] : -1;
  if (isSmallHead(rows, v, d)) {
    head.h = h, head.w = w, head.labels = labels, head.grad = g;
    head.loss = loss, head.dh = dh, head.dw = dw;
    return smallHead(head);
  }
  if (head.bias >= 0 || head.biasGrad >= 0 || head.reluGrad)
    return fail("a classifier region with a bias or a ReLU gradient runs as "
                "one kernel, for at most " + str(kSmallGemmRows) +
                " rows of at most " + str(kSmallHeadClasses) +
                " classes and a K of at most " + str(kSmallHeadK) +
                " (here " + str(rows) + " rows, " + str(v) + " classes, K " +
                str(d) + ")");
  int chunk = static_cast<int>(k->intAttr("chunk_buffer", -1));
  if (chunk < 0 || shape(chunk).size() != 2)
    return fail("a classifier region needs its chunk buffer (the plan's "
                "chunk_buffer)");
  const int64_t r = shape(chunk)[0];
  auto bytes = [&](int id) { return int64_t(dtypeBytes(plan.buffers[id].dtype)); };
  if (shape(w).size() != 2 || shape(chunk)[1] != v || count(h) != rows * d ||
      count(dh) != rows * d || count(dw) != v * d ||
      plan.buffers[chunk].dtype != plan.buffers[w].dtype ||
      plan.buffers[h].dtype != plan.buffers[w].dtype ||
      plan.buffers[dh].dtype != plan.buffers[w].dtype || isF32(labels) ||
      !isF32(g) || count(g) != 1)
    return fail("classifier shapes or types do not agree: h " + describe(h) +
                ", W " + describe(w) + ", chunk " + describe(chunk));
  needWorkspace(8 * rows);
  LossShape ls(v, isF32(chunk));
  for (int64_t r0 = 0; r0 < rows; r0 += r) {
    const int64_t rc = std::min(r, rows - r0);
    const std::string part = "classifier_c" + str(r0 / r);
    gemm(part + "_logits", h, w, chunk, false, true, rc, v, d).offsetA =
        r0 * d * bytes(h);
    launch(part,
           rowWhat(rc, v, ls.rt) + " of rows " + str(r0) +
               "..: loss and gradient over the logits; row losses to the "
               "workspace",
           {in(g, "grad"), out(chunk, "x"), in(labels, "labels"),
            ws("double", "loss")},
           kLossHelpers,
           lossConsts(rc, v, ls, ctype(chunk), ctype(chunk), rows),
           std::string(kCrossEntropyShared) + kGradScale + kInPlace +
               crossEntropyRows({"loss[row] = ", true}),
           rowGrid(rc, ls.rt, ls.block), ls.block, ls.minBlocks);
    launches.back().offsets = {0, 0, r0 * 4, r0 * 8};
    gemm(part + "_dh", chunk, w, dh, false, false, rc, d, v).offsetC =
        r0 * d * bytes(dh);
    CudaLaunch &dW = gemm(part + "_dW", chunk, h, dw, true, false, v, d, rc);
    dW.offsetB = r0 * d * bytes(h);
    dW.beta = r0 == 0 ? 0.0f : 1.0f;
  }
  finalSum("mean", loss, rows, "double",
           "(float)(s / " + str(rows) + ")");
  return true;
}

//===----------------------------------------------------------------------===//
// A small classifier head as one kernel
//===----------------------------------------------------------------------===//
//
// examples/mlp.gt at batch 64 ran its 10-class head as four launches of
// 4.5-5.6 us each on an H100 (the logits GEMM, the loss, dh with the ReLU
// gradient and its column sums, dW with the bias gradient), for about
// 2 MFLOP of work (test/bench/NOTES.md, twelfth session). This kernel does
// all of it in one launch: one cluster of S CTAs (sm_90), CTA r holding
// slice r of K (KC columns) of h and W in shared memory.
//  1. Each CTA computes its slice's part of the logits (fp32 FMAs; KQ
//     threads a row, each every KQ-th group of 4 columns, added by a
//     butterfly) and stores it into every CTA of the cluster (distributed
//     shared memory: st.async, completing on the receiver's mbarrier).
//  2. Every CTA adds the S parts in slice order, the bias, and computes the
//     loss and the gradient of its rows: all M rows, in every CTA (a few
//     hundred exponentials; no second exchange), as the row kernel of the
//     loss region (crossEntropyRows).
//  3. Each CTA computes its slice of dh = dlogits W (with the ReLU gradient
//     of h, h > 0, and dh's column sums) and of dW = dlogits^T h from the
//     slices it holds; CTA 0 writes the loss and the bias gradient.
// Every value is rounded to its op's type on the way (bf16 logits, the
// gradient's cast, ...), sums of rows are taken in double as the CPU's
// sum_to, and every sum runs in a fixed order: bitwise reproducible. Below
// sm_90 (no clusters) each CTA computes every slice's part itself, in the
// same order, its own slice last, so that it stays in shared memory.

bool Emitter::smallHead(const SmallHead &head) {
  const int h = head.h, w = head.w, labels = head.labels, g = head.grad,
            loss = head.loss, dh = head.dh, dw = head.dw;
  const int64_t m = count(labels), n = shape(w)[0], kk = shape(w).back();
  const DType et = plan.buffers[w].dtype;
  if (!isSmallHead(m, n, kk) || plan.buffers[h].dtype != et || !rt::isFloat(et) ||
      count(h) != m * kk || count(dh) != m * kk || count(dw) != n * kk ||
      isF32(labels) || !isF32(g) || count(g) != 1 || !isF32(loss) ||
      (head.bias >= 0 && count(head.bias) != n) ||
      (head.biasGrad >= 0 && count(head.biasGrad) != n) ||
      (head.colSum >= 0 && count(head.colSum) != kk))
    return fail("small classifier head's shapes or types do not agree: h " +
                describe(h) + ", W " + describe(w) + ", labels " +
                describe(labels));
  const int bytes = et == DType::F32 ? 4 : 2;
  // Up to 8 slices (a portable cluster) of at least 64 columns, each a
  // multiple of 32; S the slices that K fills.
  const int64_t kc = alignUp(ceilDiv(kk, std::min<int64_t>(8, ceilDiv(kk, 64))), 32);
  const int64_t s = ceilDiv(kk, kc);
  // Rows of the slices: 16-bit ones start 32 elements apart modulo 64 (two
  // rows' 8-byte loads of a half-warp hit distinct banks).
  const int64_t ld = bytes == 4 ? kc : kc + (96 - kc % 64) % 64;
  const int64_t np = alignUp(n, 4);
  int v = 16 / bytes;
  while (v > 1 && kk % v != 0)
    v /= 2;
  // Phase 3 takes two columns a thread (one register of W and of dW's
  // partial sums per class and column) where that fits.
  const int64_t threads = 512;
  const int64_t cpt = kk % 2 == 0 && n <= 16 ? 2 : 1;
  const int64_t rg = threads / (kc / cpt);
  const int64_t sliceBytes = alignUp((m + n) * ld * bytes, 16);
  const int64_t area = alignUp(std::max(s * m * np, rg * n * kc), 4);
  const int64_t shared =
      sliceBytes + (area + m * np) * 4 + (m + rg * kc) * 8;
  if (shared > 227 * 1024)
    return fail("the small classifier head needs " + str(shared) +
                " bytes of shared memory");
  std::string consts =
      "constexpr int M = " + str(m) + ", N = " + str(n) + ", K = " + str(kk) +
      ", S = " + str(s) + ", KC = " + str(kc) + ", LD = " + str(ld) +
      ", NP = " + str(np) + ", V = " + str(v) + ", CPT = " + str(cpt) +
      ", AREA = " + str(area) + ";\n" + "typedef " + ctypeOf(et) +
      " E;\ntypedef " + ctypeOf(head.logitType) + " LOGIT_T;\ntypedef " +
      ctypeOf(head.gradType) + " GRAD_T;\ntypedef " + ctypeOf(head.dhType) +
      " DH_T;\ntypedef " + ctype(dh) + " DX_T;\ntypedef " +
      ctypeOf(head.dwType) + " DW_T;\n" + cuh::small_head_prelude;
  std::vector<Arg> args = {in(g, "grad"), in(h, "h"), in(w, "w")};
  std::string what = "small classifier head: " + str(m) + " rows of " +
                     str(n) + " classes from K " + str(kk) + " (" +
                     dtypeName(et) + "), logits, loss, gradient, dh, dW";
  std::string body = cuh::small_head;
  auto put = [&](const std::string &marker, const std::string &code) {
    body.replace(body.find(marker), marker.size(), code);
  };
  if (head.bias >= 0) {
    args.push_back(in(head.bias, "bias"));
    what += ", +bias";
  }
  put("BIAS_ADD", head.bias >= 0 ? "v += (float)bias[j];" : "");
  args.push_back(in(labels, "labels"));
  args.push_back(out(loss, "y"));
  args.push_back(out(dh, "dx"));
  put("RELU_GRAD",
      head.reluGrad ? "v[p] *= hv[p] > 0.f ? 1.f : 0.f; // relu'" : "");
  if (head.reluGrad)
    what += " *relu'";
  if (head.colSum >= 0) {
    args.push_back(out(head.colSum, "colsum"));
    what += " +column sums";
  }
  put("COLSUM_STORE",
      head.colSum >= 0
          ? "for (int cc = threadIdx.x; cc < KC; cc += THREADS)\n"
            "    if (rank * KC + cc < K) {\n"
            "      double s = 0.0;\n"
            "      for (int gg = 0; gg < RG; ++gg)\n"
            "        s += dsum[gg * KC + cc];\n"
            "      colsum[rank * KC + cc] = as<" +
                ctypeOf(head.colSumType) + ">((float)s);\n    }"
          : "");
  args.push_back(out(dw, "dw"));
  if (head.biasGrad >= 0) {
    args.push_back(out(head.biasGrad, "db"));
    what += " +bias gradient";
  }
  put("BIAS_GRAD_STORE",
      head.biasGrad >= 0
          ? "for (int j = warp; j < N; j += THREADS / 32) {\n"
            "      double s = 0.0;\n"
            "      for (int r = lane; r < M; r += 32)\n"
            "        s += (double)dl[r * NP + j];\n"
            "      s = warp_reduce(s, Add());\n"
            "      if (lane == 0)\n"
            "        db[j] = as<" +
                ctypeOf(head.biasGradType) + ">((float)s);\n    }"
          : "");
  if (s > 1)
    what += "; K split over a cluster of " + str(s) + " CTAs";
  launch("head", what, args,
         kWarpHelpers | kPackHelpers | kAsyncHelpers | kClusterHelpers, consts,
         body, s, threads, 0, "GTC_CLUSTER");
  launches.back().shared = shared;
  return true;
}

/// CpuExecutor's accuracy(): per row argmax == label (launch 1, to the
/// workspace), then the fraction (launch 2).
bool Emitter::accuracy() {
  int x = k->inputs[0], lab = k->inputs[1], y = k->outputs[0];
  if (isFloat(lab) || !isFloat(x))
    return fail("accuracy takes float logits and i32 labels");
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
