// RUN: gtc-opt %s -split-input-file -verify-diagnostics

// Binary ops need broadcast-compatible shapes.
func.func @add_shapes(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{shapes f32[2, 3] and f32[2, 4] cannot be broadcast together for 'add'}}
  %0 = gt.add %a, %b : tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

// Binary ops need one element type.
func.func @add_dtypes(%a: tensor<3xf32>, %b: tensor<3xbf16>) {
  // expected-error @+1 {{'add' needs one element type, got f32[3] and bf16[3]}}
  %0 = gt.add %a, %b : tensor<3xf32>, tensor<3xbf16>
  return
}

// -----

// The printed result type must be the inferred one.
func.func @wrong_result(%a: tensor<3xf32>) {
  // expected-error @+2 {{'gt.add' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'gt.add' op failed to infer returned types}}
  %0 = "gt.add"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

// matmul contraction sizes must agree.
func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{'matmul' contraction sizes differ: f32[2, 3] has 3, f32[4, 5] has 4}}
  %0 = gt.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32>
  return
}

// -----

// matmul needs rank >= 2.
func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{'matmul' needs operands of rank >= 2}}
  %0 = gt.matmul %a, %b : tensor<3xf32>, tensor<3x5xf32>
  return
}

// -----

// matmul batch dimensions broadcast.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<5x4x6xf32>) {
  // expected-error @+1 {{'matmul' batch dimensions of f32[2, 3, 4] and f32[5, 4, 6] cannot be broadcast together}}
  %0 = gt.matmul %a, %b : tensor<2x3x4xf32>, tensor<5x4x6xf32>
  return
}

// -----

// matmul takes float tensors only.
func.func @matmul_int(%a: tensor<2x3xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = "gt.matmul"(%a, %a) <{transpose_b = true}> : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x2xi32>
  return
}

// -----

// linear: input features must match the weight.
func.func @linear_k(%x: tensor<?x3xf32>, %w: tensor<4x5xf32>) {
  // expected-error @+1 {{'linear' input f32[?, 3] has 3 features but weight f32[4, 5] expects 5}}
  %0 = gt.linear %x, %w : tensor<?x3xf32>, tensor<4x5xf32>
  return
}

// -----

// linear: the bias is [out].
func.func @linear_bias(%x: tensor<?x5xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{'linear' bias must be [4], got f32[5]}}
  %0 = gt.linear %x, %w, %b : tensor<?x5xf32>, tensor<4x5xf32>, tensor<5xf32>
  return
}

// -----

// linear: the weight is rank 2.
func.func @linear_weight(%x: tensor<?x5xf32>, %w: tensor<5xf32>) {
  // expected-error @+1 {{'linear' weight must be [out, in], got f32[5]}}
  %0 = gt.linear %x, %w : tensor<?x5xf32>, tensor<5xf32>
  return
}

// -----

// layernorm: weight and bias are [D].
func.func @layernorm(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'layernorm' weight and bias must be [8] for input f32[2, 8], got f32[4]}}
  %0 = gt.layernorm %x, %g, %g : tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// layernorm: epsilon > 0.
func.func @layernorm_eps(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'layernorm' epsilon must be > 0}}
  %0 = gt.layernorm %x, %g, %g <{epsilon = 0.0 : f64}> : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// rmsnorm: the weight is [D], epsilon > 0, and one element type.
func.func @rmsnorm(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'rmsnorm' weight must be [8] for input f32[2, 8], got f32[4]}}
  %0 = gt.rmsnorm %x, %g : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @rmsnorm_eps(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'rmsnorm' epsilon must be > 0}}
  %0 = gt.rmsnorm %x, %g <{epsilon = -1.0 : f64}> : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @rmsnorm_types(%x: tensor<2x8xf32>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{'rmsnorm' needs one element type, got f32[2, 8] and bf16[8]; insert a cast()}}
  %0 = gt.rmsnorm %x, %g : tensor<2x8xf32>, tensor<8xbf16>
  return
}

// -----

func.func @rmsnorm_grad(%dy: tensor<2x8xf32>, %x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'gt.rmsnorm_grad' op weight f32[4] does not match input f32[2, 8]}}
  %0:2 = gt.rmsnorm_grad %dy, %x, %g : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

