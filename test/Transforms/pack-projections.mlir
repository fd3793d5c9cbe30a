// RUN: gtc-opt %s --gt-pack-projections --split-input-file | FileCheck %s
// RUN: gtc-opt %s --gt-pack-projections=max-kv-width=1024 --split-input-file | FileCheck %s --check-prefix=WIDE

// A Llama block's attention: q, k and v projected from one input, q and k
// turned by one rope. The three weights become one packed parameter of
// three parts (rows 32, 16 and 16, each still its own parameter to
// checkpoints), projected once to packed heads [B, T, 4 + 2 * 2, 8], the
// first 6 heads turned, and attention reads the packed heads.
// CHECK-LABEL: func.func @llama
// CHECK:      %[[X:.*]] = gt.input "x" : tensor<2x8x32xf32>
// CHECK-NEXT: %[[W:.*]] = gt.param "wq+wk+wv" = "normal" [0.000000e+00, 2.000000e-02] {part_rows = [32, 16, 16], parts = ["wq", "wk", "wv"]} : tensor<64x32xf32>
// CHECK-NOT:  gt.param
// CHECK:      %[[Y:.*]] = gt.linear %[[X]], %[[W]] : tensor<2x8x32xf32>, tensor<64x32xf32>
// CHECK-NEXT: %[[P:.*]] = gt.reshape %[[Y]] : tensor<2x8x64xf32> -> tensor<2x8x8x8xf32>
// CHECK-NEXT: %[[R:.*]] = gt.rope %[[P]] <{rotated = 6 : i64, theta = 5.000000e+05 : f64}> : tensor<2x8x8x8xf32>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = gt.attention %[[R]] <{heads = 4 : i64}> : tensor<2x8x8x8xf32>
// CHECK-NEXT: %[[OR:.*]] = gt.reshape %[[O]] : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
// CHECK-NOT:  gt.linear
func.func @llama() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "normal" [0.0, 0.02] : tensor<32x32xf32>
  %wk = gt.param "wk" = "normal" [0.0, 0.02] : tensor<16x32xf32>
  %wv = gt.param "wv" = "normal" [0.0, 0.02] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %qr = gt.rope %q <{theta = 5.0e+05 : f64}> : tensor<2x8x4x8xf32>
  %kr = gt.rope %k <{theta = 5.0e+05 : f64}> : tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %qr, %kr, %v <{causal = true, heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %o3 = gt.reshape %o : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
  %s = gt.sum %o3 : tensor<2x8x32xf32>
  return %s : tensor<f32>
}

// -----

// Weights of different initializers cannot be one parameter: they are
// stacked in the step instead (pads at row offsets 0, 32 and 48, added).
// CHECK-LABEL: func.func @different_init
// CHECK:      %[[WQ:.*]] = gt.param "wq"
// CHECK:      %[[WK:.*]] = gt.param "wk"
// CHECK:      %[[WV:.*]] = gt.param "wv"
// CHECK-NEXT: %[[PQ:.*]] = gt.pad %[[WQ]] {offsets = [0, 0]} : tensor<32x32xf32> -> tensor<64x32xf32>
// CHECK-NEXT: %[[PK:.*]] = gt.pad %[[WK]] {offsets = [32, 0]} : tensor<16x32xf32> -> tensor<64x32xf32>
// CHECK-NEXT: %[[S:.*]] = gt.add %[[PQ]], %[[PK]]
// CHECK-NEXT: %[[PV:.*]] = gt.pad %[[WV]] {offsets = [48, 0]} : tensor<16x32xf32> -> tensor<64x32xf32>
// CHECK-NEXT: %[[W:.*]] = gt.add %[[S]], %[[PV]]
// CHECK-NEXT: gt.linear %{{.*}}, %[[W]] : tensor<2x8x32xf32>, tensor<64x32xf32>
func.func @different_init() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "normal" [0.0, 0.02] : tensor<32x32xf32>
  %wk = gt.param "wk" = "normal" [0.0, 0.01] : tensor<16x32xf32>
  %wv = gt.param "wv" = "normal" [0.0, 0.02] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  return %s : tensor<f32>
}

