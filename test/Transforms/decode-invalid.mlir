// RUN: gtc-opt %s --gt-decode --split-input-file -verify-diagnostics

// Generation samples from logits: a loss that is not a cross-entropy has none.
func.func @not_cross_entropy() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<16x8xf32>
  %e = gt.embedding %tok, %w : tensor<2x4xi32>, tensor<16x8xf32>
  %s = gt.sum %e : tensor<2x4x8xf32>
  // expected-error @+1 {{gt-decode: generation samples from logits, and this model's loss is not a cross_entropy of logits}}
  return %s : tensor<f32>
}

// -----

// A bidirectional attention sees later positions.
func.func @not_causal() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %tgt = gt.label "targets" : tensor<2x4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<16x24xf32>
  %x = gt.embedding %tok, %w : tensor<2x4xi32>, tensor<16x24xf32>
  // expected-error @+1 {{gt-decode: attention without causal: true sees later positions}}
  %y, %lse = gt.attention %x <{heads = 2 : i64, causal = false}> : tensor<2x4x24xf32>
  %wo = gt.param "wo" = "zeros" [] : tensor<16x8xf32>
  %l = gt.linear %y, %wo : tensor<2x4x8xf32>, tensor<16x8xf32>
  %loss = gt.cross_entropy %l, %tgt : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// A softmax over the positions cannot be split into windows.
func.func @softmax_over_positions() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<2x4xi32>
  %tgt = gt.label "targets" : tensor<2x4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<16x8xf32>
  %x = gt.embedding %tok, %w : tensor<2x4xi32>, tensor<16x8xf32>
  // expected-error @+1 {{gt-decode: this op mixes or reduces the positions of a sequence}}
  %s = gt.softmax %x <{axis = 1 : i64}> : tensor<2x4x8xf32>
  %l = gt.linear %s, %w : tensor<2x4x8xf32>, tensor<16x8xf32>
  %loss = gt.cross_entropy %l, %tgt : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// An image classifier has no token ids to feed.
func.func @no_tokens() -> tensor<f32> attributes {gt.model} {
  // expected-error @+1 {{gt-decode: generation feeds the model token ids [B, T] i32 (one input)}}
  %x = gt.input "x" : tensor<2x4x16xf32>
  %y = gt.label "y" : tensor<2x4xi32>
  %loss = gt.cross_entropy %x, %y : tensor<2x4x16xf32>, tensor<2x4xi32>
  return %loss : tensor<f32>
}

// -----

// A KV cache is a buffer made once: its batch must be known.
func.func @dynamic_batch() -> tensor<f32> attributes {gt.model} {
  %tok = gt.input "tokens" : tensor<?x4xi32>
  %tgt = gt.label "targets" : tensor<?x4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<16x24xf32>
  %x = gt.embedding %tok, %w : tensor<?x4xi32>, tensor<16x24xf32>
  // expected-error @+1 {{gt-decode: a KV cache needs a fixed batch}}
  %y, %lse = gt.attention %x <{heads = 2 : i64}> : tensor<?x4x24xf32>
  %wo = gt.param "wo" = "zeros" [] : tensor<16x8xf32>
  %l = gt.linear %y, %wo : tensor<?x4x8xf32>, tensor<16x8xf32>
  %loss = gt.cross_entropy %l, %tgt : tensor<?x4x16xf32>, tensor<?x4xi32>
  return %loss : tensor<f32>
}
