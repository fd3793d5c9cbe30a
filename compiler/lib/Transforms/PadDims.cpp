//===- PadDims.cpp - Pad GEMM dimensions to tensor-core multiples ---------===//
//
// cuBLASLt's 16-bit tensor-core kernels want every matrix dimension a
// multiple of 8 elements, so rows start 16-byte aligned; large dimensions (a
// vocabulary) tile better at multiples of 64. This pass pads the output and
// reduction dimensions of every 16-bit gt.linear of at least `min-macs`
// multiply-adds (smaller GEMMs run in about a microsecond aligned or not,
// less than the pad and slice kernels would add; f32 ones are left alone:
// the gain is not measured there, and unpadded fp32 GEMMs stay comparable
// with the CPU's; see README.md): the weight (and
// bias) get zero rows/columns, the input zero columns, and the result is
// sliced back, so every other op (softmax, the loss) sees the model's own
// sizes and the function computed is unchanged. The padding is constant, so
// gt-autodiff's pad/slice rules give the parameters exactly the gradients
// of the unpadded model.
//
// Between two padded GEMMs the activations stay padded: a padded linear's
// extra columns are exactly 0 (zero weight rows and bias), so
// pad(f(slice(y))) back to y's shape is f(y) for an f with f(0) = 0 (relu,
// gelu, tanh, neg, casts), and the slice/pad copies go away.
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTPADDIMSPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// Dimensions from this size on are padded to kLargeMultiple.
constexpr int64_t kLargeDim = 4096;
constexpr int64_t kLargeMultiple = 64;

struct GtPadDimsPass : public mlir::gt::impl::GtPadDimsPassBase<GtPadDimsPass> {
  using GtPadDimsPassBase::GtPadDimsPassBase;

  /// The size `d` is padded to for elements of `type` (`d` for f32).
  int64_t padded(int64_t d, Type type) const {
    int64_t m = multiple > 0                         ? multiple
                : type.getIntOrFloatBitWidth() > 16 ? 1
                : d >= kLargeDim                     ? kLargeMultiple
                                                     : 8;
    return (d + m - 1) / m * m;
  }

  /// `v` padded with zeros to `shape`, or `v` if it has that shape; one
  /// gt.pad per (value, shape), made before its first user (a weight used
  /// by several linears is padded once; the linears are visited in order).
  Value pad(OpBuilder &b, Value v, ArrayRef<int64_t> shape) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getShape() == shape)
      return v;
    Type to = type.clone(shape);
    Value &p = pads[{v, to}];
    if (!p)
      p = PadOp::create(b, v.getLoc(), to, v);
    return p;
  }

  /// The gt.pad made for each (value, padded type) in this run.
  DenseMap<std::pair<Value, Type>, Value> pads;

  void runOnOperation() override {
    pads.clear(); // a pass instance may run on several modules
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp op) {
      if (op->getParentOfType<func::FuncOp>()->hasAttr(kModelAttrName))
        linears.push_back(op);
    });
    for (LinearOp op : linears) {
      auto w = op.getWeight().getType();
      auto y = op.getType();
      if (!w.hasStaticShape() || !y.hasStaticShape() ||
          !op.getInput().getType().hasStaticShape()) {
        op.emitError("gt-pad-dims needs static shapes; run "
                     "gt-shape-inference=batch=N first");
        return signalPassFailure();
      }
      Type et = w.getElementType();
      int64_t n = w.getDimSize(0), k = w.getDimSize(1);
      int64_t rows = op.getInput().getType().getNumElements() / k;
      if (rows * n * k < minMacs)
        continue; // small: the padding would cost more launches than it saves
      int64_t np = padded(n, et), kp = padded(k, et);
      if (np == n && kp == k)
        continue; // already aligned: unchanged
      OpBuilder b(op);
      Value x = op.getInput();
      SmallVector<int64_t> xs(op.getInput().getType().getShape());
      xs.back() = kp;
      x = pad(b, x, xs);
      Value wp = pad(b, op.getWeight(), {np, kp});
      Value bias = op.getBias();
      if (bias)
        bias = pad(b, bias, {np});
      auto yp = LinearOp::create(b, op.getLoc(), x, wp, bias);
      Value result = yp.getResult();
      if (np != n)
        result = SliceOp::create(b, op.getLoc(), y, result);
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
    keepActivationsPadded();
  }

  /// pad(f(slice(y))) -> f(y) where y is a padded linear's result.
  void keepActivationsPadded() {
    SmallVector<PadOp> pads;
    getOperation().walk([&](PadOp p) { pads.push_back(p); });
    for (PadOp pad : pads) {
      Operation *f = pad.getInput().getDefiningOp();
      if (!f || !f->hasTrait<OpTrait::gt::ZeroPreserving>() ||
          f->getNumOperands() != 1 || f->getNumResults() != 1)
        continue;
      auto slice = f->getOperand(0).getDefiningOp<SliceOp>();
      if (!slice || !slice.getInput().getDefiningOp<LinearOp>())
        continue;
      Value y = slice.getInput();
      auto yType = cast<RankedTensorType>(y.getType());
      if (yType.getShape() != pad.getType().getShape())
        continue;
      OpBuilder b(pad);
      Operation *padded = b.clone(*f);
      padded->setOperand(0, y);
      padded->getResult(0).setType(yType.clone(
          cast<RankedTensorType>(f->getResult(0).getType()).getElementType()));
      if (padded->getResult(0).getType() != pad.getType()) {
        padded->erase();
        continue;
      }
      pad.getResult().replaceAllUsesWith(padded->getResult(0));
      pad.erase();
      if (f->use_empty())
        f->erase();
      if (slice->use_empty())
        slice->erase();
    }
  }
};

} // namespace
