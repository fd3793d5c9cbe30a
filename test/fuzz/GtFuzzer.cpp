//===- GtFuzzer.cpp - Fuzzes the .gt front end and the step compiler ------===//
//
// Input: a .gt file. It is parsed, checked and emitted as the gt dialect
// (compileSource, what `gtc check` does); a module that verifies is compiled
// into a training step at batch 2 (compileStep: autodiff, autocast, padding,
// fusion, the plan), what `gtc run` does before it touches data or a device.
// Errors are diagnostics (swallowed here); a crash, a sanitizer report or a
// hang is a bug.
//===----------------------------------------------------------------------===//

#include "gtc/Frontend/Driver.h"
#include "gtc/Plan/Settings.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include <memory>

namespace {

/// One context for many inputs (creating one is slow); replaced now and
/// then, since it keeps every name and type it has seen.
mlir::MLIRContext &context() {
  static std::unique_ptr<mlir::MLIRContext> ctx;
  static int uses = 0;
  if (!ctx || ++uses % 1000 == 0) {
    ctx = std::make_unique<mlir::MLIRContext>(
        mlir::MLIRContext::Threading::DISABLED);
    gtc::registerFrontendDialects(*ctx);
    ctx->loadAllAvailableDialects();
  }
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &ctx = context();
  mlir::ScopedDiagnosticHandler quiet(
      &ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.gt"),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      gtc::compileSource(ctx, sourceMgr, "fuzz.gt");
  if (!module)
    return 0;
  // The train block's settings as gtc run resolves them, at batch 2.
  gtc::rt::RunArgs args;
  args.batch = 2;
  (void)gtc::compileStep(*module, gtc::resolveSettings(*module, args).compile);
  return 0;
}
