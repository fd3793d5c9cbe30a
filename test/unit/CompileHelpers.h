//===- CompileHelpers.h - .gt source to plans for unit tests ----*- C++ -*-===//

#ifndef GTC_TEST_COMPILEHELPERS_H
#define GTC_TEST_COMPILEHELPERS_H

#include "gtc/Frontend/Driver.h"
#include "gtc/Plan/Settings.h"
#include "mlir/IR/Diagnostics.h"
#include <optional>
#include <string>

namespace gtc::test {

/// Compiles `source` (named `name` in diagnostics) into the training step at
/// `batch`, or its evaluation pass with `eval`, at `precision` (empty: the
/// train block's), with or without gt-fuse; on failure returns nullopt with
/// the diagnostics in `errors`. At bf16 and fp16, GEMMs are padded whatever
/// their size (--pad-all), so the tests' small models have pad and slice
/// kernels.
inline std::optional<rt::Plan> compilePlan(const std::string &source,
                                           int64_t batch, std::string &errors,
                                           bool eval = false,
                                           const std::string &name = "t.gt",
                                           const std::string &precision = "",
                                           bool fuse = true,
                                           int64_t bucketBytes = 0) {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  auto module = compileSource(context, sourceMgr, name);
  if (!module)
    return std::nullopt;
  rt::RunArgs args;
  args.batch = batch;
  args.precision = precision;
  args.noFuse = !fuse;
  args.padAll = precision == "bf16" || precision == "fp16";
  CompileOptions options = resolveSettings(*module, args).compile;
  options.bucketBytes = bucketBytes;
  mlir::FailureOr<rt::Plan> plan =
      eval ? compileEval(*module, options) : compileStep(*module, options);
  if (mlir::failed(plan))
    return std::nullopt;
  return std::move(*plan);
}

/// Compiles a .gt source's generation plan (gt-decode) over `window`
/// positions (0: T) with KV caches, at `precision` (empty: the train
/// block's).
inline std::optional<rt::Plan>
compileDecodePlan(const std::string &source, int64_t batch, int64_t window,
                  std::string &errors, const std::string &precision = "") {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "t.gt"), llvm::SMLoc());
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  auto module = compileSource(context, sourceMgr, "t.gt");
  if (!module)
    return std::nullopt;
  rt::RunArgs args;
  args.batch = batch;
  args.precision = precision;
  CompileOptions options = resolveSettings(*module, args).compile;
  mlir::FailureOr<rt::Plan> plan =
      compileDecode(*module, options, window, /*cache=*/true);
  if (mlir::failed(plan))
    return std::nullopt;
  return std::move(*plan);
}

} // namespace gtc::test

#endif // GTC_TEST_COMPILEHELPERS_H