// slice and pad: the block lies inside, one offset a dimension.
func.func @slice_offset(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'gt.slice' op offset 6 of dimension 1 puts 3 elements outside 8}}
  %0 = gt.slice %x {offsets = [0, 6]} : tensor<4x8xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @pad_offsets(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'gt.pad' op has 1 offsets for rank 2}}
  %0 = gt.pad %x {offsets = [2]} : tensor<4x8xf32> -> tensor<4x12xf32>
  return
}

// -----

// rope: [..., T, heads, head_dim] with an even head_dim, theta > 0.
func.func @rope_rank(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'gt.rope' op input f32[2, 8] must be [..., T, heads, head_dim] (rank >= 3)}}
  %0 = gt.rope %x : tensor<2x8xf32>
  return
}

// -----

func.func @rope_odd(%x: tensor<2x4x3x5xf32>) {
  // expected-error @+1 {{'gt.rope' op head_dim 5 of f32[2, 4, 3, 5] must be a fixed even size (features turn in pairs)}}
  %0 = gt.rope %x : tensor<2x4x3x5xf32>
  return
}

// -----

func.func @rope_theta(%x: tensor<2x4x3x8xf32>) {
  // expected-error @+1 {{'gt.rope' op theta must be a positive normal f32 (the kernels turn in f32), got 0}}
  %0 = gt.rope %x <{theta = 0.0 : f64}> : tensor<2x4x3x8xf32>
  return
}

// -----

func.func @rope_theta_below_f32(%x: tensor<2x4x3x8xf32>) {
  // expected-error @+1 {{'gt.rope' op theta must be a positive normal f32 (the kernels turn in f32), got 1.000000e-50}}
  %0 = gt.rope %x <{theta = 1.0e-50 : f64}> : tensor<2x4x3x8xf32>
  return
}

// -----

func.func @positions_beyond_the_table(%w: tensor<12x8xf32>) {
  %p = gt.positions 16 : tensor<16xi32>
  // expected-error @+1 {{'gt.embedding' op looks up positions 0 to 15 in a table of 12 rows; the table needs at least 16 rows (one a position)}}
  %0 = gt.embedding %p, %w : tensor<16xi32>, tensor<12x8xf32>
  return
}

// -----

// rope: rotated counts heads, and takes no positions.
func.func @rope_rotated(%x: tensor<2x4x3x8xf32>) {
  // expected-error @+1 {{'gt.rope' op rotated = 4 must be at most the heads of f32[2, 4, 3, 8]}}
  %0 = gt.rope %x <{rotated = 4 : i64}> : tensor<2x4x3x8xf32>
  return
}

// -----

func.func @rope_rotated_positions(%x: tensor<2x4x3x8xf32>, %p: tensor<2x4xi32>) {
  // expected-error @+1 {{'gt.rope' op rotated takes no positions (a training plan's packed projection)}}
  %0 = gt.rope %x at %p : tensor<2x4xi32> <{rotated = 2 : i64}> : tensor<2x4x3x8xf32>
  return
}

// -----

// attention over packed heads [B, T, H + 2 Hkv, d]: Hkv divides H.
func.func @attention_packed_heads(%qkv: tensor<2x4x7x8xf32>) {
  // expected-error @+1 {{'attention' needs packed heads [B, T, H + 2 Hkv, d] with Hkv dividing H = 3, got f32[2, 4, 7, 8]}}
  %0:2 = gt.attention %qkv <{heads = 3 : i64}> : tensor<2x4x7x8xf32>
  return
}

// -----

// attention: heads must divide D.
func.func @attention_heads(%qkv: tensor<2x4x30xf32>) {
  // expected-error @+1 {{'attention' heads = 3 must be positive and divide the model width 10}}
  %0 = gt.attention %qkv <{heads = 3 : i64}> : tensor<2x4x30xf32>
  return
}

// -----

// attention: packed qkv is a multiple of 3.
func.func @attention_qkv(%qkv: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'attention' qkv's last dimension must be a static multiple of 3, got f32[2, 4, 8]}}
  %0 = gt.attention %qkv <{heads = 1 : i64}> : tensor<2x4x8xf32>
  return
}

// -----

