// RUN: gtc-opt %s --gt-shape-inference=batch=8 | FileCheck %s
// RUN: gtc-opt %s --gt-shape-inference | FileCheck %s --check-prefix=KEEP

// The batch size replaces symbolic dimensions of inputs and labels and flows
// through every op, including reshape, broadcast and cast. A symbolic
// dimension that no input determines (the broadcast's) is the batch too.
// CHECK-LABEL: func.func @m
// CHECK: gt.input "x" : tensor<8x4x6xf32>
// CHECK: gt.label "y" : tensor<8x4xi32>
// CHECK: gt.linear {{.*}} : tensor<8x4x6xf32>, tensor<10x6xf32>
// CHECK: gt.reshape {{.*}} : tensor<8x4x10xf32> -> tensor<32x10xf32>
// CHECK: gt.cast {{.*}} : tensor<32x10xf32> -> tensor<32x10xbf16>
// CHECK: gt.broadcast {{.*}} : tensor<10xf32> -> tensor<8x10xf32>
// CHECK: gt.reshape {{.*}} : tensor<32x10xf32> -> tensor<8x4x10xf32>
// CHECK: gt.cross_entropy {{.*}} : tensor<8x4x10xf32>, tensor<8x4xi32>

// Without a batch the types stay symbolic.
// KEEP: gt.input "x" : tensor<?x4x6xf32>
// KEEP: gt.reshape {{.*}} : tensor<?x4x10xf32> -> tensor<?x10xf32>
func.func @m() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<?x4x6xf32>
  %y = gt.label "y" : tensor<?x4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<10x6xf32>
  %b = gt.param "b" = "zeros" [] : tensor<10xf32>
  %0 = gt.linear %x, %w : tensor<?x4x6xf32>, tensor<10x6xf32>
  %1 = gt.reshape %0 : tensor<?x4x10xf32> -> tensor<?x10xf32>
  %2 = gt.cast %1 : tensor<?x10xf32> -> tensor<?x10xbf16>
  %3 = gt.broadcast %b : tensor<10xf32> -> tensor<?x10xf32>
  %4 = gt.reshape %1 : tensor<?x10xf32> -> tensor<?x4x10xf32>
  %5 = gt.cross_entropy %4, %y : tensor<?x4x10xf32>, tensor<?x4xi32>
  return %5 : tensor<f32>
}
