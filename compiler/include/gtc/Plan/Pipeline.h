//===- Pipeline.h - From a checked module to runtime plans ------*- C++ -*-===//

#ifndef GTC_PLAN_PIPELINE_H
#define GTC_PLAN_PIPELINE_H

#include "gtc/Runtime/Plan.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include <optional>

namespace gtc {

/// gt-bucket's bucket size for data parallelism unless --bucket-size says
/// (gt-bucket's own default, Passes.h).
using mlir::gt::kDefaultBucketBytes;

/// What to compile a module for: the train block's settings that a run
/// option overrides, resolved (gtc::resolveSettings, Settings.h); the
/// passes and the plan read these, never the train block's.
struct CompileOptions {
  int64_t batch = rt::TrainConfig().batch;
  /// fp32, tf32, bf16 or fp16.
  std::string precision = rt::name(rt::TrainConfig().precision);
  /// Pad GEMM dimensions to tensor-core multiples (gt-pad-dims), and with
  /// padAll those of small GEMMs too (gt-pad-dims' min-macs=0).
  bool pad = true, padAll = false;
  /// Fuse ops into kernels (gt-fuse), and pack attention's q, k and v
  /// projections into one (gt-pack-projections).
  bool fuse = true;
  /// gt-checkpoint: keep the input of every n-th repeat iteration (<= 0:
  /// none), recomputing the first
  /// `checkpointGroups` groups (-1: all) and of the others the cheap values
  /// of the first `checkpointCheapGroups` (-1: all).
  int64_t checkpointEvery = 0, checkpointGroups = -1, checkpointCheapGroups = 0;
  /// > 0: `checkpoint = auto(budget: this many bytes)`, -1: `auto` (95% of
  /// deviceMemory), 0: not auto (checkpointEvery says).
  int64_t checkpointBudget = 0;
  /// The logits a chunk of gt-fuse's classifier region holds, in bytes; 0:
  /// 1 GiB, or 512 MiB with checkpointing (finishPlan). `checkpoint =
  /// auto(budget: ...)` tries 512 MiB before any recomputation.
  int64_t classifierChunkBytes = 0;
  /// Bytes of memory the step may use on the device it runs on (0: not
  /// known): `checkpoint = auto` without a budget plans for 95% of it. The
  /// runtime measures it; the compiler never asks a device.
  int64_t deviceMemory = 0;
  /// Gradient accumulation: rows per micro-batch (a divisor of `batch`);
  /// 0: none (the whole batch), -1: auto, the largest divisor whose plan
  /// fits memoryBudget().
  int64_t microBatch = 0;
  /// Where the checkpoint and micro-batch settings were given, for their
  /// errors: the train block, or null for a run option's (the module).
  mlir::LocationAttr checkpointFrom, microBatchFrom;
  /// > 0: a process of a data-parallel run: gt-bucket groups the gradients
  /// into buckets of at most this many bytes, each all-reduced once the
  /// backward has computed it (with gradient accumulation, in the last
  /// micro-batch, on the mean over the micro-batches).
  int64_t bucketBytes = 0;
  /// > 1: ZeRO-2 (shard = gradients) over this many processes: the plan's
  /// gradients are temporaries grouped by bucket (Plan::shardRanks), each
  /// reduced to the processes that own its parts (with gradient
  /// accumulation, in every micro-batch). Needs bucketBytes.
  int64_t shardGradients = 1;
  /// ZeRO-1 (shard = optimizer, several processes): the gradients keep
  /// memory of their own instead of sharing the temporaries'
  /// (Plan::gradsInTemp), where a GPU pads them and gathers the optimizer
  /// state between steps.
  bool gradientsApart = false;
};

/// Compiles the training step of the module's model at a fixed batch size:
/// gt-shape-inference{batch}, canonicalize, gt-pack-projections (unless
/// !fuse), gt-autocast{precision},
/// gt-pad-dims (unless !pad), gt-autodiff, gt-checkpoint, gt-fuse (unless
/// !fuse), gt-bucket (with bucketBytes), then the plan. With a checkpoint
/// budget (the options' or the train block's `auto(budget: SIZE)`) it
/// recomputes the fewest repeat iterations whose predicted peak fits it. With a
/// micro-batch smaller than the batch the plan is compiled at the micro-batch
/// and runs Plan::microBatches times a step (gradient accumulation). The module
/// is not changed (the passes run on a clone). Errors are emitted as
/// diagnostics.
mlir::FailureOr<rt::Plan> compileStep(mlir::ModuleOp module,
                                      const CompileOptions &options);

/// The checkpoint budget in bytes that compileStep plans for: the options'
/// `auto(budget: SIZE)`, or for `auto` memoryBudget(); 0 without one.
int64_t checkpointBudget(const CompileOptions &options);

/// Whether the options ask for gradient checkpointing.
bool checkpointRequested(const CompileOptions &options);

/// 95% of the options' deviceMemory (0 when it is not known).
int64_t memoryBudget(const CompileOptions &options);

/// The rows of the model's inputs and labels when no dimension of theirs
/// is symbolic: the batch does not reach them, the model takes that many.
/// (nullopt when the batch sets a dimension.)
std::optional<int64_t> fixedBatch(mlir::ModuleOp module);

/// `--batch auto`: the largest batch, at most `limit` (0: no limit but the
/// search's 2^24), whose training step's predicted peak fits `budget`
/// bytes, every repeat iteration recomputed when `checkpointing` (then
/// compileStep's budget search takes it from there; cleared for a model
/// without repeat loops), else as the options say. An error when not even
/// batch 1 fits.
mlir::FailureOr<int64_t> largestBatch(mlir::ModuleOp module,
                                      const CompileOptions &options,
                                      int64_t budget, bool &checkpointing,
                                      int64_t limit = 0);

/// Compiles the evaluation pass: the forward graph returning the loss and,
/// when the loss is a cross_entropy, the accuracy of its logits.
mlir::FailureOr<rt::Plan> compileEval(mlir::ModuleOp module,
                                      const CompileOptions &options);

/// Compiles a step of text generation (gt-decode, `gtc sample`): the
/// forward graph from token ids to f32 logits ("decode" plan, its `loss`
/// the logits) over a window of `window` positions (0: the model's T)
/// with KV caches, or with `cache` false the whole sequence recomputed.
/// Without padding (the logits keep the model's vocabulary).
mlir::FailureOr<rt::Plan> compileDecode(mlir::ModuleOp module,
                                        const CompileOptions &options,
                                        int64_t window, bool cache);

/// The IR of the training step (for --emit=step).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
lowerToStep(mlir::ModuleOp module, const CompileOptions &options);

} // namespace gtc

#endif // GTC_PLAN_PIPELINE_H
