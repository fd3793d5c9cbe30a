//===- Passes.h - Passes of gtc ---------------------------------*- C++ -*-===//

#ifndef GTC_TRANSFORMS_PASSES_H
#define GTC_TRANSFORMS_PASSES_H

#include "gtc/Dialect/GT/GTDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gt {

/// gt-bucket's default bucket size (its bucket-bytes option, and gtc's
/// unless --bucket-size says). PyTorch DDP's 25 MiB made GPT-2 124M's
/// data-parallel step on 2 GPUs 0.1-0.3 ms slower than 64 MiB at 4 and 16
/// sequences a GPU: each NCCL call holds SMs beside the backward for longer
/// than its bytes take (test/bench/NOTES.md, twenty-fourth session).
inline constexpr int64_t kDefaultBucketBytes = int64_t(64) << 20;

#define GEN_PASS_DECL
#include "gtc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gtc/Transforms/Passes.h.inc"

} // namespace mlir::gt

#endif // GTC_TRANSFORMS_PASSES_H
