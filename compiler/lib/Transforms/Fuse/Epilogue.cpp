//===- Epilogue.cpp - Cast epilogue regions -------------------------------===//
//
// "epilogue" regions: a cast that is the only use of a GEMM, sum_to
// or layernorm (GT_CastEpilogue) folds into that op's store.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldCasts() {
  SmallVector<Group> folds;
  for (Operation &op : block.without_terminator()) {
    if (!op.hasTrait<OpTrait::gt::CastEpilogue>() ||
        op.getNumResults() != 1)
      continue;
    if (auto sum = dyn_cast<SumToOp>(op); sum && columnSumJoins(sum))
      continue; // it joins its operand's elementwise region, cast and all
    auto cast = dyn_cast_or_null<CastOp>(soleUser(op.getResult(0)));
    if (cast && !cast->use_empty() &&
        isa<FloatType>(getElementTypeOrSelf(cast.getType())))
      folds.push_back({&op, {&op, cast}});
  }
  for (Group &g : folds)
    outline(g, "epilogue");
}

} // namespace mlir::gt::fuse
