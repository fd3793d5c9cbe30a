//===- GTOps.h - Operations of the gt dialect -------------------*- C++ -*-===//

#ifndef GTC_DIALECT_GT_GTOPS_H
#define GTC_DIALECT_GT_GTOPS_H

#include "gtc/Dialect/GT/GTDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "gtc/Dialect/GT/GTTraits.h"

#define GET_OP_CLASSES
#include "gtc/Dialect/GT/GTOps.h.inc"

namespace mlir::gt {

/// Broadcasts two shapes with NumPy rules (a dynamic dimension matches any
/// size). Returns failure and leaves `result` unspecified when a pair of
/// dimensions differs and neither is 1.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &result);

/// Formats a shape the way a `.gt` file writes it, e.g. `f32[?, 784]`.
std::string formatType(Type type);

/// The names of the `gt.train` attributes that configure training.
ArrayRef<StringRef> trainSettingNames();

} // namespace mlir::gt

#endif // GTC_DIALECT_GT_GTOPS_H
