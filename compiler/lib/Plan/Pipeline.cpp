//===- Pipeline.cpp - From a checked module to runtime plans --------------===//

#include "gtc/Plan/Pipeline.h"
#include "gtc/Plan/PlanBuilder.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::gt;
using gtc::CompileOptions;
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

/// Clones the module and runs shape inference at the batch size (and more
/// passes).
FailureOr<OwningOpRef<ModuleOp>> specialize(ModuleOp module,
                                            const CompileOptions &options,
                                            bool differentiate) {
  if (options.batch < 1)
    return module.emitError("the batch size must be >= 1, got ")
           << options.batch;
  rt::StartupPhase phase("passes");
  OwningOpRef<ModuleOp> clone(module.clone());
  PassManager pm(module.getContext());
  GtShapeInferencePassOptions shape;
  shape.batch = options.batch;
  pm.addPass(createGtShapeInferencePass(shape));
  pm.addPass(createCanonicalizerPass());
  GtAutocastPassOptions autocast;
  autocast.precision = options.precision;
  pm.addPass(createGtAutocastPass(autocast));
  if (options.pad)
    pm.addPass(createGtPadDimsPass());
  if (differentiate) {
    pm.addPass(createGtAutodiffPass());
    pm.addPass(createGtCheckpointPass());
  }
  if (differentiate && options.fuse)
    pm.addNestedPass<func::FuncOp>(createGtFusePass());
  if (failed(pm.run(*clone)))
    return failure();
  return clone;
}

/// The plan of `func`, with the precision it was compiled for.
FailureOr<rt::Plan> finishPlan(func::FuncOp func, ModuleOp lowered,
                               const CompileOptions &options) {
  rt::StartupPhase phase("planning");
  FailureOr<rt::Plan> plan =
      gtc::buildPlan(func, findTrain(lowered), /*views=*/options.fuse);
  if (succeeded(plan) && !options.precision.empty() &&
      !rt::parse(options.precision, plan->config.precision))
    return func.emitError("unknown precision '")
           << options.precision << "'; expected fp32, tf32, bf16 or fp16";
  return plan;
}

} // namespace

FailureOr<OwningOpRef<ModuleOp>>
gtc::lowerToStep(ModuleOp module, const CompileOptions &options) {
  return specialize(module, options, /*differentiate=*/true);
}

FailureOr<rt::Plan> gtc::compileStep(ModuleOp module,
                                     const CompileOptions &options) {
  FailureOr<OwningOpRef<ModuleOp>> lowered = lowerToStep(module, options);
  if (failed(lowered))
    return failure();
  func::FuncOp step = findFunc(**lowered, kStepAttrName);
  if (!step)
    return module.emitError("the module has no model to train");
  return finishPlan(step, **lowered, options);
}

FailureOr<rt::Plan> gtc::compileEval(ModuleOp module,
                                     const CompileOptions &options) {
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      specialize(module, options, /*differentiate=*/false);
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
  if (options.fuse) {
    // On the function alone: it is no longer a gt.model (it returns the
    // accuracy too), so gt.train's reference to it would not verify.
    PassManager pm(module.getContext(), func::FuncOp::getOperationName());
    pm.addPass(createGtFusePass());
    if (failed(pm.run(model)))
      return failure();
  }
  FailureOr<rt::Plan> plan = finishPlan(model, **lowered, options);
  if (succeeded(plan))
    plan->kind = "eval";
  return plan;
}
