//===- AttentionGrad.cpp - Attention gradient regions ---------------------===//
//
// "attention_grad" regions: the gradient of attention over rope(q) and
// rope(k) with the inverse ropes of its dq and dk, which the GPU's
// attention kernels apply as they store dq and dk.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldAttentionRopes() {
  SmallVector<Group> folds;
  for (auto grad : block.getOps<AttentionGradOp>()) {
    if (grad.getInputs().size() != 3 || grad.getResults().size() != 3)
      continue; // packed qkv: no rope between the projection and attention
    auto ropeQ = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[0]));
    auto ropeK = dyn_cast_or_null<RopeOp>(soleUser(grad.getResults()[1]));
    if (!ropeQ || !ropeK || !ropeQ.getInverse() || !ropeK.getInverse() ||
        ropeQ.getPositions() || ropeK.getPositions() ||
        ropeQ.getTheta() != ropeK.getTheta() ||
        ropeQ.getInterleaved() != ropeK.getInterleaved())
      continue;
    // The tensor-core kernels' operands: q, k, v, the output and its
    // gradient of one 16-bit type.
    auto q = cast<RankedTensorType>(grad.getInputs()[0].getType());
    Type element = q.getElementType();
    bool oneType = getElementTypeOrSelf(grad.getGrad().getType()) == element;
    for (Value v : grad.getInputs())
      oneType = oneType && getElementTypeOrSelf(v.getType()) == element;
    if (!oneType || !q.hasStaticShape() ||
        !gtc::rt::attentionGradTakesRope(q.getElementTypeBitWidth(),
                                         q.getShape().back()))
      continue;
    Group g{grad, {grad, ropeQ, ropeK}};
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "attention_grad");
}

} // namespace mlir::gt::fuse
