//===- Pipeline.cpp - From a checked module to runtime plans --------------===//

#include "gtc/Plan/Pipeline.h"
#include "gtc/Plan/PlanBuilder.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include <algorithm>

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
  if (differentiate && options.fuse)
    pm.addPass(createGtPackProjectionsPass());
  GtAutocastPassOptions autocast;
  autocast.precision = options.precision;
  pm.addPass(createGtAutocastPass(autocast));
  if (options.pad) {
    GtPadDimsPassOptions pad;
    if (options.padAll)
      pad.minMacs = 0;
    pm.addPass(createGtPadDimsPass(pad));
  }
  if (differentiate) {
    pm.addPass(createGtAutodiffPass());
    GtCheckpointPassOptions checkpoint;
    // (-1, not 0: the pass reads the train block at 0, and these options
    // are resolved already)
    checkpoint.every = options.checkpointEvery > 0 ? options.checkpointEvery
                                                   : -1;
    checkpoint.groups = options.checkpointGroups;
    checkpoint.cheapGroups = options.checkpointCheapGroups;
    if (auto option = dyn_cast_or_null<NameLoc>(options.checkpointFrom))
      checkpoint.from = option.getName().str();
    pm.addPass(createGtCheckpointPass(checkpoint));
  }
  if (differentiate && options.fuse)
    pm.addNestedPass<func::FuncOp>(createGtFusePass());
  if (differentiate && options.bucketBytes > 0) {
    GtBucketPassOptions bucket;
    bucket.bucketBytes = options.bucketBytes;
    pm.addNestedPass<func::FuncOp>(createGtBucketPass(bucket));
  }
  if (failed(pm.run(*clone)))
    return failure();
  return clone;
}

/// The plan of `func`, with the precision it was compiled for.
FailureOr<rt::Plan> finishPlan(func::FuncOp func, ModuleOp lowered,
                               const CompileOptions &options) {
  rt::StartupPhase phase("planning");
  // The classifier's chunks: 1 GiB, or 512 MiB where gradient checkpointing
  // trades time for memory. GPT-2 124M at batch 16 (bf16 logits of 1.65 GB)
  // measured on an H100 (test/bench/NOTES.md, forty-fourth session), step
  // and peak: 4 chunks (512 MiB) 30.78, 30.74 ms, 7530 MiB; 2 chunks (1 GiB)
  // 30.47, 30.52 ms, 7922 MiB; 1 chunk 30.34, 30.45 ms, 8708 MiB (torch.
  // compile's peak 8.44 GiB). With every block checkpointed 1 GiB would
  // raise the predicted peak from 2986 to 3300 MiB. GTC_CLASSIFIER_CHUNK_BYTES
  // overrides it, for tests (test/gpu/run.sh's many small chunks).
  int64_t chunkBytes =
      options.classifierChunkBytes > 0
          ? options.classifierChunkBytes
          : int64_t(options.checkpointEvery > 0 ? 512 : 1024) << 20;
  if (const char *env = std::getenv("GTC_CLASSIFIER_CHUNK_BYTES"))
    chunkBytes = std::max<int64_t>(1, std::strtoll(env, nullptr, 10));
  FailureOr<rt::Plan> plan =
      gtc::buildPlan(func, findTrain(lowered), /*views=*/options.fuse,
                     options.bucketBytes > 0 ? options.shardGradients : 1,
                     options.gradientsApart, chunkBytes);
  if (succeeded(plan) && !rt::parse(options.precision, plan->config.precision))
    return func.emitError("unknown precision '")
           << options.precision << "'; expected fp32, tf32, bf16 or fp16";
  return plan;
}

} // namespace