// -----

// Without ropes: no rope between the projection and attention.
// CHECK-LABEL: func.func @no_rope
// CHECK:      %[[Y:.*]] = gt.linear %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<64x32xf32>
// CHECK-NEXT: %[[P:.*]] = gt.reshape %[[Y]] : tensor<2x8x64xf32> -> tensor<2x8x8x8xf32>
// CHECK-NEXT: gt.attention %[[P]] <{causal = false, heads = 4 : i64}> : tensor<2x8x8x8xf32>
func.func @no_rope() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<32x32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<16x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{causal = false, heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  return %s : tensor<f32>
}

// -----

// Left alone: k's projection read by something else, v from another input,
// q turned and k not, a projection with a bias, and a function that is not
// a model.
// CHECK-LABEL: func.func @k_read
// CHECK-COUNT-3: gt.linear
// CHECK: gt.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^ ]*}} <
func.func @k_read() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<32x32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<16x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  %t = gt.sum %k0 : tensor<2x8x16xf32>
  %u = gt.add %s, %t : tensor<f32>, tensor<f32>
  return %u : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @other_input
// CHECK-COUNT-3: gt.linear
func.func @other_input() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %z = gt.input "z" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<32x32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<16x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %z, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @q_turned_only
// CHECK-COUNT-3: gt.linear
func.func @q_turned_only() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<32x32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<16x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %qr = gt.rope %q : tensor<2x8x4x8xf32>
  %o, %lse = gt.attention %qr, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @bias
// CHECK-COUNT-3: gt.linear
func.func @bias() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<32x32xf32>
  %bq = gt.param "bq" = "zeros" [] : tensor<32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<16x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<16x32xf32>
  %q0 = gt.linear %x, %wq, %bq : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  %s = gt.sum %o : tensor<2x8x4x8xf32>
  return %s : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @not_a_model
// CHECK-COUNT-3: gt.linear
func.func @not_a_model(%x: tensor<2x8x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<16x32xf32>, %wv: tensor<16x32xf32>) -> tensor<2x8x4x8xf32> {
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<16x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<16x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 4 : i64}> : tensor<2x8x4x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>
  return %o : tensor<2x8x4x8xf32>
}

// -----

// K/V projections of max-kv-width (512) outputs or more fill their GEMM
// tiles already: left alone.
// CHECK-LABEL: func.func @wide_kv
// CHECK-COUNT-3: gt.linear
func.func @wide_kv() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wq = gt.param "wq" = "zeros" [] : tensor<1024x32xf32>
  %wk = gt.param "wk" = "zeros" [] : tensor<512x32xf32>
  %wv = gt.param "wv" = "zeros" [] : tensor<512x32xf32>
  %q0 = gt.linear %x, %wq : tensor<2x8x32xf32>, tensor<1024x32xf32>
  %q = gt.reshape %q0 : tensor<2x8x1024xf32> -> tensor<2x8x16x64xf32>
  %k0 = gt.linear %x, %wk : tensor<2x8x32xf32>, tensor<512x32xf32>
  %k = gt.reshape %k0 : tensor<2x8x512xf32> -> tensor<2x8x8x64xf32>
  %v0 = gt.linear %x, %wv : tensor<2x8x32xf32>, tensor<512x32xf32>
  %v = gt.reshape %v0 : tensor<2x8x512xf32> -> tensor<2x8x8x64xf32>
  %o, %lse = gt.attention %q, %k, %v <{heads = 16 : i64}> : tensor<2x8x16x64xf32>, tensor<2x8x8x64xf32>, tensor<2x8x8x64xf32>
  %s = gt.sum %o : tensor<2x8x16x64xf32>
  return %s : tensor<f32>
}
// WIDE-LABEL: func.func @wide_kv
// WIDE: gt.linear %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<2048x32xf32>
// WIDE-NEXT: gt.reshape %{{.*}} : tensor<2x8x2048xf32> -> tensor<2x8x32x64xf32>

