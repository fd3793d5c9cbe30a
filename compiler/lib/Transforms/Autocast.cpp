//===- Autocast.cpp - Per-op precision, PyTorch-AMP style -----------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTAUTOCASTPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// Where an op computes under autocast.
enum class Policy { Low, Fp32, Follow };

/// The policy: each op's autocast trait (GTTraits.td) decides.
Policy policyOf(Operation *op) {
  if (op->hasTrait<OpTrait::gt::AutocastLow>())
    return Policy::Low;
  if (op->hasTrait<OpTrait::gt::AutocastF32>())
    return Policy::Fp32;
  return Policy::Follow;
}

/// The registered ops carrying an autocast trait, as "gt.a gt.b ...".
template <template <typename> class Trait>
std::string opsWith(MLIRContext *ctx) {
  SmallVector<StringRef> found;
  for (RegisteredOperationName name : ctx->getRegisteredOperations())
    if (name.getDialectNamespace() == "gt" && name.hasTrait<Trait>())
      found.push_back(name.getStringRef());
  llvm::sort(found);
  return llvm::join(found, " ");
}

void printPolicyTable(MLIRContext *ctx, llvm::raw_ostream &os) {
  os << "gt-autocast policy\n"
        "  low (bf16/fp16, f32 accumulation): "
     << opsWith<OpTrait::gt::AutocastLow>(ctx)
     << "\n  fp32:                              "
     << opsWith<OpTrait::gt::AutocastF32>(ctx)
     << "\n  follow (widest float operand):     every other op\n"
        "  parameters: f32 master weights, one cast to the low type each\n";
}

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// Rewrites one function, op by op in order.
class Caster {
public:
  Caster(func::FuncOp func, Type low) : func(func), low(low) {}

  LogicalResult run() {
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front().without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return failure();
    return success();
  }

private:
  /// `v` in element type `to`, through one cast per (value, type).
  Value castTo(Value v, Type to) {
    if (elementOf(v) == to)
      return v;
    auto key = std::make_pair(v, to);
    if (Value c = casts.lookup(key))
      return c;
    OpBuilder b(func.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func.getBody().front());
    auto type = cast<RankedTensorType>(v.getType()).clone(to);
    Value c = CastOp::create(b, v.getLoc(), type, v);
    casts[key] = c;
    return c;
  }

  LogicalResult visit(Operation *op) {
    if (op->hasTrait<OpTrait::gt::Leaf>() || isa<CastOp>(op))
      return success(); // reads nothing to cast, or casts already
    Policy policy = policyOf(op);
    Type f32 = Float32Type::get(op->getContext());
    // Operands that take the op's precision (not f32 statistics).
    MutableArrayRef<OpOperand> retyped = op->getOpOperands();
    if (op->hasTrait<OpTrait::gt::F32Statistics>())
      retyped = retyped.drop_back();
    Type target;
    if (policy == Policy::Low) {
      target = low;
    } else if (policy == Policy::Fp32) {
      target = f32;
    } else {
      // The widest float operand: f32 if any operand is f32.
      for (OpOperand &use : retyped)
        if (isFloatTensor(use.get()) &&
            (!target || elementOf(use.get()).isF32()))
          target = elementOf(use.get());
    }
    if (!target)
      return success();
    for (OpOperand &use : retyped) {
      Value v = use.get();
      if (isFloatTensor(v) && elementOf(v) != target)
        use.set(castTo(v, target));
    }
    // The results follow the (possibly new) operand types.
    SmallVector<Type> types;
    if (auto iface = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(iface.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), types)))
        return failure();
    } else if (isa<ReshapeOp, BroadcastOp, PadOp, SliceOp>(op)) {
      types.push_back(cast<RankedTensorType>(op->getResult(0).getType())
                          .clone(target));
    } else {
      return op->emitError("gt-autocast cannot retype '")
             << op->getName() << "'";
    }
    for (auto [r, t] : llvm::zip(op->getResults(), types)) {
      Type old = r.getType();
      r.setType(t);
      // Keep every use type-correct: users see the new type; a value that
      // leaves the function (the loss) goes back to its declared type.
      if (old != t)
        for (OpOperand &use : llvm::make_early_inc_range(r.getUses()))
          if (isa<func::ReturnOp>(use.getOwner())) {
            OpBuilder b(use.getOwner());
            use.set(CastOp::create(b, r.getLoc(), old, r));
          }
    }
    return success();
  }

  func::FuncOp func;
  Type low;
  DenseMap<std::pair<Value, Type>, Value> casts;
};

struct GtAutocastPass
    : public mlir::gt::impl::GtAutocastPassBase<GtAutocastPass> {
  using GtAutocastPassBase::GtAutocastPassBase;

  /// A parameter declared in a 16-bit type is trained as an f32 master
  /// weight (the optimizer's precision) used through one cast to its type,
  /// whatever the precision: what a model declares, it trains.
  static void masterWeights(func::FuncOp func) {
    OpBuilder b(func.getContext());
    for (ParamOp p : llvm::make_early_inc_range(func.getOps<ParamOp>())) {
      RankedTensorType type = p.getType();
      if (type.getElementType().isF32())
        continue;
      p.getResult().setType(type.clone(b.getF32Type()));
      b.setInsertionPointAfter(p);
      auto cast = CastOp::create(b, p.getLoc(), type, p.getResult());
      p.getResult().replaceAllUsesExcept(cast.getResult(), cast);
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (printPolicy)
      printPolicyTable(&getContext(), llvm::errs());
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kModelAttrName))
        masterWeights(func);
    std::string mode = precision;
    if (mode.empty())
      for (auto train : module.getOps<TrainOp>())
        if (auto p = train->getAttrOfType<StringAttr>("precision"))
          mode = p.str();
    if (mode.empty() || mode == "fp32" || mode == "tf32")
      return;
    Type low;
    if (mode == "bf16")
      low = BFloat16Type::get(&getContext());
    else if (mode == "fp16")
      low = Float16Type::get(&getContext());
    else {
      module.emitError("gt-autocast: unknown precision '")
          << mode << "'; expected fp32, tf32, bf16 or fp16";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kModelAttrName) && failed(Caster(func, low).run()))
        return signalPassFailure();
  }
};

} // namespace
