//===- Classifier.cpp - Classifier regions --------------------------------===//
//
// "classifier" regions: the logits' GEMM, the cross-entropy, its
// gradient and the logits' gradient GEMMs of a language model's head, run
// over chunks of rows (or a small head as one kernel).
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

CrossEntropyGradOp Fuser::gradientOf(CrossEntropyOp ce) {
  for (Operation *u : ce.getLogits().getUsers())
    if (auto g = dyn_cast<CrossEntropyGradOp>(u);
        g && g->getBlock() == &block && g.getLogits() == ce.getLogits() &&
        g.getLabels() == ce.getLabels() && ce->isBeforeInBlock(g))
      return g;
  return nullptr;
}

void Fuser::hoistSeed(CrossEntropyGradOp grad, Operation *anchor) {
  Operation *seed = grad.getGrad().getDefiningOp();
  if (seed && isa<ConstantOp>(seed) && seed->getBlock() == &block &&
      !availableAt(grad.getGrad(), anchor))
    seed->moveBefore(anchor);
}

CastOp Fuser::wideningOf(CrossEntropyOp ce, CrossEntropyGradOp grad) {
  auto widening = ce.getLogits().getDefiningOp<CastOp>();
  if (widening && widening->getBlock() == &block &&
      isa<FloatType>(getElementTypeOrSelf(widening.getInput().getType())) &&
      llvm::all_of(ce.getLogits().getUsers(), [&](Operation *u) {
        return u == ce.getOperation() || (grad && u == grad.getOperation());
      }))
    return widening;
  return nullptr;
}

void Fuser::foldClassifiers() {
  SmallVector<Group> folds;
  for (auto ce : block.getOps<CrossEntropyOp>()) {
    CrossEntropyGradOp grad = gradientOf(ce);
    if (!grad)
      continue;
    CastOp widening = wideningOf(ce, grad);
    Value stored = widening ? widening.getInput() : ce.getLogits();
    Operation *fwd = stored.getDefiningOp();
    Value h, w;
    auto logitsType = cast<RankedTensorType>(stored.getType());
    bool small = false;
    if (auto hType = fwd && fwd->getNumOperands() >= 1
                         ? dyn_cast<RankedTensorType>(
                               fwd->getOperand(0).getType())
                         : RankedTensorType();
        hType && hType.getRank() >= 1)
      small = gtc::rt::isSmallHead(rowsOf(stored), logitsType.getShape().back(),
                                   hType.getShape().back());
    if (auto lin = dyn_cast_or_null<LinearOp>(fwd);
        lin && (!lin.getBias() || small)) {
      h = lin.getInput();
      w = lin.getWeight();
    } else if (auto mm = dyn_cast_or_null<MatmulOp>(fwd);
               mm && mm.getTransposeB() && !mm.getTransposeA() &&
               cast<RankedTensorType>(mm.getB().getType()).getRank() == 2) {
      h = mm.getA();
      w = mm.getB();
    } else {
      continue;
    }
    if (fwd->getBlock() != &block ||
        !llvm::all_of(stored.getUsers(), [&](Operation *u) {
          return u == widening.getOperation() || u == ce.getOperation() ||
                 u == grad.getOperation();
        }))
      continue;
    Group g{fwd, {fwd}};
    if (widening)
      g.ops.push_back(widening);
    g.ops.push_back(ce);
    addWithCast(grad, g.ops);
    // The gradient, through reshapes, feeds exactly dh and dW.
    SmallVector<Value> forms = {g.ops.back()->getResult(0)};
    MatmulOp dh, dw;
    SumToOp db; // a small head's bias gradient
    bool ok = true;
    for (size_t i = 0; i < forms.size() && ok; ++i)
      for (Operation *u : forms[i].getUsers()) {
        auto mm = dyn_cast<MatmulOp>(u);
        auto sum = dyn_cast<SumToOp>(u);
        if (u->getBlock() != &block) {
          ok = false;
        } else if (sum && small && !db &&
                   sum.getType().getShape() ==
                       logitsType.getShape().take_back()) {
          db = sum;
        } else if (auto r = dyn_cast<ReshapeOp>(u)) {
          g.ops.push_back(r);
          forms.push_back(r.getResult());
        } else if (mm && !dh && mm.getA() == forms[i] && mm.getB() == w &&
                   !mm.getTransposeA() && !mm.getTransposeB()) {
          dh = mm;
        } else if (mm && !dw && mm.getA() == forms[i] &&
                   mm.getTransposeA() && !mm.getTransposeB() &&
                   shapeOf(mm) == cast<RankedTensorType>(w.getType())
                                      .getShape()) {
          dw = mm;
        } else {
          ok = false;
        }
        if (!ok)
          break;
      }
    if (!ok || !dh || !dw)
      continue;
    // dW reads h or a reshape of it (kept outside when it exists at the
    // region's start, else taken in).
    Value hb = dw.getB();
    auto hr = hb.getDefiningOp<ReshapeOp>();
    if (hb != h && !(hr && hr.getInput() == h && hr->getBlock() == &block))
      continue;
    if (hb != h && !availableAt(hb, fwd))
      g.ops.push_back(hr);
    g.ops.push_back(dh);
    addWithCast(dw, g.ops);
    if (db)
      addWithCast(db, g.ops);
    // A small head's dh: the ReLU gradient of h = relu(z) and its column
    // sums. The gradient reads h instead of z (relu(z) > 0 exactly when
    // z > 0, as in the gemm regions), so the region reads h alone.
    auto ag = dyn_cast_or_null<ActivationGradOp>(soleUser(dh.getResult()));
    auto relu = h.getDefiningOp<ReluOp>();
    if (small && ag && relu && ag.getKind() == "relu" &&
        ag.getGrad() == dh.getResult() &&
        (ag.getInput() == h || ag.getInput() == relu.getInput())) {
      ag.getInputMutable().assign(h);
      g.ops.push_back(ag);
      for (Operation *u : ag.getResult().getUsers())
        if (auto sum = dyn_cast<SumToOp>(u);
            sum && sum->getBlock() == &block &&
            sum.getType().getShape() ==
                cast<RankedTensorType>(ag.getType()).getShape().take_back()) {
          addWithCast(sum, g.ops);
          break;
        }
    }
    llvm::sort(g.ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    hoistSeed(grad, fwd);
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "classifier");
}

} // namespace mlir::gt::fuse
