// RUN: gtc-opt %s --gt-checkpoint -split-input-file -verify-diagnostics

// The auto modes need the memory plan (gtc run and gtc compile search it);
// the pass alone rejects them instead of ignoring the setting.
module {
  func.func @m() -> tensor<f32> attributes {gt.model} {
    %0 = gt.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
  // expected-error @+1 {{checkpoint = auto needs the memory plan: gtc run and gtc compile choose it (here, give every=N)}}
  gt.train @m {checkpoint = {mode = "auto"}}
}

// -----

module {
  func.func @m() -> tensor<f32> attributes {gt.model} {
    %0 = gt.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
  // expected-error @+1 {{checkpoint = auto needs the memory plan}}
  gt.train @m {checkpoint = {budget = 1073741824 : i64, mode = "auto"}}
}
