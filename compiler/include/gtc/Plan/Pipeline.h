//===- Pipeline.h - From a checked module to runtime plans ------*- C++ -*-===//

#ifndef GTC_PLAN_PIPELINE_H
#define GTC_PLAN_PIPELINE_H

#include "gtc/Runtime/Plan.h"
#include "mlir/IR/BuiltinOps.h"

namespace gtc {

/// Compiles the training step of the module's model at a fixed batch size:
/// gt-shape-inference{batch}, canonicalize, gt-autodiff, then the plan. The
/// module is not changed (the passes run on a clone). Errors are emitted as
/// diagnostics.
mlir::FailureOr<rt::Plan> compileStep(mlir::ModuleOp module, int64_t batch);

/// Compiles the evaluation pass at `batch`: the forward graph returning the
/// loss and, when the loss is a cross_entropy, the accuracy of its logits.
mlir::FailureOr<rt::Plan> compileEval(mlir::ModuleOp module, int64_t batch);

/// The IR of the training step at `batch` (for --emit=step).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerToStep(mlir::ModuleOp module, int64_t batch);

} // namespace gtc

#endif // GTC_PLAN_PIPELINE_H
