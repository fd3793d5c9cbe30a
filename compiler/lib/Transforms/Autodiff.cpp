//===- Autodiff.cpp - Reverse-mode differentiation into a training step ---===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/ScalarOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTAUTODIFFPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// Builds the backward graph of one function, op by op in reverse.
class Differentiator {
public:
  Differentiator(func::FuncOp func, func::ReturnOp ret)
      : func(func), b(ret) {}

  LogicalResult run(Value loss);

private:
  /// Adds `g` to the gradient of `v` (summing when `v` has several uses).
  void accumulate(Value v, Value g);
  /// The gradient of `v` reduced to the shape of `like` (undoes broadcasting).
  Value sumTo(Value g, Value like);
  Value constant(double v, Type elementType);
  LogicalResult differentiate(Operation *op, Value dy);
  // The rules of differentiate() too long to stand in its switch.
  LogicalResult matmulGrad(MatmulOp o, Value dy);
  LogicalResult linearGrad(LinearOp o, Value dy);
  /// gt.sum and gt.mean: dy broadcast back over the reduced axes (scaled by
  /// 1/N for the mean).
  template <typename ReductionOp>
  LogicalResult reductionGrad(ReductionOp o, Value dy);

  func::FuncOp func;
  OpBuilder b;
  Location loc = b.getUnknownLoc();
  DenseMap<Value, Value> grads;
  DenseSet<Value> active; ///< Values that depend on a parameter.
};

void Differentiator::accumulate(Value v, Value g) {
  if (!active.contains(v))
    return;
  auto [it, inserted] = grads.try_emplace(v, g);
  if (!inserted)
    it->second = AddOp::create(b, loc, it->second, g);
}

Value Differentiator::sumTo(Value g, Value like) {
  if (g.getType() == like.getType())
    return g;
  return SumToOp::create(b, loc, like.getType(), g);
}

Value Differentiator::constant(double v, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, v)));
}

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Collapses all leading dimensions: [d0, ..., dn-1, k] -> [d0*...*dn-1, k]
/// (and [k] -> [1, k]).
static Value flatten2d(OpBuilder &b, Location loc, Value v) {
  RankedTensorType t = tensorOf(v);
  int64_t k = t.getDimSize(t.getRank() - 1);
  if (t.getRank() == 1)
    return ReshapeOp::create(
        b, loc, RankedTensorType::get({1, k}, t.getElementType()), v);
  auto type = RankedTensorType::get({t.getNumElements() / k, k},
                                    t.getElementType());
  if (type == t)
    return v;
  return ReshapeOp::create(b, loc, type, v);
}

LogicalResult Differentiator::matmulGrad(MatmulOp o, Value dy) {
  // y = op(A) op(B); dA = dy op(B)^T, dB = op(A)^T dy, transposed back
  // when the operand itself was used transposed.
  bool ta = o.getTransposeA(), tb = o.getTransposeB();
  Value a = o.getA(), bm = o.getB();
  if (active.contains(a)) {
    Value da = ta ? MatmulOp::create(b, loc, bm, dy, tb, true)
                  : MatmulOp::create(b, loc, dy, bm, false, !tb);
    accumulate(a, sumTo(da, a));
  }
  if (active.contains(bm)) {
    Value db;
    if (tensorOf(bm).getRank() == 2 && tensorOf(a).getRank() > 2) {
      // A shared rank-2 operand: one GEMM over all batch rows.
      Value a2 = ta ? Value() : flatten2d(b, loc, a);
      if (!a2)
        return o->emitError("autodiff: a transposed batched operand "
                            "with a shared rank-2 operand is not "
                            "supported");
      Value dy2 = flatten2d(b, loc, dy);
      db = tb ? MatmulOp::create(b, loc, dy2, a2, true, false)
              : MatmulOp::create(b, loc, a2, dy2, true, false);
    } else {
      db = tb ? MatmulOp::create(b, loc, dy, a, true, ta)
              : MatmulOp::create(b, loc, a, dy, !ta, false);
    }
    accumulate(bm, sumTo(db, bm));
  }
  return success();
}

