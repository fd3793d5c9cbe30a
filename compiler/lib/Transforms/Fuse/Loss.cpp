//===- Loss.cpp - Loss regions --------------------------------------------===//
//
// "loss" regions: a cross-entropy and its gradient in one pass over
// the logits (an evaluation's cross-entropy of 16-bit logits and its
// accuracy).
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldLosses() {
  SmallVector<Group> folds;
  for (auto ce : block.getOps<CrossEntropyOp>()) {
    CrossEntropyGradOp grad = gradientOf(ce);
    CastOp widening = wideningOf(ce, grad);
    // An evaluation's accuracy of the same logits (compileEval's, of the
    // 16-bit ones) and labels: the row kernel takes each row's argmax in
    // the same pass.
    Value stored = widening ? widening.getInput() : ce.getLogits();
    AccuracyOp accuracy;
    for (Operation *u : stored.getUsers())
      if (auto acc = dyn_cast<AccuracyOp>(u);
          acc && !grad && !accuracy && acc->getBlock() == &block &&
          acc.getLabels() == ce.getLabels() && ce->isBeforeInBlock(acc))
        accuracy = acc;
    if (!grad && !widening && !accuracy)
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
    if (accuracy)
      g.ops.push_back(accuracy);
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "loss");
}

} // namespace mlir::gt::fuse
