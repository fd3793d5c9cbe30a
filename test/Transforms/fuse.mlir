// RUN: gtc-opt %s --gt-fuse --split-input-file | FileCheck %s

// A bias add, a cast and a relu after a GEMM become one region; the value
// the GEMM after them and the function read leave it as results.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xf32>, %[[W:.*]]: tensor<16x16xf32>)
// CHECK:      %[[F:.*]]:2 = gt.fused "elementwise"(%[[X]], %[[B]]) : (tensor<8x16xbf16>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<8x16xbf16>, %[[A1:.*]]: tensor<16xf32>):
// CHECK-NEXT:   %[[C:.*]] = gt.cast %[[A0]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT:   %[[S:.*]] = gt.add %[[C]], %[[A1]]
// CHECK-NEXT:   %[[R:.*]] = gt.relu %[[S]]
// CHECK-NEXT:   gt.yield %[[S]], %[[R]] : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT: }
// CHECK:      %[[L:.*]] = gt.linear %[[F]]#1, %[[W]]
// The multiply reads the GEMM, computed after the first region began, so
// it starts a second region with the neg after it.
// CHECK:      %[[G:.*]] = gt.fused "elementwise"(%[[L]], %[[F]]#0)
// CHECK:        gt.mul
// CHECK-NEXT:   gt.neg
// CHECK-NEXT:   gt.yield
// CHECK:      return %[[G]], %[[F]]#1
func.func @chain(%x: tensor<8x16xbf16>, %b: tensor<16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = gt.cast %x : tensor<8x16xbf16> -> tensor<8x16xf32>
  %1 = gt.add %0, %b : tensor<8x16xf32>, tensor<16xf32>
  %2 = gt.relu %1 : tensor<8x16xf32>
  %3 = gt.linear %2, %w : tensor<8x16xf32>, tensor<16x16xf32>
  %4 = gt.mul %3, %1 : tensor<8x16xf32>, tensor<8x16xf32>
  %5 = gt.neg %4 : tensor<8x16xf32>
  return %5, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A lone elementwise op between two GEMMs has nothing to fuse with: it
// stays as it is (no region of one op).
// CHECK-LABEL: func.func @alone
// CHECK-NOT:  gt.fused
// CHECK:      gt.gelu
// CHECK-NOT:  gt.fused
func.func @alone(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %1 = gt.gelu %0 : tensor<4x8xf32>
  %2 = gt.linear %1, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Another iteration shape is another kernel: relu over [8] and the add that
// broadcasts its result over [4, 8] are not fused (the add would need the
// relu at each of its 32 elements); the add fuses with the exp after it.
// CHECK-LABEL: func.func @shapes
// CHECK:      %[[R:.*]] = gt.fused "elementwise"(%{{.*}}) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK:        gt.relu
// CHECK-NEXT:   gt.tanh
// CHECK:      gt.fused "elementwise"(%{{.*}}, %[[R]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK:        gt.add
// CHECK-NEXT:   gt.exp
func.func @shapes(%v: tensor<8xf32>, %m: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.relu %v : tensor<8xf32>
  %1 = gt.tanh %0 : tensor<8xf32>
  %2 = gt.add %m, %1 : tensor<4x8xf32>, tensor<8xf32>
  %3 = gt.exp %2 : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// Reductions, normalizations and contractions never enter a region: the
// elementwise ops on either side of the softmax form two regions.
// CHECK-LABEL: func.func @reduction
// CHECK:      gt.fused
// CHECK:        gt.mul
// CHECK-NEXT:   gt.add
// CHECK:      gt.softmax
// CHECK:      gt.fused
// CHECK:        gt.neg
// CHECK-NEXT:   gt.exp
func.func @reduction(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = gt.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = gt.add %0, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %2 = gt.softmax %1 <{axis = -1 : i64}> : tensor<4x8xf32>
  %3 = gt.neg %2 : tensor<4x8xf32>
  %4 = gt.exp %3 : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Backward chains fuse too: the gradient of gelu and the cast of the
// result to bf16 for the next GEMM are one kernel.
// CHECK-LABEL: func.func @backward
// CHECK:      gt.fused "elementwise"
// CHECK:        gt.activation_grad
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.yield
func.func @backward(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  %0 = gt.activation_grad %dy, %x <{kind = "gelu"}> : tensor<4x8xf32>
  %1 = gt.cast %0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %1 : tensor<4x8xbf16>
}

// -----

// The casts of parameters (autocast's, one per parameter) become one
// multi-tensor region before the first of them; every parameter is declared
// before it, in its order; the bias add stays elementwise on its own.
// CHECK-LABEL: func.func @parameters
// CHECK:      %[[W:.*]] = gt.param "w"
// CHECK-NEXT: %[[V:.*]] = gt.param "v"
// CHECK-NEXT: %[[U:.*]] = gt.param "u"
// CHECK-NEXT: %[[C:.*]]:2 = gt.fused "multi_tensor"(%[[W]], %[[U]]) : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xbf16>, tensor<8xbf16>)
// CHECK:        gt.cast
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.yield
// CHECK:      gt.linear %{{.*}}, %[[C]]#0
// CHECK:      gt.add %{{.*}}, %[[C]]#1
func.func @parameters(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %w = gt.param "w" = "zeros" [] : tensor<8x8xf32>
  %0 = gt.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
  %1 = gt.linear %x, %0 : tensor<4x8xbf16>, tensor<8x8xbf16>
  %v = gt.param "v" = "zeros" [] : tensor<8xf32>
  %u = gt.param "u" = "zeros" [] : tensor<8xf32>
  %2 = gt.cast %u : tensor<8xf32> -> tensor<8xbf16>
  %3 = gt.add %1, %2 : tensor<4x8xbf16>, tensor<8xbf16>
  return %3 : tensor<4x8xbf16>
}

// -----

// A parameter cast twice to one type (gt-checkpoint's recomputed cast in the
// backward) is cast once: the second cast's uses read the region's result.
// A cast to another type is another result.
// CHECK-LABEL: func.func @recomputed_casts
// CHECK:      %[[W:.*]] = gt.param "w"
// CHECK-NEXT: %[[C:.*]]:2 = gt.fused "multi_tensor"(%[[W]]) : (tensor<8x8xf32>) -> (tensor<8x8xbf16>, tensor<8x8xf16>)
// CHECK:        gt.cast
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.yield
// CHECK:      %[[A:.*]] = gt.linear %{{.*}}, %[[C]]#0
// CHECK-NEXT: %[[B:.*]] = gt.linear %[[A]], %[[C]]#0
// CHECK-NOT:  gt.cast
// CHECK:      return %[[B]], %[[C]]#1
func.func @recomputed_casts(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8x8xf16>) {
  %w = gt.param "w" = "zeros" [] : tensor<8x8xf32>
  %0 = gt.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
  %1 = gt.linear %x, %0 : tensor<4x8xbf16>, tensor<8x8xbf16>
  %2 = gt.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
  %3 = gt.linear %1, %2 : tensor<4x8xbf16>, tensor<8x8xbf16>
  %4 = gt.cast %w : tensor<8x8xf32> -> tensor<8x8xf16>
  return %3, %4 : tensor<4x8xbf16>, tensor<8x8xf16>
}

// -----

// A cast that is the only use of a GEMM, a sum_to or a layernorm folds into
// it (GT_CastEpilogue): the bf16 weight gradient and bias gradient are
// stored as f32, the layernorm as the bf16 input of the next GEMM. A cast of
// a value with other uses stays (here: %n is also returned). The sum_to
// reads another value than the GEMM, so it is no bias gradient of it.
// CHECK-LABEL: func.func @epilogues
// CHECK:      gt.fused "epilogue"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT:   gt.yield
// CHECK:      gt.fused "epilogue"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.sum_to
// CHECK-NEXT:   gt.cast {{.*}} -> tensor<8xf32>
// CHECK-NEXT:   gt.yield
// CHECK:      %[[N:.*]] = gt.layernorm
// CHECK-NEXT: gt.cast %[[N]]
func.func @epilogues(%dy: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %w: tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>) {
  %0 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<4x8xbf16>, tensor<4x8xbf16>
  %1 = gt.cast %0 : tensor<8x8xbf16> -> tensor<8x8xf32>
  %2 = gt.sum_to %x : tensor<4x8xbf16> -> tensor<8xbf16>
  %3 = gt.cast %2 : tensor<8xbf16> -> tensor<8xf32>
  %4 = gt.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %n = gt.layernorm %4, %w, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %5 = gt.cast %n : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %1, %3, %5, %n : tensor<8x8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// A weight gradient dy^T x and the bias gradient (the row sums of the same
// dy), each with the cast of its result, become one gemm region (cuBLASLt's
// BGRADB epilogue: dy is read once), placed at the first of them.
// CHECK-LABEL: func.func @bias_gradient
// CHECK-SAME: (%[[DY:.*]]: tensor<4x8xbf16>, %[[X:.*]]: tensor<4x16xbf16>)
// CHECK:      %[[G:.*]]:2 = gt.fused "gemm"(%[[DY]], %[[X]]) : (tensor<4x8xbf16>, tensor<4x16xbf16>) -> (tensor<8x16xf32>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4x16xbf16>):
// CHECK-NEXT:   %[[M:.*]] = gt.matmul %[[A]], %[[B]] <{transpose_a = true}>
// CHECK-NEXT:   %[[MC:.*]] = gt.cast %[[M]] : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[A]]
// CHECK-NEXT:   %[[SC:.*]] = gt.cast %[[S]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[MC]], %[[SC]]
// CHECK:      return %[[G]]#0, %[[G]]#1
func.func @bias_gradient(%dy: tensor<4x8xbf16>, %x: tensor<4x16xbf16>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %0 = gt.sum_to %dy : tensor<4x8xbf16> -> tensor<8xbf16>
  %1 = gt.cast %0 : tensor<8xbf16> -> tensor<8xf32>
  %2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<4x8xbf16>, tensor<4x16xbf16>
  %3 = gt.cast %2 : tensor<8x16xbf16> -> tensor<8x16xf32>
  return %3, %1 : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// The bias gradient of a dy that an elementwise op computes (a ReLU
// gradient) joins that op's region, with its cast: one kernel stores dy and
// sums its columns, and the dW GEMM needs no BGRADB epilogue (cuBLASLt's
// split-K GEMM and separate bias kernel).
// CHECK-LABEL: func.func @bias_gradient_column_sum
// CHECK-SAME: (%[[G:.*]]: tensor<64x8xbf16>, %[[H:.*]]: tensor<64x8xbf16>, %[[X:.*]]: tensor<64x16xbf16>)
// CHECK:      %[[E:.*]]:2 = gt.fused "elementwise"(%[[G]], %[[H]]) : (tensor<64x8xbf16>, tensor<64x8xbf16>) -> (tensor<64x8xbf16>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<64x8xbf16>, %[[B:.*]]: tensor<64x8xbf16>):
// CHECK-NEXT:   %[[DY:.*]] = gt.activation_grad %[[A]], %[[B]] <{kind = "relu"}>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[DY]] : tensor<64x8xbf16> -> tensor<8xbf16>
// CHECK-NEXT:   %[[SC:.*]] = gt.cast %[[S]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[DY]], %[[SC]]
// CHECK:      %[[W:.*]] = gt.fused "epilogue"(%[[E]]#0, %[[X]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.yield
// CHECK:      return %[[W]], %[[E]]#1
func.func @bias_gradient_column_sum(%g: tensor<64x8xbf16>, %h: tensor<64x8xbf16>, %x: tensor<64x16xbf16>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %dy = gt.activation_grad %g, %h <{kind = "relu"}> : tensor<64x8xbf16>
  %0 = gt.sum_to %dy : tensor<64x8xbf16> -> tensor<8xbf16>
  %1 = gt.cast %0 : tensor<8xbf16> -> tensor<8xf32>
  %2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<64x8xbf16>, tensor<64x16xbf16>
  %3 = gt.cast %2 : tensor<8x16xbf16> -> tensor<8x16xf32>
  return %3, %1 : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// Over many rows too (the CUDA emitter splits them into chunks and adds
// the chunks' sums in a second launch).
// CHECK-LABEL: func.func @bias_gradient_many_rows
// CHECK:      %[[E:.*]]:2 = gt.fused "elementwise"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[DY:.*]] = gt.activation_grad
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[DY]] : tensor<16384x8xf32> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[DY]], %[[S]]
// CHECK:      %[[W:.*]] = gt.matmul %[[E]]#0
// CHECK-NOT:  gt.fused
// CHECK:      return %[[W]], %[[E]]#1
func.func @bias_gradient_many_rows(%g: tensor<16384x8xf32>, %h: tensor<16384x8xf32>, %x: tensor<16384x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %dy = gt.activation_grad %g, %h <{kind = "relu"}> : tensor<16384x8xf32>
  %0 = gt.sum_to %dy : tensor<16384x8xf32> -> tensor<8xf32>
  %2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<16384x8xf32>, tensor<16384x16xf32>
  return %2, %0 : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// A dy that no elementwise op computes (here an argument; in GPT-2 the
// attention's gradient) keeps its bias gradient in the dW GEMM (BGRADB).
// CHECK-LABEL: func.func @bias_gradient_gemm
// CHECK-NOT:  gt.fused "elementwise"
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.sum_to
// CHECK-NEXT:   gt.yield
func.func @bias_gradient_gemm(%dy: tensor<1024x8xf32>, %x: tensor<1024x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %0 = gt.sum_to %dy : tensor<1024x8xf32> -> tensor<8xf32>
  %2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<1024x8xf32>, tensor<1024x16xf32>
  return %2, %0 : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// cuBLASLt writes the bias gradient in the GEMM output's type: with only
// one of the two cast, they stay apart (the cast folds as an epilogue).
// CHECK-LABEL: func.func @bias_gradient_types
// CHECK-NOT:  gt.fused "gemm"
// CHECK:      gt.fused "epilogue"
// CHECK-NOT:  gt.fused "gemm"
func.func @bias_gradient_types(%dy: tensor<4x8xbf16>, %x: tensor<4x16xbf16>) -> (tensor<8x16xf32>, tensor<8xbf16>) {
  %0 = gt.sum_to %dy : tensor<4x8xbf16> -> tensor<8xbf16>
  %2 = gt.matmul %dy, %x <{transpose_a = true}> : tensor<4x8xbf16>, tensor<4x16xbf16>
  %3 = gt.cast %2 : tensor<8x16xbf16> -> tensor<8x16xf32>
  return %3, %0 : tensor<8x16xf32>, tensor<8xbf16>
}

// -----

// linear -> gelu(approximate) is one GEMM (GELU_AUX_BIAS): the GELU's input,
// which its gradient reads later, leaves the region too. That gradient,
// after the GEMM dy W of the backward and a reshape, is the DGELU epilogue
// of that GEMM (reading the saved input).
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<16x8xbf16>, %[[BI:.*]]: tensor<16xbf16>, %[[DY:.*]]: tensor<4x8xbf16>, %[[W2:.*]]: tensor<8x16xbf16>)
// CHECK:      %[[F:.*]]:2 = gt.fused "gemm"(%{{.*}}, %[[W]], %[[BI]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[Z:.*]] = gt.linear
// CHECK-NEXT:   %[[H:.*]] = gt.gelu %[[Z]] <{approximate = true}>
// CHECK-NEXT:   gt.yield %[[Z]], %[[H]]
// CHECK:      %[[D:.*]] = gt.fused "gemm"(%[[DY]], %[[W2]], %[[F]]#0) : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<2x2x16xbf16>) -> tensor<2x2x16xbf16>
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<8x16xbf16>, %[[C:.*]]: tensor<2x2x16xbf16>):
// CHECK-NEXT:   %[[M:.*]] = gt.matmul %[[A]], %[[B]]
// CHECK-NEXT:   %[[R:.*]] = gt.reshape %[[M]]
// CHECK-NEXT:   %[[G:.*]] = gt.activation_grad %[[R]], %[[C]] <{kind = "gelu_tanh"}>
// CHECK-NEXT:   gt.yield %[[G]]
// CHECK:      return %[[F]]#1, %[[D]]
func.func @gelu(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>, %dy: tensor<4x8xbf16>, %w2: tensor<8x16xbf16>) -> (tensor<2x2x16xbf16>, tensor<2x2x16xbf16>) {
  %x3 = gt.reshape %x : tensor<4x8xbf16> -> tensor<2x2x8xbf16>
  %z = gt.linear %x3, %w, %b : tensor<2x2x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>
  %h = gt.gelu %z <{approximate = true}> : tensor<2x2x16xbf16>
  %dh = gt.matmul %dy, %w2 : tensor<4x8xbf16>, tensor<8x16xbf16>
  %dh3 = gt.reshape %dh : tensor<4x16xbf16> -> tensor<2x2x16xbf16>
  %dz = gt.activation_grad %dh3, %z <{kind = "gelu_tanh"}> : tensor<2x2x16xbf16>
  return %h, %dz : tensor<2x2x16xbf16>, tensor<2x2x16xbf16>
}

// -----

// gt-autodiff sums a linear's output gradient in the dW GEMM's rank-2 form:
// the sum of that reshape of an elementwise op's value becomes the sum of
// the value itself, which joins the op's region.
// CHECK-LABEL: func.func @bias_gradient_of_reshape
// CHECK-SAME: (%[[G:.*]]: tensor<2x2x16xbf16>, %[[H:.*]]: tensor<2x2x16xbf16>, %[[X:.*]]: tensor<4x8xbf16>)
// CHECK:      %[[E:.*]]:2 = gt.fused "elementwise"(%[[G]], %[[H]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x2x16xbf16>, %[[B:.*]]: tensor<2x2x16xbf16>):
// CHECK-NEXT:   %[[DY:.*]] = gt.activation_grad %[[A]], %[[B]] <{kind = "relu"}>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[DY]] : tensor<2x2x16xbf16> -> tensor<16xbf16>
// CHECK-NEXT:   %[[SC:.*]] = gt.cast %[[S]] : tensor<16xbf16> -> tensor<16xf32>
// CHECK-NEXT:   gt.yield %[[DY]], %[[SC]]
// CHECK:      %[[DY2:.*]] = gt.reshape %[[E]]#0 : tensor<2x2x16xbf16> -> tensor<4x16xbf16>
// CHECK:      %[[DW:.*]] = gt.fused "epilogue"(%[[DY2]], %[[X]])
// CHECK:      return %[[DW]], %[[E]]#1
func.func @bias_gradient_of_reshape(%g: tensor<2x2x16xbf16>, %h: tensor<2x2x16xbf16>, %x: tensor<4x8xbf16>) -> (tensor<16x8xf32>, tensor<16xf32>) {
  %dz = gt.activation_grad %g, %h <{kind = "relu"}> : tensor<2x2x16xbf16>
  %dz2 = gt.reshape %dz : tensor<2x2x16xbf16> -> tensor<4x16xbf16>
  %0 = gt.sum_to %dz2 : tensor<4x16xbf16> -> tensor<16xbf16>
  %1 = gt.cast %0 : tensor<16xbf16> -> tensor<16xf32>
  %2 = gt.matmul %dz2, %x <{transpose_a = true}> : tensor<4x16xbf16>, tensor<4x8xbf16>
  %3 = gt.cast %2 : tensor<16x8xbf16> -> tensor<16x8xf32>
  return %3, %1 : tensor<16x8xf32>, tensor<16xf32>
}

// -----

// Not rewritten: the sum of a reshape that changes the last dimension sums
// other columns (here cuBLASLt's BGRADB with the dW GEMM). A GELU gradient
// is the DGELU epilogue of the GEMM dy W even when the bias gradient of the
// linear below sums it (the sum stays with that linear's dW GEMM, BGRADB).
// CHECK-LABEL: func.func @bias_gradient_of_reshape_not
// CHECK:      %[[D:.*]] = gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.reshape
// CHECK-NEXT:   gt.activation_grad
// CHECK-NEXT:   gt.yield
// CHECK:      gt.reshape %[[D]] : tensor<2x2x16xbf16> -> tensor<4x16xbf16>
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.sum_to %{{.*}} : tensor<4x16xbf16> -> tensor<16xbf16>
// CHECK:      %[[V:.*]] = gt.reshape %{{.*}} : tensor<2x2x16xbf16> -> tensor<8x8xbf16>
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.sum_to %{{.*}} : tensor<8x8xbf16> -> tensor<8xbf16>
// CHECK-NOT:  gt.fused "elementwise"
func.func @bias_gradient_of_reshape_not(%dy: tensor<4x8xbf16>, %w2: tensor<8x16xbf16>, %z: tensor<2x2x16xbf16>, %x: tensor<4x8xbf16>, %g: tensor<2x2x16xbf16>, %h: tensor<2x2x16xbf16>, %x8: tensor<8x8xbf16>) -> (tensor<16x8xbf16>, tensor<16xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) {
  %dh = gt.matmul %dy, %w2 : tensor<4x8xbf16>, tensor<8x16xbf16>
  %dh3 = gt.reshape %dh : tensor<4x16xbf16> -> tensor<2x2x16xbf16>
  %dz = gt.activation_grad %dh3, %z <{kind = "gelu_tanh"}> : tensor<2x2x16xbf16>
  %dz2 = gt.reshape %dz : tensor<2x2x16xbf16> -> tensor<4x16xbf16>
  %0 = gt.sum_to %dz2 : tensor<4x16xbf16> -> tensor<16xbf16>
  %2 = gt.matmul %dz2, %x <{transpose_a = true}> : tensor<4x16xbf16>, tensor<4x8xbf16>
  %r = gt.activation_grad %g, %h <{kind = "relu"}> : tensor<2x2x16xbf16>
  %r2 = gt.reshape %r : tensor<2x2x16xbf16> -> tensor<8x8xbf16>
  %1 = gt.sum_to %r2 : tensor<8x8xbf16> -> tensor<8xbf16>
  %3 = gt.matmul %r2, %x8 <{transpose_a = true}> : tensor<8x8xbf16>, tensor<8x8xbf16>
  return %2, %0, %3, %1 : tensor<16x8xbf16>, tensor<16xbf16>, tensor<8x8xbf16>, tensor<8xbf16>
}

// -----

// In bf16 at the sizes of gtc's Hopper GEMM (whole 128 x 128 tiles, K a
// multiple of 64 up to 2048, more than 64 rows: rt::dgeluSumsFit) the bias
// gradient of the linear below (the column sums of the GELU gradient, here
// through the dW GEMM's rank-2 view) joins the DGELU region, read directly;
// the dW GEMM keeps only its cast. In f32 it stays with the dW GEMM (BGRADB).
// CHECK-LABEL: func.func @gelu_gradient_column_sums
// CHECK-SAME: (%[[DY:.*]]: tensor<128x64xbf16>, %[[W2:.*]]: tensor<64x128xbf16>, %[[Z:.*]]: tensor<2x64x128xbf16>, %[[X:.*]]: tensor<128x64xbf16>
// CHECK:      %[[D:.*]]:2 = gt.fused "gemm"(%[[DY]], %[[W2]], %[[Z]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[M:.*]] = gt.matmul
// CHECK-NEXT:   %[[R:.*]] = gt.reshape %[[M]]
// CHECK-NEXT:   %[[G:.*]] = gt.activation_grad %[[R]], %{{.*}} <{kind = "gelu_tanh"}>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[G]] : tensor<2x64x128xbf16> -> tensor<128xbf16>
// CHECK-NEXT:   %[[SC:.*]] = gt.cast %[[S]] : tensor<128xbf16> -> tensor<128xf32>
// CHECK-NEXT:   gt.yield %[[G]], %[[SC]]
// CHECK:      %[[V:.*]] = gt.reshape %[[D]]#0 : tensor<2x64x128xbf16> -> tensor<128x128xbf16>
// CHECK:      %[[DW:.*]] = gt.fused "epilogue"(%[[V]], %[[X]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.yield
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.reshape
// CHECK-NEXT:   gt.activation_grad
// CHECK-NEXT:   gt.yield
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul %{{.*}}, %{{.*}} <{transpose_a = true}>
// CHECK-NEXT:   gt.sum_to %{{.*}} : tensor<128x128xf32> -> tensor<128xf32>
// CHECK:      return %[[DW]], %[[D]]#1
func.func @gelu_gradient_column_sums(%dy: tensor<128x64xbf16>, %w2: tensor<64x128xbf16>, %z: tensor<2x64x128xbf16>, %x: tensor<128x64xbf16>, %dyf: tensor<128x64xf32>, %w2f: tensor<64x128xf32>, %zf: tensor<2x64x128xf32>, %xf: tensor<128x64xf32>) -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128x64xf32>, tensor<128xf32>) {
  %dh = gt.matmul %dy, %w2 : tensor<128x64xbf16>, tensor<64x128xbf16>
  %dh3 = gt.reshape %dh : tensor<128x128xbf16> -> tensor<2x64x128xbf16>
  %dz = gt.activation_grad %dh3, %z <{kind = "gelu_tanh"}> : tensor<2x64x128xbf16>
  %dz2 = gt.reshape %dz : tensor<2x64x128xbf16> -> tensor<128x128xbf16>
  %0 = gt.sum_to %dz2 : tensor<128x128xbf16> -> tensor<128xbf16>
  %1 = gt.cast %0 : tensor<128xbf16> -> tensor<128xf32>
  %2 = gt.matmul %dz2, %x <{transpose_a = true}> : tensor<128x128xbf16>, tensor<128x64xbf16>
  %3 = gt.cast %2 : tensor<128x64xbf16> -> tensor<128x64xf32>
  %fh = gt.matmul %dyf, %w2f : tensor<128x64xf32>, tensor<64x128xf32>
  %fh3 = gt.reshape %fh : tensor<128x128xf32> -> tensor<2x64x128xf32>
  %fz = gt.activation_grad %fh3, %zf <{kind = "gelu_tanh"}> : tensor<2x64x128xf32>
  %fz2 = gt.reshape %fz : tensor<2x64x128xf32> -> tensor<128x128xf32>
  %4 = gt.sum_to %fz2 : tensor<128x128xf32> -> tensor<128xf32>
  %5 = gt.matmul %fz2, %xf <{transpose_a = true}> : tensor<128x128xf32>, tensor<128x64xf32>
  return %3, %1, %5, %4 : tensor<128x64xf32>, tensor<128xf32>, tensor<128x64xf32>, tensor<128xf32>
}

// -----

// Not fused: the exact GELU (cuBLASLt has the tanh form only), a saved GELU
// input whose rows are not a multiple of 8 elements (cuBLASLt's rule for
// its auxiliary matrix), and a GEMM whose result is read again besides the
// GELU gradient (the region would have to store it too).
// CHECK-LABEL: func.func @gelu_not
// CHECK-NOT:  gt.fused "gemm"
func.func @gelu_not(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %dy: tensor<4x8xf32>, %w2: tensor<8x16xf32>, %z: tensor<4x16xf32>, %w3: tensor<12x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>, tensor<4x12xf32>) {
  %0 = gt.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32>
  %1 = gt.gelu %0 : tensor<4x16xf32>
  %3 = gt.linear %x, %w3 : tensor<4x8xf32>, tensor<12x8xf32>
  %4 = gt.gelu %3 <{approximate = true}> : tensor<4x12xf32>
  %dh = gt.matmul %dy, %w2 : tensor<4x8xf32>, tensor<8x16xf32>
  %dz = gt.activation_grad %dh, %z <{kind = "gelu_tanh"}> : tensor<4x16xf32>
  %2 = gt.add %dz, %dh : tensor<4x16xf32>, tensor<4x16xf32>
  return %1, %2, %0, %3, %4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>, tensor<4x12xf32>
}

// -----

// linear -> relu is one GEMM (RELU_BIAS). Its gradient reads the relu's
// output instead of its input (relu(z) > 0 exactly when z > 0), so the
// region stores only the relu's output.
// CHECK-LABEL: func.func @relu
// CHECK:      %[[F:.*]] = gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   %[[Z:.*]] = gt.linear
// CHECK-NEXT:   %[[H:.*]] = gt.relu %[[Z]]
// CHECK-NEXT:   gt.yield %[[H]]
// CHECK:      gt.activation_grad %{{.*}}, %[[F]] <{kind = "relu"}>
func.func @relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %dy: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = gt.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32>
  %h = gt.relu %z : tensor<4x16xf32>
  %dz = gt.activation_grad %dy, %z <{kind = "relu"}> : tensor<4x16xf32>
  return %h, %dz : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A relu input read by anything but relu gradients stays a value of its
// own: no region.
// CHECK-LABEL: func.func @relu_not
// CHECK-NOT:  gt.fused "gemm"
func.func @relu_not(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %z = gt.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32>
  %h = gt.relu %z : tensor<4x16xf32>
  return %h, %z : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// dh = dy W of at most 64 rows, the ReLU gradient of dh and its column sums
// (the bias gradient of the linear below) are one gemm region: gtc's
// small GEMM masks and sums in its epilogue. The dW GEMM then needs no
// BGRADB epilogue.
// CHECK-LABEL: func.func @relu_gradient_gemm
// CHECK-SAME: (%[[DY:.*]]: tensor<64x16xbf16>, %[[W:.*]]: tensor<16x8xbf16>, %[[H:.*]]: tensor<64x8xbf16>, %[[X:.*]]: tensor<64x4xbf16>)
// CHECK:      %[[R:.*]]:2 = gt.fused "gemm"(%[[DY]], %[[W]], %[[H]]) : (tensor<64x16xbf16>, tensor<16x8xbf16>, tensor<64x8xbf16>) -> (tensor<64x8xbf16>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<64x16xbf16>, %[[B:.*]]: tensor<16x8xbf16>, %[[C:.*]]: tensor<64x8xbf16>):
// CHECK-NEXT:   %[[DH:.*]] = gt.matmul %[[A]], %[[B]]
// CHECK-NEXT:   %[[DZ:.*]] = gt.activation_grad %[[DH]], %[[C]] <{kind = "relu"}>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[DZ]] : tensor<64x8xbf16> -> tensor<8xbf16>
// CHECK-NEXT:   %[[SC:.*]] = gt.cast %[[S]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[DZ]], %[[SC]]
// CHECK:      gt.fused "epilogue"(%[[R]]#0, %[[X]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast
func.func @relu_gradient_gemm(%dy: tensor<64x16xbf16>, %w: tensor<16x8xbf16>, %h: tensor<64x8xbf16>, %x: tensor<64x4xbf16>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %dh = gt.matmul %dy, %w : tensor<64x16xbf16>, tensor<16x8xbf16>
  %dz = gt.activation_grad %dh, %h <{kind = "relu"}> : tensor<64x8xbf16>
  %0 = gt.sum_to %dz : tensor<64x8xbf16> -> tensor<8xbf16>
  %1 = gt.cast %0 : tensor<8xbf16> -> tensor<8xf32>
  %2 = gt.matmul %dz, %x <{transpose_a = true}> : tensor<64x8xbf16>, tensor<64x4xbf16>
  %3 = gt.cast %2 : tensor<8x4xbf16> -> tensor<8x4xf32>
  return %3, %1 : tensor<8x4xf32>, tensor<8xf32>
}

// -----

// Over more than 64 rows the GEMM is cuBLASLt's, which has no epilogue for a
// ReLU gradient of a saved output: the gradient and its column sums stay an
// elementwise region (over at most 512 rows).
// CHECK-LABEL: func.func @relu_gradient_gemm_many_rows
// CHECK:      %[[DH:.*]] = gt.matmul
// CHECK-NEXT: gt.fused "elementwise"(%[[DH]],
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.activation_grad
// CHECK-NEXT:   gt.sum_to
// CHECK-NEXT:   gt.yield
func.func @relu_gradient_gemm_many_rows(%dy: tensor<128x16xf32>, %w: tensor<16x8xf32>, %h: tensor<128x8xf32>) -> (tensor<128x8xf32>, tensor<8xf32>) {
  %dh = gt.matmul %dy, %w : tensor<128x16xf32>, tensor<16x8xf32>
  %dz = gt.activation_grad %dh, %h <{kind = "relu"}> : tensor<128x8xf32>
  %0 = gt.sum_to %dz : tensor<128x8xf32> -> tensor<8xf32>
  return %dz, %0 : tensor<128x8xf32>, tensor<8xf32>
}

// -----

// Residual add + layernorm: the cast of the branch, the add (the residual
// stream, stored too), the layernorm and the cast of its rows are one row
// kernel; the parameters it reads are declared before it, in their order.
// CHECK-LABEL: func.func @residual_layernorm
// CHECK-SAME: (%[[R:.*]]: tensor<4x8xf32>, %[[A:.*]]: tensor<4x8xbf16>)
// CHECK:      %[[W:.*]] = gt.param "ln.weight"
// CHECK-NEXT: %[[B:.*]] = gt.param "ln.bias"
// CHECK-NEXT: %[[F:.*]]:2 = gt.fused "norm"(%[[A]], %[[R]], %[[W]], %[[B]]) : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x8xbf16>, %[[A1:.*]]: tensor<4x8xf32>, %[[A2:.*]]: tensor<8xf32>, %[[A3:.*]]: tensor<8xf32>):
// CHECK-NEXT:   %[[C:.*]] = gt.cast %[[A0]]
// CHECK-NEXT:   %[[S:.*]] = gt.add %[[A1]], %[[C]]
// CHECK-NEXT:   %[[N:.*]] = gt.layernorm %[[S]], %[[A2]], %[[A3]]
// CHECK-NEXT:   %[[NC:.*]] = gt.cast %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   gt.yield %[[S]], %[[NC]]
// CHECK:      return %[[F]]#0, %[[F]]#1
func.func @residual_layernorm(%r: tensor<4x8xf32>, %a: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %0 = gt.cast %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %1 = gt.add %r, %0 : tensor<4x8xf32>, tensor<4x8xf32>
  %w = gt.param "ln.weight" = "ones" [] : tensor<8xf32>
  %b = gt.param "ln.bias" = "zeros" [] : tensor<8xf32>
  %2 = gt.layernorm %1, %w, %b : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %3 = gt.cast %2 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %1, %3 : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// A residual add that two layer norms read (the forward's and one that
// gt-checkpoint recomputes in the backward from the kept residual stream)
// joins the first one's region only; the second reads the stored sum.
// CHECK-LABEL: func.func @residual_two_norms
// CHECK:      %[[F:.*]]:2 = gt.fused "norm"
// CHECK:        gt.add
// CHECK-NEXT:   gt.layernorm
// CHECK-NEXT:   gt.yield
// CHECK:      %[[N:.*]] = gt.layernorm %[[F]]#0
// CHECK:      return %[[F]]#0, %[[F]]#1, %[[N]]
func.func @residual_two_norms(%r: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = gt.add %r, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = gt.layernorm %0, %w, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %2 = gt.layernorm %0, %w, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A table of rows repeated along the leading dimensions (the position
// embedding added to the token embedding, either operand first) joins as the
// residual add: the row kernel reads row i % T of the table.
// CHECK-LABEL: func.func @position_table_layernorm
// CHECK-SAME: (%[[E:.*]]: tensor<2x4x8xf32>, %[[P:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK:      %[[F:.*]]:2 = gt.fused "norm"(%[[E]], %[[P]], %[[W]])
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<2x4x8xf32>, %[[A1:.*]]: tensor<4x8xf32>, %[[A2:.*]]: tensor<8xf32>):
// CHECK-NEXT:   %[[S:.*]] = gt.add %[[A0]], %[[A1]] : tensor<2x4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT:   %[[N:.*]] = gt.layernorm %[[S]], %[[A2]], %[[A2]]
// CHECK-NEXT:   gt.yield %[[S]], %[[N]]
// CHECK:      %[[G:.*]]:2 = gt.fused "norm"(%[[P]], %[[E]], %[[W]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<2x4x8xf32>
// CHECK:      return %[[F]]#0, %[[F]]#1, %[[G]]#0, %[[G]]#1
func.func @position_table_layernorm(%e: tensor<2x4x8xf32>, %p: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %0 = gt.add %e, %p : tensor<2x4x8xf32>, tensor<4x8xf32>
  %1 = gt.layernorm %0, %w, %w : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %2 = gt.add %p, %e : tensor<4x8xf32>, tensor<2x4x8xf32>
  %3 = gt.layernorm %2, %w, %w : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0, %1, %2, %3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Not a norm region: an add read only by the layernorm is no residual
// stream (the region would keep it in registers, which a row kernel that
// reads its input twice does not), and an add that broadcasts along the
// rows (one value a row) or a table with a leading 1 is not over whole rows.
// CHECK-LABEL: func.func @layernorm_not
// CHECK-NOT:  gt.fused "norm"
func.func @layernorm_not(%r: tensor<4x8xf32>, %a: tensor<4x8xf32>, %c: tensor<4x1xf32>, %w: tensor<8xf32>, %e: tensor<2x4x8xf32>, %p: tensor<1x4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %0 = gt.add %r, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = gt.layernorm %0, %w, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %2 = gt.add %r, %c : tensor<4x8xf32>, tensor<4x1xf32>
  %3 = gt.layernorm %2, %w, %w : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %4 = gt.add %e, %p : tensor<2x4x8xf32>, tensor<1x4x8xf32>
  %5 = gt.layernorm %4, %w, %w : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %1, %2, %3, %4, %5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Layer norm backward in one kernel: the cast of the incoming gradient, the
// layernorm_grad, the add of its input gradient to the residual gradient
// and that sum's cast (the next GEMM's operand).
// CHECK-LABEL: func.func @layernorm_grad
// CHECK-SAME: (%[[DY:.*]]: tensor<4x8xbf16>, %[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[G:.*]]: tensor<4x8xf32>)
// CHECK:      %[[F:.*]]:4 = gt.fused "norm"(%[[DY]], %[[X]], %[[W]], %[[G]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = gt.layernorm_grad
// CHECK-NEXT:   %[[T:.*]] = gt.add %{{.*}}, %[[DX]]
// CHECK-NEXT:   %[[TC:.*]] = gt.cast %[[T]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   gt.yield %[[DW]], %[[DB]], %[[T]], %[[TC]]
func.func @layernorm_grad(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %0 = gt.cast %dy : tensor<4x8xbf16> -> tensor<4x8xf32>
  %dx, %dw, %db = gt.layernorm_grad %0, %x, %w : tensor<4x8xf32>, tensor<8xf32>
  %1 = gt.add %g, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  %2 = gt.cast %1 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %1, %2, %dw, %db : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// RMS norm regions, as layer norm's: forward, the residual add (stored) and
// the rmsnorm with the cast of its rows; backward, the cast of dy, the
// rmsnorm_grad, the add to the residual gradient and its cast.
// CHECK-LABEL: func.func @residual_rmsnorm
// CHECK:      %[[F:.*]]:2 = gt.fused "norm"
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x8xf32>, %[[A1:.*]]: tensor<4x8xf32>, %[[A2:.*]]: tensor<8xf32>):
// CHECK-NEXT:   %[[S:.*]] = gt.add %[[A0]], %[[A1]]
// CHECK-NEXT:   %[[N:.*]] = gt.rmsnorm %[[S]], %[[A2]]
// CHECK-NEXT:   %[[NC:.*]] = gt.cast %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   gt.yield %[[S]], %[[NC]]
// CHECK:      %[[G:.*]]:3 = gt.fused "norm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   %[[DX:.*]], %[[DW:.*]] = gt.rmsnorm_grad
// CHECK-NEXT:   %[[T:.*]] = gt.add %{{.*}}, %[[DX]]
// CHECK-NEXT:   %[[TC:.*]] = gt.cast %[[T]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   gt.yield %[[DW]], %[[T]], %[[TC]]
// CHECK:      return %[[F]]#0, %[[F]]#1, %[[G]]#1, %[[G]]#2, %[[G]]#0
func.func @residual_rmsnorm(%r: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8xf32>, %dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>) {
  %0 = gt.add %r, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = gt.rmsnorm %0, %w : tensor<4x8xf32>, tensor<8xf32>
  %2 = gt.cast %1 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %3 = gt.cast %dy : tensor<4x8xbf16> -> tensor<4x8xf32>
  %dx, %dw = gt.rmsnorm_grad %3, %x, %w : tensor<4x8xf32>, tensor<8xf32>
  %4 = gt.add %g, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  %5 = gt.cast %4 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %0, %2, %4, %5, %dw : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>
}

// -----

// The bias gradient of the linear whose output gradient is the norm's total// -----

// The bias gradient of the linear whose output gradient is the norm's total
// (gt-autodiff's sum_to over its 2-D view) joins the norm region as the
// column sums of the stored bf16 total, with their cast: the row kernel sums
// the columns it holds, and the linear's dW GEMM (a cast epilogue) needs no
// BGRADB. The view stays outside for the GEMMs.
// CHECK-LABEL: func.func @layernorm_grad_bias
// CHECK:      %[[F:.*]]:5 = gt.fused "norm"
// CHECK:        %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = gt.layernorm_grad
// CHECK-NEXT:   %[[T:.*]] = gt.add %{{.*}}, %[[DX]]
// CHECK-NEXT:   %[[TC:.*]] = gt.cast %[[T]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[TC]] : tensor<2x4x8xbf16> -> tensor<8xbf16>
// CHECK-NEXT:   %[[SF:.*]] = gt.cast %[[S]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[DW]], %[[DB]], %[[T]], %[[TC]], %[[SF]]
// CHECK:      %[[V:.*]] = gt.reshape %[[F]]#3
// CHECK:      gt.fused "epilogue"(%[[V]], %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast
// CHECK-NOT:  gt.sum_to
// CHECK:      return
func.func @layernorm_grad_bias(%dy: tensor<2x4x8xbf16>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %g: tensor<2x4x8xf32>, %h: tensor<8x16xbf16>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8xf32>) {
  %0 = gt.cast %dy : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %dx, %dw, %db = gt.layernorm_grad %0, %x, %w : tensor<2x4x8xf32>, tensor<8xf32>
  %1 = gt.add %g, %dx : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %2 = gt.cast %1 : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %3 = gt.reshape %2 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %4 = gt.matmul %3, %h <{transpose_a = true}> : tensor<8x8xbf16>, tensor<8x16xbf16>
  %5 = gt.cast %4 : tensor<8x16xbf16> -> tensor<8x16xf32>
  %6 = gt.sum_to %3 : tensor<8x8xbf16> -> tensor<8xbf16>
  %7 = gt.cast %6 : tensor<8xbf16> -> tensor<8xf32>
  return %1, %dw, %db, %5, %7 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8xf32>
}

// -----

// The backward's first norm has no residual add: dx's cast and the bias
// gradient over it join the region just the same.
// CHECK-LABEL: func.func @layernorm_grad_first
// CHECK:      %[[F:.*]]:4 = gt.fused "norm"
// CHECK:        %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = gt.layernorm_grad
// CHECK-NEXT:   %[[TC:.*]] = gt.cast %[[DX]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[TC]] : tensor<2x4x8xbf16> -> tensor<8xbf16>
// CHECK-NEXT:   %[[SF:.*]] = gt.cast %[[S]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:   gt.yield %[[DW]], %[[DB]], %[[TC]], %[[SF]]
func.func @layernorm_grad_first(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %h: tensor<8x16xbf16>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8xf32>) {
  %dx, %dw, %db = gt.layernorm_grad %dy, %x, %w : tensor<2x4x8xf32>, tensor<8xf32>
  %2 = gt.cast %dx : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %3 = gt.reshape %2 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %4 = gt.matmul %3, %h <{transpose_a = true}> : tensor<8x8xbf16>, tensor<8x16xbf16>
  %5 = gt.cast %4 : tensor<8x16xbf16> -> tensor<8x16xf32>
  %6 = gt.sum_to %3 : tensor<8x8xbf16> -> tensor<8xbf16>
  %7 = gt.cast %6 : tensor<8xbf16> -> tensor<8xf32>
  return %dw, %db, %5, %7 : tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8xf32>
}

// -----

// Without a norm region, the linear's bias gradient stays with its dW GEMM
// (BGRADB): a sum_to over a view of a plain value.
// CHECK-LABEL: func.func @bias_gradient_gemm
// CHECK:      gt.fused "gemm"
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   gt.matmul
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.sum_to
// CHECK-NEXT:   gt.cast
func.func @bias_gradient_gemm(%dy: tensor<2x4x8xbf16>, %h: tensor<8x16xbf16>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %3 = gt.reshape %dy : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %4 = gt.matmul %3, %h <{transpose_a = true}> : tensor<8x8xbf16>, tensor<8x16xbf16>
  %5 = gt.cast %4 : tensor<8x16xbf16> -> tensor<8x16xf32>
  %6 = gt.sum_to %3 : tensor<8x8xbf16> -> tensor<8xbf16>
  %7 = gt.cast %6 : tensor<8xbf16> -> tensor<8xf32>
  return %5, %7 : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// A cross-entropy and its gradient become one "loss" region at the widening
// cast of the bf16 logits: the f32 logits are never stored, the scalar
// gradient of the loss (a constant) is declared before the region, and the
// gradient leaves it already cast to bf16 for the GEMMs that read it.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[Y:.*]]: tensor<4xi32>)
// CHECK:      %[[ONE:.*]] = gt.constant
// CHECK-NEXT: %[[L:.*]]:2 = gt.fused "loss"(%[[X]], %[[Y]], %[[ONE]]) : (tensor<4x8xbf16>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xbf16>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4xi32>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT:   %[[F:.*]] = gt.cast %[[A]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:   %[[CE:.*]] = gt.cross_entropy %[[F]], %[[B]]
// CHECK-NEXT:   %[[G:.*]] = gt.cross_entropy_grad %[[S]], %[[F]], %[[B]]
// CHECK-NEXT:   %[[GB:.*]] = gt.cast %[[G]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   gt.yield %[[CE]], %[[GB]] : tensor<f32>, tensor<4x8xbf16>
// CHECK-NEXT: }
// CHECK:      return %[[L]]#0, %[[L]]#1
func.func @loss(%x: tensor<4x8xbf16>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<4x8xbf16>) {
  %0 = gt.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %1 = gt.cross_entropy %0, %y : tensor<4x8xf32>, tensor<4xi32>
  %2 = gt.constant dense<1.0> : tensor<f32>
  %3 = gt.cross_entropy_grad %2, %0, %y : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %4 = gt.cast %3 : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %1, %4 : tensor<f32>, tensor<4x8xbf16>
}

// -----

// Logits that something else reads too (accuracy) stay in memory: the
// widening cast stays outside the region, which reads the f32 logits; the
// gradient read by an op besides its cast stays f32 (the cast and that op,
// siblings, are one elementwise kernel).
// CHECK-LABEL: func.func @loss_shared_logits
// CHECK:      %[[F:.*]] = gt.cast %{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:      %[[L:.*]]:2 = gt.fused "loss"(%[[F]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>)
// CHECK-NOT:    gt.cast
// CHECK:        gt.yield
// CHECK:      gt.accuracy %[[F]]
// CHECK:      gt.fused "elementwise"(%[[L]]#1)
// CHECK-NEXT:   ^bb0
// CHECK-NEXT:   gt.cast
// CHECK-NEXT:   gt.neg
func.func @loss_shared_logits(%x: tensor<4x8xbf16>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<4x8xbf16>, tensor<4x8xf32>) {
  %0 = gt.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %1 = gt.cross_entropy %0, %y : tensor<4x8xf32>, tensor<4xi32>
  %2 = gt.accuracy %0, %y : tensor<4x8xf32>, tensor<4xi32>
  %3 = gt.cross_entropy_grad %one, %0, %y : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %4 = gt.cast %3 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %5 = gt.neg %3 : tensor<4x8xf32>
  return %1, %2, %4, %5 : tensor<f32>, tensor<f32>, tensor<4x8xbf16>, tensor<4x8xf32>
}

// -----

// What must not fuse: a cross-entropy without its gradient (evaluation), and
// a gradient against other labels (another loss).
// CHECK-LABEL: func.func @loss_unmatched
// CHECK-NOT:  gt.fused "loss"
// CHECK:      gt.cross_entropy %{{.*}}, %[[Y:[^ ]*]]
// CHECK:      gt.cross_entropy_grad
// CHECK-NOT:  gt.fused "loss"
func.func @loss_unmatched(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %z: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %0 = gt.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  %1 = gt.cross_entropy_grad %one, %x, %z : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  return %0, %1 : tensor<f32>, tensor<4x8xf32>
}

// -----

// A language model's classifier (GPT-2's, with the tied embedding W): the
// logits' GEMM, the cross-entropy and its gradient with their casts, and the
// GEMMs of the gradient (dh = dl W, dW = dl^T h) become one "classifier"
// region that yields the loss, dh and dW; the logits and their gradient stay
// inside (the GPU computes them a chunk of rows at a time). The reshape of h
// that dW reads comes in; the loss's gradient constant moves before it.
// CHECK-LABEL: func.func @classifier
// CHECK-SAME: (%[[H:.*]]: tensor<2x4x16xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[Y:.*]]: tensor<2x4xi32>)
// CHECK-NEXT: %[[ONE:.*]] = gt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[C:.*]]:3 = gt.fused "classifier"(%[[H]], %[[W]], %[[Y]], %[[ONE]]) : (tensor<2x4x16xbf16>, tensor<8x16xbf16>, tensor<2x4xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x4x16xbf16>, tensor<8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4x16xbf16>, %[[B:.*]]: tensor<8x16xbf16>, %[[L:.*]]: tensor<2x4xi32>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT:   %[[LOGITS:.*]] = gt.matmul %[[A]], %[[B]] <{transpose_b = true}>
// CHECK-NEXT:   %[[F:.*]] = gt.cast %[[LOGITS]]
// CHECK-NEXT:   %[[LOSS:.*]] = gt.cross_entropy %[[F]], %[[L]]
// CHECK-NEXT:   %[[G:.*]] = gt.cross_entropy_grad %[[S]], %[[F]], %[[L]]
// CHECK-NEXT:   %[[G16:.*]] = gt.cast %[[G]]
// CHECK-NEXT:   %[[DH:.*]] = gt.matmul %[[G16]], %[[B]] :
// CHECK-NEXT:   %[[H2:.*]] = gt.reshape %[[A]]
// CHECK-NEXT:   %[[G2:.*]] = gt.reshape %[[G16]]
// CHECK-NEXT:   %[[DW:.*]] = gt.matmul %[[G2]], %[[H2]] <{transpose_a = true}>
// CHECK-NEXT:   %[[DW32:.*]] = gt.cast %[[DW]]
// CHECK-NEXT:   gt.yield %[[LOSS]], %[[DH]], %[[DW32]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[C]]#0, %[[C]]#1, %[[C]]#2
func.func @classifier(%h: tensor<2x4x16xbf16>, %w: tensor<8x16xbf16>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x16xbf16>, tensor<8x16xf32>) {
  %l = gt.matmul %h, %w <{transpose_b = true}> : tensor<2x4x16xbf16>, tensor<8x16xbf16>
  %f = gt.cast %l : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %loss = gt.cross_entropy %f, %y : tensor<2x4x8xf32>, tensor<2x4xi32>
  %one = gt.constant dense<1.0> : tensor<f32>
  %g = gt.cross_entropy_grad %one, %f, %y : tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>
  %g16 = gt.cast %g : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %dh = gt.matmul %g16, %w : tensor<2x4x8xbf16>, tensor<8x16xbf16>
  %h2 = gt.reshape %h : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
  %g2 = gt.reshape %g16 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %dw = gt.matmul %g2, %h2 <{transpose_a = true}> : tensor<8x8xbf16>, tensor<8x16xbf16>
  %dw32 = gt.cast %dw : tensor<8x16xbf16> -> tensor<8x16xf32>
  return %loss, %dh, %dw32 : tensor<f32>, tensor<2x4x16xbf16>, tensor<8x16xf32>
}

// -----

// Not a classifier when the logits' gradient is read by anything but its two
// GEMMs (it would have to exist in full), or when the logits come from a
// linear with a bias and the head is not small (here 128 rows: the GPU
// computes a bias and its gradient in the small head's kernel only): the
// cross-entropy and its gradient stay a "loss" region.
// CHECK-LABEL: func.func @classifier_gradient_escapes
// CHECK-NOT:  gt.fused "classifier"
// CHECK:      gt.fused "loss"
// CHECK-LABEL: func.func @classifier_bias
// CHECK-NOT:  gt.fused "classifier"
// CHECK:      gt.fused "loss"
func.func @classifier_gradient_escapes(%h: tensor<4x16xf32>, %w: tensor<8x16xf32>, %y: tensor<4xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x16xf32>, tensor<8x16xf32>, tensor<4x8xf32>) {
  %l = gt.matmul %h, %w <{transpose_b = true}> : tensor<4x16xf32>, tensor<8x16xf32>
  %loss = gt.cross_entropy %l, %y : tensor<4x8xf32>, tensor<4xi32>
  %g = gt.cross_entropy_grad %one, %l, %y : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %dh = gt.matmul %g, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %dw = gt.matmul %g, %h <{transpose_a = true}> : tensor<4x8xf32>, tensor<4x16xf32>
  return %loss, %dh, %dw, %g : tensor<f32>, tensor<4x16xf32>, tensor<8x16xf32>, tensor<4x8xf32>
}
func.func @classifier_bias(%h: tensor<128x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>, %y: tensor<128xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<128x16xf32>, tensor<8x16xf32>) {
  %l = gt.linear %h, %w, %b : tensor<128x16xf32>, tensor<8x16xf32>, tensor<8xf32>
  %loss = gt.cross_entropy %l, %y : tensor<128x8xf32>, tensor<128xi32>
  %g = gt.cross_entropy_grad %one, %l, %y : tensor<f32>, tensor<128x8xf32>, tensor<128xi32>
  %dh = gt.matmul %g, %w : tensor<128x8xf32>, tensor<8x16xf32>
  %dw = gt.matmul %g, %h <{transpose_a = true}> : tensor<128x8xf32>, tensor<128x16xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<128x16xf32>, tensor<8x16xf32>
}

// -----

// A small head (at most 64 rows of at most 32 classes, a K of at most 2048:
// examples/mlp.gt's last layer at batch 64) also takes the linear's bias and
// its gradient (the column sums of the logits' gradient), and, h being a
// ReLU's output, the ReLU gradient of dh, rewritten to read h instead of z
// (relu(z) > 0 exactly when z > 0), and its column sums: the bias gradient of
// the layer below. The GPU runs it as one kernel.
// CHECK-LABEL: func.func @small_head
// CHECK-SAME: (%[[Z:.*]]: tensor<64x32xf32>, %[[W:.*]]: tensor<10x32xf32>, %[[B:.*]]: tensor<10xf32>, %[[Y:.*]]: tensor<64xi32>, %[[ONE:.*]]: tensor<f32>)
// CHECK-NEXT: %[[H:.*]] = gt.relu %[[Z]]
// CHECK-NEXT: %[[C:.*]]:5 = gt.fused "classifier"(%[[H]], %[[W]], %[[B]], %[[Y]], %[[ONE]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<64x32xf32>, %[[WA:.*]]: tensor<10x32xf32>, %[[BA:.*]]: tensor<10xf32>, %[[L:.*]]: tensor<64xi32>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT:   %[[LOGITS:.*]] = gt.linear %[[A]], %[[WA]], %[[BA]]
// CHECK-NEXT:   %[[LOSS:.*]] = gt.cross_entropy %[[LOGITS]], %[[L]]
// CHECK-NEXT:   %[[G:.*]] = gt.cross_entropy_grad %[[S]], %[[LOGITS]], %[[L]]
// CHECK-NEXT:   %[[DH:.*]] = gt.matmul %[[G]], %[[WA]] :
// CHECK-NEXT:   %[[DZ:.*]] = gt.activation_grad %[[DH]], %[[A]] <{kind = "relu"}>
// CHECK-NEXT:   %[[DB1:.*]] = gt.sum_to %[[DZ]]
// CHECK-NEXT:   %[[DW:.*]] = gt.matmul %[[G]], %[[A]] <{transpose_a = true}>
// CHECK-NEXT:   %[[DB:.*]] = gt.sum_to %[[G]]
// CHECK-NEXT:   gt.yield %[[LOSS]], %[[DZ]], %[[DB1]], %[[DW]], %[[DB]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[C]]#0, %[[C]]#1, %[[C]]#2, %[[C]]#3, %[[C]]#4
func.func @small_head(%z: tensor<64x32xf32>, %w: tensor<10x32xf32>, %b: tensor<10xf32>, %y: tensor<64xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<64x32xf32>, tensor<32xf32>, tensor<10x32xf32>, tensor<10xf32>) {
  %h = gt.relu %z : tensor<64x32xf32>
  %l = gt.linear %h, %w, %b : tensor<64x32xf32>, tensor<10x32xf32>, tensor<10xf32>
  %loss = gt.cross_entropy %l, %y : tensor<64x10xf32>, tensor<64xi32>
  %g = gt.cross_entropy_grad %one, %l, %y : tensor<f32>, tensor<64x10xf32>, tensor<64xi32>
  %dh = gt.matmul %g, %w : tensor<64x10xf32>, tensor<10x32xf32>
  %dz = gt.activation_grad %dh, %z <{kind = "relu"}> : tensor<64x32xf32>
  %db1 = gt.sum_to %dz : tensor<64x32xf32> -> tensor<32xf32>
  %dw = gt.matmul %g, %h <{transpose_a = true}> : tensor<64x10xf32>, tensor<64x32xf32>
  %db = gt.sum_to %g : tensor<64x10xf32> -> tensor<10xf32>
  return %loss, %dz, %db1, %dw, %db : tensor<f32>, tensor<64x32xf32>, tensor<32xf32>, tensor<10x32xf32>, tensor<10xf32>
}

// -----

// Not a small head with 33 classes: the logits' GEMM with its bias stays
// apart, the cross-entropy and its gradient are a "loss" region, and dh's
// ReLU gradient goes to the gemm region of dh (at most 64 rows).
// CHECK-LABEL: func.func @head_many_classes
// CHECK-NOT:  gt.fused "classifier"
// CHECK:      gt.linear
// CHECK:      gt.fused "loss"
// CHECK:      gt.fused "gemm"
// CHECK:      gt.activation_grad
func.func @head_many_classes(%z: tensor<64x32xf32>, %w: tensor<33x32xf32>, %b: tensor<33xf32>, %y: tensor<64xi32>, %one: tensor<f32>) -> (tensor<f32>, tensor<64x32xf32>, tensor<33x32xf32>) {
  %h = gt.relu %z : tensor<64x32xf32>
  %l = gt.linear %h, %w, %b : tensor<64x32xf32>, tensor<33x32xf32>, tensor<33xf32>
  %loss = gt.cross_entropy %l, %y : tensor<64x33xf32>, tensor<64xi32>
  %g = gt.cross_entropy_grad %one, %l, %y : tensor<f32>, tensor<64x33xf32>, tensor<64xi32>
  %dh = gt.matmul %g, %w : tensor<64x33xf32>, tensor<33x32xf32>
  %dz = gt.activation_grad %dh, %z <{kind = "relu"}> : tensor<64x32xf32>
  %dw = gt.matmul %g, %h <{transpose_a = true}> : tensor<64x33xf32>, tensor<64x32xf32>
  return %loss, %dz, %dw : tensor<f32>, tensor<64x32xf32>, tensor<33x32xf32>
}

// -----

// A tied embedding's gradient: the table's rows scattered onto the
// classifier's dW (the add's other operand) in one "scatter_add" region at
// the embedding gradient, which yields the sum.
// CHECK-LABEL: func.func @scatter_add
// CHECK-SAME: (%[[DY:.*]]: tensor<2x4x16xf32>, %[[IDS:.*]]: tensor<2x4xi32>, %[[DW:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[S:.*]] = gt.fused "scatter_add"(%[[DY]], %[[IDS]], %[[DW]]) : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4x16xf32>, %[[I:.*]]: tensor<2x4xi32>, %[[B:.*]]: tensor<8x16xf32>):
// CHECK-NEXT:   %[[E:.*]] = gt.embedding_grad %[[A]], %[[I]]
// CHECK-NEXT:   %[[SUM:.*]] = gt.add %[[B]], %[[E]]
// CHECK-NEXT:   gt.yield %[[SUM]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[S]]
func.func @scatter_add(%dy: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>, %dw: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = gt.embedding_grad %dy, %ids : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<8x16xf32>
  %s = gt.add %dw, %e : tensor<8x16xf32>, tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// Not a scatter_add when the embedding gradient is read by anything else
// (it must exist on its own), or when the add broadcasts the other operand
// (the scatter would have to start from a broadcast table).
// CHECK-LABEL: func.func @scatter_add_escapes
// CHECK-NOT:  gt.fused
// CHECK-LABEL: func.func @scatter_add_broadcast
// CHECK-NOT:  gt.fused
func.func @scatter_add_escapes(%dy: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>, %dw: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %e = gt.embedding_grad %dy, %ids : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<8x16xf32>
  %s = gt.add %dw, %e : tensor<8x16xf32>, tensor<8x16xf32>
  return %s, %e : tensor<8x16xf32>, tensor<8x16xf32>
}
func.func @scatter_add_broadcast(%dy: tensor<2x4x16xf32>, %ids: tensor<2x4xi32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %e = gt.embedding_grad %dy, %ids : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<8x16xf32>
  %s = gt.add %e, %b : tensor<8x16xf32>, tensor<16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// SwiGLU: silu(g) * u. The backward reads silu(g) (du = dy * silu(g)) and g
// (the silu gradient): silu(g) is computed again in the backward instead of
// kept, so the forward's silu sinks to its product (after u's GEMM) and
// fuses with it, and the backward's silu joins the region that reads g
// already: one kernel a direction, nothing of silu(g) kept between them.
// CHECK-LABEL: func.func @swiglu
// CHECK:      %[[G:.*]] = gt.linear
// CHECK:      %[[U:.*]] = gt.linear
// CHECK:      %[[H:.*]] = gt.fused "elementwise"(%[[G]], %[[U]]) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:   ^bb0(%[[A:.*]]: tensor<4x16xf32>, %[[B:.*]]: tensor<4x16xf32>):
// CHECK-NEXT:   %[[S:.*]] = gt.silu %[[A]]
// CHECK-NEXT:   %[[P:.*]] = gt.mul %[[S]], %[[B]]
// CHECK-NEXT:   gt.yield %[[P]]
// CHECK:      gt.constant
// CHECK-NEXT: %[[D:.*]]:2 = gt.fused "elementwise"(%[[DY:.*]], %[[U]], %[[G]]) : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
// CHECK:        gt.mul
// CHECK-NEXT:   gt.activation_grad
// CHECK-NEXT:   gt.silu
// CHECK-NEXT:   gt.mul
// CHECK-NEXT:   gt.yield
// CHECK:      return %[[H]], %[[D]]#1, %[[D]]#0
func.func @swiglu(%x: tensor<4x8xf32>, %w1: tensor<16x8xf32>, %w2: tensor<16x8xf32>, %dy: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %g = gt.linear %x, %w1 : tensor<4x8xf32>, tensor<16x8xf32>
  %s = gt.silu %g : tensor<4x16xf32>
  %u = gt.linear %x, %w2 : tensor<4x8xf32>, tensor<16x8xf32>
  %h = gt.mul %s, %u : tensor<4x16xf32>, tensor<4x16xf32>
  %seed = gt.constant dense<1.0> : tensor<f32> {gt.loss_grad}
  %ds = gt.mul %dy, %u : tensor<4x16xf32>, tensor<4x16xf32>
  %dg = gt.activation_grad %ds, %g <{kind = "silu"}> : tensor<4x16xf32>
  %du = gt.mul %dy, %s : tensor<4x16xf32>, tensor<4x16xf32>
  return %h, %du, %dg : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The input gradient of two linears of one x (SwiGLU's gate and up): the
// second GEMM dy W adds the first's product as cuBLASLt's C, in its
// epilogue, instead of an add kernel reading both. The first cannot (the
// second's product does not exist yet at it).
// CHECK-LABEL: func.func @summed_input_gradients
// CHECK-SAME: (%[[DA:.*]]: tensor<64x16xbf16>, %[[WA:.*]]: tensor<16x8xbf16>, %[[DB:.*]]: tensor<64x16xbf16>, %[[WB:.*]]: tensor<16x8xbf16>)
// CHECK:      %[[P:.*]] = gt.matmul %[[DA]], %[[WA]]
// CHECK-NEXT: %[[PR:.*]] = gt.reshape %[[P]]
// CHECK-NEXT: %[[S:.*]] = gt.fused "gemm"(%[[DB]], %[[WB]], %[[PR]]) : (tensor<64x16xbf16>, tensor<16x8xbf16>, tensor<4x16x8xbf16>) -> tensor<4x16x8xbf16> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<64x16xbf16>, %[[B:.*]]: tensor<16x8xbf16>, %[[C:.*]]: tensor<4x16x8xbf16>):
// CHECK-NEXT:   %[[M:.*]] = gt.matmul %[[A]], %[[B]]
// CHECK-NEXT:   %[[R:.*]] = gt.reshape %[[M]]
// CHECK-NEXT:   %[[SUM:.*]] = gt.add %[[C]], %[[R]]
// CHECK-NEXT:   gt.yield %[[SUM]]
// CHECK:      return %[[S]]
func.func @summed_input_gradients(%da: tensor<64x16xbf16>, %wa: tensor<16x8xbf16>, %db: tensor<64x16xbf16>, %wb: tensor<16x8xbf16>) -> tensor<4x16x8xbf16> {
  %pa = gt.matmul %da, %wa : tensor<64x16xbf16>, tensor<16x8xbf16>
  %ra = gt.reshape %pa : tensor<64x8xbf16> -> tensor<4x16x8xbf16>
  %pb = gt.matmul %db, %wb : tensor<64x16xbf16>, tensor<16x8xbf16>
  %rb = gt.reshape %pb : tensor<64x8xbf16> -> tensor<4x16x8xbf16>
  %sum = gt.add %ra, %rb : tensor<4x16x8xbf16>, tensor<4x16x8xbf16>
  return %sum : tensor<4x16x8xbf16>
}

// -----

// An evaluation's cross-entropy (no gradient) of widened 16-bit logits: a
// loss region with the cast, so the f32 logits never exist, and the
// accuracy of the 16-bit logits (compileEval's), which the row kernel
// takes in the same pass.
// CHECK-LABEL: func.func @eval_loss
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[Y:.*]]: tensor<4xi32>)
// CHECK:      %[[L:.*]]:2 = gt.fused "loss"(%[[X]], %[[Y]]) : (tensor<4x8xbf16>, tensor<4xi32>) -> (tensor<f32>, tensor<f32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4xi32>):
// CHECK-NEXT:   %[[F:.*]] = gt.cast %[[A]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:   %[[CE:.*]] = gt.cross_entropy %[[F]], %[[B]]
// CHECK-NEXT:   %[[ACC:.*]] = gt.accuracy %[[A]], %[[B]]
// CHECK-NEXT:   gt.yield %[[CE]], %[[ACC]] : tensor<f32>, tensor<f32>
// CHECK:      return %[[L]]#0, %[[L]]#1
func.func @eval_loss(%x: tensor<4x8xbf16>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<f32>) {
  %0 = gt.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %1 = gt.cross_entropy %0, %y : tensor<4x8xf32>, tensor<4xi32>
  %2 = gt.accuracy %x, %y : tensor<4x8xbf16>, tensor<4xi32>
  return %1, %2 : tensor<f32>, tensor<f32>
}

// -----

// An f32 evaluation's cross-entropy and accuracy of the same logits: one
// region too.
// CHECK-LABEL: func.func @eval_accuracy_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4xi32>)
// CHECK:      %[[L:.*]]:2 = gt.fused "loss"(%[[X]], %[[Y]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4xi32>):
// CHECK-NEXT:   %[[CE:.*]] = gt.cross_entropy %[[A]], %[[B]]
// CHECK-NEXT:   %[[ACC:.*]] = gt.accuracy %[[A]], %[[B]]
// CHECK-NEXT:   gt.yield %[[CE]], %[[ACC]]
// CHECK:      return %[[L]]#0, %[[L]]#1
func.func @eval_accuracy_f32(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<f32>) {
  %0 = gt.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  %1 = gt.accuracy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// -----

// A cross-entropy of f32 logits alone is one kernel already: no region.
// CHECK-LABEL: func.func @eval_loss_f32
// CHECK-NOT:  gt.fused
// CHECK:      gt.cross_entropy
func.func @eval_loss_f32(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
  %0 = gt.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  return %0 : tensor<f32>
}

// -----

// The gradient of attention over rope(q) and rope(k) with the inverse ropes
// of its dq and dk: one "attention_grad" region (the GPU kernels turn dq and
// dk as they store them), yielding dv and the turned dq and dk.
// CHECK-LABEL: func.func @attention_grad_rope
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4x6x64xbf16>, %[[LSE:[^:]*]]: tensor<2x6x4xf32>, %[[Q:[^:]*]]: tensor<2x4x6x64xbf16>, %[[K:[^:]*]]: tensor<2x4x2x64xbf16>, %[[V:[^:]*]]: tensor<2x4x2x64xbf16>)
// CHECK:      %[[R:.*]]:3 = gt.fused "attention_grad"(%[[DY]], %[[Q]], %[[K]], %[[V]], %[[LSE]])
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<2x4x6x64xbf16>, %[[AQ:[^:]*]]: tensor<2x4x6x64xbf16>, %[[AK:[^:]*]]: tensor<2x4x2x64xbf16>, %[[AV:[^:]*]]: tensor<2x4x2x64xbf16>, %[[L:[^:]*]]: tensor<2x6x4xf32>):
// CHECK-NEXT:   %[[D:.*]]:3 = gt.attention_grad %[[A]], %[[A]], %[[L]], %[[AQ]], %[[AK]], %[[AV]]
// CHECK-NEXT:   %[[RQ:.*]] = gt.rope %[[D]]#0 <{inverse = true}>
// CHECK-NEXT:   %[[RK:.*]] = gt.rope %[[D]]#1 <{inverse = true}>
// CHECK-NEXT:   gt.yield %[[D]]#2, %[[RQ]], %[[RK]]
// CHECK:      return %[[R]]#1, %[[R]]#2, %[[R]]#0
func.func @attention_grad_rope(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xbf16>, %k: tensor<2x4x2x64xbf16>, %v: tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>) {
  %d:3 = gt.attention_grad %dy, %dy, %lse, %q, %k, %v <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
  %dq = gt.rope %d#0 <{inverse = true}> : tensor<2x4x6x64xbf16>
  %dk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xbf16>
  return %dq, %dk, %d#2 : tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
}

// -----

// Not when the kernels cannot turn them (f32 here, or heads of 32), nor
// when dq is read by anything but its rope.
// CHECK-LABEL: func.func @attention_grad_rope_f32
// CHECK-NOT:  gt.fused
func.func @attention_grad_rope_f32(%dy: tensor<2x4x6x64xf32>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xf32>, %k: tensor<2x4x2x64xf32>, %v: tensor<2x4x2x64xf32>) -> (tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>) {
  %d:3 = gt.attention_grad %dy, %dy, %lse, %q, %k, %v <{heads = 6 : i64}> : tensor<2x4x6x64xf32>, tensor<2x6x4xf32>, tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>
  %dq = gt.rope %d#0 <{inverse = true}> : tensor<2x4x6x64xf32>
  %dk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xf32>
  return %dq, %dk, %d#2 : tensor<2x4x6x64xf32>, tensor<2x4x2x64xf32>, tensor<2x4x2x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention_grad_dq_read
// CHECK-NOT:  gt.fused
func.func @attention_grad_dq_read(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %q: tensor<2x4x6x64xbf16>, %k: tensor<2x4x2x64xbf16>, %v: tensor<2x4x2x64xbf16>) -> (tensor<2x4x6x64xbf16>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>) {
  %d:3 = gt.attention_grad %dy, %dy, %lse, %q, %k, %v <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>, tensor<2x4x2x64xbf16>
  %dq = gt.rope %d#0 <{inverse = true}> : tensor<2x4x6x64xbf16>
  %dk = gt.rope %d#1 <{inverse = true}> : tensor<2x4x2x64xbf16>
  return %dq, %d#0, %dk : tensor<2x4x6x64xbf16>, tensor<2x4x6x64xbf16>, tensor<2x4x2x64xbf16>
}

// -----

// Over packed heads [B, T, H + 2 Hkv, d] one inverse rope turns dq's and
// dk's heads (rotated = H + Hkv) back: one region, as for q, k and v apart.
// CHECK-LABEL: func.func @attention_grad_rope_packed
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4x6x64xbf16>, %[[LSE:[^:]*]]: tensor<2x6x4xf32>, %[[QKV:[^:]*]]: tensor<2x4x10x64xbf16>)
// CHECK:      %[[R:.*]] = gt.fused "attention_grad"(%[[DY]], %[[QKV]], %[[LSE]])
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<2x4x6x64xbf16>, %[[AQKV:[^:]*]]: tensor<2x4x10x64xbf16>, %[[L:[^:]*]]: tensor<2x6x4xf32>):
// CHECK-NEXT:   %[[D:.*]] = gt.attention_grad %[[A]], %[[A]], %[[L]], %[[AQKV]]
// CHECK-NEXT:   %[[RD:.*]] = gt.rope %[[D]] <{inverse = true, rotated = 8 : i64}>
// CHECK-NEXT:   gt.yield %[[RD]]
// CHECK:      return %[[R]]
func.func @attention_grad_rope_packed(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  %d = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
  %r = gt.rope %d <{inverse = true, rotated = 8 : i64}> : tensor<2x4x10x64xbf16>
  return %r : tensor<2x4x10x64xbf16>
}

// -----

// Not when the rope turns another number of heads than q's and k's.
// CHECK-LABEL: func.func @attention_grad_rope_packed_all
// CHECK-NOT:  gt.fused
func.func @attention_grad_rope_packed_all(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> tensor<2x4x10x64xbf16> {
  %d = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
  %r = gt.rope %d <{inverse = true}> : tensor<2x4x10x64xbf16>
  return %r : tensor<2x4x10x64xbf16>
}

// -----

// A packed gradient [B, T, 3 D] (GPT-2's q, k and v one projection) and the
// sum of its columns over all rows (the projection's bias gradient, written
// by gt-autodiff over the weight gradient's rank-2 view): one
// "attention_grad" region whose kernels sum dqkv as they store it, so the
// weight gradient's GEMM has no bias gradient (BGRADB) left.
// CHECK-LABEL: func.func @attention_grad_bias
// CHECK-SAME: (%[[DY:[^:]*]]: tensor<2x4x64xbf16>, %[[LSE:[^:]*]]: tensor<2x1x4xf32>, %[[QKV:[^:]*]]: tensor<2x4x192xbf16>, %[[X:[^:]*]]: tensor<8x16xbf16>)
// CHECK:      %[[R:.*]]:2 = gt.fused "attention_grad"(%[[DY]], %[[QKV]], %[[LSE]])
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: tensor<2x4x64xbf16>, %[[AQKV:[^:]*]]: tensor<2x4x192xbf16>, %[[L:[^:]*]]: tensor<2x1x4xf32>):
// CHECK-NEXT:   %[[D:.*]] = gt.attention_grad %[[A]], %[[A]], %[[L]], %[[AQKV]]
// CHECK-NEXT:   %[[S:.*]] = gt.sum_to %[[D]] : tensor<2x4x192xbf16> -> tensor<192xbf16>
// CHECK-NEXT:   %[[C:.*]] = gt.cast %[[S]] : tensor<192xbf16> -> tensor<192xf32>
// CHECK-NEXT:   gt.yield %[[D]], %[[C]]
// CHECK:      %[[V:.*]] = gt.reshape %[[R]]#0
// CHECK:      %[[W:.*]] = gt.fused "epilogue"(%[[V]], %[[X]])
// CHECK-NOT:    gt.sum_to
// CHECK:      return %[[W]], %[[R]]#1
func.func @attention_grad_bias(%dy: tensor<2x4x64xbf16>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xbf16>, %x: tensor<8x16xbf16>) -> (tensor<192x16xf32>, tensor<192xf32>) {
  %d = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 1 : i64}> : tensor<2x4x64xbf16>, tensor<2x1x4xf32>, tensor<2x4x192xbf16>
  %v = gt.reshape %d : tensor<2x4x192xbf16> -> tensor<8x192xbf16>
  %w = gt.matmul %v, %x <{transpose_a = true}> : tensor<8x192xbf16>, tensor<8x16xbf16>
  %wf = gt.cast %w : tensor<192x16xbf16> -> tensor<192x16xf32>
  %s = gt.sum_to %v : tensor<8x192xbf16> -> tensor<192xbf16>
  %sf = gt.cast %s : tensor<192xbf16> -> tensor<192xf32>
  return %wf, %sf : tensor<192x16xf32>, tensor<192xf32>
}

// -----

// Not in f32 (the kernels sum only 16-bit dqkv, and heads of 64 or 128):
// the weight gradient's GEMM keeps the bias gradient.
// CHECK-LABEL: func.func @attention_grad_bias_f32
// CHECK-NOT:  "attention_grad"
// CHECK:      gt.fused "gemm"
// CHECK:        gt.sum_to
func.func @attention_grad_bias_f32(%dy: tensor<2x4x64xf32>, %lse: tensor<2x1x4xf32>, %qkv: tensor<2x4x192xf32>, %x: tensor<8x16xf32>) -> (tensor<192x16xf32>, tensor<192xf32>) {
  %d = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 1 : i64}> : tensor<2x4x64xf32>, tensor<2x1x4xf32>, tensor<2x4x192xf32>
  %v = gt.reshape %d : tensor<2x4x192xf32> -> tensor<8x192xf32>
  %w = gt.matmul %v, %x <{transpose_a = true}> : tensor<8x192xf32>, tensor<8x16xf32>
  %s = gt.sum_to %v : tensor<8x192xf32> -> tensor<192xf32>
  return %w, %s : tensor<192x16xf32>, tensor<192xf32>
}

// -----

// Over packed heads [B, T, H + 2 Hkv, d] a sum over the last dimension adds
// heads together, which the kernels do not: the rope alone joins.
// CHECK-LABEL: func.func @attention_grad_rope_packed_sum
// CHECK:      %[[R:.*]] = gt.fused "attention_grad"
// CHECK-NOT:    gt.sum_to
// CHECK:        gt.yield
// CHECK:      gt.sum_to %[[R]]
func.func @attention_grad_rope_packed_sum(%dy: tensor<2x4x6x64xbf16>, %lse: tensor<2x6x4xf32>, %qkv: tensor<2x4x10x64xbf16>) -> (tensor<2x4x10x64xbf16>, tensor<64xbf16>) {
  %d = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 6 : i64}> : tensor<2x4x6x64xbf16>, tensor<2x6x4xf32>, tensor<2x4x10x64xbf16>
  %r = gt.rope %d <{inverse = true, rotated = 8 : i64}> : tensor<2x4x10x64xbf16>
  %s = gt.sum_to %r : tensor<2x4x10x64xbf16> -> tensor<64xbf16>
  return %r, %s : tensor<2x4x10x64xbf16>, tensor<64xbf16>
}
