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

#endif // GTC_TRANSFORMS_PASSES