// attention: heads is positive.
func.func @attention_zero_heads(%qkv: tensor<2x4x6xf32>) {
  // expected-error @+1 {{'attention' heads = 0 must be positive and divide the model width 2}}
  %0 = gt.attention %qkv <{heads = 0 : i64}> : tensor<2x4x6xf32>
  return
}

// -----

// dropout: p is a probability below 1.
func.func @dropout_p(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'gt.dropout' op p must be in [0, 1), got 1}}
  %0 = gt.dropout %x <{p = 1.0 : f64, salt = 0 : i64}> : tensor<2x4xf32>
  return
}

// -----

// attention on q, k, v: the key heads divide the query heads.
func.func @attention_kv_heads(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x4x8xf32>) {
  // expected-error @+1 {{'attention' needs q [B, T, H, d] and k, v [B, T, Hkv, d] of one dtype with Hkv dividing H and T, H, d fixed, got f32[2, 4, 6, 8], f32[2, 4, 4, 8], f32[2, 4, 4, 8]}}
  %0, %1 = gt.attention %q, %k, %k <{heads = 6 : i64}> : tensor<2x4x6x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>
  return
}

// -----

// attention on q, k, v: heads is q's.
func.func @attention_qkv_heads(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'attention' heads = 3 must be q's heads 6}}
  %0, %1 = gt.attention %q, %k, %k <{heads = 3 : i64}> : tensor<2x4x6x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
  return
}

// -----

// attention takes one or three operands.
func.func @attention_two(%q: tensor<2x4x6xf32>) {
  // expected-error @+1 {{'attention' takes packed qkv or q, k, v, got 2 operands}}
  %0, %1 = gt.attention %q, %q <{heads = 1 : i64}> : tensor<2x4x6xf32>, tensor<2x4x6xf32>
  return
}

// -----

// attention_grad: the gradient has the output's type.
func.func @attention_grad_dy(%dy: tensor<2x4x6x4xf32>, %q: tensor<2x4x6x8xf32>, %k: tensor<2x4x2x8xf32>, %lse: tensor<2x6x4xf32>) {
  // expected-error @+1 {{'gt.attention_grad' op gradient f32[2, 4, 6, 4] does not match the output f32[2, 4, 6, 8] of attention on f32[2, 4, 6, 8], f32[2, 4, 2, 8], f32[2, 4, 2, 8]}}
  %0:3 = gt.attention_grad %dy, %dy, %lse, %q, %k, %k <{heads = 6 : i64}> : tensor<2x4x6x4xf32>, tensor<2x6x4xf32>, tensor<2x4x6x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
  return
}

// -----

// attention_grad: lse is the forward's [B, H, T] statistics.
func.func @attention_grad_lse(%dy: tensor<2x4x6xf32>, %qkv: tensor<2x4x18xf32>, %lse: tensor<2x4x2xf32>) {
  // expected-error @+1 {{'gt.attention_grad' op lse f32[2, 4, 2] does not match the f32[2, 2, 4] of attention on f32[2, 4, 18]}}
  %0 = gt.attention_grad %dy, %dy, %lse, %qkv <{heads = 2 : i64}> : tensor<2x4x6xf32>, tensor<2x4x2xf32>, tensor<2x4x18xf32>
  return
}

// -----

// embedding: the table is [V, D].
func.func @embedding(%i: tensor<4xi32>, %t: tensor<8xf32>) {
  // expected-error @+1 {{'embedding' table must be [V, D], got f32[8]}}
  %0 = gt.embedding %i, %t : tensor<4xi32>, tensor<8xf32>
  return
}

// -----

// cross_entropy: labels have the logits' leading shape.
func.func @cross_entropy(%l: tensor<2x3x10xf32>, %y: tensor<2x4xi32>) {
  // expected-error @+1 {{'cross_entropy' labels must have the logits' shape without the class dimension: logits f32[2, 3, 10], labels i32[2, 4]}}
  %0 = gt.cross_entropy %l, %y : tensor<2x3x10xf32>, tensor<2x4xi32>
  return
}

// -----

// Reductions: axes in range and unique.
func.func @sum_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'sum' axis 2 is out of range for f32[2, 3]}}
  %0 = gt.sum %x <{axes = [2]}> : tensor<2x3xf32>
  return
}

