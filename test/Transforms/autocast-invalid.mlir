// RUN: not gtc-opt %s --gt-autocast=precision=fp8 2>&1 | FileCheck %s
// An unknown precision is an error that names the choices.
// CHECK: error: gt-autocast: unknown precision 'fp8'; expected fp32, tf32, bf16 or fp16
func.func @m() -> tensor<f32> attributes {gt.model} {
  %w = gt.param "w" = "zeros" [] : tensor<2xf32>
  %m = gt.mean %w : tensor<2xf32>
  return %m : tensor<f32>
}
