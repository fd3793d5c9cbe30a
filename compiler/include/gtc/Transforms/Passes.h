//===- Passes.h - Passes of gtc ---------------------------------*- C++ -*-===//

#ifndef GTC_TRANSFORMS_PASSES_H
#define GTC_TRANSFORMS_PASSES_H

#include "gtc/Dialect/GT/GTDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gt {

#define GEN_PASS_DECL
#include "gtc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gtc/Transforms/Passes.h.inc"

} // namespace mlir::gt

#endif // GTC_TRANSFORMS_PASSES_H
