//===- Elementwise.cpp - Elementwise regions ------------------------------===//
//
// "elementwise" regions: chains of elementwise ops of one iteration
// space, and the column sums (sum_to) that join them.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::place(Operation *op) {
  // Producers' groups, the most recently started first.
  SmallVector<int> candidates;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp())
      if (auto it = groupOf.find(def); it != groupOf.end() &&
                                       !llvm::is_contained(candidates,
                                                           it->second))
        candidates.push_back(it->second);
  llvm::sort(candidates, std::greater<int>());
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

void Fuser::fuseElementwise() {
  for (Operation &op : block.without_terminator())
    if (isFusable(&op))
      place(&op);
  addColumnSums();
  for (Group &g : groups)
    if (g.ops.size() > 1)
      outline(g, "elementwise");
}

} // namespace mlir::gt::fuse
