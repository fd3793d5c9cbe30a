// RUN: gtc-opt %s --gt-decode=window=1 --split-input-file | FileCheck %s
// RUN: gtc-opt %s --gt-decode=window=4 --split-input-file | FileCheck %s --check-prefix=W4
// RUN: gtc-opt %s --gt-decode=cache=false --split-input-file | FileCheck %s --check-prefix=NOCACHE

// GPT-2's block: position embeddings, packed attention. The tokens become a
// window, a positions input appears, gt.positions reads it, the packed qkv
// is sliced into q, k and v, k and v go into two caches that the attention
// reads, and the loss gives way to the logits.
// CHECK-LABEL: func.func @gpt() -> tensor<2x1x16xf32> attributes {gt.decode}
// CHECK-DAG:  %[[POS:.*]] = gt.input "positions" : tensor<2x1xi32>
// CHECK-DAG:  %[[TOK:.*]] = gt.input "tokens" : tensor<2x1xi32>
// CHECK-NOT:  gt.label
// CHECK:      %[[TE:.*]] = gt.embedding %[[TOK]], %{{.*}} : tensor<2x1xi32>, tensor<16x8xf32>
// CHECK:      %[[PE:.*]] = gt.embedding %[[POS]], %{{.*}} : tensor<2x1xi32>, tensor<4x8xf32>
// CHECK:      %[[X:.*]] = gt.add %[[TE]], %[[PE]] : tensor<2x1x8xf32>, tensor<2x1x8xf32>
// CHECK:      %[[QKV:.*]] = gt.linear %[[X]], %{{.*}} : tensor<2x1x8xf32>, tensor<24x8xf32>
// CHECK:      %[[QS:.*]] = gt.slice %[[QKV]] {offsets = [0, 0, 0]} : tensor<2x1x24xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[Q:.*]] = gt.reshape %[[QS]] : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
// CHECK-NEXT: %[[KS:.*]] = gt.slice %[[QKV]] {offsets = [0, 0, 8]}
// CHECK-NEXT: %[[K:.*]] = gt.reshape %[[KS]]
// CHECK-NEXT: %[[VS:.*]] = gt.slice %[[QKV]] {offsets = [0, 0, 16]}
// CHECK-NEXT: %[[V:.*]] = gt.reshape %[[VS]]
// CHECK-NEXT: %[[KC:.*]] = gt.state "kv.0.k" : tensor<2x4x2x4xf32>
// CHECK-NEXT: %[[K2:.*]] = gt.cache_update %[[KC]], %[[K]], %[[POS]]
// CHECK-NEXT: %[[VC:.*]] = gt.state "kv.0.v" : tensor<2x4x2x4xf32>
// CHECK-NEXT: %[[V2:.*]] = gt.cache_update %[[VC]], %[[V]], %[[POS]]
// CHECK-NEXT: %[[Y:.*]] = gt.cached_attention %[[Q]], %[[K2]], %[[V2]], %[[POS]] : tensor<2x1x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x1xi32>
// CHECK-NEXT: %[[YR:.*]] = gt.reshape %[[Y]] : tensor<2x1x2x4xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[H:.*]] = gt.add %[[X]], %[[YR]] : tensor<2x1x8xf32>, tensor<2x1x8xf32>
// CHECK:      %[[L:.*]] = gt.linear %[[H]], %{{.*}} : tensor<2x1x8xf32>, tensor<16x8xf32>
// CHECK-NEXT: return %[[L]] : tensor<2x1x16xf32>
// W4-LABEL: func.func @gpt() -> tensor<2x4x16xf32>
// W4: gt.cached_attention {{.*}} : tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4xi32>
// NOCACHE-LABEL: func.func @gpt() -> tensor<2x4x16xf32> attributes {gt.decode}
// NOCACHE-NOT: gt.input "positions"
// NOCACHE:     gt.positions 4
// NOCACHE:     gt.attention
// NOCACHE-NOT: gt.cross_entropy
func.func @gpt() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %tgt = gt.label "targets" : tensor<2x4xi32>
  %wte = gt.param "wte" = "zeros" [] : tensor<16x8xf32>
  %e = gt.embedding %tok, %wte : tensor<2x4xi32>, tensor<16x8xf32>
  %pos = gt.positions 4 : tensor<4xi32>
  %wpe = gt.param "wpe" = "zeros" [] : tensor<4x8xf32>
  %p = gt.embedding %pos, %wpe : tensor<4xi32>, tensor<4x8xf32>
  %x = gt.add %e, %p : tensor<2x4x8xf32>, tensor<4x8xf32>
  %w = gt.param "attn.w" = "zeros" [] : tensor<24x8xf32>
  %qkv = gt.linear %x, %w : tensor<2x4x8xf32>, tensor<24x8xf32>
  %y, %lse = gt.attention %qkv <{heads = 2 : i64}> : tensor<2x4x24xf32>
  %h = gt.add %x, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %d = gt.dropout %h <{p = 1.000000e-01 : f64, salt = 1 : i64}> : tensor<2x4x8xf32>
  %l = gt.linear %d, %wte : tensor<2x4x8xf32>, tensor<16x8xf32>
  %loss = gt.cross_entropy %l, %tgt : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// The position table added directly (canonicalization folds
