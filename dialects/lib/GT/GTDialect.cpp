//===- GTDialect.cpp - The gt dialect -------------------------------------===//

#include "gtc/Dialect/GT/GTDialect.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::gt;

#include "gtc/Dialect/GT/GTOpsDialect.cpp.inc"

void GTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "gtc/Dialect/GT/GTOps.cpp.inc"
      >();
}

/// `gt.model` marks a function as a model and `gt.step` a training step built
/// from one: no arguments (the leaves are gt.input / gt.label / gt.param), one
/// f32 scalar result (the loss). `gt.decode` marks a generation step built by
/// gt-decode: no arguments, the f32 logits [B, S, V]. `gt.loss_grad` marks the
/// f32 scalar gt.constant that seeds a step's backward pass.
LogicalResult GTDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  if (attr.getName() != kModelAttrName && attr.getName() != kStepAttrName &&
      attr.getName() != kLossGradAttrName && attr.getName() != kDecodeAttrName)
    return op->emitError() << "unknown gt dialect attribute '"
                           << attr.getName().getValue() << "'";
  if (!isa<UnitAttr>(attr.getValue()))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a unit attribute";
  if (attr.getName() == kLossGradAttrName) {
    auto scalar = RankedTensorType::get({}, Float32Type::get(op->getContext()));
    if (!isa<ConstantOp>(op) || op->getResult(0).getType() != scalar)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' only applies to a gt.constant of type "
                             << scalar;
    return success();
  }
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func)
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' only applies to func.func";
  FunctionType type = func.getFunctionType();
  if (type.getNumInputs() != 0)
    return op->emitError() << "a model takes no arguments; its leaves are "
                              "gt.input, gt.label and gt.param";
  if (attr.getName() == kDecodeAttrName) {
    auto logits = type.getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(type.getResult(0))
                      : RankedTensorType();
    if (!logits || logits.getRank() != 3 || !logits.getElementType().isF32())
      return op->emitError() << "a generation step returns exactly one "
                                "value, the f32 logits [B, S, V]";
    return success();
  }
  auto scalar = RankedTensorType::get({}, Float32Type::get(op->getContext()));
  if (type.getNumResults() != 1 || type.getResult(0) != scalar)
    return op->emitError()
           << "a model returns exactly one value, the loss, of type "
           << scalar;
  return success();
}