// -----

func.func @mean_axis_twice(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'mean' axis 1 appears twice}}
  %0 = gt.mean %x <{axes = [1, -1]}> : tensor<2x3xf32>
  return
}

// -----

// transpose: a permutation of 0..rank-1.
func.func @transpose(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'transpose' permutation is not a permutation of 0..1}}
  %0 = gt.transpose %x <{permutation = [1, 1]}> : tensor<2x3xf32>
  return
}

// -----

// softmax: axis in range.
func.func @softmax(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'gt.softmax' op axis 2 is out of range for f32[2, 3]}}
  %0 = gt.softmax %x <{axis = 2 : i64}> : tensor<2x3xf32>
  return
}

// -----

// reshape: element counts match.
func.func @reshape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'gt.reshape' op cannot reshape f32[2, 3] (6 elements) to f32[7] (7 elements)}}
  %0 = gt.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

// reshape: a dynamic input needs exactly one dynamic result dimension.
func.func @reshape_dynamic(%x: tensor<?x3xf32>) {
  // expected-error @+1 {{'gt.reshape' op cannot reshape f32[?, 3] to f32[6]: a dynamic input size needs exactly one dynamic result dimension}}
  %0 = gt.reshape %x : tensor<?x3xf32> -> tensor<6xf32>
  return
}

// -----

