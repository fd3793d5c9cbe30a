//===- AttentionGrad.cpp - Attention gradient regions ---------------------===//
//
// "attention_grad" regions: the gradient of attention over rope(q) and
// rope(k) with the inverse ropes of its dq and dk, which the GPU's
// attention kernels apply as they store dq and dk. Over packed heads
// [B, T, H + 2 Hkv, d] (gt-pack-projections) one inverse rope turns the
// first H + Hkv heads of dqkv: q's and k's. A packed gradient (GPT-2's
// [B, T, 3 D] too) also takes the sum of its columns over all rows, the
// packed projection's bias gradient, which the kernels add up as they
// store dqkv.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldAttentionGrads() {
  SmallVector<Group> folds;
  // An inverse rope of a whole gradient, as the kernels turn it.
  auto inverse = [](RopeOp r) {
    return r && r.getInverse() && !r.getPositions();
  };
  for (auto grad : block.getOps<AttentionGradOp>()) {
    auto q = cast<RankedTensorType>(grad.getInputs()[0].getType());
    bool packed = grad.getInputs().size() == 1;
    // The tensor-core kernels' operands: q, k, v, the output and its
    // gradient of one 16-bit type, heads of 64 or 128 ([B, T, 3 D]: as
    // many key heads as query heads).
    int64_t headDim = packed && q.getRank() == 3
                          ? q.getShape().back() / (3 * grad.getHeads())
                          : q.getShape().back();
    Type element = q.getElementType();
    bool oneType = getElementTypeOrSelf(grad.getGrad().getType()) == element;
    for (Value v : grad.getInputs())
      oneType = oneType && getElementTypeOrSelf(v.getType()) == element;
    if (!oneType || !q.hasStaticShape() ||
        !gtc::rt::attentionGradTakesRope(q.getElementTypeBitWidth(), headDim))
      continue;
    SmallVector<Operation *> ops{grad};
    if (packed) {
      // Packed heads: q's and k's heads turned back, v's left; then the
      // column sums of the gradient.
      Value stored = grad.getResults()[0];
      auto rope = dyn_cast_or_null<RopeOp>(soleUser(stored));
      int64_t h = grad.getHeads(), kv = (q.getShape()[2] - h) / 2;
      if (q.getRank() == 4 && inverse(rope) &&
          rope.getRotated() == uint64_t(h + kv)) {
        ops.push_back(rope);
        stored = rope.getResult();
      }
      // A row of [B, T, W] is a position's q, k and v: its columns' sums
      // are the projection's bias gradient.
      if (q.getRank() == 3)
        addBiasGradient(stored, ops);
      if (ops.size() == 1)
        continue;
    } else {
      auto ropeQ = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[0]));
      auto ropeK = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[1]));
      if (!inverse(ropeQ) || !inverse(ropeK) || ropeQ.getRotated() ||
          ropeK.getRotated() || ropeQ.getTheta() != ropeK.getTheta() ||
          ropeQ.getInterleaved() != ropeK.getInterleaved())
        continue;
      ops.append({ropeQ, ropeK});
    }
    Group g{grad, ops};
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "attention_grad");
}

} // namespace mlir::gt::fuse
