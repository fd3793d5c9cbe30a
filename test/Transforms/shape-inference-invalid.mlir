// RUN: gtc-opt %s --gt-shape-inference=batch=5 -split-input-file -verify-diagnostics

// A reshape that a concrete batch cannot satisfy is reported.
func.func @m() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<?x3xf32>
  // expected-error @+1 {{'gt.reshape' op cannot reshape f32[5, 3] to f32[?, 4]}}
  %0 = gt.reshape %x : tensor<?x3xf32> -> tensor<?x4xf32>
  %1 = gt.mean %0 : tensor<?x4xf32>
  return %1 : tensor<f32>
}

// -----

// A shape error that only shows with concrete sizes is reported by inference.
func.func @m() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<?x3xf32>
  %c = gt.param "c" = "zeros" [] : tensor<4x3xf32>
  // expected-error @+1 {{shapes f32[5, 3] and f32[4, 3] cannot be broadcast together for 'add'}}
  %0 = gt.add %x, %c : tensor<?x3xf32>, tensor<4x3xf32>
  %1 = gt.mean %0 : tensor<4x3xf32>
  return %1 : tensor<f32>
}

// -----

// At batch 5, 5 x 2^42 elements is more than the 2^44 a tensor may have.
func.func @m() -> tensor<f32> attributes {gt.model} {
  // expected-error @+1 {{at batch 5 this value has more than 17592186044416 elements; lower the batch}}
  %x = gt.input "x" : tensor<?x4398046511104xf32>
  %1 = gt.mean %x : tensor<?x4398046511104xf32>
  return %1 : tensor<f32>
}