LogicalResult Differentiator::linearGrad(LinearOp o, Value dy) {
  // y = x W^T + b over flattened rows: dx = dy W, dW = dy^T x,
  // db = column sums of dy.
  Value x = o.getInput(), w = o.getWeight();
  Value x2 = flatten2d(b, loc, x), dy2 = flatten2d(b, loc, dy);
  if (active.contains(x)) {
    Value dx2 = MatmulOp::create(b, loc, dy2, w, false, false);
    accumulate(x,
               dx2.getType() == x.getType()
                   ? dx2
                   : ReshapeOp::create(b, loc, x.getType(), dx2).getResult());
  }
  if (active.contains(w))
    accumulate(w, MatmulOp::create(b, loc, dy2, x2, true, false));
  if (Value bias = o.getBias(); bias && active.contains(bias))
    accumulate(bias, SumToOp::create(b, loc, bias.getType(), dy2));
  return success();
}

template <typename ReductionOp>
LogicalResult Differentiator::reductionGrad(ReductionOp o, Value dy) {
  // Broadcast dy back over the reduced axes (scaled by 1/N for mean).
  RankedTensorType in = tensorOf(o.getInput());
  SmallVector<int64_t> keep(in.getShape());
  int64_t n = 1;
  ArrayAttr axes = o.getAxes();
  for (int64_t i = 0; i < in.getRank(); ++i) {
    bool reduced = axes.empty() || llvm::any_of(axes, [&](Attribute a) {
                     int64_t ax = cast<IntegerAttr>(a).getInt();
                     return (ax < 0 ? ax + in.getRank() : ax) == i;
                   });
    if (reduced) {
      n *= keep[i];
      keep[i] = 1;
    }
  }
  Value g = dy;
  auto keepType = RankedTensorType::get(keep, in.getElementType());
  if (g.getType() != keepType)
    g = ReshapeOp::create(b, loc, keepType, g);
  if (isa<MeanOp>(o.getOperation()))
    g = MulOp::create(b, loc, g,
                      constant(1.0 / double(n), in.getElementType()));
  accumulate(o.getInput(), BroadcastOp::create(b, loc, in, g));
  return success();
}

