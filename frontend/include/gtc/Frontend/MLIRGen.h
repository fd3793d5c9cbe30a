//===- MLIRGen.h - From the .gt syntax tree to the gt dialect ---*- C++ -*-===//

#ifndef GTC_FRONTEND_MLIRGEN_H
#define GTC_FRONTEND_MLIRGEN_H

#include "gtc/Frontend/AST.h"
#include "gtc/Runtime/Capabilities.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace gtc {

/// Limits that keep any input, however odd, from exhausting the compiler.
struct Limits {
  static constexpr int64_t kMaxRepeat = 10000;   ///< repeat N: N <= this.
  static constexpr unsigned kMaxCallDepth = 64;  ///< def calls nest this deep.
  static constexpr int64_t kMaxDim = int64_t(1) << 40; ///< one dimension.
  static constexpr int64_t kMaxElements = rt::kMaxElements; ///< one tensor.
  static constexpr size_t kMaxOps = 2000000;     ///< operations in a model.
  /// repeat iterations unrolled in all (nested loops multiply): loops
  /// without ops still take the compiler's time.
  static constexpr size_t kMaxIterations = kMaxOps;
};

/// Checks the file (names, arity, keywords, shapes, dtypes, settings) while
/// emitting it as a module holding one `gt.model` function and, if the file
/// has a train block, one `gt.train` op. Errors are emitted through the
/// context's diagnostic engine at FileLineColLoc locations of `file.path`;
/// the first error stops generation and null is returned.
mlir::OwningOpRef<mlir::ModuleOp> mlirGen(mlir::MLIRContext &context,
                                          const File &file);

} // namespace gtc

#endif // GTC_FRONTEND_MLIRGEN_H
