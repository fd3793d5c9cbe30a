// RUN: gtc-opt %s --canonicalize --split-input-file | FileCheck %s

// A transpose of the last two dimensions folds into matmul's flag.
// CHECK-LABEL: func.func @fold_transpose_b
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<5x3xf32>)
// CHECK-NEXT: %[[M:.*]] = gt.matmul %[[A]], %[[B]] <{transpose_b = true}> : tensor<2x3xf32>, tensor<5x3xf32>
// CHECK-NEXT: return %[[M]]
func.func @fold_transpose_b(%a: tensor<2x3xf32>, %b: tensor<5x3xf32>) -> tensor<2x5xf32> {
  %t = gt.transpose %b <{permutation = [1, 0]}> : tensor<5x3xf32>
  %m = gt.matmul %a, %t : tensor<2x3xf32>, tensor<3x5xf32>
  return %m : tensor<2x5xf32>
}

// -----

// Folding toggles a flag that is already set, on either side.
// CHECK-LABEL: func.func @fold_both
// CHECK-SAME: (%[[A:.*]]: tensor<4x3x2xf32>, %[[B:.*]]: tensor<3x5xf32>)
// CHECK-NEXT: gt.matmul %[[A]], %[[B]] <{transpose_a = true}> : tensor<4x3x2xf32>, tensor<3x5xf32>
func.func @fold_both(%a: tensor<4x3x2xf32>, %b: tensor<3x5xf32>) -> tensor<4x2x5xf32> {
  %ta = gt.transpose %a <{permutation = [0, 2, 1]}> : tensor<4x3x2xf32>
  %tb = gt.transpose %b <{permutation = [1, 0]}> : tensor<3x5xf32>
  %m = gt.matmul %ta, %tb <{transpose_b = true}> : tensor<4x2x3xf32>, tensor<5x3xf32>
  return %m : tensor<4x2x5xf32>
}

// -----

// A transpose that does not swap the last two dimensions stays.
// CHECK-LABEL: func.func @keep_other_transpose
// CHECK: gt.transpose
// CHECK: gt.matmul
func.func @keep_other_transpose(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<3x2x5xf32> {
  %t = gt.transpose %a <{permutation = [1, 0, 2]}> : tensor<2x3x4xf32>
  %m = gt.matmul %t, %b : tensor<3x2x4xf32>, tensor<3x4x5xf32>
  return %m : tensor<3x2x5xf32>
}

// -----

// Identity transposes, no-op casts and reshapes fold away.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = gt.transpose %x <{permutation = [0, 1]}> : tensor<2x3xf32>
  %1 = gt.cast %0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = gt.reshape %1 : tensor<2x3xf32> -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// -----

// Unused pure ops are removed.
// CHECK-LABEL: func.func @dead
// CHECK-NOT: gt.relu
func.func @dead(%x: tensor<2x3xf32>) {
  %0 = gt.relu %x : tensor<2x3xf32>
  return
}

// -----

// slice(pad(x)) back to x's shape is x; a pad or slice to the same shape is
// its input.
// CHECK-LABEL: func.func @pad_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x10xf32>)
// CHECK-NEXT: return %[[X]]
func.func @pad_slice(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %p = gt.pad %x : tensor<4x10xf32> -> tensor<4x16xf32>
  %s = gt.slice %p : tensor<4x16xf32> -> tensor<4x10xf32>
  %q = gt.pad %s : tensor<4x10xf32> -> tensor<4x10xf32>
  return %q : tensor<4x10xf32>
}

// -----

// Looking up positions 0..N-1 in a table of N rows is the table.
// CHECK-LABEL: func.func @positions_lookup
// CHECK-SAME: (%[[W:.*]]: tensor<8x4xf32>)
// CHECK-NEXT: return %[[W]]
func.func @positions_lookup(%w: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %p = gt.positions 8 : tensor<8xi32>
  %a = gt.embedding %p, %w : tensor<8xi32>, tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}

// -----

// A table of more rows (its leading slice would be a copy) and other
// indices stay look-ups. (Positions past a table's rows are the verifier's
// error, invalid.mlir.)
// CHECK-LABEL: func.func @positions_lookup_kept
// CHECK-SAME: (%[[V:.*]]: tensor<16x4xf32>, %[[W:.*]]: tensor<4x4xf32>, %[[I:.*]]: tensor<4xi32>)
// CHECK: gt.embedding %{{.*}}, %[[V]]
// CHECK: gt.embedding %[[I]], %[[W]]
func.func @positions_lookup_kept(%v: tensor<16x4xf32>, %w: tensor<4x4xf32>, %i: tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4x4xf32>) {
  %p = gt.positions 8 : tensor<8xi32>
  %a = gt.embedding %p, %v : tensor<8xi32>, tensor<16x4xf32>
  %c = gt.embedding %i, %w : tensor<4xi32>, tensor<4x4xf32>
  return %a, %c : tensor<8x4xf32>, tensor<4x4xf32>
}