// -----

// A SwiGLU MLP: silu of one projection times another of the same input.
// The two weights become one packed parameter of two parts (rows 48 and
// 48), projected once to [2, 8, 96], and gt.glu takes silu of the first
// half times the second.
// CHECK-LABEL: func.func @swiglu
// CHECK:      %[[X:.*]] = gt.input "x" : tensor<2x8x32xf32>
// CHECK-NEXT: %[[W:.*]] = gt.param "wg+wu" = "normal" [0.000000e+00, 2.000000e-02] {part_rows = [48, 48], parts = ["wg", "wu"]} : tensor<96x32xf32>
// CHECK-NOT:  gt.param "w{{g|u}}"
// CHECK:      %[[Y:.*]] = gt.linear %[[X]], %[[W]] : tensor<2x8x32xf32>, tensor<96x32xf32>
// CHECK-NEXT: %[[H:.*]] = gt.glu %[[Y]] <{kind = "silu"}> : tensor<2x8x96xf32> -> tensor<2x8x48xf32>
// CHECK-NEXT: gt.linear %[[H]], %{{.*}} : tensor<2x8x48xf32>, tensor<32x48xf32>
// CHECK-NOT:  gt.silu
// CHECK-NOT:  gt.mul
func.func @swiglu() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x8x32xf32>
  %wg = gt.param "wg" = "normal" [0.0, 0.02] : tensor<48x32xf32>
  %wu = gt.param "wu" = "normal" [0.0, 0.02] : tensor<48x32xf32>
  %wd = gt.param "wd" = "normal" [0.0, 0.02] : tensor<32x48xf32>
  %g0 = gt.linear %x, %wg : tensor<2x8x32xf32>, tensor<48x32xf32>
  %g = gt.silu %g0 : tensor<2x8x48xf32>
  %u = gt.linear %x, %wu : tensor<2x8x32xf32>, tensor<48x32xf32>
  %h = gt.mul %g, %u : tensor<2x8x48xf32>, tensor<2x8x48xf32>
  %d = gt.linear %h, %wd : tensor<2x8x48xf32>, tensor<32x48xf32>
  %s = gt.sum %d : tensor<2x8x32xf32>
  return %s : tensor<f32>
}

// -----

// The product in the other order, GELU's tanh form, weights of different
// initializers: stacked by pads at rows 0 and 16, and glu of kind
// gelu_tanh.
// CHECK-LABEL: func.func @geglu_pads
// CHECK:      %[[WU:.*]] = gt.param "wu"
// CHECK-NEXT: %[[WG:.*]] = gt.param "wg"
// CHECK:      %[[PG:.*]] = gt.pad %[[WG]] {offsets = [0, 0]} : tensor<16x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT: %[[PU:.*]] = gt.pad %[[WU]] {offsets = [16, 0]} : tensor<16x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT: %[[W:.*]] = gt.add %[[PG]], %[[PU]]
// CHECK-NEXT: %[[Y:.*]] = gt.linear %{{.*}}, %[[W]] : tensor<2x32xf32>, tensor<32x32xf32>
// CHECK-NEXT: gt.glu %[[Y]] <{kind = "gelu_tanh"}> : tensor<2x32xf32> -> tensor<2x16xf32>
func.func @geglu_pads() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x32xf32>
  %wu = gt.param "wu" = "normal" [0.0, 0.01] : tensor<16x32xf32>
  %wg = gt.param "wg" = "normal" [0.0, 0.02] : tensor<16x32xf32>
  %u = gt.linear %x, %wu : tensor<2x32xf32>, tensor<16x32xf32>
  %g0 = gt.linear %x, %wg : tensor<2x32xf32>, tensor<16x32xf32>
  %g = gt.gelu %g0 <{approximate = true}> : tensor<2x16xf32>
  %h = gt.mul %u, %g : tensor<2x16xf32>, tensor<2x16xf32>
  %s = gt.sum %h : tensor<2x16xf32>
  return %s : tensor<f32>
}

