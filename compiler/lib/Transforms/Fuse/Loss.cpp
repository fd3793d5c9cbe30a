//===- Loss.cpp - Loss regions --------------------------------------------===//
//
// "loss" regions: a cross-entropy and its gradient in one pass over
// the logits.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldLosses() {
  SmallVector<Group> folds;
  for (auto ce : block.getOps<CrossEntropyOp>()) {
    CrossEntropyGradOp grad = gradientOf(ce);
    if (!grad)
      continue;
    Group g{ce, {}};
    if (CastOp widening = wideningOf(ce, grad)) {
      g.ops.push_back(widening);
      g.anchor = widening;
    }
    g.ops.push_back(ce);
    addWithCast(grad, g.ops);
    hoistSeed(grad, g.anchor);
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "loss");
}

} // namespace mlir::gt::fuse
