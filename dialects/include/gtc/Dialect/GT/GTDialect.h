//===- GTDialect.h - The gt dialect -----------------------------*- C++ -*-===//

#ifndef GTC_DIALECT_GT_GTDIALECT_H
#define GTC_DIALECT_GT_GTDIALECT_H

#include "mlir/IR/Dialect.h"

#include "gtc/Dialect/GT/GTOpsDialect.h.inc"

namespace mlir::gt {
/// The unit attribute that marks a `func.func` as a model.
inline constexpr llvm::StringLiteral kModelAttrName = "gt.model";
/// The unit attribute that marks a `func.func` as a training step (built by
/// gt-autodiff): the forward pass, the backward pass and gt.gradient ops.
inline constexpr llvm::StringLiteral kStepAttrName = "gt.step";
/// The unit attribute that marks a `func.func` as a generation step (built
/// by gt-decode): token ids and their positions in, logits out.
inline constexpr llvm::StringLiteral kDecodeAttrName = "gt.decode";
/// The unit attribute that marks the `gt.constant` seeding the backward pass
/// (d loss / d loss = 1): with dynamic loss scaling the runtime writes the
/// current scale there, so every gradient is scaled.
inline constexpr llvm::StringLiteral kLossGradAttrName = "gt.loss_grad";
} // namespace mlir::gt

#endif // GTC_DIALECT_GT_GTDIALECT_H
