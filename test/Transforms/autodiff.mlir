// RUN: gtc-opt %s --gt-autodiff --split-input-file | FileCheck %s

// linear -> relu -> cross_entropy: the backward runs in reverse order and
// ends in one gt.gradient per parameter.
// CHECK-LABEL: func.func @mlp_step() -> tensor<f32> attributes {gt.step}
// CHECK:      %[[X:.*]] = gt.input "x"
// CHECK:      %[[W:.*]] = gt.param "fc.weight"
// CHECK:      %[[B:.*]] = gt.param "fc.bias"
// CHECK:      %[[H:.*]] = gt.linear %[[X]], %[[W]], %[[B]]
// CHECK:      %[[R:.*]] = gt.relu %[[H]]
// CHECK:      %[[L:.*]] = gt.cross_entropy %[[R]], %[[Y:.*]] :
// CHECK:      %[[ONE:.*]] = gt.constant dense<1.000000e+00> : tensor<f32> {gt.loss_grad}
// CHECK:      %[[DR:.*]] = gt.cross_entropy_grad %[[ONE]], %[[R]], %[[Y]]
// CHECK:      %[[DH:.*]] = gt.activation_grad %[[DR]], %[[H]] <{kind = "relu"}> : tensor<4x3xf32>
// CHECK:      %[[DW:.*]] = gt.matmul %[[DH]], %[[X]] <{transpose_a = true}> : tensor<4x3xf32>, tensor<4x5xf32>
// CHECK:      %[[DB:.*]] = gt.sum_to %[[DH]] : tensor<4x3xf32> -> tensor<3xf32>
// CHECK:      gt.gradient "fc.weight", %[[DW]] : tensor<3x5xf32>
// CHECK:      gt.gradient "fc.bias", %[[DB]] : tensor<3xf32>
// CHECK:      return %[[L]] : tensor<f32>
func.func @mlp() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x5xf32>
  %y = gt.label "y" : tensor<4xi32>
  %w = gt.param "fc.weight" = "zeros" [] : tensor<3x5xf32>
  %b = gt.param "fc.bias" = "zeros" [] : tensor<3xf32>
  %h = gt.linear %x, %w, %b : tensor<4x5xf32>, tensor<3x5xf32>, tensor<3xf32>
  %r = gt.relu %h : tensor<4x3xf32>
  %l = gt.cross_entropy %r, %y : tensor<4x3xf32>, tensor<4xi32>
  return %l : tensor<f32>
}

// -----

// A tied weight used twice gets one gradient: the two contributions are
// summed (embedding scatter-add plus the transposed matmul's gradient).
// CHECK-LABEL: func.func @tied_step
// CHECK:      %[[WTE:.*]] = gt.param "wte"
// CHECK-DAG:  %[[G1:.*]] = gt.embedding_grad %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<7x4xf32>
// CHECK-DAG:  %[[G2:.*]] = gt.matmul %{{.*}}, %{{.*}} <{transpose_a = true}> : tensor<6x7xf32>, tensor<6x4xf32>
// CHECK:      %[[SUM:.*]] = gt.add %[[G2]], %[[G1]] : tensor<7x4xf32>, tensor<7x4xf32>
// CHECK:      gt.gradient "wte", %[[SUM]] : tensor<7x4xf32>
// CHECK-NOT:  gt.gradient
func.func @tied() -> tensor<f32> attributes {gt.model} {
  %t = gt.input "t" : tensor<2x3xi32>
  %y = gt.label "y" : tensor<2x3xi32>
  %wte = gt.param "wte" = "normal" [0.0, 0.02] : tensor<7x4xf32>
  %x = gt.embedding %t, %wte : tensor<2x3xi32>, tensor<7x4xf32>
  %l = gt.matmul %x, %wte <{transpose_b = true}> : tensor<2x3x4xf32>, tensor<7x4xf32>
  %loss = gt.cross_entropy %l, %y : tensor<2x3x7xf32>, tensor<2x3xi32>
  return %loss : tensor<f32>
}

// -----

// Broadcasting is undone with sum_to; a parameter the loss does not use
// gets a zero gradient; inputs get none.
// CHECK-LABEL: func.func @bias_step
// CHECK:      %[[D:.*]] = gt.broadcast %{{.*}} : tensor<1x1xf32> -> tensor<4x3xf32>
// CHECK:      %[[DB:.*]] = gt.sum_to %[[D]] : tensor<4x3xf32> -> tensor<3xf32>
// CHECK:      gt.gradient "b", %[[DB]] : tensor<3xf32>
// CHECK:      %[[Z:.*]] = gt.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK:      gt.gradient "unused", %[[Z]] : tensor<5xf32>
func.func @bias() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x3xf32>
  %b = gt.param "b" = "zeros" [] : tensor<3xf32>
  %u = gt.param "unused" = "zeros" [] : tensor<5xf32>
  %s = gt.add %x, %b : tensor<4x3xf32>, tensor<3xf32>
  %m = gt.mean %s : tensor<4x3xf32>
  return %m : tensor<f32>
}

// -----

// The original model stays; the step is added after it.
// CHECK-LABEL: func.func @keep() -> tensor<f32> attributes {gt.model}
// CHECK-LABEL: func.func @keep_step() -> tensor<f32> attributes {gt.step}
func.func @keep() -> tensor<f32> attributes {gt.model} {
  %w = gt.param "w" = "zeros" [] : tensor<2xf32>
  %m = gt.mean %w : tensor<2xf32>
  return %m : tensor<f32>
}

// -----

// pad's gradient is a slice, slice's a pad: the padded weight rows get no
// gradient, the parameter exactly its own.
// CHECK-LABEL: func.func @padded_step
// CHECK:      %[[ONE:.*]] = gt.constant dense<1.000000e+00> : tensor<f32> {gt.loss_grad}
// CHECK:      %[[DYP:.*]] = gt.pad %{{.*}} : tensor<2x3xf32> -> tensor<2x8xf32>
// CHECK:      %[[DWP:.*]] = gt.matmul %[[DYP]], %{{.*}} <{transpose_a = true}> : tensor<2x8xf32>, tensor<2x4xf32>
// CHECK:      %[[DW:.*]] = gt.slice %[[DWP]] : tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK:      gt.gradient "w", %[[DW]] : tensor<3x4xf32>
func.func @padded() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x4xf32>
  %w = gt.param "w" = "zeros" [] : tensor<3x4xf32>
  %wp = gt.pad %w : tensor<3x4xf32> -> tensor<8x4xf32>
  %yp = gt.linear %x, %wp : tensor<2x4xf32>, tensor<8x4xf32>
  %y = gt.slice %yp : tensor<2x8xf32> -> tensor<2x3xf32>
  %l = gt.mean %y : tensor<2x3xf32>
  return %l : tensor<f32>
}

// -----

// Every activation op differentiates through gt.activation_grad of its own
// kind (ScalarOps.h's list): silu.
// CHECK-LABEL: func.func @silu_step
// CHECK:      %[[S:.*]] = gt.silu %[[P:.*]] : tensor<4xf32>
// CHECK:      gt.activation_grad %{{.*}}, %[[P]] <{kind = "silu"}> : tensor<4xf32>
func.func @silu() -> tensor<f32> attributes {gt.model} {
  %p = gt.param "p" = "zeros" [] : tensor<4xf32>
  %s = gt.silu %p : tensor<4xf32>
  %l = gt.mean %s : tensor<4xf32>
  return %l : tensor<f32>
}
