// RUN: gtc-opt %s --gt-pad-dims=min-macs=0 --split-input-file | FileCheck %s
// RUN: gtc-opt %s --gt-pad-dims="multiple=16 min-macs=0" --split-input-file | FileCheck %s --check-prefix=M16
// RUN: gtc-opt %s --gt-pad-dims --split-input-file | FileCheck %s --check-prefix=SMALL

// By default GEMMs of fewer than 2^28 multiply-adds (all of this file's
// small shapes) keep their sizes: padding them would cost more pad and slice
// kernels than the aligned GEMM saves.
// SMALL-NOT: gt.pad
// SMALL-NOT: gt.slice

// An odd output size (1001 -> 1008) and reduction size (12 -> 16): the
// input, weight and bias are padded with zeros, the result sliced back, and
// every user sees the slice.
// CHECK-LABEL: func.func @odd
// CHECK:      %[[X:.*]] = gt.input "x" : tensor<4x12xbf16>
// CHECK:      %[[W:.*]] = gt.param "w"
// CHECK:      %[[B:.*]] = gt.param "b"
// CHECK:      %[[XP:.*]] = gt.pad %[[X]] : tensor<4x12xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[WP:.*]] = gt.pad %[[W]] : tensor<1001x12xbf16> -> tensor<1008x16xbf16>
// CHECK-NEXT: %[[BP:.*]] = gt.pad %[[B]] : tensor<1001xbf16> -> tensor<1008xbf16>
// CHECK-NEXT: %[[YP:.*]] = gt.linear %[[XP]], %[[WP]], %[[BP]] : tensor<4x16xbf16>, tensor<1008x16xbf16>, tensor<1008xbf16>
// CHECK-NEXT: %[[Y:.*]] = gt.slice %[[YP]] : tensor<4x1008xbf16> -> tensor<4x1001xbf16>
// CHECK-NEXT: %[[R:.*]] = gt.relu %[[Y]] : tensor<4x1001xbf16>
// CHECK-NEXT: %[[S:.*]] = gt.sum %[[R]]
func.func @odd() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x12xbf16>
  %w = gt.param "w" = "zeros" [] : tensor<1001x12xbf16>
  %b = gt.param "b" = "zeros" [] : tensor<1001xbf16>
  %y = gt.linear %x, %w, %b : tensor<4x12xbf16>, tensor<1001x12xbf16>, tensor<1001xbf16>
  %r = gt.relu %y : tensor<4x1001xbf16>
  %s = gt.sum %r : tensor<4x1001xbf16>
  %l = gt.cast %s : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A vocabulary (50257 -> 50304, a multiple of 64) with an aligned reduction
// size: only the weight and the result change.
// CHECK-LABEL: func.func @vocab
// CHECK-NOT:  gt.pad %{{.*}} : tensor<2x768xf16>
// CHECK:      %[[WP:.*]] = gt.pad %{{.*}} : tensor<50257x768xf16> -> tensor<50304x768xf16>
// CHECK-NEXT: %[[YP:.*]] = gt.linear %{{.*}}, %[[WP]] : tensor<2x768xf16>, tensor<50304x768xf16>
// CHECK-NEXT: gt.slice %[[YP]] : tensor<2x50304xf16> -> tensor<2x50257xf16>
func.func @vocab() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x768xf16>
  %w = gt.param "wte" = "zeros" [] : tensor<50257x768xf16>
  %y = gt.linear %x, %w : tensor<2x768xf16>, tensor<50257x768xf16>
  %s = gt.sum %y : tensor<2x50257xf16>
  %l = gt.cast %s : tensor<f16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Unchanged: dimensions already multiples of 8, and f32 GEMMs (by default).