// broadcast: NumPy rules.
func.func @broadcast(%x: tensor<3xf32>) {
  // expected-error @+1 {{'gt.broadcast' op cannot broadcast f32[3] to f32[2, 4]}}
  %0 = gt.broadcast %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

// cast keeps the shape.
func.func @cast(%x: tensor<3xf32>) {
  // expected-error @+1 {{'gt.cast' op requires the same shape for all operands and results}}
  %0 = gt.cast %x : tensor<3xf32> -> tensor<4xbf16>
  return
}

// -----

// Parameters: known initializer with the right arity and a static shape.
func.func @param_init() {
  // expected-error @+1 {{'gt.param' op has unknown initializer 'xavier'}}
  %0 = gt.param "w" = "xavier" [] : tensor<3xf32>
  return
}

// -----

// A checkpoint's own names: its metadata and the optimizer state.
func.func @param_reserved() {
  // expected-error @+1 {{'gt.param' op name 'optimizer.exp_avg.w' is a checkpoint's own (its metadata, or the optimizer state under 'optimizer.'), so the parameter could not be saved; rename it}}
  %0 = gt.param "optimizer.exp_avg.w" = "zeros" [] : tensor<3xf32>
  return
}

// -----

func.func @param_reserved_metadata() {
  // expected-error @+1 {{'gt.param' op name '__metadata__' is a checkpoint's own}}
  %0 = gt.param "__metadata__" = "zeros" [] : tensor<3xf32>
  return
}

// -----

func.func @param_reserved_part() {
  // expected-error @+1 {{'gt.param' op name 'optimizer.b' is a checkpoint's own}}
  %0 = gt.param "a+b" = "zeros" [] {parts = ["a", "optimizer.b"], part_rows = [2, 2]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_arity() {
  // expected-error @+1 {{'gt.param' op initializer 'normal' takes 2 arguments, got 1}}
  %0 = gt.param "w" = "normal" [0.1] : tensor<3xf32>
  return
}

// -----

// Packed parameters: parts and their rows, of one length, distinct names,
// rows adding up to dimension 0.
func.func @param_parts_alone() {
  // expected-error @+1 {{'gt.param' op a packed parameter needs 'parts' and 'part_rows' of one length, at least 2}}
  %0 = gt.param "a+b" = "zeros" [] {parts = ["a", "b"]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_one_part() {
  // expected-error @+1 {{'gt.param' op a packed parameter needs 'parts' and 'part_rows' of one length, at least 2}}
  %0 = gt.param "a" = "zeros" [] {parts = ["a"], part_rows = [4]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_parts_names() {
  // expected-error @+1 {{'gt.param' op a packed parameter's parts need distinct, non-empty names}}
  %0 = gt.param "a+a" = "zeros" [] {parts = ["a", "a"], part_rows = [1, 3]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_parts_empty_rows() {
  // expected-error @+1 {{'gt.param' op part 'b' needs at least one row}}
  %0 = gt.param "a+b" = "zeros" [] {parts = ["a", "b"], part_rows = [4, 0]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_parts_rows() {
  // expected-error @+1 {{'gt.param' op the parts' rows add up to 5, not dimension 0 of 'tensor<4x2xf32>'}}
  %0 = gt.param "a+b" = "zeros" [] {parts = ["a", "b"], part_rows = [2, 3]} : tensor<4x2xf32>
  return
}

// -----

func.func @param_parts_scalar() {
  // expected-error @+1 {{'gt.param' op a packed parameter needs a dimension 0 to pack along}}
  %0 = gt.param "a+b" = "zeros" [] {parts = ["a", "b"], part_rows = [1, 1]} : tensor<f32>
  return
}

// -----

func.func @param_dynamic() {
  // expected-error @+1 {{'gt.param' op needs a static shape, got 'tensor<?xf32>'}}
  %0 = gt.param "w" = "zeros" [] : tensor<?xf32>
  return
}

// -----

func.func @param_std() {
  // expected-error @+1 {{'gt.param' op normal initializer needs std >= 0}}
  %0 = gt.param "w" = "normal" [0.0, -1.0] : tensor<3xf32>
  return
}

// -----

func.func @param_name() {
  // expected-error @+1 {{'gt.param' op needs a non-empty name}}
  %0 = gt.param "" = "zeros" [] : tensor<3xf32>
  return
}

// -----

func.func @input_name() {
  // expected-error @+1 {{'gt.input' op needs a non-empty name}}
  %0 = gt.input "" : tensor<3xf32>
  return
}

// -----

// Inputs hold f32, bf16, f16 or i32 tensors.
func.func @input_type() {
  // expected-error @+1 {{'gt.input' op result #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer values, but got 'tensor<3xf64>'}}
  %0 = gt.input "x" : tensor<3xf64>
  return
}

// -----

// positions: a positive length.
func.func @positions() {
  // expected-error @+1 {{'gt.positions' op attribute 'length' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = gt.positions 0 : tensor<0xi32>
  return
}

// -----

func.func @pad_smaller(%x: tensor<4x8xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'gt.pad' op cannot pad f32[4, 8] to f32[4, 6]: the ranks must agree and every dimension be static and no smaller}}
  %y = gt.pad %x : tensor<4x8xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @slice_larger(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+1 {{'gt.slice' op cannot slice f32[4, 8] to f32[4, 9]: the ranks must agree and every dimension be static and no larger}}
  %y = gt.slice %x : tensor<4x8xf32> -> tensor<4x9xf32>
  return %y : tensor<4x9xf32>
}

// -----

func.func @pad_rank(%x: tensor<4x8xf32>) -> tensor<4x8x1xf32> {
  // expected-error @+1 {{'gt.pad' op cannot pad}}
  %y = gt.pad %x : tensor<4x8xf32> -> tensor<4x8x1xf32>
  return %y : tensor<4x8x1xf32>
}

// -----

func.func @pad_type(%x: tensor<4x8xf32>) -> tensor<4x16xbf16> {
  // expected-error @+1 {{'gt.pad' op requires the same element type for all operands and results}}
  %y = gt.pad %x : tensor<4x8xf32> -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

// gt.all_reduce gives back its operands' types, in order.
func.func @all_reduce_types(%a: tensor<4xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'gt.all_reduce' op results must have the types of its operands, in order}}
  %r:2 = gt.all_reduce %a, %b {bucket = 0 : i64} : (tensor<4xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<2xf32>, tensor<4xf32>
}

// -----

// It reduces something.
func.func @all_reduce_nothing() {
  // expected-error @+1 {{'gt.all_reduce' op reduces at least one gradient}}
  gt.all_reduce {bucket = 0 : i64} : () -> ()
  return
}

// -----

// Buckets are numbered from 0.
func.func @all_reduce_bucket(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'bucket' failed to satisfy constraint}}
  %r = gt.all_reduce %a {bucket = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// An activation's gradient names one the executors can differentiate
// (runtime/include/gtc/Runtime/ScalarOps.h's GTC_ACTIVATIONS).
func.func @activation_grad_kind(%dy: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'gt.activation_grad' op has unknown kind 'swish'; expected relu, tanh, exp, log, sqrt, sigmoid, silu, gelu, gelu_tanh}}
  %r = gt.activation_grad %dy, %x <{kind = "swish"}> : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A gated linear unit's activation is one of those kinds too.
func.func @glu_kind(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'glu' has unknown kind 'swish'; expected relu, tanh, exp, log, sqrt, sigmoid, silu, gelu, gelu_tanh}}
  // expected-error @+1 {{'gt.glu' op failed to infer returned types}}
  %r = gt.glu %x <{kind = "swish"}> : tensor<4x8xf32> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Its input's last dimension holds two halves.
func.func @glu_odd(%x: tensor<4x7xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{'glu' needs an even last dimension (two halves), got f32[4, 7]}}
  // expected-error @+1 {{'gt.glu' op failed to infer returned types}}
  %r = gt.glu %x <{kind = "silu"}> : tensor<4x7xf32> -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// The result is the half of the input's last dimension.
func.func @glu_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'gt.glu' op inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{'gt.glu' op failed to infer returned types}}
  %r = gt.glu %x <{kind = "silu"}> : tensor<4x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// The gradient of glu has glu's result type.
func.func @glu_grad_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'gt.glu_grad' op gradient f32[4, 8] does not match the result f32[4, 4] of glu on f32[4, 8]}}
  %r = gt.glu_grad %dy, %x <{kind = "silu"}> : tensor<4x8xf32>, tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A KV cache is written in place: gt.cache_update takes a gt.state.
func.func @cache_update_not_state(%c: tensor<2x8x2x4xf32>, %k: tensor<2x1x2x4xf32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{'gt.cache_update' op writes a gt.state in place; its cache operand is not one}}
  %0 = gt.cache_update %c, %k, %p : tensor<2x8x2x4xf32>, tensor<2x1x2x4xf32>, tensor<2x1xi32>
  return
}

// -----

// The window's heads must be the cache's.
func.func @cache_update_heads(%k: tensor<2x1x4x4xf32>, %p: tensor<2x1xi32>) {
  %c = gt.state "kv.0.k" : tensor<2x8x2x4xf32>
  // expected-error @+1 {{'gt.cache_update' op the update f32[2, 1, 4, 4] and the cache f32[2, 8, 2, 4] differ in heads}}
  %0 = gt.cache_update %c, %k, %p : tensor<2x8x2x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1xi32>
  return
}

// -----

// Positions give one place for each query of the window.
func.func @cached_attention_positions(%q: tensor<2x1x4x4xf32>, %c: tensor<2x8x2x4xf32>, %p: tensor<2x3xi32>) {
  // expected-error @+1 {{'gt.cached_attention' op positions i32[2, 3] must be [B, S] of the window f32[2, 1, 4, 4]}}
  %0 = gt.cached_attention %q, %c, %c, %p : tensor<2x1x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x3xi32>
  return
}

// -----

// Query heads are a multiple of the cache's.
func.func @cached_attention_groups(%q: tensor<2x1x3x4xf32>, %c: tensor<2x8x2x4xf32>, %p: tensor<2x1xi32>) {
  // expected-error @+1 {{'gt.cached_attention' op the window f32[2, 1, 3, 4] does not fit the cache f32[2, 8, 2, 4]}}
  %0 = gt.cached_attention %q, %c, %c, %p : tensor<2x1x3x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x1xi32>
  return
}

// -----

// Rope's positions are [B, T] of its input.
func.func @rope_positions(%x: tensor<2x1x4x4xf32>, %p: tensor<2x2xi32>) {
  // expected-error @+1 {{'gt.rope' op positions i32[2, 2] must be [B, T] of the input f32[2, 1, 4, 4] [B, T, heads, head_dim]}}
  %0 = gt.rope %x at %p : tensor<2x2xi32> : tensor<2x1x4x4xf32>
  return
}

// -----

// A state is a buffer made once.
func.func @state_dynamic() {
  // expected-error @+1 {{'gt.state' op type f32[?, 8, 2, 4] must be static (a buffer made once)}}
  %0 = gt.state "kv.0.k" : tensor<?x8x2x4xf32>
  return
}
