//===- Fuser.cpp - gt-fuse's shared steps ---------------------------------===//
//
// The fusion pass's shared steps: a value's sole user, hoisting
// parameters, availability, and outlining a group as a gt.fused region.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

Operation *Fuser::soleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  return user->getBlock() == &block ? user : nullptr;
}

void Fuser::addWithCast(Operation *op, SmallVectorImpl<Operation *> &ops) {
  ops.push_back(op);
  if (auto c = dyn_cast_or_null<CastOp>(soleUser(op->getResult(0))))
    ops.push_back(c);
}

void Fuser::hoistParams(const Group &g) {
  Operation *last = nullptr;
  for (Operation *op : g.ops)
    for (Value v : op->getOperands())
      if (auto p = v.getDefiningOp<ParamOp>();
          p && g.anchor->isBeforeInBlock(p) &&
          (!last || last->isBeforeInBlock(p)))
        last = p;
  if (!last)
    return;
  for (Operation &op : llvm::make_early_inc_range(llvm::make_range(
           g.anchor->getIterator(), std::next(last->getIterator()))))
    if (isa<ParamOp>(op))
      op.moveBefore(g.anchor);
}

bool Fuser::readsOnlyAvailable(const Group &g) {
  llvm::SmallPtrSet<Operation *, 8> members(g.ops.begin(), g.ops.end());
  for (Operation *op : g.ops)
    for (Value v : op->getOperands())
      if (!members.count(v.getDefiningOp()) && !availableAt(v, g.anchor))
        return false;
  return true;
}

bool Fuser::availableAt(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  return !def || (def->getBlock() == op->getBlock() &&
                  def->isBeforeInBlock(op));
}

void Fuser::outline(Group &g, StringRef kind) {
  llvm::SmallPtrSet<Operation *, 8> members(g.ops.begin(), g.ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : g.ops) {
    for (Value v : op->getOperands())
      if (!v.getDefiningOp() || !members.count(v.getDefiningOp()))
        inputs.insert(v);
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !members.count(u); }))
        outputs.push_back(r);
  }
  OpBuilder b(g.anchor);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto fused = FusedOp::create(b, g.anchor->getLoc(), resultTypes,
                               b.getStringAttr(kind),
                               inputs.getArrayRef());
  Block *body = b.createBlock(&fused.getBody());
  IRMapping map;
  for (Value v : inputs)
    map.map(v, body->addArgument(v.getType(), v.getLoc()));
  for (Operation *op : g.ops)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  YieldOp::create(b, g.anchor->getLoc(), yielded);
  for (auto [old, now] : llvm::zip(outputs, fused.getResults()))
    old.replaceAllUsesWith(now);
  for (Operation *op : llvm::reverse(g.ops))
    op->erase();
}

} // namespace mlir::gt::fuse
