//===- Gemm.cpp - GEMM epilogue regions -----------------------------------===//
//
// "gemm" regions: a GEMM and what cuBLASLt computes in its epilogue
// (an activation, the GELU gradient, the bias gradient, an addend).
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldGemmEpilogues() {
  SmallVector<Group> folds;
  llvm::SmallPtrSet<Operation *, 16> taken;
  auto isGemm = [](MatmulOp mm) {
    return cast<RankedTensorType>(mm.getB().getType()).getRank() == 2 &&
           cast<RankedTensorType>(mm.getA().getType()).getRank() == 2;
  };
  for (Operation &op : block.without_terminator()) {
    if (taken.count(&op))
      continue;
    Group g{&op, {&op}};
    if (auto lin = dyn_cast<LinearOp>(op)) {
      Value z = lin.getResult();
      Operation *act = nullptr;
      for (Operation *u : z.getUsers())
        if ((isa<ReluOp>(u) ||
             (isa<GeluOp>(u) && cast<GeluOp>(u).getApproximate())) &&
            u->getBlock() == &block && (!act || u->isBeforeInBlock(act)))
          act = u;
      if (!act)
        continue;
      // cuBLASLt saves a GELU's input (read by the backward) in rows of a
      // multiple of 8 elements.
      if (isa<GeluOp>(act) && !z.hasOneUse() && !auxFits(z))
        continue;
      if (isa<ReluOp>(act)) {
        SmallVector<ActivationGradOp> grads;
        bool ok = true;
        for (Operation *u : z.getUsers()) {
          auto ag = dyn_cast<ActivationGradOp>(u);
          if (u == act)
            continue;
          if (ag && ag.getKind() == "relu" && ag.getInput() == z &&
              ag.getGrad() != z && act->isBeforeInBlock(ag))
            grads.push_back(ag);
          else
            ok = false;
        }
        if (!ok)
          continue;
        for (ActivationGradOp ag : grads)
          ag.getInputMutable().assign(act->getResult(0));
      }
      g.ops.push_back(act);
    } else if (auto mm = dyn_cast<MatmulOp>(op)) {
      if (!isGemm(mm))
        continue;
      Operation *next = soleUser(mm.getResult());
      if (auto r = dyn_cast_or_null<ReshapeOp>(next)) {
        g.ops.push_back(r);
        next = soleUser(r.getResult());
      }
      auto ag = dyn_cast_or_null<ActivationGradOp>(next);
      bool feeds = ag && ag.getGrad() == g.ops.back()->getResult(0) &&
                   availableAt(ag.getInput(), &op);
      // (The alternative, a GELU gradient with its bias gradient as an
      // elementwise kernel beside plain GEMMs, was measured no faster:
      // test/bench/NOTES.md, "gt-fuse's measured choices".)
      if (!mm.getTransposeA() && feeds && ag.getKind() == "gelu_tanh" &&
          auxFits(ag.getInput())) {
        g.ops.push_back(ag);
        // Its column sums (the bias gradient of the linear below), where
        // gtc's Hopper GEMM adds them as it stores the gradient
        // (rt::dgeluSumsFit), instead of BGRADB in the weight gradient's
        // GEMM below.
        auto a = cast<RankedTensorType>(mm.getA().getType());
        auto c = cast<RankedTensorType>(mm.getResult().getType());
        if (gtc::rt::dgeluSumsFit(
                getElementTypeOrSelf(ag.getType()).isBF16(), c.getShape()[0],
                c.getShape()[1], a.getShape()[1]))
          for (SumToOp sum : block.getOps<SumToOp>())
            if (!taken.count(sum) && summedValue(sum) == ag.getResult() &&
                sum.getType().getShape() ==
                    cast<RankedTensorType>(ag.getType())
                        .getShape()
                        .take_back()) {
              addWithCast(sum.getInput() == ag.getResult() ? sum
                                                            : sumDirectly(sum),
                          g.ops);
              break;
            }
      } else if (!mm.getTransposeA() && feeds && ag.getKind() == "relu" &&
                 rowsOf(mm.getResult()) <= gtc::rt::kSmallGemmRows) {
        g.ops.push_back(ag);
        // Its column sums (the bias gradient of the linear below).
        for (Operation *u : ag.getResult().getUsers())
          if (auto sum = dyn_cast<SumToOp>(u);
              sum && sum->getBlock() == &block && !taken.count(sum) &&
              sum.getType().getShape() ==
                  cast<RankedTensorType>(ag.getType()).getShape().take_back()) {
            addWithCast(sum, g.ops);
            break;
          }
      } else if (!mm.getTransposeA()) {
        // dy W + another gradient of the same value: cuBLASLt adds that
        // as C while it stores the product.
        auto add = dyn_cast_or_null<AddOp>(next);
        Value product = g.ops.back()->getResult(0);
        if (!add || add.getLhs() == add.getRhs() ||
            add.getType() != product.getType())
          continue;
        Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
        if (other.getType() != add.getType() || !availableAt(other, &op))
          continue;
        g.ops.push_back(add);
      } else {
        // dW = dy^T x; the bias gradient sums dy over its rows, unless
        // that sum joins the elementwise region computing dy (not when a
        // GEMM of this loop takes dy's op, as DGELU does).
        g.ops.clear();
        SumToOp bias;
        for (Operation *u : mm.getA().getUsers())
          if (auto s = dyn_cast<SumToOp>(u);
              s && s->getBlock() == &block && !taken.count(s) &&
              !(columnSumJoins(s) &&
                !taken.count(summedValue(s).getDefiningOp())) &&
              cast<RankedTensorType>(s.getType()).getShape() ==
                  ArrayRef<int64_t>(cast<RankedTensorType>(mm.getA().getType())
                                        .getShape()
                                        .back()))
            bias = s;
        if (!bias || !availableAt(mm.getB(), bias))
          continue;
        addWithCast(mm, g.ops);
        size_t gemmOps = g.ops.size();
        addWithCast(bias, g.ops);
        if (getElementTypeOrSelf(g.ops[gemmOps - 1]->getResult(0)) !=
            getElementTypeOrSelf(g.ops.back()->getResult(0)))
          continue; // cuBLASLt writes both in one type
        g.anchor = bias->isBeforeInBlock(mm) ? bias.getOperation() : &op;
      }
    } else {
      continue;
    }
    taken.insert(g.ops.begin(), g.ops.end());
    folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "gemm");
}

int64_t Fuser::rowsOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() / std::max<int64_t>(1, type.getShape().back());
}

bool Fuser::auxFits(Value v) {
  return gtc::rt::gemmAuxFits(
      cast<RankedTensorType>(v.getType()).getShape().back());
}

} // namespace mlir::gt::fuse
