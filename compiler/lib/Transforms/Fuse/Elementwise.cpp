//===- Elementwise.cpp - Elementwise regions ------------------------------===//
//
// "elementwise" regions: chains of elementwise ops of one iteration
// space, and the column sums (sum_to) that join them.
//===----------------------------------------------------------------------===//

#include "Fuser.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::gt::fuse {

void Fuser::place(Operation *op) {
  // Producers' groups, the most recently started first; then the groups
  // of ops on op's side of the backward's seed that read one of op's
  // computed operands (siblings: one kernel reads the shared value once;
  // parameters are left to castParameters).
  SmallVector<int> candidates, siblings;
  auto add = [&](SmallVectorImpl<int> &to, Operation *o) {
    if (auto it = groupOf.find(o);
        it != groupOf.end() && !llvm::is_contained(candidates, it->second) &&
        !llvm::is_contained(siblings, it->second))
      to.push_back(it->second);
  };
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp())
      add(candidates, def);
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp(); !def || !isLeaf(def))
      for (Operation *u : v.getUsers())
        if (u != op && u->getBlock() == &block && u->isBeforeInBlock(op) &&
            inBackward(u) == inBackward(op))
          add(siblings, u);
  llvm::sort(candidates, std::greater<int>());
  llvm::sort(siblings, std::greater<int>());
  candidates.append(siblings);
  for (int g : candidates) {
    if (shapeOf(op) != shapeOf(groups[g].anchor))
      continue; // another iteration space
    if (!llvm::all_of(op->getOperands(),
                      [&](Value v) { return availableTo(v, g); }))
      continue; // an operand computed after the group began
    groups[g].ops.push_back(op);
    groupOf[op] = g;
    return;
  }
  groupOf[op] = static_cast<int>(groups.size());
  groups.push_back({op, {op}});
}

bool Fuser::availableTo(Value v, int g) {
  auto it = groupOf.find(v.getDefiningOp());
  return (it != groupOf.end() && it->second == g) ||
         availableAt(v, groups[g].anchor);
}

bool Fuser::columnSumJoins(SumToOp s) {
  Value v = summedValue(s);
  auto in = cast<RankedTensorType>(v.getType());
  Operation *def = v.getDefiningOp();
  return s->getBlock() == &block && in.hasStaticShape() &&
         in.getRank() >= 2 &&
         s.getType().getShape() == in.getShape().take_back() && def &&
         def->getBlock() == &block && isFusable(def);
}

Value Fuser::summedValue(SumToOp s) {
  auto view = s.getInput().getDefiningOp<ReshapeOp>();
  if (!view || view->getBlock() != &block)
    return s.getInput();
  auto type = cast<RankedTensorType>(view.getInput().getType());
  return type.getRank() >= 2 &&
                 type.getShape().back() ==
                     cast<RankedTensorType>(view.getType()).getShape().back()
             ? view.getInput()
             : s.getInput();
}

SumToOp Fuser::sumDirectly(SumToOp sum) {
  OpBuilder b(sum);
  auto direct =
      SumToOp::create(b, sum.getLoc(), sum.getType(), summedValue(sum));
  sum.getResult().replaceAllUsesWith(direct.getResult());
  sum.erase();
  return direct;
}

void Fuser::sumColumnsOfValues() {
  for (SumToOp sum : llvm::make_early_inc_range(block.getOps<SumToOp>()))
    if (summedValue(sum) != sum.getInput() && columnSumJoins(sum))
      sumDirectly(sum);
}

void Fuser::addColumnSums() {
  for (SumToOp sum : block.getOps<SumToOp>()) {
    if (!columnSumJoins(sum))
      continue;
    Group &g = groups[groupOf.at(sum.getInput().getDefiningOp())];
    g.ops.push_back(sum);
    auto c = dyn_cast_or_null<CastOp>(soleUser(sum.getResult()));
    if (!c)
      continue;
    if (auto it = groupOf.find(c); it != groupOf.end()) {
      if (groups[it->second].ops.size() != 1)
        continue;
      groups[it->second].ops.clear();
      groupOf.erase(it);
    }
    g.ops.push_back(c);
  }
}

Operation *Fuser::backwardSeed() {
  for (Operation &op : block)
    if (op.hasAttr(kLossGradAttrName))
      return &op;
  return nullptr;
}

bool Fuser::inBackward(Operation *op) {
  return seed && !op->isBeforeInBlock(seed);
}

void Fuser::recomputeInBackward() {
  if (!seed)
    return;
  for (Operation &op : llvm::make_early_inc_range(
           llvm::make_range(block.begin(), seed->getIterator()))) {
    if (!isFusable(&op) || !isMemoryEffectFree(&op))
      continue;
    SmallVector<OpOperand *> late;
    bool ok = true;
    for (OpOperand &use : op.getResult(0).getUses()) {
      Operation *u = use.getOwner();
      if (u->getBlock() != &block)
        ok = false;
      else if (inBackward(u))
        late.push_back(&use);
    }
    if (!ok || late.empty() || !llvm::all_of(late, [](OpOperand *use) {
          return isFusable(use->getOwner());
        }))
      continue;
    // Recomputing must not keep an operand alive that would have died.
    if (!llvm::all_of(op.getOperands(), [&](Value v) {
          return !v.getDefiningOp() || isLeaf(v.getDefiningOp()) ||
                 llvm::any_of(v.getUsers(), [&](Operation *u) {
                   return u->getBlock() == &block && inBackward(u);
                 });
        }))
      continue;
    Operation *first = late.front()->getOwner();
    for (OpOperand *use : late)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    OpBuilder b(first);
    Value again = b.clone(op)->getResult(0);
    for (OpOperand *use : late)
      use->set(again);
  }
}

void Fuser::sinkIntoUsers() {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (!isFusable(op) || !isMemoryEffectFree(op))
      continue;
    Operation *user = soleUser(op->getResult(0));
    if (user && isFusable(user) && shapeOf(user) == shapeOf(op) &&
        inBackward(user) == inBackward(op))
      op->moveBefore(user);
  }
}

void Fuser::fuseElementwise() {
  seed = backwardSeed();
  recomputeInBackward();
  sinkIntoUsers();
  for (Operation &op : block.without_terminator())
    if (isFusable(&op))
      place(&op);
  addColumnSums();
  for (Group &g : groups)
    if (g.ops.size() > 1)
      outline(g, "elementwise");
}

} // namespace mlir::gt::fuse