// CHECK-LABEL: func.func @keep
// CHECK-NOT:  gt.pad
// CHECK-NOT:  gt.slice
// CHECK:      gt.linear %{{.*}} : tensor<4x8xbf16>, tensor<16x8xbf16>
// CHECK:      gt.linear %{{.*}} : tensor<4x5xf32>, tensor<3x5xf32>
// M16-LABEL: func.func @keep
// M16:       gt.linear %{{.*}} : tensor<4x16xbf16>, tensor<16x16xbf16>
// M16:       gt.linear %{{.*}} : tensor<4x16xf32>, tensor<16x16xf32>
func.func @keep() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x8xbf16>
  %w = gt.param "w" = "zeros" [] : tensor<16x8xbf16>
  %y = gt.linear %x, %w : tensor<4x8xbf16>, tensor<16x8xbf16>
  %s = gt.sum %y : tensor<4x16xbf16>
  %l = gt.cast %s : tensor<bf16> -> tensor<f32>
  %a = gt.input "a" : tensor<4x5xf32>
  %v = gt.param "v" = "zeros" [] : tensor<3x5xf32>
  %z = gt.linear %a, %v : tensor<4x5xf32>, tensor<3x5xf32>
  %t = gt.sum %z : tensor<4x3xf32>
  %u = gt.add %l, %t : tensor<f32>, tensor<f32>
  return %u : tensor<f32>
}

// -----

// Between two padded linears the activation stays padded: the first
// result's extra columns are zero, relu keeps them zero, so
// pad(relu(slice(y))) becomes relu(y) and no copy is made.
// CHECK-LABEL: func.func @chain
// CHECK:      %[[Y1:.*]] = gt.linear %{{.*}} : tensor<4x8xbf16>, tensor<1008x8xbf16>, tensor<1008xbf16>
// CHECK-NEXT: %[[S:.*]] = gt.slice %[[Y1]] : tensor<4x1008xbf16> -> tensor<4x1001xbf16>
// CHECK-NEXT: %[[R:.*]] = gt.relu %[[Y1]] : tensor<4x1008xbf16>
// CHECK-NEXT: %[[W2:.*]] = gt.pad %{{.*}} : tensor<16x1001xbf16> -> tensor<16x1008xbf16>
// CHECK-NEXT: gt.linear %[[R]], %[[W2]] : tensor<4x1008xbf16>, tensor<16x1008xbf16>
// A sigmoid (sigmoid(0) = 1/2) does not keep the padding zero: its input
// is sliced and its result padded as before. w2's padded copy is shared.
// CHECK-NEXT: %[[G:.*]] = gt.sigmoid %[[S]] : tensor<4x1001xbf16>
// CHECK-NEXT: %[[GP:.*]] = gt.pad %[[G]] : tensor<4x1001xbf16> -> tensor<4x1008xbf16>
// CHECK-NEXT: gt.linear %[[GP]], %[[W2]] : tensor<4x1008xbf16>, tensor<16x1008xbf16>
func.func @chain() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x8xbf16>
  %w1 = gt.param "w1" = "zeros" [] : tensor<1001x8xbf16>
  %b1 = gt.param "b1" = "zeros" [] : tensor<1001xbf16>
  %w2 = gt.param "w2" = "zeros" [] : tensor<16x1001xbf16>
  %y1 = gt.linear %x, %w1, %b1 : tensor<4x8xbf16>, tensor<1001x8xbf16>, tensor<1001xbf16>
  %r = gt.relu %y1 : tensor<4x1001xbf16>
  %y2 = gt.linear %r, %w2 : tensor<4x1001xbf16>, tensor<16x1001xbf16>
  %g = gt.sigmoid %y1 : tensor<4x1001xbf16>
  %y3 = gt.linear %g, %w2 : tensor<4x1001xbf16>, tensor<16x1001xbf16>
  %s2 = gt.sum %y2 : tensor<4x16xbf16>
  %s3 = gt.sum %y3 : tensor<4x16xbf16>
  %s = gt.add %s2, %s3 : tensor<bf16>, tensor<bf16>
  %l = gt.cast %s : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A large GEMM (4096 x 1001 x 1024: 4.2 G multiply-adds) is padded by
// default.
// SMALL-LABEL: func.func @large
// SMALL:       gt.pad %{{.*}} : tensor<1001x1024xbf16> -> tensor<1008x1024xbf16>
// SMALL:       gt.slice %{{.*}} : tensor<4096x1008xbf16> -> tensor<4096x1001xbf16>
func.func @large() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4096x1024xbf16>
  %w = gt.param "w" = "zeros" [] : tensor<1001x1024xbf16>
  %y = gt.linear %x, %w : tensor<4096x1024xbf16>, tensor<1001x1024xbf16>
  %s = gt.sum %y : tensor<4096x1001xbf16>
  %l = gt.cast %s : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}
