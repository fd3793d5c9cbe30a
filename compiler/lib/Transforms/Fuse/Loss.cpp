//===- Loss.cpp - Loss regions --------------------------------------------===//
//
// "loss" regions: a cross-entropy and its gradient in one pass over
// the logits (an evaluation's cross-entropy of 16-bit logits alone).
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldLosses() {
  SmallVector<Group> folds;
  for (auto ce : block.getOps<CrossEntropyOp>()) {
    CrossEntropyGradOp grad = gradientOf(ce);
    CastOp widening = wideningOf(ce, grad);
    if (!grad && !widening)
      continue; // a cross-entropy alone is one kernel already
    Group g{ce, {}};
    if (widening) {
      g.ops.push_back(widening);
      g.anchor = widening;
    }
    g.ops.push_back(ce);
    if (grad) {
      addWithCast(grad, g.ops);
      hoistSeed(grad, g.anchor);
    }
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "loss");
}

} // namespace mlir::gt::fuse