namespace {

/// --pad-all and --no-pad choose how 16-bit GEMMs are padded; in another
/// precision they would do nothing, so a training step (its plan, or
/// --emit=step) refuses them.
LogicalResult checkPadding(Operation *at, const CompileOptions &options) {
  if (!options.padAll && options.pad)
    return success();
  rt::Precision precision;
  if (!rt::parse(options.precision, precision) ||
      precision == rt::Precision::Bf16 || precision == rt::Precision::Fp16)
    return success(); // (an unknown precision is finishPlan's error)
  const char *flag = options.padAll ? "--pad-all" : "--no-pad";
  return at->emitError()
         << flag
         << " applies to 16-bit GEMMs (gt-pad-dims pads no other), and this "
            "step computes in "
         << options.precision << "; give --precision bf16 or fp16, or drop "
         << flag;
}

FailureOr<rt::Plan> compileOnce(ModuleOp module,
                                const CompileOptions &options) {
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      specialize(module, options, /*differentiate=*/true);
  if (failed(lowered))
    return failure();
  func::FuncOp step = findFunc(**lowered, kStepAttrName);
  if (!step)
    return module.emitError("the module has no model to train");
  if (failed(checkPadding(step, options)))
    return failure();
  return finishPlan(step, **lowered, options);
}

/// A size for messages: whole MiB, or KiB below one MiB (a budget of 1KiB
/// is not "0 MiB"), or bytes below one KiB.
std::string mib(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  if (bytes < (1 << 20))
    return std::to_string((bytes + 512) >> 10) + " KiB";
  return std::to_string((bytes + (1 << 19)) >> 20) + " MiB";
}

/// `checkpoint = auto(budget: SIZE)`: no recomputation if the plan fits,
/// else the fewest groups of one repeat iteration, in program order, that
/// recompute their cheap values (selective checkpointing), else all of
/// those and the fewest groups recomputing everything, whose plan's
/// predicted peak fits (a search over plans: the peak depends on liveness,
/// not on a sum of sizes). An unreachable budget is an error that names the
/// smallest peak and the largest batch that fit. `options` ends with the
/// checkpoint settings of the plan returned.
FailureOr<rt::Plan> compileForBudget(ModuleOp module, CompileOptions &options,
                                     Location where, int64_t budget) {
  auto peak = [](const rt::Plan &p) { return p.memory().peak(); };
  options.checkpointEvery = -1;
  FailureOr<rt::Plan> none = compileOnce(module, options);
  if (failed(none) || peak(*none) <= budget)
    return none;
  // Half the classifier's chunks before any recomputation (they cost GPT-2
  // 124M 1% of its step, finishPlan).
  if (options.classifierChunkBytes == 0) {
    CompileOptions smaller = options;
    smaller.classifierChunkBytes = int64_t(512) << 20;
    FailureOr<rt::Plan> p = compileOnce(module, smaller);
    if (failed(p))
      return failure();
    if (peak(*p) <= budget) {
      options = smaller;
      return p;
    }
  }
  // The largest batch that fits `budget`, with every repeat iteration
  // recomputed or none, for an error (none fits: its error is this one's).
  auto largest = [&](bool checkpointing) {
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    CompileOptions o = options;
    o.checkpointEvery = -1;
    return gtc::largestBatch(module, o, budget, checkpointing);
  };
  auto sayLargest = [](InFlightDiagnostic &diag, FailureOr<int64_t> fits) {
    if (succeeded(fits))
      diag << "the largest batch that fits is " << *fits;
    else
      diag << "no batch fits; raise the budget";
  };
  options.checkpointEvery = 1;
  options.checkpointGroups = 0;
  options.checkpointCheapGroups = -1;
  FailureOr<rt::Plan> cheap;
  {
    // The one error gt-checkpoint can give here: no repeat loop.
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    cheap = compileOnce(module, options);
  }
  if (failed(cheap)) {
    InFlightDiagnostic diag =
        emitError(where, "checkpoint = auto(budget: ")
        << mib(budget) << ") cannot be met at batch " << options.batch
        << ": the predicted peak is " << mib(peak(*none))
        << ", and this model has no repeat loop whose iterations could be "
           "recomputed; ";
    sayLargest(diag, largest(false));
    return failure();
  }
  // The smallest count (of options.checkpointGroups or CheapGroups) whose
  // plan fits, where -1 (all) does: doubling, then bisection (the peak
  // falls as groups are added).
  auto smallest = [&](int64_t &count,
                      FailureOr<rt::Plan> all) -> FailureOr<rt::Plan> {
    int64_t lo = 0, hi = 1;
    FailureOr<rt::Plan> best = std::move(all);
    for (;; hi *= 2) {
      count = hi;
      FailureOr<rt::Plan> p = compileOnce(module, options);
      if (failed(p))
        return failure();
      if (peak(*p) <= budget) {
        best = std::move(p);
        break;
      }
      lo = hi; // (at the number of groups or more, each is recomputed,
               // which fits)
    }
    while (lo + 1 < hi) {
      count = (lo + hi) / 2;
      FailureOr<rt::Plan> p = compileOnce(module, options);
      if (failed(p))
        return failure();
      if (peak(*p) <= budget) {
        hi = count;
        best = std::move(p);
      } else {
        lo = count;
      }
    }
    count = hi; // best's
    return best;
  };
  if (peak(*cheap) <= budget)
    return smallest(options.checkpointCheapGroups, std::move(cheap));
  options.checkpointGroups = -1;
  FailureOr<rt::Plan> all = compileOnce(module, options);
  if (failed(all))
    return failure();
  if (peak(*all) > budget) {
    InFlightDiagnostic diag =
        emitError(where, "checkpoint = auto(budget: ")
        << mib(budget) << ") cannot be met at batch " << options.batch
        << ": the smallest predicted peak is " << mib(peak(*all))
        << ", every repeat iteration recomputed (" << mib(peak(*none))
        << " without checkpointing); ";
    sayLargest(diag, largest(true));
    return failure();
  }
  return smallest(options.checkpointGroups, std::move(all));
}

/// Where a setting of `options` was given: `from` (the train block), else
/// the module (a run option).
Location settingLoc(ModuleOp module, LocationAttr from) {
  return from ? Location(from) : module.getLoc();
}

} // namespace

