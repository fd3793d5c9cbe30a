// RUN: gtc-opt %s --gt-checkpoint -split-input-file -verify-diagnostics

// A memory-budget mode that gt-checkpoint does not implement yet is an
// error, not a setting silently ignored.
module {
  func.func @m() -> tensor<f32> attributes {gt.model} {
    %0 = gt.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
  // expected-error @+1 {{checkpoint = auto is not implemented yet (gradient checkpointing chooses values by a memory budget only later); use checkpoint = every(n), which keeps the input of every n-th repeat iteration, or none}}
  gt.train @m {checkpoint = {mode = "auto"}}
}

// -----

module {
  func.func @m() -> tensor<f32> attributes {gt.model} {
    %0 = gt.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
  // expected-error @+1 {{checkpoint = auto is not implemented yet}}
  gt.train @m {checkpoint = {budget = 1073741824 : i64, mode = "auto"}}
}
