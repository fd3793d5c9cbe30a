//===- Norm.cpp - Norm regions --------------------------------------------===//
//
// "norm" regions: a layer norm or RMS norm with the residual adds and casts
// around it, forward and backward (and a linear's bias gradient from the
// backward's column sums).
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldNorms() {
  SmallVector<Group> folds;
  llvm::SmallPtrSet<Operation *, 16> taken;
  auto sameShape = [](Operation *op) {
    return llvm::all_of(op->getOperandTypes(), [&](Type t) {
      return t == op->getResult(0).getType();
    });
  };
  auto overRows = [](AddOp add) {
    auto result = cast<RankedTensorType>(add.getType());
    ArrayRef<int64_t> rs = result.getShape();
    int full = 0;
    for (Type t : add->getOperandTypes()) {
      auto type = cast<RankedTensorType>(t);
      ArrayRef<int64_t> s = type.getShape();
      if (type == result) {
        ++full;
        continue;
      }
      if (type.getElementType() != result.getElementType() || s.empty() ||
          s.size() > rs.size() || s != rs.take_back(s.size()))
        return false;
    }
    return full >= 1;
  };
  auto castFeeding = [&](Value v, Operation *user) -> Operation * {
    auto c = v.getDefiningOp<CastOp>();
    return c && c->getBlock() == &block && soleUser(c.getResult()) == user
               ? c.getOperation()
               : nullptr;
  };
  for (Operation &op : block.without_terminator()) {
    Group g{nullptr, {}};
    Value total; // a backward region's total
    // A forward norm reads its rows as operand 0 and returns them as
    // result 0; a backward one reads dy as operand 0 and returns dx first.
    if (isa<LayerNormOp, RmsNormOp>(op)) {
      Operation *ln = &op;
      auto add = ln->getOperand(0).getDefiningOp<AddOp>();
      if (!add || add->getBlock() != &block || !overRows(add) ||
          add.getResult().hasOneUse())
        continue; // no residual stream to store on the way
      for (Value v : add->getOperands())
        if (Operation *c = castFeeding(v, add))
          g.ops.push_back(c);
      g.ops.push_back(add);
      g.ops.push_back(ln);
      if (auto c = dyn_cast_or_null<CastOp>(soleUser(ln->getResult(0))))
        g.ops.push_back(c);
    } else if (isa<LayerNormGradOp, RmsNormGradOp>(op)) {
      Operation *lg = &op;
      if (Operation *c = castFeeding(lg->getOperand(0), lg))
        g.ops.push_back(c);
      g.ops.push_back(lg);
      // The input gradient plus the residual gradient (none for the
      // backward's first norm), and its cast: the total.
      total = lg->getResult(0);
      if (auto add = dyn_cast_or_null<AddOp>(soleUser(total));
          add && sameShape(add)) {
        g.ops.push_back(add);
        total = add.getResult();
      }
      for (Operation *u : total.getUsers())
        if (isa<CastOp>(u) && u->getBlock() == &block) {
          g.ops.push_back(u);
          total = u->getResult(0);
          break;
        }
    }
    if (g.ops.size() < 2)
      continue;
    llvm::sort(g.ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    g.anchor = g.ops.front();
    // A residual add that two layer norms read (the forward's and one
    // that gt-checkpoint recomputes from the kept residual stream) joins
    // the first one's region only.
    if (llvm::any_of(g.ops, [&](Operation *o) { return taken.count(o); }))
      continue;
    hoistParams(g);
    if (readsOnlyAvailable(g)) {
      // The bias gradient joins only an accepted region (it rewrites IR).
      if (total)
        addBiasGradient(total, g.ops);
      folds.push_back(g);
      taken.insert(g.ops.begin(), g.ops.end());
    }
  }
  for (Group &g : folds)
    outline(g, "norm");
}

void Fuser::addBiasGradient(Value total, SmallVectorImpl<Operation *> &ops) {
  auto type = cast<RankedTensorType>(total.getType());
  for (Operation *u : total.getUsers()) {
    auto view = dyn_cast<ReshapeOp>(u);
    if (!view || view->getBlock() != &block)
      continue;
    for (Operation *vu : view.getResult().getUsers()) {
      auto sum = dyn_cast<SumToOp>(vu);
      if (!sum || sum->getBlock() != &block || summedValue(sum) != total ||
          sum.getType().getShape() != type.getShape().take_back())
        continue;
      addWithCast(sumDirectly(sum), ops);
      return;
    }
  }
}

} // namespace mlir::gt::fuse
