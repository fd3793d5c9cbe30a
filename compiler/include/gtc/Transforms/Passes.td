//===- Passes.td - Passes of gtc -----------------------------*- tablegen -*-===//

#ifndef GTC_TRANSFORMS_PASSES
#define GTC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def GtShapeInferencePass : Pass<"gt-shape-inference", "mlir::ModuleOp"> {
  let summary = "Fixes the batch dimension and re-infers every result type";
  let description = [{
    Replaces the symbolic (dynamic) dimensions of every `gt.input` and
    `gt.label` by `batch`, then walks each model in order and recomputes the
    result type of every operation: through InferTypeOpInterface where the op
    implements it, and from the operand for `gt.cast`, `gt.reshape` and
    `gt.broadcast`. The model's function type follows its return value.
    With `batch=0` (the default) only the re-inference runs, which checks
    that the printed types are the inferred ones.

    Example: `gtc-opt --gt-shape-inference=batch=64` turns
    `gt.input "x" : tensor<?x784xf32>` into `tensor<64x784xf32>` and every
    tensor computed from it accordingly.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "size given to symbolic dimensions (0: keep them symbolic)">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtAutodiffPass : Pass<"gt-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the training step of each model by reverse-mode differentiation";
  let description = [{
    For every function with the `gt.model` attribute, adds a function
    `<model>_step` with the `gt.step` attribute: a copy of the forward graph,
    then the backward graph in reverse order, ending in one `gt.gradient` per
    parameter. Gradients of values used several times are summed (so a tied
    weight such as GPT-2's `wte` gets one gradient); broadcasting is undone
    with `gt.sum_to`; a parameter the loss does not depend on gets a zero
    gradient. The optimizer update is not part of the IR: the plan applies it
    to the contiguous gradient buffer.

    Every shape must be static: run `gt-shape-inference=batch=N` first.

    Example: `gtc-opt --gt-shape-inference=batch=64 --gt-autodiff`.
  }];
  let dependentDialects = ["mlir::gt::GTDialect", "mlir::func::FuncDialect"];
}

#endif // GTC_TRANSFORMS_PASSES
