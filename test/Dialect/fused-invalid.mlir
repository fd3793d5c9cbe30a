// RUN: gtc-opt %s -split-input-file -verify-diagnostics

// Only elementwise regions exist.
func.func @kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unknown fusion kind 'reduction'; expected 'elementwise', 'multi_tensor', 'epilogue', 'gemm', 'norm', 'loss', 'classifier', 'scatter_add' or 'attention_grad'}}
  %0 = gt.fused "reduction"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = gt.relu %a : tensor<4xf32>
    gt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// Body arguments mirror the inputs.
func.func @arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 1 inputs but its body 2 arguments}}
  %0 = gt.fused "elementwise"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %1 = gt.add %a, %b : tensor<4xf32>, tensor<4xf32>
    gt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A reduction cannot run in an elementwise loop.
func.func @not_elementwise(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "elementwise"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{'gt.softmax' op cannot be fused elementwise: it is not elementwise (GT_Elementwise)}}
    %1 = gt.softmax %a <{axis = -1 : i64}> : tensor<4x8xf32>
    gt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Every op of the region iterates over one shape, its first op's.
func.func @shape(%x: tensor<8xf32>, %m: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "elementwise"(%x, %m) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<4x8xf32>):
    %1 = gt.relu %b : tensor<4x8xf32>
    // expected-error @+1 {{'gt.relu' op result shape differs from the fusion region's iteration shape 'tensor<4x8xf32>'}}
    %2 = gt.relu %a : tensor<8xf32>
    %3 = gt.add %1, %2 : tensor<4x8xf32>, tensor<8xf32>
    gt.yield %3 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// A column sum in an elementwise region sums a value the region computes.
func.func @column_sum_of_input(%m: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %0:2 = gt.fused "elementwise"(%m) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = gt.relu %a : tensor<4x8xf32>
    // expected-error @+1 {{'gt.sum_to' op in an elementwise region sums a value the region computes over its rows, to its last dimension}}
    %2 = gt.sum_to %a : tensor<4x8xf32> -> tensor<8xf32>
    gt.yield %1, %2 : tensor<4x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// ... over all its rows (a bias gradient), not to another shape.
func.func @column_sum_shape(%m: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<4x8xf32>) {
  %0:2 = gt.fused "elementwise"(%m) : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<2x4x8xf32>):
    %1 = gt.relu %a : tensor<2x4x8xf32>
    // expected-error @+1 {{'gt.sum_to' op in an elementwise region sums a value the region computes over its rows, to its last dimension}}
    %2 = gt.sum_to %1 : tensor<2x4x8xf32> -> tensor<4x8xf32>
    gt.yield %1, %2 : tensor<2x4x8xf32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<4x8xf32>
}

// -----

// Column sums end the region: only their casts follow them.
func.func @after_column_sum(%m: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %0:2 = gt.fused "elementwise"(%m) : (tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = gt.relu %a : tensor<4x8xf32>
    %2 = gt.sum_to %1 : tensor<4x8xf32> -> tensor<8xf32>
    // expected-error @+1 {{'gt.exp' op follows the column sums of its elementwise region: only their casts may}}
    %3 = gt.exp %1 : tensor<4x8xf32>
    gt.yield %2, %3 : tensor<8xf32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<8xf32>, tensor<4x8xf32>
}

// -----

// The yielded values are the results.
func.func @yield_types(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{yields 1 values whose types differ from its results}}
  %0 = gt.fused "elementwise"(%x) : (tensor<4xf32>) -> tensor<4xbf16> {
  ^bb0(%a: tensor<4xf32>):
    %1 = gt.relu %a : tensor<4xf32>
    gt.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xbf16>
}

// -----

// A region with no ops at all (the verifier takes its iteration shape from
// the results then).
func.func @empty(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields its own input; use the value directly}}
  %0 = gt.fused "elementwise"(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    gt.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A region that returns an input computes nothing for it.
func.func @passthrough(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{yields its own input; use the value directly}}
  %0:2 = gt.fused "elementwise"(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %1 = gt.relu %a : tensor<4xf32>
    gt.yield %1, %a : tensor<4xf32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// gt.yield only ends fusion regions.
func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'gt.yield' op expects parent op 'gt.fused'}}
  gt.yield %x : tensor<4xf32>
}

