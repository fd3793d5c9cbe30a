//===- Bucket.cpp - Gradient buckets for data parallelism -----------------===//
//
// gt-bucket groups the gradients of a training step into buckets and
// all-reduces each bucket as soon as the backward has computed its last
// gradient (gt.all_reduce), as PyTorch DDP does with its gradient buckets:
// on a GPU a bucket's communication then overlaps the rest of the
// backward. Buckets follow the order in which the backward produces the
// gradients (the block order of their defining ops), which is roughly the
// reverse of the parameters' order; each holds at most `bucket-bytes`
// bytes, except a gradient larger than that, which is a bucket alone. A
// value handed to two gt.gradient ops is reduced once.
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTBUCKETPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() *
         static_cast<int64_t>((type.getElementTypeBitWidth() + 7) / 8);
}

struct GtBucketPass : public mlir::gt::impl::GtBucketPassBase<GtBucketPass> {
  using GtBucketPassBase::GtBucketPassBase;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (!f->hasAttr(kStepAttrName) || f.getBody().empty())
      return;
    if (bucketBytes <= 0) {
      f.emitError("gt-bucket needs bucket-bytes > 0, got ")
          << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    Block &block = f.getBody().front();
    // Where each value is computed: block arguments first.
    DenseMap<Operation *, int64_t> position;
    int64_t at = 0;
    for (Operation &op : block)
      position[&op] = ++at;
    auto producedAt = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && def->getBlock() == &block ? position.lookup(def) : 0;
    };
    // The values handed to the optimizer, each once, with their gt.gradient
    // ops, in the order the backward produces them.
    llvm::MapVector<Value, SmallVector<GradientOp>> handed;
    for (auto g : block.getOps<GradientOp>())
      handed[g.getGrad()].push_back(g);
    SmallVector<Value> order;
    for (auto &entry : handed)
      order.push_back(entry.first);
    llvm::stable_sort(order, [&](Value a, Value b) {
      return producedAt(a) < producedAt(b);
    });

    SmallVector<SmallVector<Value>> buckets;
    int64_t filled = 0;
    for (Value v : order) {
      int64_t bytes = bytesOf(v);
      if (buckets.empty() || filled + bytes > bucketBytes) {
        if (buckets.empty() || !buckets.back().empty())
          buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(v);
      filled += bytes;
    }

    OpBuilder b(f.getContext());
    Operation *placed = nullptr; // the previous bucket's last op
    for (auto [index, bucket] : llvm::enumerate(buckets)) {
      // Right after the op that computes the bucket's last gradient, or
      // after the previous bucket when that op computes its gradients too
      // (one op, such as a GEMM with its bias gradient, may fill several).
      Value last = bucket.back();
      Operation *def = last.getDefiningOp();
      if (def && def->getBlock() != &block)
        def = nullptr;
      if (placed && (!def || !placed->isBeforeInBlock(def)))
        b.setInsertionPointAfter(placed);
      else if (def)
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&block);
      SmallVector<Type> types;
      for (Value v : bucket)
        types.push_back(v.getType());
      auto reduce = AllReduceOp::create(b, last.getLoc(), types, bucket,
                                        static_cast<int64_t>(index));
      Operation *after = reduce;
      for (auto [v, r] : llvm::zip(bucket, reduce.getResults()))
        for (GradientOp g : handed[v]) {
          g.getGradMutable().assign(r);
          g->moveAfter(after);
          after = g;
        }
      placed = after;
    }
  }
};

} // namespace