// -----

// Left alone: the activation's input read again, projections of two
// inputs, a projection with a bias, a product of two activations.
// CHECK-LABEL: func.func @gated_left_alone
// CHECK-NOT:  gt.glu
// CHECK-COUNT-8: gt.linear
func.func @gated_left_alone() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x32xf32>
  %z = gt.input "z" : tensor<2x32xf32>
  %w1 = gt.param "w1" = "zeros" [] : tensor<16x32xf32>
  %w2 = gt.param "w2" = "zeros" [] : tensor<16x32xf32>
  %w3 = gt.param "w3" = "zeros" [] : tensor<16x32xf32>
  %w4 = gt.param "w4" = "zeros" [] : tensor<16x32xf32>
  %w5 = gt.param "w5" = "zeros" [] : tensor<12x32xf32>
  %b5 = gt.param "b5" = "zeros" [] : tensor<12xf32>
  %w6 = gt.param "w6" = "zeros" [] : tensor<12x32xf32>
  %w7 = gt.param "w7" = "zeros" [] : tensor<16x32xf32>
  %w8 = gt.param "w8" = "zeros" [] : tensor<16x32xf32>
  %a0 = gt.linear %x, %w1 : tensor<2x32xf32>, tensor<16x32xf32>
  %a = gt.silu %a0 : tensor<2x16xf32>
  %b = gt.linear %x, %w2 : tensor<2x32xf32>, tensor<16x32xf32>
  %ab = gt.mul %a, %b : tensor<2x16xf32>, tensor<2x16xf32>
  %c0 = gt.linear %x, %w3 : tensor<2x32xf32>, tensor<16x32xf32>
  %c = gt.silu %c0 : tensor<2x16xf32>
  %d = gt.linear %z, %w4 : tensor<2x32xf32>, tensor<16x32xf32>
  %cd = gt.mul %c, %d : tensor<2x16xf32>, tensor<2x16xf32>
  %e0 = gt.linear %x, %w5, %b5 : tensor<2x32xf32>, tensor<12x32xf32>, tensor<12xf32>
  %e = gt.silu %e0 : tensor<2x12xf32>
  %f = gt.linear %x, %w6 : tensor<2x32xf32>, tensor<12x32xf32>
  %ef = gt.mul %e, %f : tensor<2x12xf32>, tensor<2x12xf32>
  %g0 = gt.linear %x, %w7 : tensor<2x32xf32>, tensor<16x32xf32>
  %g = gt.silu %g0 : tensor<2x16xf32>
  %h0 = gt.linear %x, %w8 : tensor<2x32xf32>, tensor<16x32xf32>
  %h = gt.silu %h0 : tensor<2x16xf32>
  %gh = gt.mul %g, %h : tensor<2x16xf32>, tensor<2x16xf32>
  %s1 = gt.sum %ab : tensor<2x16xf32>
  %s2 = gt.sum %cd : tensor<2x16xf32>
  %s3 = gt.sum %ef : tensor<2x12xf32>
  %s4 = gt.sum %gh : tensor<2x16xf32>
  %s5 = gt.sum %a0 : tensor<2x16xf32>
  %t1 = gt.add %s1, %s2 : tensor<f32>, tensor<f32>
  %t2 = gt.add %s3, %s4 : tensor<f32>, tensor<f32>
  %t3 = gt.add %t1, %t2 : tensor<f32>, tensor<f32>
  %t4 = gt.add %t3, %s5 : tensor<f32>, tensor<f32>
  return %t4 : tensor<f32>
}
