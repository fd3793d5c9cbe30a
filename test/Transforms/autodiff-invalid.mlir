// RUN: gtc-opt %s --gt-autodiff --split-input-file -verify-diagnostics

// Symbolic shapes must be fixed first.
func.func @dynamic() -> tensor<f32> attributes {gt.model} {
  // expected-error @+1 {{gt-autodiff needs static shapes, got f32[?, 3]; run gt-shape-inference=batch=N first}}
  %x = gt.input "x" : tensor<?x3xf32>
  %m = gt.mean %x : tensor<?x3xf32>
  return %m : tensor<f32>
}

// -----

// A loss without parameters has nothing to train.
// expected-error @+1 {{gt-autodiff: the loss of 'noparams_step' does not depend on any parameter}}
func.func @noparams() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x3xf32>
  %m = gt.mean %x : tensor<2x3xf32>
  return %m : tensor<f32>
}
