//===- ShapeInference.cpp - Fix the batch and re-infer result types -------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Capabilities.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTSHAPEINFERENCEPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// Replaces every dynamic dimension of `type` by `size`.
RankedTensorType fixDynamic(RankedTensorType type, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t &d : shape)
    if (ShapedType::isDynamic(d))
      d = size;
  return type.clone(shape);
}

/// The result type of a reshape whose input type changed: a single dynamic
/// result dimension takes whatever the static input leaves for it.
FailureOr<RankedTensorType> reshapeType(ReshapeOp op) {
  RankedTensorType in = op.getInput().getType(), out = op.getType();
  if (!in.hasStaticShape() || out.hasStaticShape())
    return out;
  int64_t known = 1;
  for (int64_t d : out.getShape())
    if (!ShapedType::isDynamic(d))
      known *= d;
  if (known == 0 || in.getNumElements() % known != 0)
    return op.emitOpError("cannot reshape ")
           << formatType(in) << " to " << formatType(out);
  return fixDynamic(out, in.getNumElements() / known);
}

/// The result type of a broadcast whose input type changed: dynamic result
/// dimensions take the aligned input dimension when it is not 1, and the
/// batch otherwise (symbolic dimensions stand for the batch).
RankedTensorType broadcastType(BroadcastOp op, int64_t batch) {
  RankedTensorType in = op.getInput().getType(), out = op.getType();
  SmallVector<int64_t> shape(out.getShape());
  int64_t offset = out.getRank() - in.getRank();
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (ShapedType::isDynamic(shape[i + offset]) && in.getDimSize(i) != 1)
      shape[i + offset] = in.getDimSize(i);
  return batch > 0 ? fixDynamic(out.clone(shape), batch) : out.clone(shape);
}

struct GtShapeInferencePass
    : public mlir::gt::impl::GtShapeInferencePassBase<GtShapeInferencePass> {
  using GtShapeInferencePassBase::GtShapeInferencePassBase;

  LogicalResult inferOp(Operation *op) {
    if (isa<InputOp, LabelOp>(op)) {
      if (batch > 0) {
        auto type = cast<RankedTensorType>(op->getResult(0).getType());
        op->getResult(0).setType(fixDynamic(type, batch));
      }
      return success();
    }
    if (auto iface = dyn_cast<InferTypeOpInterface>(op))
      return reinferResultTypes(iface);
    if (auto cast = dyn_cast<CastOp>(op)) {
      cast.getResult().setType(cast.getType().clone(
          cast.getInput().getType().getShape()));
      return success();
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      FailureOr<RankedTensorType> type = reshapeType(reshape);
      if (failed(type))
        return failure();
      reshape.getResult().setType(*type);
      return success();
    }
    if (isa<PadOp, SliceOp>(op)) {
      // A dimension left dynamic is the batch, whole: the input's.
      auto in = cast<RankedTensorType>(op->getOperand(0).getType());
      auto out = cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<int64_t> shape(out.getShape());
      for (auto [i, d] : llvm::enumerate(shape))
        if (ShapedType::isDynamic(d))
          d = in.getDimSize(i);
      op->getResult(0).setType(out.clone(shape));
      return success();
    }
    if (auto broadcast = dyn_cast<BroadcastOp>(op))
      broadcast.getResult().setType(broadcastType(broadcast, batch));
    return success();
  }

  /// A batch so large that a tensor has more than rt::kMaxElements
  /// elements (the front end bounds every shape without the batch).
  LogicalResult checkSize(Operation *op) {
    for (Type t : op->getResultTypes()) {
      auto type = dyn_cast<RankedTensorType>(t);
      if (!type || !type.hasStaticShape())
        continue;
      int64_t elements = 1;
      for (int64_t d : type.getShape())
        if (__builtin_mul_overflow(elements, d, &elements) ||
            elements > gtc::rt::kMaxElements)
          return op->emitError("at batch ")
                 << static_cast<int64_t>(batch) << " this value has more than "
                 << gtc::rt::kMaxElements
                 << " elements; lower the batch";
    }
    return success();
  }

  void runOnOperation() override {
    if (batch < 0) {
      getOperation().emitError("gt-shape-inference: batch must be >= 0");
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(kModelAttrName))
        continue;
      WalkResult walk = func.walk([&](Operation *op) {
        return failed(inferOp(op)) || failed(checkSize(op))
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      Block &body = func.getBody().front();
      func.setFunctionType(FunctionType::get(
          func.getContext(), {},
          body.getTerminator()->getOperandTypes()));
    }
  }
};

} // namespace