// -----

// The ops of a multi-tensor region are independent, each over its own
// region input.
func.func @multi(%x: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = gt.fused "multi_tensor"(%x) : (tensor<4xf32>) -> tensor<4xbf16> {
  ^bb0(%a: tensor<4xf32>):
    %1 = gt.relu %a : tensor<4xf32>
    // expected-error @+1 {{'gt.cast' op in a multi_tensor region reads only region inputs of its own shape}}
    %2 = gt.cast %1 : tensor<4xf32> -> tensor<4xbf16>
    gt.yield %2 : tensor<4xbf16>
  }
  return %0 : tensor<4xbf16>
}

// -----

// An epilogue region folds the cast of one op that can store another type.
func.func @epilogue(%x: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{an epilogue region is one op with the GT_CastEpilogue trait and the gt.cast of its result, which it yields}}
  %0 = gt.fused "epilogue"(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xbf16>):
    %1 = gt.relu %a : tensor<4x8xbf16>
    %2 = gt.cast %1 : tensor<4x8xbf16> -> tensor<4x8xf32>
    gt.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// A gemm region is a GEMM and what cuBLASLt applies in its epilogue.
func.func @gemm_first(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{a gemm region starts with a GEMM (GT_Contraction)}}
  %0 = gt.fused "gemm"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = gt.relu %a : tensor<4x8xf32>
    gt.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @gemm_exact_gelu(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "gemm"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %1 = gt.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{'gt.gelu' op cannot run in a GEMM epilogue: cuBLASLt computes the tanh approximation only}}
    %2 = gt.gelu %1 : tensor<4x8xf32>
    gt.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// cuBLASLt's GELU epilogue keeps its input in rows of a multiple of 8.
func.func @gemm_gelu_aux_rows(%x: tensor<4x8xf32>, %w: tensor<12x8xf32>) -> (tensor<4x12xf32>, tensor<4x12xf32>) {
  %0:2 = gt.fused "gemm"(%x, %w) : (tensor<4x8xf32>, tensor<12x8xf32>) -> (tensor<4x12xf32>, tensor<4x12xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<12x8xf32>):
    %1 = gt.linear %a, %b : tensor<4x8xf32>, tensor<12x8xf32>
    // expected-error @+1 {{'gt.gelu' op cannot run in a GEMM epilogue: cuBLASLt's GELU epilogues need rows of a multiple of 8 elements}}
    %2 = gt.gelu %1 <{approximate = true}> : tensor<4x12xf32>
    gt.yield %1, %2 : tensor<4x12xf32>, tensor<4x12xf32>
  }
  return %0#0, %0#1 : tensor<4x12xf32>, tensor<4x12xf32>
}

// -----

