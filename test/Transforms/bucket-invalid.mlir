// RUN: gtc-opt %s -split-input-file -verify-diagnostics --gt-bucket=bucket-bytes=0

// A bucket holds something.
// expected-error @+1 {{gt-bucket needs bucket-bytes > 0, got 0}}
func.func @empty_buckets() -> tensor<f32> attributes {gt.step} {
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
