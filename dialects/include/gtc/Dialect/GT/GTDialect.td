//===- GTDialect.td - The gt dialect -------------------------*- tablegen -*-===//

#ifndef GT_DIALECT
#define GT_DIALECT

include "mlir/IR/OpBase.td"

def GT_Dialect : Dialect {
  let name = "gt";
  let summary = "Neural-network training graphs for gtc.";
  let description = [{
    The `gt` dialect holds the forward graph of a model written in a `.gt` file
    and its training configuration. Values are builtin ranked tensors of `f32`,
    `bf16`, `f16` (activations, parameters) or `i32` (tokens, labels); a
    symbolic dimension such as the batch `B` is a dynamic dimension (`?`).

    A model is a `func.func` carrying the `gt.model` unit attribute, with no
    arguments and one `tensor<f32>` result: the loss. Its leaves are
    `gt.input`, `gt.label` and `gt.param` operations; the training setup is one
    `gt.train` operation at module level that names the model.

    Every operation that computes a value infers its result type
    (InferTypeOpInterface); the verifiers check that the printed type matches
    the inferred one, so shape and dtype errors are caught in one place.
  }];
  let cppNamespace = "::mlir::gt";
  let hasOperationAttrVerify = 1;
}

#endif // GT_DIALECT
