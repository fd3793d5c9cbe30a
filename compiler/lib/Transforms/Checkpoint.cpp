//===- Checkpoint.cpp - Recompute forward values in the backward ----------===//
//
// Gradient checkpointing on the training step that gt-autodiff builds: the
// forward ops of `repeat` loops are grouped n iterations at a time; a group
// keeps only what another group's recomputation reads (its input, in
// effect), and the backward recomputes the rest from there. The iteration of an op comes
// from the parameters it reads (gtc names them `<loop>.<i>.<layer>...`) and
// otherwise from its operands, so the pass needs nothing from the front end
// beyond those names. Recomputed ops are clones placed just before their
// group's first use in the backward; the memory plan's liveness then ends
// the forward values with the forward.
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTCHECKPOINTPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// The loop and iteration of a parameter named `<loop>.<i>.<rest>` (the
/// first all-digit component), or nullopt outside any loop.
std::optional<std::pair<std::string, int64_t>> iterationOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  size_t start = parts.empty() ? 0 : parts[0].size() + 1;
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    int64_t n;
    if (!parts[i].getAsInteger(10, n) && n >= 0)
      return std::make_pair(name.take_front(start - 1).str(), n);
    start += parts[i].size() + 1;
  }
  return std::nullopt;
}

/// Leaves of the step: read anywhere, never recomputed.
bool isLeaf(Operation *op) {
  return isa<InputOp, LabelOp, ParamOp, ConstantOp, PositionsOp>(op);
}

class Checkpointer {
public:
  Checkpointer(func::FuncOp func, int64_t every, int64_t limit)
      : func(func), every(every), limit(limit) {}

  /// False when the step has no repeat iteration to recompute.
  bool run() {
    Block &block = func.getBody().front();
    Operation *seed = nullptr;
    for (Operation &op : block)
      if (op.hasAttr(kLossGradAttrName)) {
        seed = &op;
        break;
      }
    if (!seed)
      return true;
    assignGroups(block, seed);
    if (llvm::none_of(group, [](auto &e) { return e.second >= 0; }))
      return false;
    recompute(block, seed);
    return true;
  }

private:
  /// Group of every forward op: -1 outside the loops, else a number in
  /// program order for (loop, iteration / every). An op reading parameters
  /// has the latest group among theirs (-1 if all are outside the loops);
  /// another op the latest group among its operands, while an op after it
  /// still reads that group's parameters (inside the block), else -1: a
  /// block's output and what follows the loop are not recomputed.
  void assignGroups(Block &block, Operation *seed) {
    std::map<std::pair<std::string, int64_t>, int64_t> ids;
    DenseMap<Operation *, int64_t> position;
    DenseMap<int64_t, int64_t> lastParamUse; // group -> position
    auto paramGroup = [&](Operation *op) -> std::optional<int64_t> {
      std::optional<int64_t> g;
      for (Value v : op->getOperands())
        if (auto p = v.getDefiningOp<ParamOp>())
          g = std::max(g.value_or(-1), group[p]);
      return g;
    };
    int64_t pos = 0;
    for (Operation &op : block) {
      if (&op == seed)
        break;
      position[&op] = pos++;
      if (auto p = dyn_cast<ParamOp>(op)) {
        int64_t g = -1;
        if (auto it = iterationOf(p.getName())) {
          auto key = std::make_pair(it->first, it->second / every);
          g = ids.try_emplace(key, static_cast<int64_t>(ids.size()))
                  .first->second;
        }
        group[&op] = g;
      } else if (std::optional<int64_t> g = paramGroup(&op); g && *g >= 0) {
        lastParamUse[*g] = position[&op];
      }
    }
    for (Operation &op : block) {
      if (&op == seed)
        break;
      if (isa<ParamOp>(op))
        continue;
      if (std::optional<int64_t> g = paramGroup(&op)) {
        group[&op] = *g;
        continue;
      }
      int64_t g = -1;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp(); def && group.count(def))
          g = std::max(g, group[def]);
      auto last = lastParamUse.find(g);
      group[&op] =
          last != lastParamUse.end() && last->second > position[&op] ? g : -1;
    }
  }

  bool isForward(Operation *op) { return group.count(op) > 0; }

  /// Clones, before each group's first backward use, the ops that compute
  /// the group's values the backward reads, except those another group
  /// reads too (its recomputation needs them: they stay). Ops outside the
  /// groups are never recomputed, so what they read in the forward may go.
  void recompute(Block &block, Operation *seed) {
    // Values of each group the backward reads; kept ones are left out.
    std::map<int64_t, llvm::SetVector<Value>> wanted;
    for (Operation &op : block) {
      if (!isForward(&op) || isLeaf(&op) || group[&op] < 0)
        continue;
      int64_t g = group[&op];
      for (Value r : op.getResults()) {
        bool kept = false, backward = false;
        for (Operation *u : r.getUsers()) {
          if (!isForward(u))
            backward = true;
          else if (group[u] != g && group[u] >= 0)
            kept = true; // another group's recomputation reads it
        }
        if (backward && !kept && isMemoryEffectFree(&op))
          wanted[g].insert(r);
      }
    }
    for (auto &[g, values] : wanted) {
      if (limit >= 0 && g >= limit)
        continue; // only the first `limit` groups
      // The group's ops those values depend on, in program order.
      llvm::SetVector<Operation *> ops;
      SmallVector<Value> work(values.begin(), values.end());
      while (!work.empty()) {
        Operation *def = work.pop_back_val().getDefiningOp();
        if (!def || isLeaf(def) || group[def] != g || !ops.insert(def))
          continue;
        for (Value v : def->getOperands())
          work.push_back(v);
      }
      SmallVector<Operation *> order(ops.begin(), ops.end());
      llvm::sort(order, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      // Just before the first backward op that reads one of the values.
      Operation *first = nullptr;
      for (Value v : values)
        for (Operation *u : v.getUsers())
          if (!isForward(u) && (!first || u->isBeforeInBlock(first)))
            first = u;
      OpBuilder b(first);
      IRMapping map;
      llvm::SmallPtrSet<Operation *, 32> clones;
      for (Operation *op : order)
        clones.insert(b.clone(*op, map));
      for (Value v : values)
        v.replaceUsesWithIf(map.lookup(v), [&](OpOperand &use) {
          return !isForward(use.getOwner()) && !clones.count(use.getOwner());
        });
    }
  }

  func::FuncOp func;
  int64_t every, limit;
  DenseMap<Operation *, int64_t> group;
};

struct GtCheckpointPass
    : public mlir::gt::impl::GtCheckpointPassBase<GtCheckpointPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t n = every; // < 0: none, whatever the train block says
    if (n == 0) {
      for (auto train : module.getOps<TrainOp>()) {
        auto c = train->getAttrOfType<DictionaryAttr>("checkpoint");
        auto mode = c ? c.getAs<StringAttr>("mode") : StringAttr();
        if (!mode || mode.getValue() == "none")
          continue;
        if (mode.getValue() == "every") {
          if (auto e = c.getAs<IntegerAttr>("every"))
            n = e.getInt();
          continue;
        }
        train.emitError("checkpoint = auto needs the memory plan: gtc run "
                        "and gtc compile choose it (here, give every=N)");
        return signalPassFailure();
      }
    }
    if (n <= 0)
      return;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kStepAttrName) && !Checkpointer(f, n, groups).run()) {
        f.emitError("checkpoint = every(")
            << n
            << ") recomputes repeat iterations, and this model has none "
               "(no parameter is named <loop>.<i>...); remove the setting";
        return signalPassFailure();
      }
  }
};

} // namespace
