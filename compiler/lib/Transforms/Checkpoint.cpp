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
// the forward values with the forward. A group may instead recompute only
// its cheap values (selective checkpointing): those whose ops are no
// contraction (no GEMM, no attention) and read only what stays alive into
// the backward anyway, such as a layernorm's output recomputed from its
// input, or a GELU's from the GEMM output its gradient keeps.
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

/// Leaves of the step (GT_Leaf): read anywhere, never recomputed.
bool isLeaf(Operation *op) { return op->hasTrait<OpTrait::gt::Leaf>(); }

class Checkpointer {
public:
  /// Groups before `limit` (all if -1) recompute every value; of the
  /// others, those before `cheapLimit` (all if -1) their cheap ones.
  Checkpointer(func::FuncOp func, int64_t every, int64_t limit,
               int64_t cheapLimit)
      : func(func), every(every), limit(limit), cheapLimit(cheapLimit) {}

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
    auto within = [](int64_t g, int64_t n) { return n < 0 || g < n; };
    for (auto &[g, all] : wanted) {
      llvm::SetVector<Operation *> ops;
      llvm::SetVector<Value> values;
      if (within(g, limit)) {
        values = all;
        // The group's ops those values depend on.
        SmallVector<Value> work(values.begin(), values.end());
        while (!work.empty()) {
          Operation *def = work.pop_back_val().getDefiningOp();
          if (!def || isLeaf(def) || group[def] != g || !ops.insert(def))
            continue;
          for (Value v : def->getOperands())
            work.push_back(v);
        }
      } else if (within(g, cheapLimit)) {
        selectCheap(g, all, values, ops);
      }
      if (values.empty())
        continue;
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

  /// Whether the backward reads `v` (a clone included), unless it is one
  /// of `dropped`: a value that stays alive after the forward.
  bool alive(Value v, const llvm::SetVector<Value> &dropped) {
    Operation *def = v.getDefiningOp();
    if (!def || isLeaf(def))
      return true;
    return !dropped.contains(v) && llvm::any_of(v.getUsers(), [&](Operation *u) {
             return !isForward(u);
           });
  }

  /// Of group `g`'s `wanted` values, in program order, those whose ops can
  /// be recomputed cheaply (`values`, with the ops in `ops`): no contraction
  /// and no memory effect, reading only values that stay alive anyway, the
  /// leaves, or other such ops of the group, so no recomputation keeps a
  /// forward value alive that would have died.
  void selectCheap(int64_t g, const llvm::SetVector<Value> &wanted,
                   llvm::SetVector<Value> &values,
                   llvm::SetVector<Operation *> &ops) {
    auto cheap = [&](Operation *op) {
      return op && !isLeaf(op) && group.lookup(op) == g && isForward(op) &&
             !op->hasTrait<OpTrait::gt::Contraction>() &&
             isMemoryEffectFree(op);
    };
    for (Value v : wanted) {
      llvm::SetVector<Operation *> cone;
      bool ok = cheap(v.getDefiningOp());
      SmallVector<Operation *> work;
      if (ok)
        work.push_back(v.getDefiningOp());
      while (ok && !work.empty()) {
        Operation *op = work.pop_back_val();
        if (ops.contains(op) || !cone.insert(op))
          continue; // recomputed already: its results come from the clones
        for (Value o : op->getOperands()) {
          Operation *def = o.getDefiningOp();
          if (ops.contains(def) || alive(o, values))
            continue;
          ok = cheap(def);
          if (!ok)
            break;
          work.push_back(def);
        }
      }
      if (!ok)
        continue;
      values.insert(v);
      ops.insert(cone.begin(), cone.end());
    }
  }

  func::FuncOp func;
  int64_t every, limit, cheapLimit;
  DenseMap<Operation *, int64_t> group;
};

struct GtCheckpointPass
    : public mlir::gt::impl::GtCheckpointPassBase<GtCheckpointPass> {
  using Base::Base;

  /// Where `every` was given: the run option named by `from`, else the
  /// train block's setting, else the step.
  Location settingLoc(ModuleOp module, func::FuncOp step) {
    if (every > 0 && !from.empty())
      return NameLoc::get(StringAttr::get(module.getContext(), from));
    for (auto train : module.getOps<TrainOp>())
      if (train->hasAttr("checkpoint"))
        return trainSettingLoc(train, "checkpoint");
    return step.getLoc();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t n = every; // < 0: none, whatever the train block says
    if (n == 0) {
      for (auto train : module.getOps<TrainOp>()) {
        CheckpointSetting setting = checkpointSetting(train);
        if (setting.budget != 0) {
          emitError(trainSettingLoc(train, "checkpoint"),
                    "checkpoint = auto needs the memory plan: gtc run "
                    "and gtc compile choose it (here, give every=N)");
          return signalPassFailure();
        }
        n = setting.every;
      }
    }
    if (n <= 0)
      return;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kStepAttrName) && !Checkpointer(f, n, groups, cheapGroups).run()) {
        emitError(settingLoc(module, f), "checkpoint = every(")
            << n
            << ") recomputes repeat iterations, and this model has none "
               "(no parameter is named <loop>.<i>...); drop it";
        return signalPassFailure();
      }
  }
};

} // namespace
