//===- PlanBuilder.h - From a gt function to a runtime plan -----*- C++ -*-===//

#ifndef GTC_PLAN_PLANBUILDER_H
#define GTC_PLAN_PLANBUILDER_H

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Plan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace gtc {

/// Builds the plan of `func`: a training step (`gt.step`, built by
/// gt-autodiff) or an evaluation function (the forward graph returning the
/// loss and, optionally, a gt.accuracy). Every shape must be static and every
/// element type f32 or i32. Buffers are placed by a liveness-based memory
/// plan: temporaries whose lifetimes do not overlap share memory; gradients
/// are written straight into the gradient region when nothing else reads
/// them. With `views`, a gt.reshape gets no kernel: its result is a view of
/// its operand's memory, whose lifetime extends to the view's last use.
/// `train`, if given, fills the plan's configuration. With `shardRanks` >
/// 1 (ZeRO-2, shard = gradients, over that many processes) the gradients
/// are temporaries grouped by gt-bucket's buckets (Plan::shardRanks);
/// otherwise a step's gradients share the temporaries' memory
/// (Plan::gradsInTemp) unless `gradientsApart`. A classifier region (gt-fuse)
/// runs over chunks of rows whose logits take at most `classifierChunkBytes`.
mlir::FailureOr<rt::Plan> buildPlan(mlir::func::FuncOp func,
                                    mlir::gt::TrainOp train, bool views = true,
                                    int64_t shardRanks = 1,
                                    bool gradientsApart = false,
                                    int64_t classifierChunkBytes = int64_t(1)
                                                                   << 30);

/// Converts the attributes of a gt.train op into the runtime's configuration
/// (defaults for what the op leaves out); an unknown optimizer, schedule or
/// precision name is an error at the op.
mlir::FailureOr<rt::TrainConfig> trainConfig(mlir::gt::TrainOp train);

} // namespace gtc

#endif // GTC_PLAN_PLANBUILDER_H