LogicalResult Differentiator::differentiate(Operation *op, Value dy) {
  loc = op->getLoc();
  auto activation = [&](StringRef kind) {
    Value x = op->getOperand(0);
    accumulate(x, ActivationGradOp::create(b, loc, dy, x, kind));
    return success();
  };

  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<AddOp>([&](AddOp o) {
        accumulate(o.getLhs(), sumTo(dy, o.getLhs()));
        accumulate(o.getRhs(), sumTo(dy, o.getRhs()));
        return success();
      })
      .Case<SubOp>([&](SubOp o) {
        accumulate(o.getLhs(), sumTo(dy, o.getLhs()));
        if (active.contains(o.getRhs()))
          accumulate(o.getRhs(), sumTo(NegOp::create(b, loc, dy), o.getRhs()));
        return success();
      })
      .Case<MulOp>([&](MulOp o) {
        if (active.contains(o.getLhs()))
          accumulate(o.getLhs(),
                     sumTo(MulOp::create(b, loc, dy, o.getRhs()), o.getLhs()));
        if (active.contains(o.getRhs()))
          accumulate(o.getRhs(),
                     sumTo(MulOp::create(b, loc, dy, o.getLhs()), o.getRhs()));
        return success();
      })
      .Case<DivOp>([&](DivOp o) {
        // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
        if (active.contains(o.getLhs()))
          accumulate(o.getLhs(),
                     sumTo(DivOp::create(b, loc, dy, o.getRhs()), o.getLhs()));
        if (active.contains(o.getRhs())) {
          Value t = DivOp::create(b, loc, MulOp::create(b, loc, dy, o),
                                  o.getRhs());
          accumulate(o.getRhs(), sumTo(NegOp::create(b, loc, t), o.getRhs()));
        }
        return success();
      })
      .Case<NegOp>([&](NegOp o) {
        accumulate(o.getInput(), NegOp::create(b, loc, dy));
        return success();
      })
// The activations: dx = activation_grad(dy, x) of the op's kind.
#define GTC_ACTIVATION_RULE(Kind, name)                                        \
  .Case<Kind##Op>([&](auto) { return activation(#name); })
          GTC_ACTIVATION_OPS(GTC_ACTIVATION_RULE)
#undef GTC_ACTIVATION_RULE
      .Case<GeluOp>([&](GeluOp o) {
        return activation(o.getApproximate() ? "gelu_tanh" : "gelu");
      })
      .Case<GluOp>([&](GluOp o) {
        accumulate(o.getInput(), GluGradOp::create(b, loc, dy, o.getInput(),
                                                   o.getKindAttr()));
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp o) {
        accumulate(o.getInput(),
                   SoftmaxGradOp::create(b, loc, dy, o, o.getAxis()));
        return success();
      })
      .Case<CastOp>([&](CastOp o) {
        accumulate(o.getInput(),
                   CastOp::create(b, loc, o.getInput().getType(), dy));
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp o) { return matmulGrad(o, dy); })
      .Case<LinearOp>([&](LinearOp o) { return linearGrad(o, dy); })
      .Case<LayerNormOp>([&](LayerNormOp o) {
        auto g = LayerNormGradOp::create(b, loc, dy, o.getInput(),
                                         o.getWeight(), o.getEpsilonAttr());
        accumulate(o.getInput(), g.getInputGrad());
        accumulate(o.getWeight(), g.getWeightGrad());
        accumulate(o.getBias(), g.getBiasGrad());
        return success();
      })
      .Case<RopeOp>([&](RopeOp o) {
        accumulate(o.getInput(),
                   RopeOp::create(b, loc, dy, o.getPositions(),
                                  o.getThetaAttr(), o.getInterleavedAttr(),
                                  b.getBoolAttr(!o.getInverse()),
                                  o.getRotatedAttr()));
        return success();
      })
      .Case<DropoutOp>([&](DropoutOp o) {
        accumulate(o.getInput(), DropoutOp::create(b, loc, dy, o.getPAttr(),
                                                   o.getSaltAttr()));
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp o) {
        auto g = RmsNormGradOp::create(b, loc, dy, o.getInput(), o.getWeight(),
                                       o.getEpsilonAttr());
        accumulate(o.getInput(), g.getInputGrad());
        accumulate(o.getWeight(), g.getWeightGrad());
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp o) {
        auto g = AttentionGradOp::create(b, loc, dy, o.getInputs(),
                                         o.getResult(), o.getLse(),
                                         o.getHeadsAttr(), o.getCausalAttr());
        for (auto [x, dx] : llvm::zip(o.getInputs(), g.getResults()))
          accumulate(x, dx);
        return success();
      })
      .Case<EmbeddingOp>([&](EmbeddingOp o) {
        accumulate(o.getTable(),
                   EmbeddingGradOp::create(b, loc, o.getTable().getType(), dy,
                                           o.getIndices()));
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp o) {
        accumulate(o.getLogits(), CrossEntropyGradOp::create(
                                      b, loc, dy, o.getLogits(), o.getLabels()));
        return success();
      })
      .Case<SumOp, MeanOp>([&](auto o) { return reductionGrad(o, dy); })
      .Case<TransposeOp>([&](TransposeOp o) {
        SmallVector<int64_t> inverse(o.getPermutation().size());
        for (auto [i, a] : llvm::enumerate(o.getPermutation()))
          inverse[cast<IntegerAttr>(a).getInt()] = i;
        accumulate(o.getInput(),
                   TransposeOp::create(b, loc, dy, b.getI64ArrayAttr(inverse)));
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp o) {
        accumulate(o.getInput(),
                   ReshapeOp::create(b, loc, o.getInput().getType(), dy));
        return success();
      })
      .Case<PadOp>([&](PadOp o) {
        // The padding is constant: its gradient is dropped.
        accumulate(o.getInput(), SliceOp::create(b, loc, o.getInput().getType(),
                                                 dy, o.getOffsetsAttr()));
        return success();
      })
      .Case<SliceOp>([&](SliceOp o) {
        accumulate(o.getInput(), PadOp::create(b, loc, o.getInput().getType(),
                                               dy, o.getOffsetsAttr()));
        return success();
      })
      .Case<BroadcastOp>([&](BroadcastOp o) {
        accumulate(o.getInput(), sumTo(dy, o.getInput()));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitError("gt-autodiff: no gradient rule for '")
               << other->getName() << "'";
      });
}

