//===- PackProjections.cpp - One GEMM for attention's q, k, v projections -===//
//
// A Llama block projects one input three times, q = x Wq^T, k = x Wk^T and
// v = x Wv^T, turns q and k by a rope and attends over [B, T, H, d] q and
// [B, T, Hkv, d] k, v. Three GEMMs of N = H d, Hkv d and Hkv d (768, 256,
// 256 in llama124m) each forward and twice each backward run below one of
// N = (H + 2 Hkv) d: the narrow ones fill fewer tiles, their weight
// gradients need split-K, and the three dX GEMMs add into one another
// (test/bench/NOTES.md, thirty-third and thirty-fourth sessions). This pass
// rewrites
//
//   attention(rope(reshape(linear(x, Wq))), rope(reshape(linear(x, Wk))),
//             reshape(linear(x, Wv)))
//
// into one linear over the weights stacked along N, reshaped to packed
// heads [B, T, H + 2 Hkv, d], one rope of the first H + Hkv heads
// (`rotated`), and attention over the packed heads. The stacked weight is
// one packed gt.param of three parts when the weights are parameters read
// by nothing else (one tensor in memory: no copies forward, and the dW
// GEMM writes the three gradients in place); else the weights are placed
// at their row offsets by gt.pad and added (the language's concat). The
// function computed is the same; gt-autodiff then gives one dX and one dW
// GEMM, and gt-fuse folds the gradient's inverse rope into the attention
// gradient's kernels as before. Ropes on both q and k with one angle, or
// on neither; projections without bias, read by nothing else; K/V
// projections narrower than `max-kv-width` (wider ones fill their tiles
// already, and attention reads packed rows more slowly).
//
// Likewise a gated MLP's two projections of one input,
//
//   silu(linear(x, Wg)) * linear(x, Wu)
//
// (SwiGLU; any activation of gt.activation_grad's kinds), become one linear
// over [Wg; Wu] and gt.glu of its [..., 2F] result: one GEMM of N = 2F
// forward, one dW and one dX backward, where two of each ran and the dX of
// one was added into the other's; the glu kernels move the bytes the
// fused silu-and-product kernels moved. Runs on the model function before
// gt-autocast.
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/ScalarOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTPACKPROJECTIONSPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// One of attention's operands traced back to its projection: [rope of]
/// reshape of a bias-free linear, each read only by the next.
struct Projection {
  LinearOp linear;
  ReshapeOp reshape;
  RopeOp rope; // null when the operand is not turned
};

std::optional<Projection> projectionOf(Value operand) {
  Projection p;
  Value v = operand;
  if ((p.rope = v.getDefiningOp<RopeOp>())) {
    if (!v.hasOneUse() || p.rope.getPositions() || p.rope.getInverse() ||
        p.rope.getRotated())
      return std::nullopt;
    v = p.rope.getInput();
  }
  p.reshape = v.getDefiningOp<ReshapeOp>();
  if (!p.reshape || !v.hasOneUse())
    return std::nullopt;
  v = p.reshape.getInput();
  p.linear = v.getDefiningOp<LinearOp>();
  if (!p.linear || !v.hasOneUse() || p.linear.getBias())
    return std::nullopt;
  return p;
}