func.func @gemm_grad_kind(%dy: tensor<4x8xf32>, %w: tensor<8x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "gemm"(%dy, %w, %z) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %c: tensor<4x8xf32>):
    %1 = gt.matmul %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{'gt.activation_grad' op cannot run in a GEMM epilogue: only the gradients of gelu_tanh (cuBLASLt) and relu (gtc's small GEMM) do}}
    %2 = gt.activation_grad %1, %c <{kind = "tanh"}> : tensor<4x8xf32>
    gt.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @gemm_bias_grad(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %0:2 = gt.fused "gemm"(%dy, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %1 = gt.matmul %a, %b <{transpose_a = true}> : tensor<4x8xf32>, tensor<4x8xf32>
    // expected-error @+1 {{'gt.sum_to' op in a gemm region sums the GEMM's first operand (the bias gradient) or the columns of a value the epilogue computes}}
    %2 = gt.sum_to %b : tensor<4x8xf32> -> tensor<8xf32>
    gt.yield %1, %2 : tensor<8x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<8x8xf32>, tensor<8xf32>
}

// -----

// Column sums in a gemm region sum a value of its epilogue (the ReLU
// gradient), not the GEMM's own result.
func.func @gemm_column_sum_of_product(%dy: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %0:2 = gt.fused "gemm"(%dy, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %1 = gt.matmul %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{'gt.sum_to' op in a gemm region sums the GEMM's first operand (the bias gradient) or the columns of a value the epilogue computes}}
    %2 = gt.sum_to %1 : tensor<4x8xf32> -> tensor<8xf32>
    gt.yield %1, %2 : tensor<4x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

func.func @gemm_other_op(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "gemm"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %1 = gt.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{'gt.exp' op cannot run in a GEMM epilogue}}
    %2 = gt.exp %1 : tensor<4x8xf32>
    gt.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// An add in a gemm region adds a region input (cuBLASLt's C), not a value
// the region computes.
func.func @gemm_add_own_value(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.fused "gemm"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %1 = gt.linear %a, %b : tensor<4x8xf32>, tensor<8x8xf32>
    // expected-error @+1 {{'gt.add' op in a gemm region adds one of the region's inputs of the sum's type (cuBLASLt's C)}}
    %2 = gt.add %1, %1 : tensor<4x8xf32>, tensor<4x8xf32>
    gt.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// A norm region is one layer norm with elementwise ops over its rows.
func.func @norm_none(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{a norm region has one gt.layernorm, gt.rmsnorm or their gradient}}
  %0 = gt.fused "norm"(%x) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = gt.cast %a : tensor<4x8xf32> -> tensor<4x8xbf16>
    gt.yield %1 : tensor<4x8xbf16>
  }
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @norm_rows(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %0:2 = gt.fused "norm"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %1 = gt.layernorm %a, %b, %b : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
    // expected-error @+1 {{'gt.neg' op in a norm region is an elementwise op over the normalized rows 'tensor<4x8xf32>'}}
    %2 = gt.neg %b : tensor<8xf32>
    gt.yield %1, %2 : tensor<4x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Column sums (a linear's bias gradient) end only a backward norm region.
func.func @norm_forward_column_sums(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<8xf32> {
  %0 = gt.fused "norm"(%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %1 = gt.layernorm %a, %b, %b : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
    // expected-error @+1 {{'gt.sum_to' op in a norm region sums the columns of a value the backward region computes, once}}
    %2 = gt.sum_to %1 : tensor<4x8xf32> -> tensor<8xf32>
    gt.yield %2 : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

// ... of a value the region computes, not of one of its inputs.
func.func @norm_column_sums_of_input(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0:3 = gt.fused "norm"(%dy, %x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<8xf32>):
    %dx, %dw, %db = gt.layernorm_grad %a, %b, %c : tensor<4x8xf32>, tensor<8xf32>
    // expected-error @+1 {{'gt.sum_to' op in a norm region sums the columns of a value the backward region computes, once}}
    %1 = gt.sum_to %a : tensor<4x8xf32> -> tensor<8xf32>
    gt.yield %dw, %db, %1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1, %0#2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A loss region is a cross-entropy and the gradient of the same logits.
func.func @loss_other_labels(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %z: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  // expected-error @+1 {{a loss region is [a gt.cast to the logits,] gt.cross_entropy, the gt.cross_entropy_grad of the same logits and labels[, and the gt.cast of the gradient], or [a gt.cast to the logits,] gt.cross_entropy[ and the gt.accuracy of the same logits and labels]}}
  %0:2 = gt.fused "loss"(%x, %y, %z, %one) : (tensor<4x8xf32>, tensor<4xi32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4xi32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.cross_entropy %a, %b : tensor<4x8xf32>, tensor<4xi32>
    %2 = gt.cross_entropy_grad %s, %a, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    gt.yield %1, %2 : tensor<f32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4x8xf32>
}

// -----

// An evaluation's loss region (no gradient) yields the loss alone: the f32
// logits stay in the kernel.
func.func @loss_only_yields_logits(%x: tensor<4x8xbf16>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>) {
  // expected-error @+1 {{a loss region without a gradient yields the loss[ and the accuracy]}}
  %0:2 = gt.fused "loss"(%x, %y) : (tensor<4x8xbf16>, tensor<4xi32>) -> (tensor<f32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xbf16>, %b: tensor<4xi32>):
    %1 = gt.cast %a : tensor<4x8xbf16> -> tensor<4x8xf32>
    %2 = gt.cross_entropy %1, %b : tensor<4x8xf32>, tensor<4xi32>
    gt.yield %2, %1 : tensor<f32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4x8xf32>
}

// -----

// An evaluation's accuracy in a loss region is of the cross-entropy's
// logits and labels.
func.func @loss_accuracy_other_labels(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %z: tensor<4xi32>) -> (tensor<f32>, tensor<f32>) {
  // expected-error @+1 {{or [a gt.cast to the logits,] gt.cross_entropy[ and the gt.accuracy of the same logits and labels]}}
  %0:2 = gt.fused "loss"(%x, %y, %z) : (tensor<4x8xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<f32>, tensor<f32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4xi32>, %c: tensor<4xi32>):
    %1 = gt.cross_entropy %a, %b : tensor<4x8xf32>, tensor<4xi32>
    %2 = gt.accuracy %a, %c : tensor<4x8xf32>, tensor<4xi32>
    gt.yield %1, %2 : tensor<f32>, tensor<f32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<f32>
}

// -----

func.func @loss_yields(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{a loss region yields the loss and the gradient}}
  %0 = gt.fused "loss"(%x, %y, %one) : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.cross_entropy %a, %b : tensor<4x8xf32>, tensor<4xi32>
    %2 = gt.cross_entropy_grad %s, %a, %b : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    gt.yield %1 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// A classifier region starts with the GEMM of the logits.
func.func @classifier_no_gemm(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{a classifier region starts with the GEMM of the logits and has one gt.cross_entropy and the gt.cross_entropy_grad of the same logits and labels}}
  %0 = gt.fused "classifier"(%x, %y, %one) : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.cross_entropy %a, %b : tensor<4x8xf32>, tensor<4xi32>
    %2 = gt.cross_entropy_grad %s, %a, %b : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    gt.yield %1 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// The logits' gradient exists a chunk at a time: a classifier cannot yield it.
func.func @classifier_yields_gradient(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  // expected-error @+1 {{a classifier region cannot yield the logits or their gradient: they exist a chunk of rows at a time}}
  %0:2 = gt.fused "classifier"(%h, %w, %y, %one) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.matmul %a, %b <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
    %2 = gt.cross_entropy %1, %c : tensor<4x8xf32>, tensor<4xi32>
    %3 = gt.cross_entropy_grad %s, %1, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    gt.yield %2, %3 : tensor<f32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4x8xf32>
}

// -----

// Only GEMMs, casts, reshapes, the cross-entropy, column sums and a ReLU
// gradient belong in a classifier.
func.func @classifier_other_op(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> tensor<f32> {
  %0 = gt.fused "classifier"(%h, %w, %y, %one) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<4xi32>, tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.matmul %a, %b <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
    %2 = gt.cross_entropy %1, %c : tensor<4x8xf32>, tensor<4xi32>
    %3 = gt.cross_entropy_grad %s, %1, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    // expected-error @+1 {{cannot be part of a classifier region: it is not a GEMM, a cast, a reshape, the cross-entropy, a column sum or a ReLU gradient}}
    %4 = gt.relu %3 : tensor<4x8xf32>
    gt.yield %2 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// A small head's bias gradient sums the columns of a value the region
// computes, not of an input.
func.func @classifier_sums_input(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<16xf32>) {
  %0:2 = gt.fused "classifier"(%h, %w, %y, %one) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<16xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.matmul %a, %b <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
    %2 = gt.cross_entropy %1, %c : tensor<4x8xf32>, tensor<4xi32>
    %3 = gt.cross_entropy_grad %s, %1, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    // expected-error @+1 {{in a classifier region sums the columns of a value the region computes}}
    %4 = gt.sum_to %a : tensor<4x16xf32> -> tensor<16xf32>
    gt.yield %2, %4 : tensor<f32>, tensor<16xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<16xf32>
}

// -----

// The ReLU gradient a small head computes is that of dh, a GEMM's result.
func.func @classifier_relu_gradient_of_logits(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %0:2 = gt.fused "classifier"(%h, %w, %y, %one) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.matmul %a, %b <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
    %2 = gt.cross_entropy %1, %c : tensor<4x8xf32>, tensor<4xi32>
    %3 = gt.cross_entropy_grad %s, %1, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    // expected-error @+1 {{in a classifier region is the ReLU gradient of a GEMM's result}}
    %4 = gt.activation_grad %3, %1 <{kind = "relu"}> : tensor<4x8xf32>
    gt.yield %2, %4 : tensor<f32>, tensor<4x8xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4x8xf32>
}

// -----

// The one activation gradient a small head computes is the ReLU's.
func.func @classifier_gelu_gradient(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x16xf32>) {
  %0:2 = gt.fused "classifier"(%h, %w, %y, %one) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x16xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %c: tensor<4xi32>, %s: tensor<f32>):
    %1 = gt.matmul %a, %b <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
    %2 = gt.cross_entropy %1, %c : tensor<4x8xf32>, tensor<4xi32>
    %3 = gt.cross_entropy_grad %s, %1, %c : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
    %4 = gt.matmul %3, %b : tensor<4x8xf32>, tensor<8x16xf32>
    // expected-error @+1 {{in a classifier region is the ReLU gradient of a GEMM's result}}
    %5 = gt.activation_grad %4, %a <{kind = "gelu_tanh"}> : tensor<4x16xf32>
    gt.yield %2, %5 : tensor<f32>, tensor<4x16xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4x16xf32>
}

// -----

// A scatter_add region adds the embedding gradient to a region input of its
// type.
func.func @scatter_add_other(%dy: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{a scatter_add region is a gt.embedding_grad and the gt.add of its result to a region input of its type}}
  %0 = gt.fused "scatter_add"(%dy, %ids) : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<2x4x16xf32>, %i: tensor<2x4xi32>):
    %e = gt.embedding_grad %a, %i : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<8x16xf32>
    %s = gt.add %e, %e : tensor<8x16xf32>, tensor<8x16xf32>
    gt.yield %s : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

// It yields the sum, not the scattered table.
func.func @scatter_add_yield(%dy: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>, %dw: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{a scatter_add region yields the sum}}
  %0 = gt.fused "scatter_add"(%dy, %ids, %dw) : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<2x4x16xf32>, %i: tensor<2x4xi32>, %b: tensor<8x16xf32>):
    %e = gt.embedding_grad %a, %i : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<8x16xf32>
    %s = gt.add %b, %e : tensor<8x16xf32>, tensor<8x16xf32>
    gt.yield %e : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

// An attention_grad region turns dq and dk back by inverse ropes.
func.func @attention_grad_forward_rope(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xbf16>, %k: tensor<2x4x2x64xbf16>, %v: tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) {
  // expected-error @+1 {{an attention_grad region is a gt.attention_grad of q, k and v and the inverse gt.rope (without positions, one theta and convention) of its dq and then its dk}}
  %r:3 = gt.fused "attention_grad"(%dy, %lse, %q, %k, %v) : (tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) {
  ^bb0(%a: tensor<2x4x6x64xbf16>, %l: tensor<2x6x4xf32>, %aq: tensor<2x4x6x64xbf16>, %ak: tensor<2x4x2x64xbf16>, %av: tensor<2x4x2x64xbf16>):
    %d:3 = gt.attention_grad %a, %a, %l, %aq, %ak, %av <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
    %rq = gt.rope %d#0 : tensor<2x4x6x64xbf16>
    %rk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xbf16>
    gt.yield %rq, %rk, %d#2 : tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
}

// -----

// Only where the GPU's kernels turn them: 16-bit, heads of 64 or 128.
func.func @attention_grad_f32(%dy: tensor<2x4x6x64xf32>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xf32>, %k: tensor<2x4x2x64xf32>, %v: tensor<2x4x2x64xf32>) -> (tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>) {
  // expected-error @+1 {{an attention_grad region needs 16-bit q, k and v with heads of 64 or 128 (the GPU kernels that turn dq and dk and sum dqkv as they store them)}}
  %r:3 = gt.fused "attention_grad"(%dy, %lse, %q, %k, %v) : (tensor<2x4x6x64xf32>, tensor<2x6x4xf32>, tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>) -> (tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>) {
  ^bb0(%a: tensor<2x4x6x64xf32>, %l: tensor<2x6x4xf32>, %aq: tensor<2x4x6x64xf32>, %ak: tensor<2x4x2x64xf32>, %av: tensor<2x4x2x64xf32>):
    %d:3 = gt.attention_grad %a, %a, %l, %aq, %ak, %av <{heads = 6 : i64}> : tensor<2x4x6x64xf32>, tensor<2x6x4xf32>, tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>
    %rq = gt.rope %d#0 <{inverse = true}> : tensor<2x4x6x64xf32>
    %rk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xf32>
    gt.yield %rq, %rk, %d#2 : tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>
}

// -----

// It yields the turned dq and dk, not the kernel's.
func.func @attention_grad_yield(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xbf16>, %k: tensor<2x4x2x64xbf16>, %v: tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) {
  // expected-error @+1 {{an attention_grad region yields the turned dq and dk and dv, each once}}
  %r:3 = gt.fused "attention_grad"(%dy, %lse, %q, %k, %v) : (tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) {
  ^bb0(%a: tensor<2x4x6x64xbf16>, %l: tensor<2x6x4xf32>, %aq: tensor<2x4x6x64xbf16>, %ak: tensor<2x4x2x64xbf16>, %av: tensor<2x4x2x64xbf16>):
    %d:3 = gt.attention_grad %a, %a, %l, %aq, %ak, %av <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
    %rq = gt.rope %d#0 <{inverse = true}> : tensor<2x4x6x64xbf16>
    %rk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xbf16>
    gt.yield %d#0, %rk, %d#2 : tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
}

// -----

// Over packed heads the inverse rope turns q's and k's heads (6 + 2), not v's.
func.func @attention_grad_packed_rotated(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  // expected-error @+1 {{an attention_grad region over packed heads turns the first H + Hkv heads of [B, T, H + 2 Hkv, d] by one inverse gt.rope (without positions)}}
  %r = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  ^bb0(%a: tensor<2x4x6x64xbf16>, %l: tensor<2x6x4xf32>, %aqkv: tensor<2x4x10x64xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
    %rd = gt.rope %d <{inverse = true}> : tensor<2x4x10x64xbf16>
    gt.yield %rd : tensor<2x4x10x64xbf16>
  }
  return %r : tensor<2x4x10x64xbf16>
}

// -----

func.func @attention_grad_packed_yield(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  // expected-error @+1 {{an attention_grad region over packed heads yields the (turned) gradient and then its column sums}}
  %r = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  ^bb0(%a: tensor<2x4x6x64xbf16>, %l: tensor<2x6x4xf32>, %aqkv: tensor<2x4x10x64xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
    %rd = gt.rope %d <{inverse = true, rotated = 8 : i64}> : tensor<2x4x10x64xbf16>
    gt.yield %d : tensor<2x4x10x64xbf16>
  }
  return %r : tensor<2x4x10x64xbf16>
}

// -----

// Over packed heads a region has an inverse rope or column sums (or both).
func.func @attention_grad_packed_alone(%dy: tensor<2x4x64xbf16>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xbf16>) -> tensor<2x4x192xbf16> {
  // expected-error @+1 {{an attention_grad region over packed heads is a gt.attention_grad, the inverse gt.rope of its gradient and the sum of the gradient's columns (with its cast), one of the two at least, in that order}}
  %r = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>) -> tensor<2x4x192xbf16> {
  ^bb0(%a: tensor<2x4x64xbf16>, %l: tensor<2x1x4xf32>, %aqkv: tensor<2x4x192xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 1 : i64}> : tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>
    gt.yield %d : tensor<2x4x192xbf16>
  }
  return %r : tensor<2x4x192xbf16>
}

// -----

// The column sums are over all rows, to a row of dqkv.
func.func @attention_grad_sum_rows(%dy: tensor<2x4x64xbf16>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xbf16>) -> (tensor<2x4x192xbf16>, tensor<4x192xbf16>) {
  // expected-error @+1 {{an attention_grad region sums the columns of a packed gradient [B, T, W] over all rows}}
  %r:2 = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>) -> (tensor<2x4x192xbf16>, tensor<4x192xbf16>) {
  ^bb0(%a: tensor<2x4x64xbf16>, %l: tensor<2x1x4xf32>, %aqkv: tensor<2x4x192xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 1 : i64}> : tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>
    %s = gt.sum_to %d : tensor<2x4x192xbf16> -> tensor<4x192xbf16>
    gt.yield %d, %s : tensor<2x4x192xbf16>, tensor<4x192xbf16>
  }
  return %r#0, %r#1 : tensor<2x4x192xbf16>, tensor<4x192xbf16>
}

// -----

// Only where the GPU's kernels sum them: 16-bit dqkv, heads of 64 or 128.
func.func @attention_grad_sum_f32(%dy: tensor<2x4x64xf32>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xf32>) -> (tensor<2x4x192xf32>, tensor<192xf32>) {
  // expected-error @+1 {{an attention_grad region needs 16-bit q, k and v with heads of 64 or 128 (the GPU kernels that turn dq and dk and sum dqkv as they store them)}}
  %r:2 = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x64xf32>, tensor<2x1x4xf32>, tensor<2x4x192xf32>) -> (tensor<2x4x192xf32>, tensor<192xf32>) {
  ^bb0(%a: tensor<2x4x64xf32>, %l: tensor<2x1x4xf32>, %aqkv: tensor<2x4x192xf32>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 1 : i64}> : tensor<2x4x64xf32>, tensor<2x1x4xf32>, tensor<2x4x192xf32>
    %s = gt.sum_to %d : tensor<2x4x192xf32> -> tensor<192xf32>
    gt.yield %d, %s : tensor<2x4x192xf32>, tensor<192xf32>
  }
  return %r#0, %r#1 : tensor<2x4x192xf32>, tensor<192xf32>
}

// -----

// It yields the gradient and then the sums' cast, not the sum before it.
func.func @attention_grad_sum_yield(%dy: tensor<2x4x64xbf16>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xbf16>) -> (tensor<2x4x192xbf16>, tensor<192xbf16>) {
  // expected-error @+1 {{an attention_grad region over packed heads yields the (turned) gradient and then its column sums}}
  %r:2 = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>) -> (tensor<2x4x192xbf16>, tensor<192xbf16>) {
  ^bb0(%a: tensor<2x4x64xbf16>, %l: tensor<2x1x4xf32>, %aqkv: tensor<2x4x192xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 1 : i64}> : tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>
    %s = gt.sum_to %d : tensor<2x4x192xbf16> -> tensor<192xbf16>
    %c = gt.cast %s : tensor<192xbf16> -> tensor<192xf32>
    gt.yield %d, %s : tensor<2x4x192xbf16>, tensor<192xbf16>
  }
  return %r#0, %r#1 : tensor<2x4x192xbf16>, tensor<192xbf16>
}

// -----

// Over packed heads [B, T, H + 2 Hkv, d] the sum over the last dimension
// would add heads together: not a row's column sums.
func.func @attention_grad_sum_heads(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> (tensor<2x4x10x64xbf16>, tensor<64xbf16>) {
  // expected-error @+1 {{an attention_grad region sums the columns of a packed gradient [B, T, W] over all rows}}
  %r:2 = gt.fused "attention_grad"(%dy, %lse, %qkv) : (tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>) -> (tensor<2x4x10x64xbf16>, tensor<64xbf16>) {
  ^bb0(%a: tensor<2x4x6x64xbf16>, %l: tensor<2x6x4xf32>, %aqkv: tensor<2x4x10x64xbf16>):
    %d = gt.attention_grad %a, %a, %l, %aqkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
    %s = gt.sum_to %d : tensor<2x4x10x64xbf16> -> tensor<64xbf16>
    gt.yield %d, %s : tensor<2x4x10x64xbf16>, tensor<64xbf16>
  }
  return %r#0, %r#1 : tensor<2x4x10x64xbf16>, tensor<64xbf16>
}
