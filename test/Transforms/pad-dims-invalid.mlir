// RUN: gtc-opt %s --gt-pad-dims -verify-diagnostics

// The pass pads static shapes only.
func.func @dynamic() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<?x12xbf16>
  %w = gt.param "w" = "zeros" [] : tensor<3x12xbf16>
  // expected-error @+1 {{gt-pad-dims needs static shapes; run gt-shape-inference=batch=N first}}
  %y = gt.linear %x, %w : tensor<?x12xbf16>, tensor<3x12xbf16>
  %s = gt.sum %y : tensor<?x3xbf16>
  %l = gt.cast %s : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}