struct GtPackProjectionsPass
    : public mlir::gt::impl::GtPackProjectionsPassBase<GtPackProjectionsPass> {
  using GtPackProjectionsPassBase::GtPackProjectionsPassBase;

  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    SmallVector<MulOp> products;
    getOperation().walk([&](func::FuncOp f) {
      if (!f->hasAttr(kModelAttrName))
        return;
      f.walk([&](AttentionOp op) { attentions.push_back(op); });
      f.walk([&](MulOp op) { products.push_back(op); });
    });
    for (AttentionOp op : attentions)
      pack(op);
    for (MulOp op : products)
      packGated(op);
  }

  /// `act(linear(x, Wg)) * linear(x, Wu)` (either order) as
  /// `glu(linear(x, [Wg; Wu]))`.
  void packGated(MulOp op) {
    for (auto [gated, up] : {std::pair(op.getLhs(), op.getRhs()),
                             std::pair(op.getRhs(), op.getLhs())}) {
      Operation *act = gated.getDefiningOp();
      StringRef kind = act ? activationKind(act) : StringRef();
      if (kind.empty() || !gated.hasOneUse())
        continue;
      auto gate = act->getOperand(0).getDefiningOp<LinearOp>();
      auto upLinear = up.getDefiningOp<LinearOp>();
      if (!gate || !upLinear || gate == upLinear ||
          !act->getOperand(0).hasOneUse() || !up.hasOneUse() ||
          gate.getBias() || upLinear.getBias() ||
          gate.getInput() != upLinear.getInput())
        continue;
      auto wg = gate.getWeight().getType(), wu = upLinear.getWeight().getType();
      auto type = cast<RankedTensorType>(op.getType());
      if (!wg.hasStaticShape() || wg != wu || type != gate.getType() ||
          type != upLinear.getType())
        continue;
      OpBuilder b(op);
      auto stacked = wg.clone({2 * wg.getDimSize(0), wg.getDimSize(1)});
      SmallVector<LinearOp, 3> linears = {gate, upLinear};
      SmallVector<ParamOp, 3> params = packableParams(linears);
      Value w = stackWeights(b, op.getLoc(), linears, params, stacked);
      Value y = LinearOp::create(b, op.getLoc(), gate.getInput(), w, Value());
      Value h = GluOp::create(b, op.getLoc(), y, b.getStringAttr(kind));
      op.getResult().replaceAllUsesWith(h);
      op.erase();
      act->erase();
      gate.erase();
      upLinear.erase();
      for (ParamOp p : params)
        p.erase();
      return;
    }
  }

  /// The gt.activation_grad kind of an activation op, or "".
  static StringRef activationKind(Operation *op) {
#define GTC_ACTIVATION_KIND(Kind, name)                                        \
  if (isa<Kind##Op>(op))                                                       \
    return #name;
    GTC_ACTIVATION_OPS(GTC_ACTIVATION_KIND)
#undef GTC_ACTIVATION_KIND
    if (auto gelu = dyn_cast<GeluOp>(op))
      return gelu.getApproximate() ? "gelu_tanh" : "gelu";
    return "";
  }

  void pack(AttentionOp op) {
    if (op.getInputs().size() != 3)
      return;
    std::optional<Projection> q = projectionOf(op.getInputs()[0]),
                              k = projectionOf(op.getInputs()[1]),
                              v = projectionOf(op.getInputs()[2]);
    if (!q || !k || !v || v->rope || bool(q->rope) != bool(k->rope))
      return;
    if (q->rope && (q->rope.getTheta() != k->rope.getTheta() ||
                    q->rope.getInterleaved() != k->rope.getInterleaved()))
      return;
    Value x = q->linear.getInput();
    if (k->linear.getInput() != x || v->linear.getInput() != x)
      return;
    auto qType = cast<RankedTensorType>(op.getInputs()[0].getType());
    auto kType = cast<RankedTensorType>(op.getInputs()[1].getType());
    auto wq = q->linear.getWeight().getType(),
         wk = k->linear.getWeight().getType(),
         wv = v->linear.getWeight().getType();
    if (!wq.hasStaticShape() || !wk.hasStaticShape() || wk != wv ||
        wq.getElementType() != wk.getElementType() ||
        wq.getDimSize(1) != wk.getDimSize(1))
      return;
    int64_t heads = qType.getDimSize(2), kv = kType.getDimSize(2),
            d = qType.getDimSize(3);
    if (wq.getDimSize(0) != heads * d || wk.getDimSize(0) != kv * d ||
        kv * d >= maxKvWidth)
      return;

    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t rows = (heads + 2 * kv) * d;
    auto stacked = wq.clone({rows, wq.getDimSize(1)});
    SmallVector<LinearOp, 3> linears = {q->linear, k->linear, v->linear};
    SmallVector<ParamOp, 3> params = packableParams(linears);
    Value w = stackWeights(b, loc, linears, params, stacked);
    Value y = LinearOp::create(b, loc, x, w, Value());
    auto packedType = qType.clone(
        {qType.getDimSize(0), qType.getDimSize(1), heads + 2 * kv, d});
    Value qkv = ReshapeOp::create(b, loc, packedType, y);
    if (q->rope)
      qkv = RopeOp::create(b, loc, qkv, Value(), q->rope.getThetaAttr(),
                           q->rope.getInterleavedAttr(), b.getBoolAttr(false),
                           b.getI64IntegerAttr(heads + kv));
    auto packed = AttentionOp::create(b, loc, ValueRange{qkv},
                                      op.getHeadsAttr(), op.getCausalAttr());
    op.getResult().replaceAllUsesWith(packed.getResult());
    op.getLse().replaceAllUsesWith(packed.getLse());
    op.erase();
    for (Projection *p : {&*q, &*k, &*v}) {
      if (p->rope)
        p->rope.erase();
      p->reshape.erase();
      p->linear.erase();
    }
    for (ParamOp p : params)
      p.erase();
  }

  /// The linears' weights when they are parameters read by nothing else,
  /// with one initializer and element type, none packed already: they can
  /// become one packed parameter. Empty otherwise.
  static SmallVector<ParamOp, 3> packableParams(ArrayRef<LinearOp> linears) {
    SmallVector<ParamOp, 3> params;
    for (LinearOp linear : linears) {
      Value w = linear.getWeight();
      auto param = w.getDefiningOp<ParamOp>();
      if (!param || !w.hasOneUse() || param.getParts() ||
          (!params.empty() && (param.getInit() != params.front().getInit() ||
                               param.getArgs() != params.front().getArgs() ||
                               param.getType().getElementType() !=
                                   params.front().getType().getElementType())))
        return {};
      params.push_back(param);
    }
    return params;
  }

  /// The linears' weights stacked along their rows as one `stacked` tensor:
  /// one packed gt.param of their parts when `params` are theirs (one
  /// tensor in memory: no copies forward, and the dW GEMM writes the
  /// parts' gradients in place), else each weight placed at its row offset
  /// by gt.pad and the pads added (the language's concat).
  static Value stackWeights(OpBuilder &b, Location loc,
                            ArrayRef<LinearOp> linears,
                            MutableArrayRef<ParamOp> params,
                            RankedTensorType stacked) {
    if (!params.empty()) {
      OpBuilder pb(params.front());
      SmallVector<std::string> names;
      SmallVector<int64_t> partRows;
      for (ParamOp p : params) {
        names.push_back(p.getName().str());
        partRows.push_back(p.getType().getDimSize(0));
      }
      return ParamOp::create(pb, params.front().getLoc(), stacked,
                             pb.getStringAttr(llvm::join(names, "+")),
                             params.front().getInitAttr(),
                             params.front().getArgsAttr(),
                             pb.getStrArrayAttr(SmallVector<StringRef>(
                                 names.begin(), names.end())),
                             pb.getI64ArrayAttr(partRows));
    }
    Value w;
    int64_t row = 0;
    for (LinearOp linear : linears) {
      Value part = linear.getWeight();
      Value placed =
          PadOp::create(b, loc, stacked, part, b.getI64ArrayAttr({row, 0}));
      w = w ? AddOp::create(b, loc, w, placed).getResult() : placed;
      row += cast<RankedTensorType>(part.getType()).getDimSize(0);
    }
    return w;
  }
};

} // namespace
