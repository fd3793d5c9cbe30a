//===- Driver.cpp - Loading, parsing and checking .gt files ---------------===//

#include "gtc/Frontend/Driver.h"
#include "gtc/Dialect/GT/GTDialect.h"
#include "gtc/Frontend/MLIRGen.h"
#include "gtc/Frontend/Parser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Verifier.h"

using namespace gtc;

void gtc::registerFrontendDialects(mlir::MLIRContext &context) {
  context.loadDialect<mlir::gt::GTDialect, mlir::func::FuncDialect>();
}

std::optional<File> gtc::parseSource(mlir::MLIRContext &context,
                                     llvm::SourceMgr &sourceMgr,
                                     llvm::StringRef path) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  Parser parser(path, buffer->getBuffer(),
                [&](Loc loc, const llvm::Twine &message) {
                  mlir::emitError(mlir::FileLineColLoc::get(
                      &context, path, loc.line, loc.col))
                      << message;
                });
  return parser.parseFile();
}

mlir::OwningOpRef<mlir::ModuleOp>
gtc::compileSource(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
                   llvm::StringRef path) {
  registerFrontendDialects(context);
  // Diagnostics point at the .gt source; the IR of the op is noise there.
  context.printOpOnDiagnostic(false);
  std::optional<File> file = parseSource(context, sourceMgr, path);
  if (!file)
    return nullptr;
  mlir::OwningOpRef<mlir::ModuleOp> module = mlirGen(context, *file);
  if (!module)
    return nullptr;
  if (mlir::failed(mlir::verify(*module))) {
    mlir::emitError(module->getLoc())
        << "internal error: the generated IR does not verify; please report "
           "this with the .gt file";
    return nullptr;
  }
  return module;
}
