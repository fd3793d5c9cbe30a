// RUN: gtc-opt %s -split-input-file --gt-bucket=bucket-bytes=512 | FileCheck %s
// RUN: gtc-opt %s -split-input-file --gt-bucket | FileCheck %s --check-prefix=ONE

// Buckets follow the order in which the backward computes the gradients
// (fc2's before fc1's, whatever the order of the gt.gradient ops): fc2.weight
// (256 bytes) and fc2.bias (16) share bucket 0, reduced right after the
// second is computed; fc1.weight (512 bytes: 272 + 512 > 512) starts bucket
// 1 and fills it; fc1.bias (64) is bucket 2. Each gt.gradient moves after
// its bucket and reads its result.
// CHECK-LABEL: func.func @order
// CHECK:      %[[W2:.*]] = gt.matmul %[[DY:.*]], %{{.*}} <{transpose_a = true}>
// CHECK-NEXT: %[[B2:.*]] = gt.sum_to %[[DY]]
// CHECK-NEXT: %[[R0:[0-9]+]]:2 = gt.all_reduce %[[W2]], %[[B2]] {bucket = 0 : i64} : (tensor<4x16xf32>, tensor<4xf32>) -> (tensor<4x16xf32>, tensor<4xf32>)
// CHECK-NEXT: gt.gradient "fc2.weight", %[[R0]]#0
// CHECK-NEXT: gt.gradient "fc2.bias", %[[R0]]#1
// CHECK-NEXT: %[[W1:.*]] = gt.matmul
// CHECK-NEXT: %[[R1:.*]] = gt.all_reduce %[[W1]] {bucket = 1 : i64}
// CHECK-NEXT: gt.gradient "fc1.weight", %[[R1]]
// CHECK-NEXT: %[[B1:.*]] = gt.sum_to
// CHECK-NEXT: %[[R2:.*]] = gt.all_reduce %[[B1]] {bucket = 2 : i64}
// CHECK-NEXT: gt.gradient "fc1.bias", %[[R2]]
// CHECK-NOT:  gt.all_reduce
// With the default 64 MiB, one bucket after the last gradient.
// ONE-LABEL: func.func @order
// ONE:      gt.sum_to
// ONE:      %[[LAST:[0-9]+]] = gt.sum_to
// ONE-NEXT: %[[R:[0-9]+]]:4 = gt.all_reduce %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[LAST]] {bucket = 0 : i64}
// ONE-NEXT: gt.gradient "fc2.weight", %[[R]]#0
// ONE-NEXT: gt.gradient "fc2.bias", %[[R]]#1
// ONE-NEXT: gt.gradient "fc1.weight", %[[R]]#2
// ONE-NEXT: gt.gradient "fc1.bias", %[[R]]#3
// ONE-NOT:  gt.all_reduce
func.func @order() -> tensor<f32> attributes {gt.step} {
  %dy = gt.input "dy" : tensor<2x4xf32>
  %x = gt.input "x" : tensor<2x16xf32>
  %h = gt.input "h" : tensor<2x16xf32>
  %x0 = gt.input "x0" : tensor<2x8xf32>
  %w2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<2x4xf32>, tensor<2x16xf32>
  %b2 = gt.sum_to %dy : tensor<2x4xf32> -> tensor<4xf32>
  %w1 = gt.matmul %h, %x0 <{transpose_a = true}> : tensor<2x16xf32>, tensor<2x8xf32>
  %b1 = gt.sum_to %h : tensor<2x16xf32> -> tensor<16xf32>
  gt.gradient "fc1.weight", %w1 : tensor<16x8xf32>
  gt.gradient "fc1.bias", %b1 : tensor<16xf32>
  gt.gradient "fc2.weight", %w2 : tensor<4x16xf32>
  gt.gradient "fc2.bias", %b2 : tensor<4xf32>
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A gradient larger than a bucket (1024 bytes > 512) is a bucket alone; a
// tied parameter (one table read twice) has one gradient, the sum of its
// two uses' (counted once, 512 bytes: a bucket of its own again).
// CHECK-LABEL: func.func @large_and_tied
// ONE-LABEL: func.func @large_and_tied
// CHECK:      %[[BIG:.*]] = gt.matmul
// CHECK-NEXT: %[[R0:.*]] = gt.all_reduce %[[BIG]] {bucket = 0 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT: gt.gradient "big", %[[R0]]
// CHECK:      %[[TIED:.*]] = gt.add
// CHECK-NEXT: %[[R1:.*]] = gt.all_reduce %[[TIED]] {bucket = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: gt.gradient "wte", %[[R1]]
// CHECK-NOT:  gt.all_reduce
func.func @large_and_tied() -> tensor<f32> attributes {gt.step} {
  %a = gt.input "a" : tensor<4x16xf32>
  %ids = gt.input "ids" : tensor<4xi32>
  %big = gt.matmul %a, %a <{transpose_a = true}> : tensor<4x16xf32>, tensor<4x16xf32>
  %e = gt.embedding_grad %a, %ids : tensor<4x16xf32>, tensor<4xi32> -> tensor<8x16xf32>
  %d = gt.embedding_grad %a, %ids : tensor<4x16xf32>, tensor<4xi32> -> tensor<8x16xf32>
  %tied = gt.add %e, %d : tensor<8x16xf32>, tensor<8x16xf32>
  gt.gradient "wte", %tied : tensor<8x16xf32>
  gt.gradient "big", %big : tensor<16x16xf32>
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A value handed to two gt.gradient ops is reduced once; a function that is
// not a training step (no gt.step) is left alone.
// CHECK-LABEL: func.func @shared
// CHECK:      %[[R:.*]] = gt.all_reduce %{{.*}} {bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: gt.gradient "p", %[[R]]
// CHECK-NEXT: gt.gradient "q", %[[R]]
// CHECK-NOT:  gt.all_reduce
// CHECK-LABEL: func.func @model
// CHECK-NOT:  gt.all_reduce
func.func @shared() -> tensor<f32> attributes {gt.step} {
  %a = gt.input "a" : tensor<2x4xf32>
  %s = gt.sum_to %a : tensor<2x4xf32> -> tensor<4xf32>
  gt.gradient "p", %s : tensor<4xf32>
  gt.gradient "q", %s : tensor<4xf32>
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
func.func @model() -> tensor<f32> attributes {gt.model} {
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// One op computes two gradients that go to two buckets (a 1 KiB weight
// gradient, larger than a bucket, and its bias gradient): the buckets are
// reduced in their order, the second after the first.
// CHECK-LABEL: func.func @one_op_two_buckets
// CHECK:      %[[G:[0-9]+]]:2 = gt.fused "gemm"
// CHECK:      %[[R0:.*]] = gt.all_reduce %[[G]]#0 {bucket = 0 : i64}
// CHECK-NEXT: gt.gradient "w", %[[R0]]
// CHECK-NEXT: %[[R1:.*]] = gt.all_reduce %[[G]]#1 {bucket = 1 : i64}
// CHECK-NEXT: gt.gradient "b", %[[R1]]
func.func @one_op_two_buckets() -> tensor<f32> attributes {gt.step} {
  %dy = gt.input "dy" : tensor<4x16xf32>
  %x = gt.input "x" : tensor<4x16xf32>
  %g:2 = gt.fused "gemm"(%dy, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<16xf32>) {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>):
    %w = gt.matmul %a, %b <{transpose_a = true}> : tensor<4x16xf32>, tensor<4x16xf32>
    %s = gt.sum_to %a : tensor<4x16xf32> -> tensor<16xf32>
    gt.yield %w, %s : tensor<16x16xf32>, tensor<16xf32>
  }
  gt.gradient "w", %g#0 : tensor<16x16xf32>
  gt.gradient "b", %g#1 : tensor<16xf32>
  %l = gt.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
