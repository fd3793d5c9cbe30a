//===- MultiTensor.cpp - Multi-tensor regions -----------------------------===//
//
// "multi_tensor" regions: the elementwise ops still alone that read
// only parameters (the casts of parameters to bf16/fp16), in one launch.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::castParameters() {
  auto readsParams = [&](Operation &op) {
    return isFusable(&op) && op.getNumOperands() > 0 &&
           llvm::all_of(op.getOperands(), [&](Value v) {
             auto type = cast<RankedTensorType>(v.getType());
             return v.getDefiningOp<ParamOp>() &&
                    type.getShape() == shapeOf(&op);
           });
  };
  // One cast a parameter and type: gt-checkpoint's recomputed casts of a
  // parameter compute what the first does, and the region runs before
  // every use of either.
  DenseMap<std::pair<Value, Type>, CastOp> firstCast;
  for (CastOp c : llvm::make_early_inc_range(block.getOps<CastOp>())) {
    if (!readsParams(*c))
      continue;
    auto [it, first] =
        firstCast.try_emplace({c.getInput(), c.getType()}, c);
    if (!first) {
      c.getResult().replaceAllUsesWith(it->second.getResult());
      c->erase();
    }
  }
  Group g{nullptr, {}};
  for (Operation &op : block.without_terminator())
    if (readsParams(op)) {
      if (!g.anchor)
        g.anchor = &op;
      g.ops.push_back(&op);
    }
  if (g.ops.size() < 2)
    return;
  // Parameters are leaves: declare every one before the region, in their
  // order (which is the plan's parameter layout). Those after the region's
  // first op are found in one walk: each move would make the block recompute
  // its order for the next isBeforeInBlock.
  SmallVector<ParamOp> after;
  for (Operation *op = g.anchor->getNextNode(); op; op = op->getNextNode())
    if (auto p = dyn_cast<ParamOp>(op))
      after.push_back(p);
  for (ParamOp p : after)
    p->moveBefore(g.anchor);
  outline(g, "multi_tensor");
}

} // namespace mlir::gt::fuse
