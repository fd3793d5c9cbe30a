//===- AttentionGrad.cpp - Attention gradient regions ---------------------===//
//
// "attention_grad" regions: the gradient of attention over rope(q) and
// rope(k) with the inverse ropes of its dq and dk, which the GPU's
// attention kernels apply as they store dq and dk. Over packed heads
// [B, T, H + 2 Hkv, d] (gt-pack-projections) one inverse rope turns the
// first H + Hkv heads of dqkv: q's and k's.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldAttentionRopes() {
  SmallVector<Group> folds;
  // An inverse rope of a whole gradient, as the kernels turn it.
  auto inverse = [](RopeOp r) {
    return r && r.getInverse() && !r.getPositions();
  };
  for (auto grad : block.getOps<AttentionGradOp>()) {
    auto q = cast<RankedTensorType>(grad.getInputs()[0].getType());
    SmallVector<Operation *> ops{grad};
    if (grad.getInputs().size() == 1 && q.getRank() == 4) {
      // Packed heads: q's and k's heads turned back, v's left.
      auto rope = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[0]));
      int64_t h = grad.getHeads(), kv = (q.getDimSize(2) - h) / 2;
      if (!inverse(rope) || rope.getRotated() != uint64_t(h + kv))
        continue;
      ops.push_back(rope);
    } else if (grad.getInputs().size() == 3) {
      auto ropeQ = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[0]));
      auto ropeK = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[1]));
      if (!inverse(ropeQ) || !inverse(ropeK) || ropeQ.getRotated() ||
          ropeK.getRotated() || ropeQ.getTheta() != ropeK.getTheta() ||
          ropeQ.getInterleaved() != ropeK.getInterleaved())
        continue;
      ops.append({ropeQ, ropeK});
    } else {
      continue; // GPT-2's packed qkv: no rope between projection and attention
    }
    // The tensor-core kernels' operands: q, k, v, the output and its
    // gradient of one 16-bit type.
    Type element = q.getElementType();
    bool oneType = getElementTypeOrSelf(grad.getGrad().getType()) == element;
    for (Value v : grad.getInputs())
      oneType = oneType && getElementTypeOrSelf(v.getType()) == element;
    if (!oneType || !q.hasStaticShape() ||
        !gtc::rt::attentionGradTakesRope(q.getElementTypeBitWidth(),
                                         q.getShape().back()))
      continue;
    Group g{grad, ops};
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "attention_grad");
}

} // namespace mlir::gt::fuse