// embedding(positions(T), table) to it): each window row looks up its own.
// CHECK-LABEL: func.func @table
// CHECK:      %[[POS:.*]] = gt.input "positions" : tensor<2x1xi32>
// CHECK:      %[[WPE:.*]] = gt.param "wpe"
// CHECK:      %[[PE:.*]] = gt.embedding %[[POS]], %[[WPE]] : tensor<2x1xi32>, tensor<4x8xf32>
// CHECK-NEXT: gt.add %{{.*}}, %[[PE]] : tensor<2x1x8xf32>, tensor<2x1x8xf32>
func.func @table() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %tgt = gt.label "targets" : tensor<2x4xi32>
  %wte = gt.param "wte" = "zeros" [] : tensor<16x8xf32>
  %e = gt.embedding %tok, %wte : tensor<2x4xi32>, tensor<16x8xf32>
  %wpe = gt.param "wpe" = "zeros" [] : tensor<4x8xf32>
  %x = gt.add %e, %wpe : tensor<2x4x8xf32>, tensor<4x8xf32>
  %l = gt.linear %x, %wte : tensor<2x4x8xf32>, tensor<16x8xf32>
  %loss = gt.cross_entropy %l, %tgt : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// Llama's attention: rope turns by the positions input, grouped-query
// caches hold the KV heads, and bf16 logits come back as f32.
// CHECK-LABEL: func.func @llama() -> tensor<2x1x16xf32>
// CHECK-DAG:  %[[POS:.*]] = gt.input "positions" : tensor<2x1xi32>
// CHECK:      %[[Q:.*]] = gt.reshape %{{.*}} : tensor<2x1x8xbf16> -> tensor<2x1x4x2xbf16>
// CHECK:      %[[K:.*]] = gt.reshape %{{.*}} : tensor<2x1x4xbf16> -> tensor<2x1x2x2xbf16>
// CHECK:      %[[RQ:.*]] = gt.rope %[[Q]] at %[[POS]] : tensor<2x1xi32> {{ *}}: tensor<2x1x4x2xbf16>
// CHECK-NEXT: %[[RK:.*]] = gt.rope %[[K]] at %[[POS]] : tensor<2x1xi32> {{ *}}: tensor<2x1x2x2xbf16>
// CHECK-NEXT: %[[KC:.*]] = gt.state "kv.0.k" : tensor<2x4x2x2xbf16>
// CHECK-NEXT: %[[K2:.*]] = gt.cache_update %[[KC]], %[[RK]], %[[POS]]
// CHECK-NEXT: %[[VC:.*]] = gt.state "kv.0.v" : tensor<2x4x2x2xbf16>
// CHECK-NEXT: %[[V2:.*]] = gt.cache_update %[[VC]], %{{.*}}, %[[POS]]
// CHECK-NEXT: %[[Y:.*]] = gt.cached_attention %[[RQ]], %[[K2]], %[[V2]], %[[POS]] : tensor<2x1x4x2xbf16>
// CHECK:      %[[L:.*]] = gt.linear %{{.*}} : tensor<2x1x8xbf16>, tensor<16x8xbf16>
// CHECK-NEXT: %[[F:.*]] = gt.cast %[[L]] : tensor<2x1x16xbf16> -> tensor<2x1x16xf32>
// CHECK-NEXT: return %[[F]]
func.func @llama() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %tgt = gt.label "targets" : tensor<2x4xi32>
  %wte = gt.param "wte" = "zeros" [] : tensor<16x8xbf16>
  %x = gt.embedding %tok, %wte : tensor<2x4xi32>, tensor<16x8xbf16>
  %wq = gt.param "wq" = "zeros" [] : tensor<8x8xbf16>
  %wk = gt.param "wk" = "zeros" [] : tensor<4x8xbf16>
  %q0 = gt.linear %x, %wq : tensor<2x4x8xbf16>, tensor<8x8xbf16>
  %k0 = gt.linear %x, %wk : tensor<2x4x8xbf16>, tensor<4x8xbf16>
  %v0 = gt.linear %x, %wk : tensor<2x4x8xbf16>, tensor<4x8xbf16>
  %q = gt.reshape %q0 : tensor<2x4x8xbf16> -> tensor<2x4x4x2xbf16>
  %k = gt.reshape %k0 : tensor<2x4x4xbf16> -> tensor<2x4x2x2xbf16>
  %v = gt.reshape %v0 : tensor<2x4x4xbf16> -> tensor<2x4x2x2xbf16>
  %rq = gt.rope %q <{theta = 1.000000e+04 : f64}> : tensor<2x4x4x2xbf16>
  %rk = gt.rope %k <{theta = 1.000000e+04 : f64}> : tensor<2x4x2x2xbf16>
  %y, %lse = gt.attention %rq, %rk, %v <{heads = 4 : i64}> : tensor<2x4x4x2xbf16>, tensor<2x4x2x2xbf16>, tensor<2x4x2x2xbf16>
  %yr = gt.reshape %y : tensor<2x4x4x2xbf16> -> tensor<2x4x8xbf16>
  %l = gt.linear %yr, %wte : tensor<2x4x8xbf16>, tensor<16x8xbf16>
  %lf = gt.cast %l : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %loss = gt.cross_entropy %lf, %tgt : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}
