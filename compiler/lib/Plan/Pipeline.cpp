//===- Pipeline.cpp - From a checked module to runtime plans --------------===//

#include "gtc/Plan/Pipeline.h"
#include "gtc/Plan/PlanBuilder.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::gt;
namespace rt = gtc::rt;

namespace {

func::FuncOp findFunc(ModuleOp module, StringRef attr) {
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(attr))
      return f;
  return nullptr;
}

TrainOp findTrain(ModuleOp module) {
  auto ops = module.getOps<TrainOp>();
  return ops.empty() ? TrainOp() : *ops.begin();
}

/// Clones the module and runs shape inference at `batch` (and more passes).
FailureOr<OwningOpRef<ModuleOp>> specialize(ModuleOp module, int64_t batch,
                                            bool differentiate) {
  if (batch < 1)
    return module.emitError("the batch size must be >= 1, got ") << batch;
  OwningOpRef<ModuleOp> clone(module.clone());
  PassManager pm(module.getContext());
  GtShapeInferencePassOptions shape;
  shape.batch = batch;
  pm.addPass(createGtShapeInferencePass(shape));
  pm.addPass(createCanonicalizerPass());
  if (differentiate)
    pm.addPass(createGtAutodiffPass());
  if (failed(pm.run(*clone)))
    return failure();
  return clone;
}

} // namespace

FailureOr<OwningOpRef<ModuleOp>> gtc::lowerToStep(ModuleOp module,
                                                  int64_t batch) {
  return specialize(module, batch, /*differentiate=*/true);
}

FailureOr<rt::Plan> gtc::compileStep(ModuleOp module, int64_t batch) {
  FailureOr<OwningOpRef<ModuleOp>> lowered = lowerToStep(module, batch);
  if (failed(lowered))
    return failure();
  func::FuncOp step = findFunc(**lowered, kStepAttrName);
  if (!step)
    return module.emitError("the module has no model to train");
  return buildPlan(step, findTrain(**lowered));
}

FailureOr<rt::Plan> gtc::compileEval(ModuleOp module, int64_t batch) {
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      specialize(module, batch, /*differentiate=*/false);
  if (failed(lowered))
    return failure();
  func::FuncOp model = findFunc(**lowered, kModelAttrName);
  if (!model)
    return module.emitError("the module has no model to evaluate");
  // Return the accuracy too when the loss is a cross-entropy of logits.
  auto ret = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  if (auto cast = loss.getDefiningOp<CastOp>())
    loss = cast.getInput();
  model->removeAttr(kModelAttrName);
  if (auto ce = loss.getDefiningOp<CrossEntropyOp>()) {
    OpBuilder b(ret);
    Value acc = AccuracyOp::create(b, ce.getLoc(), ce.getLogits(),
                                   ce.getLabels());
    ret->insertOperands(1, acc);
    model.setFunctionType(FunctionType::get(
        module.getContext(), {}, ret.getOperandTypes()));
  }
  FailureOr<rt::Plan> plan = buildPlan(model, findTrain(**lowered));
  if (succeeded(plan))
    plan->kind = "eval";
  return plan;
}