std::optional<int64_t> gtc::fixedBatch(ModuleOp module) {
  func::FuncOp model = findFunc(module, kModelAttrName);
  if (!model)
    return std::nullopt;
  std::optional<int64_t> rows;
  WalkResult walk = model.walk([&](Operation *op) {
    if (!isa<InputOp, LabelOp>(op))
      return WalkResult::advance();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (!type.hasStaticShape() || type.getRank() == 0)
      return WalkResult::interrupt();
    if (!rows)
      rows = type.getDimSize(0);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return rows;
}

bool gtc::checkpointRequested(const CompileOptions &options) {
  return options.checkpointEvery > 0 || options.checkpointBudget != 0;
}

int64_t gtc::memoryBudget(const CompileOptions &options) {
  return options.deviceMemory / 20 * 19;
}

int64_t gtc::checkpointBudget(const CompileOptions &options) {
  return options.checkpointBudget >= 0 ? options.checkpointBudget
                                       : memoryBudget(options);
}

namespace {

/// compileStep's plan; `options` ends with the checkpoint settings it was
/// compiled with (a budget's search made explicit).
FailureOr<rt::Plan> resolve(ModuleOp module, CompileOptions &options) {
  Location where = settingLoc(module, options.checkpointFrom);
  if (int64_t budget = gtc::checkpointBudget(options); budget > 0)
    return compileForBudget(module, options, where, budget);
  if (options.checkpointBudget != 0)
    return emitError(where,
                     "checkpoint = auto without a budget plans for the free "
                     "memory of the device it runs on, which is not known "
                     "here (a dry run for a GPU, or gtc compile); give "
                     "auto(budget: SIZE), every(n) or none");
  return compileOnce(module, options);
}

/// resolve()'s plan with gradient accumulation: compiled at the micro-batch
/// and run batch / micro-batch times a step. `micro_batch = auto` takes the
/// largest divisor of the batch whose plan, the gradients' accumulator
/// included, fits memoryBudget() (the whole batch when it fits: no
/// accumulation). `options` ends with the plan's settings, the batch still
/// the global one.
FailureOr<rt::Plan> accumulate(ModuleOp module, CompileOptions &options) {
  const int64_t batch = options.batch;
  const int64_t micro = options.microBatch;
  Location where = settingLoc(module, options.microBatchFrom);
  if (micro == batch)
    emitWarning(where, "micro_batch = ")
        << micro << " is the whole batch each step computes"
        << " (a process's share, with data parallelism): nothing to "
           "accumulate; give a divisor smaller than "
        << batch << ", or drop micro_batch";
  if (micro == 0 || micro == batch)
    return resolve(module, options);
  if (micro > 0) {
    if (batch % micro != 0)
      return emitError(where, "micro_batch = ")
             << micro << " does not divide the batch of " << batch
             << "; give a divisor of it (or auto)";
    // gt-bucket's all-reduces stay: the executors run them in the last
    // micro-batch, on the accumulated mean of each bucket.
    options.batch = micro;
    FailureOr<rt::Plan> plan = resolve(module, options);
    options.batch = batch;
    if (succeeded(plan))
      plan->microBatches = batch / micro;
    return plan;
  }
  int64_t budget = memoryBudget(options);
  if (budget <= 0)
    return emitError(where, "micro_batch = auto plans for the free memory "
                            "of the device it runs on, which is not known "
                            "here (a dry run for a GPU, or gtc compile); give "
                            "micro_batch = N");
  int64_t smallest = 0;
  for (int64_t m = batch; m >= 1; --m) {
    if (batch % m != 0)
      continue;
    CompileOptions o = options;
    o.batch = m;
    FailureOr<rt::Plan> plan;
    {
      // A micro-batch too large for a checkpoint budget is one to skip.
      ScopedDiagnosticHandler quiet(module.getContext(),
                                    [](Diagnostic &) { return success(); });
      plan = resolve(module, o);
    }
    if (failed(plan))
      continue;
    plan->microBatches = batch / m;
    smallest = plan->memory().peak();
    if (smallest <= budget) {
      options = o;
      options.batch = batch;
      return plan;
    }
  }
  if (smallest == 0) // not one plan compiled: say why
    return resolve(module, options);
  return emitError(where, "micro_batch = auto: no micro-batch of the batch of ")
         << batch << " fits " << mib(budget) << " (95% of the free memory): "
         << "one row needs " << mib(smallest);
}

} // namespace

FailureOr<rt::Plan> gtc::compileStep(ModuleOp module,
                                     const CompileOptions &options) {
  CompileOptions o = options;
  return accumulate(module, o);
}

FailureOr<OwningOpRef<ModuleOp>>
gtc::lowerToStep(ModuleOp module, const CompileOptions &options) {
  CompileOptions o = options;
  // A checkpoint budget and an automatic micro-batch are met by planning:
  // search first, then lower with the settings found (at the micro-batch).
  if (o.microBatch != 0) {
    FailureOr<rt::Plan> plan = accumulate(module, o);
    if (failed(plan))
      return failure();
    o.batch = plan->batch;
  } else if (o.checkpointBudget != 0) {
    if (failed(resolve(module, o)))
      return failure();
  }
  FailureOr<OwningOpRef<ModuleOp>> step =
      specialize(module, o, /*differentiate=*/true);
  if (succeeded(step)) {
    if (func::FuncOp f = findFunc(**step, kStepAttrName);
        f && failed(checkPadding(f, o)))
      return failure();
  }
  return step;
}

FailureOr<int64_t> gtc::largestBatch(ModuleOp module,
                                     const CompileOptions &options,
                                     int64_t budget, bool &checkpointing,
                                     int64_t limit) {
  CompileOptions o = options;
  o.batch = 1;
  FailureOr<rt::Plan> first = failure();
  if (checkpointing) {
    o.checkpointEvery = 1;
    o.checkpointGroups = -1;
    o.checkpointCheapGroups = 0;
    o.checkpointBudget = 0;
    // A model without repeat loops has nothing to recompute (gt-checkpoint's
    // one error here): its batch is found without.
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    if (failed(first = compileOnce(module, o))) {
      checkpointing = false;
      o.checkpointEvery = -1;
    }
  }
  if (failed(first) && failed(first = compileOnce(module, o)))
    return failure();
  int64_t smallest = first->memory().peak();
  if (smallest > budget)
    return module.emitError("no batch fits ")
           << mib(budget) << ": batch 1 needs " << mib(smallest)
           << (checkpointing ? " with every repeat iteration recomputed" : "");
  auto fits = [&](int64_t batch) -> FailureOr<bool> {
    o.batch = batch;
    FailureOr<rt::Plan> plan = compileOnce(module, o);
    if (failed(plan))
      return failure();
    return plan->memory().peak() <= budget;
  };
  // Doubling up to the limit, then bisection: the peak grows with the
  // batch.
  constexpr int64_t kMaxBatch = int64_t(1) << 24;
  const int64_t most = limit > 0 ? std::min(limit, kMaxBatch) : kMaxBatch;
  int64_t lo = 1, hi = 2;
  for (;; hi *= 2) {
    if (hi >= most) {
      if (lo == most)
        return lo;
      hi = most;
    }
    FailureOr<bool> ok = fits(hi);
    if (failed(ok))
      return failure();
    if (!*ok)
      break;
    lo = hi;
    if (lo == most)
      return lo;
  }
  while (lo + 1 < hi) {
    int64_t mid = (lo + hi) / 2;
    FailureOr<bool> ok = fits(mid);
    if (failed(ok))
      return failure();
    (*ok ? lo : hi) = mid;
  }
  return lo;
}

FailureOr<rt::Plan> gtc::compileDecode(ModuleOp module,
                                       const CompileOptions &options,
                                       int64_t window, bool cache) {
  CompileOptions unpadded = options;
  unpadded.pad = false;
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      specialize(module, unpadded, /*differentiate=*/false);
  if (failed(lowered))
    return failure();
  func::FuncOp model = findFunc(**lowered, kModelAttrName);
  if (!model)
    return module.emitError("the module has no model to sample from");
  // On the function alone: gt.train's reference to it would not verify
  // once it is a gt.decode.
  PassManager pm(module.getContext(), func::FuncOp::getOperationName());
  GtDecodePassOptions decode;
  decode.window = window;
  decode.cache = cache;
  pm.addPass(createGtDecodePass(decode));
  if (options.fuse)
    pm.addPass(createGtFusePass());
  if (failed(pm.run(model)))
    return failure();
  return finishPlan(model, **lowered, unpadded);
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
  // Evaluation runs without dropout.
  model.walk([](DropoutOp d) {
    d.replaceAllUsesWith(d.getInput());
    d.erase();
  });
  // Return the accuracy too when the loss is a cross-entropy of logits.
  auto ret = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  if (auto cast = loss.getDefiningOp<CastOp>())
    loss = cast.getInput();
  model->removeAttr(kModelAttrName);
  if (auto ce = loss.getDefiningOp<CrossEntropyOp>()) {
    OpBuilder b(ret);
    // Of the 16-bit logits where gt-autocast widens them (the same argmax):
    // then the f32 logits need not exist (gt-fuse's loss region).
    Value logits = ce.getLogits();
    if (auto widen = logits.getDefiningOp<CastOp>();
        widen && isa<FloatType>(getElementTypeOrSelf(widen.getInput())))
      logits = widen.getInput();
    Value acc = AccuracyOp::create(b, ce.getLoc(), logits, ce.getLabels());
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