LogicalResult Differentiator::run(Value loss) {
  // Forward sweep: which values depend on a parameter.
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator()) {
    ops.push_back(&op);
    if (isa<ParamOp>(op)) {
      active.insert(op.getResult(0));
      continue;
    }
    if (isa<PositionsOp, ConstantOp, InputOp, LabelOp>(op))
      continue;
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value r : op.getResults())
        if (isa<FloatType>(tensorOf(r).getElementType()))
          active.insert(r);
  }
  if (!active.contains(loss))
    return func.emitError("gt-autodiff: the loss of '")
           << func.getSymName() << "' does not depend on any parameter";

  // Backward sweep.
  Value seed = constant(1.0, b.getF32Type());
  seed.getDefiningOp()->setAttr(kLossGradAttrName, b.getUnitAttr());
  grads[loss] = seed;
  // Gradients flow through each op's first result (attention's second,
  // its log-sum-exp, only feeds attention_grad).
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() == 0 || isa<ParamOp>(op))
      continue;
    auto it = grads.find(op->getResult(0));
    if (it == grads.end())
      continue;
    if (failed(differentiate(op, it->second)))
      return failure();
  }

  // One gradient per parameter, zero when the loss does not use it.
  for (Operation *op : ops) {
    auto param = dyn_cast<ParamOp>(op);
    if (!param)
      continue;
    loc = param.getLoc();
    Value g = grads.lookup(param.getResult());
    if (!g)
      g = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(param.getType(),
                                 b.getFloatAttr(param.getType().getElementType(),
                                                0.0)));
    GradientOp::create(b, loc, param.getName(), g);
  }
  return success();
}

struct GtAutodiffPass
    : public mlir::gt::impl::GtAutodiffPassBase<GtAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> models;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kModelAttrName))
        models.push_back(func);
    SymbolTable symbols(module);
    for (func::FuncOp model : models) {
      WalkResult dynamic = model.walk([&](Operation *op) {
        for (Type t : op->getResultTypes())
          if (auto rt = dyn_cast<RankedTensorType>(t);
              rt && !rt.hasStaticShape()) {
            op->emitError("gt-autodiff needs static shapes, got ")
                << formatType(rt)
                << "; run gt-shape-inference=batch=N first";
            return WalkResult::interrupt();
          }
        return WalkResult::advance();
      });
      if (dynamic.wasInterrupted())
        return signalPassFailure();

      func::FuncOp step = model.clone();
      step.setSymName((model.getSymName() + "_step").str());
      step->removeAttr(kModelAttrName);
      step->setAttr(kStepAttrName, UnitAttr::get(&getContext()));
      symbols.insert(step, std::next(Block::iterator(model)));
      auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
      if (failed(Differentiator(step, ret).run(ret.getOperand(0))))
        return signalPassFailure();
    }
  }
};

} // namespace
