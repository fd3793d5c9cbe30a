//===- Driver.h - Loading, parsing and checking .gt files -------*- C++ -*-===//

#ifndef GTC_FRONTEND_DRIVER_H
#define GTC_FRONTEND_DRIVER_H

#include "gtc/Frontend/AST.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"
#include <optional>

namespace gtc {

/// Registers the dialects the frontend emits.
void registerFrontendDialects(mlir::MLIRContext &context);

/// Parses the main buffer of `sourceMgr` (named `path`). Errors are emitted
/// as MLIR diagnostics at FileLineColLoc locations, so a
/// SourceMgrDiagnosticHandler prints them with the source line and a caret.
std::optional<File> parseSource(mlir::MLIRContext &context,
                                llvm::SourceMgr &sourceMgr,
                                llvm::StringRef path);

/// Parses and emits the gt dialect for the main buffer of `sourceMgr`, then
/// verifies the module. Returns null after reporting the first error.
mlir::OwningOpRef<mlir::ModuleOp> compileSource(mlir::MLIRContext &context,
                                                llvm::SourceMgr &sourceMgr,
                                                llvm::StringRef path);

} // namespace gtc

#endif // GTC_FRONTEND_DRIVER_H
