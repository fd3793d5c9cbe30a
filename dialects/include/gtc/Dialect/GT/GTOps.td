//===- GTOps.td - Operations of the gt dialect ---------------*- tablegen -*-===//

#ifndef GT_OPS
#define GT_OPS

include "gtc/Dialect/GT/GTDialect.td"
include "gtc/Dialect/GT/GTTraits.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def GT_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def GT_IndexTensor : RankedTensorOf<[I32]>;
def GT_AnyTensor : RankedTensorOf<[F32, BF16, F16, I32]>;
def GT_ScalarF32 : 0DTensorOf<[F32]>;

class GT_Op<string mnemonic, list<Trait> traits = []>
    : Op<GT_Dialect, mnemonic, traits>;

/// An operation whose result type is computed from its operands and
/// attributes; the verifier compares it with the printed result type.
class GT_InferredOp<string mnemonic, list<Trait> traits = []>
    : GT_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])>;

//===----------------------------------------------------------------------===//
// Leaves: inputs, labels, parameters, constants
//===----------------------------------------------------------------------===//

class GT_DataOp<string mnemonic, string what>
    : GT_Op<mnemonic, [Pure, GT_Leaf]> {
  let summary = "a " # what # " of the model, fed by the data loader";
  let description = [{
    Declares a named }] # what # [{ tensor of the model; its value comes from
    the training data each step. A symbolic dimension (the batch `B`) is a
    dynamic dimension.

    Example:

    ```mlir
    %x = gt.}] # mnemonic # [{ "x" : tensor<?x784xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def GT_InputOp : GT_DataOp<"input", "input">;
def GT_LabelOp : GT_DataOp<"label", "label">;

def GT_ParamOp : GT_Op<"param", [Pure, GT_Leaf]> {
  let summary = "a trainable parameter with its initializer";
  let description = [{
    Declares a trainable parameter. `name` is its stable, PyTorch-style name
    (`blocks.3.attn.c_attn.weight`), used in checkpoints; names are unique in a
    model. `init` is one of `zeros`, `ones`, `constant(v)`, `normal(mean, std)`,
    `uniform(low, high)` with its arguments in `args`. The shape is static.

    A packed parameter (gt-pack-projections makes them) is several of the
    model's parameters stored one after another along dimension 0, used as
    one tensor: `parts` names them and `part_rows` gives each one's rows.
    Checkpoints, `--init` and the optimizer's state see the parts under
    their own names, and each part is drawn from `init` as that parameter
    alone would be; `name` is the packed tensor's, inside the compiler.

    Example:

    ```mlir
    %w = gt.param "fc1.weight" = "uniform" [-0.0357, 0.0357] : tensor<1024x784xf32>
    %qkv = gt.param "q.weight+k.weight+v.weight" = "normal" [0.0, 0.02]
        {part_rows = [768, 256, 256],
         parts = ["q.weight", "k.weight", "v.weight"]} : tensor<1280x768xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$init, F64ArrayAttr:$args,
                       OptionalAttr<StrArrayAttr>:$parts,
                       OptionalAttr<I64ArrayAttr>:$part_rows);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$name `=` $init $args attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def GT_ConstantOp : GT_InferredOp<"constant", [ConstantLike, GT_Leaf]> {
  let summary = "a constant tensor";
  let description = [{
    A constant; its type is the type of `value`.

    Example:

    ```mlir
    %half = gt.constant dense<5.000000e-01> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def GT_PositionsOp : GT_InferredOp<"positions", [GT_Leaf]> {
  let summary = "the positions 0, 1, ..., length-1";
  let description = [{
    The `i32` tensor `[0, 1, ..., length - 1]`, used to look up position
    embeddings.

    Example:

    ```mlir
    %pos = gt.positions 1024 : tensor<1024xi32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$length);
  let results = (outs GT_IndexTensor:$result);
  let assemblyFormat = "$length attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class GT_BinaryOp<string mnemonic, string what>
    : GT_InferredOp<mnemonic, [SameOperandsElementType, GT_Elementwise,
                               GT_Broadcasting]> {
  let summary = "elementwise " # what # " with broadcasting";
  let description = [{
    Elementwise }] # what # [{ of two tensors of one element type, with
    NumPy broadcasting: shapes are aligned at the right; each dimension pair
    must be equal or contain a 1. A dynamic dimension matches any size.

    Example:

    ```mlir
    %r = gt.}] # mnemonic # [{ %a, %b : tensor<?x1024xf32>, tensor<1024xf32>
    ```
  }];
  let arguments = (ins GT_AnyTensor:$lhs, GT_AnyTensor:$rhs);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def GT_AddOp : GT_BinaryOp<"add", "addition">;
def GT_SubOp : GT_BinaryOp<"sub", "subtraction">;
def GT_MulOp : GT_BinaryOp<"mul", "multiplication">;
def GT_DivOp : GT_BinaryOp<"div", "division">;

/// Unary elementwise ops: ODS derives the result type from the operand.
class GT_UnaryOp<string mnemonic, string what, dag extraArgs = (ins),
                 list<Trait> facts = []>
    : GT_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                   InferTypeOpInterface, GT_Elementwise],
                                  facts)> {
  let summary = what # ", elementwise";
  let description = [{
    Applies }] # what # [{ to every element; the result has the type of
    the input.

    Example:

    ```mlir
    %r = gt.}] # mnemonic # [{ %x : tensor<?x1024xf32>
    ```
  }];
  let arguments = !con((ins GT_FloatTensor:$input), extraArgs);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
}

def GT_ReluOp : GT_UnaryOp<"relu", "max(x, 0)", (ins), [GT_ZeroPreserving]>;
def GT_TanhOp : GT_UnaryOp<"tanh", "the hyperbolic tangent", (ins),
                           [GT_ZeroPreserving]>;
def GT_ExpOp : GT_UnaryOp<"exp", "the exponential", (ins), [GT_AutocastF32]>;
def GT_LogOp : GT_UnaryOp<"log", "the natural logarithm", (ins),
                          [GT_AutocastF32]>;
def GT_NegOp : GT_UnaryOp<"neg", "negation", (ins), [GT_ZeroPreserving]>;
def GT_SqrtOp : GT_UnaryOp<"sqrt", "the square root", (ins), [GT_AutocastF32]>;
def GT_SigmoidOp : GT_UnaryOp<"sigmoid", "the logistic sigmoid">;
def GT_SiluOp : GT_UnaryOp<"silu", "SiLU (swish), x * sigmoid(x)", (ins),
                           [GT_ZeroPreserving]>;
def GT_GeluOp : GT_UnaryOp<"gelu", "the GELU activation",
    (ins DefaultValuedAttr<BoolAttr, "false">:$approximate),
    [GT_ZeroPreserving]> {
  let description = [{
    The Gaussian error linear unit, `x * Phi(x)`. With `approximate = true` it
    uses the tanh approximation of GPT-2
    (`0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`), as PyTorch's
    `gelu(x, approximate="tanh")`.

    Example:

    ```mlir
    %r = gt.gelu %x <{approximate = true}> : tensor<?x3072xf32>
    ```
  }];
}

def GT_GluOp : GT_InferredOp<"glu"> {
  let summary = "a gated linear unit over the two halves of the last dimension";
  let description = [{
    `f(a) * b`, where `a` and `b` are the first and second halves of the
    last dimension `2F` of `input` and `f` the activation `kind` (SwiGLU's
    `silu`, GeGLU's `gelu`, ...: a kind of gt.activation_grad); the result's
    last dimension is `F`. gt-pack-projections makes it of Llama's
    `silu(x Wg^T) * (x Wu^T)`, whose two projections become one GEMM over
    the stacked weights. `f(a)` and the product are each rounded to the
    element type, as the two ops' results would be.

    Example:

    ```mlir
    %h = gt.glu %gu <{kind = "silu"}> : tensor<?x1024x4096xbf16> -> tensor<?x1024x2048xbf16>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, StrAttr:$kind);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $input prop-dict attr-dict `:` type($input) `->` type($result)
  }];
}

def GT_GluGradOp : GT_Op<"glu_grad",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "the gradient of gt.glu";
  let description = [{
    The gradient of `glu(input)` for the result's gradient `grad`: its
    first half `dy * b * f'(a)`, its second `dy * f(a)`, with `a` and `b`
    the halves of `input` as in gt.glu.

    Example:

    ```mlir
    %dgu = gt.glu_grad %dh, %gu <{kind = "silu"}>
        : tensor<8x2048xbf16>, tensor<8x4096xbf16>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_FloatTensor:$input,
                       StrAttr:$kind);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input prop-dict attr-dict `:` type($grad) `,` type($input)
  }];
  let hasVerifier = 1;
}

def GT_CastOp : GT_Op<"cast", [Pure, SameOperandsAndResultShape,
                               GT_Elementwise, GT_ZeroPreserving]> {
  let summary = "converts the element type";
  let description = [{
    Converts every element to the result's element type (round to nearest
    even for narrowing float casts, truncation toward zero for float to
    `i32`). The shape does not change.

    Example:

    ```mlir
    %h = gt.cast %x : tensor<?x784xf32> -> tensor<?x784xbf16>
    ```
  }];
  let arguments = (ins GT_AnyTensor:$input);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def GT_MatmulOp : GT_InferredOp<"matmul", [SameOperandsElementType,
                                          GT_Contraction, GT_AutocastLow,
                                          GT_CastEpilogue]> {
  let summary = "batched matrix product with transpose flags";
  let description = [{
    `op(a) @ op(b)` over the last two dimensions, where `op` transposes them
    when `transpose_a` / `transpose_b` is set. Leading (batch) dimensions
    broadcast like elementwise operations; a rank-2 `b` is shared by every
    batch. Accumulation is in f32 whatever the element type.

    Example:

    ```mlir
    // logits = x @ wte^T with wte : [V, D]
    %l = gt.matmul %x, %wte <{transpose_b = true}>
        : tensor<?x1024x768xf32>, tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$a, GT_FloatTensor:$b,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$a `,` $b prop-dict attr-dict `:` type($a) `,` type($b)";
  let hasCanonicalizer = 1;
}

def GT_LinearOp : GT_InferredOp<"linear", [GT_Contraction, GT_AutocastLow]> {
  let summary = "affine map x W^T + b (PyTorch's nn.Linear)";
  let description = [{
    `input : [..., K]`, `weight : [N, K]`, optional `bias : [N]`; the result
    is `[..., N]`. All three have one element type.

    Example:

    ```mlir
    %h = gt.linear %x, %w, %b
        : tensor<?x784xf32>, tensor<1024x784xf32>, tensor<1024xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, GT_FloatTensor:$weight,
                       Optional<GT_FloatTensor>:$bias);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Normalization, attention, losses
//===----------------------------------------------------------------------===//

def GT_LayerNormOp : GT_InferredOp<"layernorm", [GT_Reduction,
                                                 GT_AutocastF32,
                                                 GT_CastEpilogue]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * weight + bias` over the last
    dimension `D` of `input`; `weight` and `bias` are `[D]`. Statistics are
    computed in f32.

    Example:

    ```mlir
    %y = gt.layernorm %x, %g, %b <{epsilon = 1.0e-05 : f64}>
        : tensor<?x1024x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, GT_FloatTensor:$weight,
                       GT_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias prop-dict attr-dict `:` type($input) `,`
    type($weight)
    `,` type($bias)
  }];
}

def GT_RmsNormOp : GT_InferredOp<"rmsnorm", [GT_Reduction, GT_AutocastF32,
                                             GT_CastEpilogue]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * weight` over the last dimension `D` of
    `input` (RMSNorm, as Llama's); `weight` is `[D]`, there is no bias.
    Statistics are computed in f32; the kernels are gt.layernorm's without
    the mean.

    Example:

    ```mlir
    %y = gt.rmsnorm %x, %g <{epsilon = 1.0e-06 : f64}>
        : tensor<?x1024x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, GT_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight prop-dict attr-dict `:` type($input) `,` type($weight)
  }];
}

def GT_DropoutOp : GT_Op<"dropout", [Pure, SameOperandsAndResultType,
                                     InferTypeOpInterface]> {
  let summary = "zeroes elements at random and scales the rest by 1 / (1 - p)";
  let description = [{
    Each element is dropped (zero) with probability `p` and otherwise
    multiplied by `1 / (1 - p)`. The mask is drawn by a counter-based
    generator from the run's seed, the training step, the op's `salt` (one
    a dropout of the model) and the element's index: it differs from step
    to step, also in a replayed CUDA graph (the GPU reads the step from the
    device), and is the same on the CPU and the GPU. The gradient is the
    same dropout, same salt, of the result's gradient. Evaluation leaves
    the op out.

    Example:

    ```mlir
    %y = gt.dropout %x <{p = 1.0e-01 : f64, salt = 0 : i64}> : tensor<?x1024x768xbf16>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, F64Attr:$p,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$salt);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def GT_RopeOp : GT_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates pairs of each head's features by an angle that grows with the
    position: on `[..., T, H, d]` (positions along dimension -3, `d` even),
    the pair `i` of position `t` turns by `t * theta^(-2i/d)`. The pairs are
    `(i, i + d/2)` (Hugging Face's rotate-half convention: `x * cos +
    rotate_half(x) * sin`), or `(2i, 2i + 1)` with `interleaved` (the
    original RoFormer and Meta's Llama code). `inverse` turns by minus the
    angle: the gradient of a rope is the inverse rope of its result's
    gradient. The angles and products are computed in f32 (f64 on a
    float64 CPU run), whatever the element type. With `rotated = n`, only
    heads `0..n-1` turn and the others pass unchanged (a packed
    `[B, T, H + 2 Hkv, d]` projection whose queries and keys turn and whose
    values do not; gt-pack-projections makes them).

    With `positions : [B, T] i32` (gt-decode's generation plans, whose
    window starts at a different place in each sequence), position `t` of
    row `b` is `positions[b, t]` instead of `t`; the input is then
    `[B, T, H, d]`.

    Example:

    ```mlir
    %q = gt.rope %x <{theta = 1.0e+04 : f64}> : tensor<?x1024x12x64xbf16>
    %k = gt.rope %y at %pos : tensor<4x1xi32> <{theta = 1.0e+04 : f64}>
        : tensor<4x1x4x64xbf16>
    // q's and k's heads of a packed projection turn, v's 4 heads do not.
    %p = gt.rope %qkv <{rotated = 16 : i64, theta = 1.0e+04 : f64}>
        : tensor<?x1024x20x64xbf16>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input,
                       Optional<GT_IndexTensor>:$positions,
                       DefaultValuedAttr<F64Attr, "10000.0">:$theta,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$rotated);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`at` $positions^ `:` type($positions))? prop-dict attr-dict `:`
    type($input)
  }];
  let hasVerifier = 1;
}

def GT_SoftmaxOp : GT_Op<"softmax",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface, GT_Reduction,
     GT_AutocastF32]> {
  let summary = "softmax along one axis";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from the
    end; default: the last axis).

    Example:

    ```mlir
    %p = gt.softmax %x <{axis = -1 : i64}> : tensor<?x10xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def GT_AttentionOp : GT_InferredOp<"attention", [GT_Contraction,
                                                 GT_AutocastLow]> {
  let summary = "scaled dot-product attention: multi-head, grouped-query, "
                "multi-query";
  let description = [{
    Three forms. Packed (GPT-2): one operand `qkv : [B, T, 3D]` holds the
    queries, keys and values side by side (the output of one linear layer);
    with `heads = H` each is split into H heads of size `D / H` and the
    result is `[B, T, D]`. Packed heads: one operand `qkv : [B, T, H + 2 Hkv,
    d]` holds H query heads, then Hkv key heads, then Hkv value heads (one
    linear layer over q's, k's and v's weights stacked, which
    gt-pack-projections makes), with Hkv dividing H; the result is
    `[B, T, H, d]`. Separate: three operands `q : [B, T, H, d]`,
    `k, v : [B, T, Hkv, d]` with `Hkv` dividing `H`; query head `h` attends
    with key and value head `h / (H / Hkv)` (grouped-query attention; the
    kernels read K and V in place, never repeated), and the result has q's
    type. Either way each head computes
    `softmax(q k^T / sqrt(d) + mask) v`; with `causal = true`, position t
    attends to positions <= t only. The second result `lse : [B, H, T] f32`
    is each query's log-sum-exp of its scaled scores, which the gradient
    reuses instead of recomputing the forward pass (FlashAttention's
    statistics).

    Example:

    ```mlir
    %y, %lse = gt.attention %qkv <{causal = true, heads = 12 : i64}>
        : tensor<?x1024x2304xf32>
    %o, %lse2 = gt.attention %q, %k, %v <{heads = 12 : i64}>
        : tensor<?x1024x12x64xbf16>, tensor<?x1024x4x64xbf16>,
          tensor<?x1024x4x64xbf16>
    %p, %lse3 = gt.attention %qkv <{heads = 12 : i64}>
        : tensor<?x1024x20x64xbf16>
    ```
  }];
  let arguments = (ins Variadic<GT_FloatTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal);
  let results = (outs GT_FloatTensor:$result, F32Tensor:$lse);
  let assemblyFormat = "$inputs prop-dict attr-dict `:` type($inputs)";
}

//===----------------------------------------------------------------------===//
// Generation (gt-decode): a KV cache and attention over it
//===----------------------------------------------------------------------===//

def GT_StateOp : GT_Op<"state", [GT_Leaf]> {
  let summary = "a persistent buffer of a generation plan (a KV cache)";
  let description = [{
    A tensor that lives as long as the plan: zeroed when the plan is loaded,
    written in place by `gt.cache_update`, kept from one run of the plan to
    the next (gt-decode's keys and values of the positions generated so
    far). Not pure: two states of one type are two buffers. `name` is unique
    in a function.

    Example:

    ```mlir
    %kc = gt.state "transformer.h.0.attn.k" : tensor<4x1024x12x64xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def GT_CacheUpdateOp : GT_Op<"cache_update",
    [AllTypesMatch<["cache", "result"]>,
     AllElementTypesMatch<["cache", "update"]>]> {
  let summary = "writes a window of keys or values into a KV cache, in place";
  let description = [{
    `cache : [B, Tmax, Hkv, d]` (a `gt.state`), `update : [B, S, Hkv, d]`,
    `positions : [B, S] i32`: writes `update[b, s]` to
    `cache[b, positions[b, s]]` and returns the cache, whose buffer it
    is (the plan writes the state in place; a position outside
    `[0, Tmax)` is an error at run time). Readers of the result see the
    update.

    Example:

    ```mlir
    %kc2 = gt.cache_update %kc, %k, %pos : tensor<4x1024x4x64xbf16>,
        tensor<4x1x4x64xbf16>, tensor<4x1xi32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$cache, GT_FloatTensor:$update,
                       GT_IndexTensor:$positions);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `,` $update `,` $positions attr-dict `:` type($cache) `,`
    type($update) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def GT_CachedAttentionOp : GT_Op<"cached_attention",
    [Pure, AllTypesMatch<["q", "result"]>,
     AllElementTypesMatch<["q", "k_cache", "v_cache"]>]> {
  let summary = "causal attention of a window of queries over a KV cache";
  let description = [{
    `q : [B, S, H, d]`, `k_cache, v_cache : [B, Tmax, Hkv, d]` with `Hkv`
    dividing `H`, `positions : [B, S] i32`: the query `(b, s)` at position
    `p = positions[b, s]` attends to the cached keys and values
    `0, ..., p` of its row with `softmax(q k^T / sqrt(d)) v` (query head `h`
    with cache head `h / (H / Hkv)`), computed in f32. Generation by
    gt-decode: the prompt's window and then one position at a time, each
    after its `gt.cache_update`s.

    Example:

    ```mlir
    %y = gt.cached_attention %q, %kc2, %vc2, %pos : tensor<4x1x12x64xbf16>,
        tensor<4x1024x4x64xbf16>, tensor<4x1024x4x64xbf16>, tensor<4x1xi32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$q, GT_FloatTensor:$k_cache,
                       GT_FloatTensor:$v_cache, GT_IndexTensor:$positions);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache `,` $positions attr-dict `:` type($q) `,`
    type($k_cache) `,` type($v_cache) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def GT_EmbeddingOp : GT_InferredOp<"embedding"> {
  let summary = "looks up rows of a table";
  let description = [{
    `indices : [...] i32` and `table : [V, D]` give `[..., D]`: row
    `indices[i]` of the table for every index. Indices out of `[0, V)` are an
    error at run time; `gt.positions N` as the indices, known now, needs a
    table of at least N rows (the verifier's check).

    Example:

    ```mlir
    %e = gt.embedding %tokens, %wte
        : tensor<?x1024xi32>, tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins GT_IndexTensor:$indices, GT_FloatTensor:$table);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $table attr-dict `:` type($indices) `,` type($table)
  }];
  // Positions 0, ..., N-1 in a table of N rows: the table.
  let hasCanonicalizer = 1;
  let hasVerifier = 1;
}

def GT_CrossEntropyOp : GT_InferredOp<"cross_entropy", [GT_Reduction,
                                                         GT_AutocastF32]> {
  let summary = "mean softmax cross-entropy of logits against class labels";
  let description = [{
    `logits : [..., C]` (any float type) and `labels : [...] i32` with the
    same leading dimensions; the result is the mean over all positions of
    `logsumexp(logits) - logits[label]`, as an f32 scalar (PyTorch's
    `F.cross_entropy` with `reduction="mean"`).

    Example:

    ```mlir
    %loss = gt.cross_entropy %logits, %y : tensor<?x10xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$logits, GT_IndexTensor:$labels);
  let results = (outs GT_ScalarF32:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and shape manipulation
//===----------------------------------------------------------------------===//

class GT_ReduceOp<string mnemonic, string what>
    : GT_InferredOp<mnemonic, [GT_Reduction, GT_AutocastF32]> {
  let summary = what # " over some or all axes";
  let description = [{
    The }] # what # [{ of `input` over `axes` (all axes when empty; negative
    axes count from the end), accumulated in f32. With `keepdim` the reduced
    axes stay as size 1.

    Example:

    ```mlir
    %s = gt.}] # mnemonic # [{ %x <{axes = [-1]}> : tensor<?x10xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input,
                       DefaultValuedAttr<I64ArrayAttr, "{}">:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
}

def GT_SumOp : GT_ReduceOp<"sum", "sum">;
def GT_MeanOp : GT_ReduceOp<"mean", "mean">;

def GT_TransposeOp : GT_InferredOp<"transpose", [GT_LayoutOnly]> {
  let summary = "permutes the dimensions";
  let description = [{
    Result dimension i is input dimension `permutation[i]`; `permutation` is a
    permutation of `0 .. rank-1`.

    Example:

    ```mlir
    %t = gt.transpose %w <{permutation = [1, 0]}> : tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins GT_AnyTensor:$input, I64ArrayAttr:$permutation);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$input prop-dict attr-dict `:` type($input)";
  let hasFolder = 1;
}

def GT_ReshapeOp : GT_Op<"reshape", [Pure, SameOperandsAndResultElementType,
                                     GT_LayoutOnly]> {
  let summary = "reinterprets the elements in a new shape";
  let description = [{
    Same elements, in row-major order, in a new shape. With static shapes the
    element counts must be equal; a dynamic input dimension needs a dynamic
    result dimension.

    Example:

    ```mlir
    %r = gt.reshape %x : tensor<?x1024x768xf32> -> tensor<?x768xf32>
    ```
  }];
  let arguments = (ins GT_AnyTensor:$input);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def GT_BroadcastOp : GT_Op<"broadcast", [Pure, SameOperandsAndResultElementType,
                                         GT_LayoutOnly, GT_Elementwise,
                                         GT_Broadcasting]> {
  let summary = "repeats a tensor to a larger shape";
  let description = [{
    Broadcasts `input` to the result shape with NumPy rules (align at the
    right; each input dimension is 1 or equal to the result's).

    Example:

    ```mlir
    %b = gt.broadcast %bias : tensor<1024xf32> -> tensor<?x1024xf32>
    ```
  }];
  let arguments = (ins GT_AnyTensor:$input);
  let results = (outs GT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion regions (built by gt-fuse)
//===----------------------------------------------------------------------===//

def GT_FusedOp : GT_Op<"fused", [IsolatedFromAbove, SingleBlock,
                                 RecursiveMemoryEffects]> {
  let summary = "ops that run as one kernel";
  let description = [{
    A fusion region made by gt-fuse: the ops of its body run as one
    kernel, reading the region's operands (the body's arguments) and
    writing the values its `gt.yield` returns; no other value of the body is
    stored in memory. `kind` says how: `elementwise` is one loop over the
    elements of one shape, its first op's; each body op has the
    `GT_Elementwise` trait and that result shape, and each operand
    broadcasts to it. It may end with column sums: gt.sum_to ops of values
    it computes over all their rows to the last dimension (a small batch's
    bias gradient), each with the cast of its result; the kernel then walks
    each column's rows.
    `multi_tensor` runs independent elementwise ops, each over its own
    elements and reading only region inputs of its shape (the casts of all
    parameters to the low precision, in one launch). `epilogue` is an op
    with the `GT_CastEpilogue` trait and the gt.cast of its result: the
    op's kernel stores the cast's type directly. `gemm` is a GEMM
    (`GT_Contraction`) and what its epilogue applies: a ReLU or
    tanh-approximated GELU (whose input the region may also yield, for the
    backward), the GELU gradient of a saved input, the bias gradient (a
    gt.sum_to of the GEMM's first operand), casts and reshapes of the
    results (cuBLASLt's epilogues); and the ReLU gradient of a saved output
    with the column sums of that gradient (gt.sum_to of a value the
    epilogue computes to its last dimension), which gtc's small-GEMM kernel
    computes (at most 64 rows). `norm` is one gt.layernorm, gt.layernorm_grad, gt.rmsnorm or gt.rmsnorm_grad with
    elementwise ops over the same rows before and after it (the residual
    add, casts): one row kernel. `loss` is a gt.cross_entropy and the
    gt.cross_entropy_grad of the same logits and labels, with the widening
    cast that makes the logits and the cast of the gradient: one row kernel
    that yields the loss and the gradient. `classifier` is a language
    model's classifier: the GEMM of the logits (h W^T), the loss region's
    ops, and the GEMMs of the logits' gradient (dh = dlogits W, dW =
    dlogits^T h); it yields the loss, dh and dW, never the logits or their
    gradient, which the GPU computes a chunk of rows at a time. A small
    head's region may also hold column sums of values it computes (bias
    gradients) and the ReLU gradient of dh, which one GPU kernel computes.
    `scatter_add` is a gt.embedding_grad and the gt.add of its result to a
    region input of its type (a tied embedding's gradient: the table's rows
    scattered onto the classifier's dW, in place when that is dW's only
    use, instead of zeroing a table, scattering, and adding two tables).
    `attention_grad` is a gt.attention_grad of q, k and v and the inverse
    gt.rope of its dq and of its dk (the gradient of attention over rope(q)
    and rope(k)); it yields the turned dq and dk and dv, which the GPU's
    tensor-core attention kernels store turned (16-bit, heads of 64 or 128).
    The CPU executor runs the
    body op by op; the CUDA emitter generates one kernel (or GEMM).

    Example:

    ```mlir
    %r:2 = gt.fused "elementwise" (%x, %b) : (tensor<8x16xbf16>, tensor<16xf32>)
        -> (tensor<8x16xf32>, tensor<8x16xf32>) {
    ^bb0(%a: tensor<8x16xbf16>, %c: tensor<16xf32>):
      %0 = gt.cast %a : tensor<8x16xbf16> -> tensor<8x16xf32>
      %1 = gt.add %0, %c : tensor<8x16xf32>, tensor<16xf32>
      %2 = gt.relu %1 : tensor<8x16xf32>
      gt.yield %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$kind, Variadic<GT_AnyTensor>:$inputs);
  let results = (outs Variadic<GT_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The region's terminator.
    YieldOp getYield();
  }];
}

def GT_YieldOp : GT_Op<"yield", [Pure, Terminator,
                                 HasParent<"FusedOp">]> {
  let summary = "the results of a fusion region";
  let description = [{
    Ends the body of a `gt.fused` op; its operands are the region's results,
    in order.

    Example:

    ```mlir
    gt.yield %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Variadic<GT_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Gradients (built by gt-autodiff)
//===----------------------------------------------------------------------===//

def GT_SumToOp : GT_Op<"sum_to", [Pure, SameOperandsAndResultElementType,
                                   GT_Reduction, GT_CastEpilogue]> {
  let summary = "sums a broadcast result back to an operand's shape";
  let description = [{
    The adjoint of broadcasting: sums `input` over the dimensions in which the
    result shape was broadcast (leading dimensions it lacks, and dimensions
    where it has size 1). The result shape must broadcast to the input shape.

    Example:

    ```mlir
    // The gradient of a bias added to every row.
    %db = gt.sum_to %dy : tensor<64x1024xf32> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def GT_PadOp : GT_Op<"pad", [Pure, SameOperandsAndResultElementType,
                             GT_LayoutOnly]> {
  let summary = "places a tensor inside a larger one of zeros";
  let description = [{
    The result has the input's rank and each dimension at least the input's;
    the input lies at `offsets` (one a dimension, zeros when absent) and
    every other element is 0: result `[c0, ..., cn]` is input `[c0 - o0,
    ..., cn - on]` where that is inside the input. Inserted by gt-pad-dims
    (at offset 0) to round GEMM dimensions up to tensor-core multiples;
    `concat` in the language is a sum of pads. Its gradient is gt.slice at
    the same offsets.

    Example:

    ```mlir
    // A 1001-row weight padded to 1008 rows.
    %wp = gt.pad %w : tensor<1001x784xbf16> -> tensor<1008x784xbf16>
    // 64 columns placed at column 128 of 192.
    %c = gt.pad %k {offsets = [0, 128]} : tensor<8x64xf32> -> tensor<8x192xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, OptionalAttr<I64ArrayAttr>:$offsets);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def GT_SliceOp : GT_Op<"slice", [Pure, SameOperandsAndResultElementType,
                                 GT_LayoutOnly]> {
  let summary = "a block of a tensor";
  let description = [{
    The result has the input's rank and each dimension at most the input's:
    result `[c0, ..., cn]` is input `[c0 + o0, ..., cn + on]` for `offsets`
    (one a dimension, zeros when absent), which keep the block inside the
    input. gt-pad-dims slices padded GEMM results back to the model's sizes
    (at offset 0), so the padding never reaches a softmax or a loss;
    `slice` in the language takes any block. Its gradient is gt.pad at the
    same offsets.

    Example:

    ```mlir
    %logits = gt.slice %lp : tensor<8x50304xbf16> -> tensor<8x50257xbf16>
    %k = gt.slice %qkv {offsets = [0, 64]} : tensor<8x192xf32> -> tensor<8x64xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$input, OptionalAttr<I64ArrayAttr>:$offsets);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def GT_ActivationGradOp : GT_Op<"activation_grad",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface, GT_Elementwise]> {
  let summary = "the gradient of an elementwise function";
  let description = [{
    `dy * f'(x)` for the elementwise function `kind`: `relu`, `gelu`,
    `gelu_tanh` (the tanh approximation), `tanh`, `sigmoid`, `exp`, `log` or
    `sqrt`. The derivative is computed from the forward input `x`.

    Example:

    ```mlir
    %dx = gt.activation_grad %dy, %x <{kind = "relu"}> : tensor<64x1024xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_FloatTensor:$input,
                       StrAttr:$kind);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input prop-dict attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def GT_SoftmaxGradOp : GT_Op<"softmax_grad",
    [Pure, SameOperandsAndResultType, InferTypeOpInterface, GT_Reduction]> {
  let summary = "the gradient of softmax";
  let description = [{
    `y * (dy - sum(dy * y, axis))`, where `y` is the softmax output.

    Example:

    ```mlir
    %dx = gt.softmax_grad %dy, %y <{axis = -1 : i64}> : tensor<64x10xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_FloatTensor:$output,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output prop-dict attr-dict `:` type($grad)";
}

def GT_LayerNormGradOp : GT_Op<"layernorm_grad",
    [Pure, GT_Reduction, AllTypesMatch<["grad", "input", "input_grad"]>,
     AllTypesMatch<["weight", "weight_grad", "bias_grad"]>]> {
  let summary = "the gradients of layer normalization";
  let description = [{
    Given `dy`, the forward input `x` and `weight`, returns the gradients of
    the input, the weight and the bias. The statistics are recomputed from `x`.

    Example:

    ```mlir
    %dx, %dw, %db = gt.layernorm_grad %dy, %x, %w
        : tensor<8x64x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_FloatTensor:$input,
                       GT_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs GT_FloatTensor:$input_grad, GT_FloatTensor:$weight_grad,
                      GT_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight prop-dict attr-dict `:` type($grad) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def GT_RmsNormGradOp : GT_Op<"rmsnorm_grad",
    [Pure, GT_Reduction, AllTypesMatch<["grad", "input", "input_grad"]>,
     AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "the gradients of RMS normalization";
  let description = [{
    Given `dy`, the forward input `x` and `weight`, returns the gradients of
    the input and the weight. The statistics are recomputed from `x`.

    Example:

    ```mlir
    %dx, %dw = gt.rmsnorm_grad %dy, %x, %w
        : tensor<8x64x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_FloatTensor:$input,
                       GT_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon);
  let results = (outs GT_FloatTensor:$input_grad, GT_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight prop-dict attr-dict `:` type($grad) `,`
    type($weight)
  }];
  let hasVerifier = 1;
}

def GT_AttentionGradOp : GT_Op<"attention_grad",
    [Pure, GT_Contraction, GT_F32Statistics, InferTypeOpAdaptor,
     AllTypesMatch<["grad", "output"]>]> {
  let summary = "the gradient of attention with respect to q, k and v";
  let description = [{
    Given the gradient of the attention output, the forward's output, its
    log-sum-exp `lse : [B, H, T] f32` and the forward's operands (packed
    `qkv`, or `q, k, v`), returns the gradients of the forward's operands,
    of their types. The attention weights are recomputed from q, k and lse.
    (The operands are stored as grad, the forward's operands, output, lse:
    lse last, as F32Statistics asks.)

    Example:

    ```mlir
    %dqkv = gt.attention_grad %dy, %y, %lse, %qkv <{heads = 12 : i64}>
        : tensor<8x1024x768xf32>, tensor<8x12x1024xf32>, tensor<8x1024x2304xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, Variadic<GT_FloatTensor>:$inputs,
                       GT_FloatTensor:$output, F32Tensor:$lse,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal);
  let results = (outs Variadic<GT_FloatTensor>:$results);
  let assemblyFormat = [{
    $grad `,` $output `,` $lse `,` $inputs prop-dict attr-dict `:`
    type($grad) `,` type($lse) `,` type($inputs)
  }];
  let hasVerifier = 1;
}

def GT_EmbeddingGradOp : GT_Op<"embedding_grad", [Pure, GT_Reduction]> {
  let summary = "the gradient of an embedding table (scatter-add)";
  let description = [{
    Adds row `i` of `grad : [..., D]` into row `indices[i]` of a zero table of
    the result type `[V, D]`.

    Example:

    ```mlir
    %dw = gt.embedding_grad %dy, %tokens
        : tensor<8x1024x768xf32>, tensor<8x1024xi32> -> tensor<50304x768xf32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$grad, GT_IndexTensor:$indices);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` type($grad) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def GT_CrossEntropyGradOp : GT_Op<"cross_entropy_grad",
    [Pure, GT_Reduction, AllTypesMatch<["logits", "result"]>]> {
  let summary = "the gradient of the mean cross-entropy with respect to logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / N` for N positions, where
    `grad` is the scalar gradient of the loss.

    Example:

    ```mlir
    %dl = gt.cross_entropy_grad %one, %logits, %y
        : tensor<f32>, tensor<64x10xf32>, tensor<64xi32>
    ```
  }];
  let arguments = (ins GT_ScalarF32:$grad, GT_FloatTensor:$logits,
                       GT_IndexTensor:$labels);
  let results = (outs GT_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $labels attr-dict `:` type($grad) `,` type($logits)
    `,` type($labels)
  }];
  let hasVerifier = 1;
}

def GT_AccuracyOp : GT_InferredOp<"accuracy", [GT_Reduction]> {
  let summary = "the fraction of positions whose largest logit is the label";
  let description = [{
    Used by evaluation: the mean over positions of
    `argmax(logits) == label` (the first maximum wins ties), as f32.

    Example:

    ```mlir
    %acc = gt.accuracy %logits, %y : tensor<64x10xf32>, tensor<64xi32>
    ```
  }];
  let arguments = (ins GT_FloatTensor:$logits, GT_IndexTensor:$labels);
  let results = (outs GT_ScalarF32:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels)
  }];
}

def GT_GradientOp : GT_Op<"gradient", [MemoryEffects<[MemWrite]>]> {
  let summary = "hands the gradient of a parameter to the optimizer";
  let description = [{
    Marks `grad` as the gradient of the parameter `name` in a training step
    (a function with the `gt.step` attribute). The plan places it in the
    gradient buffer, where the optimizer update reads it. Each parameter of
    the model has exactly one.

    Example:

    ```mlir
    gt.gradient "fc1.weight", %dw : tensor<1024x784xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, GT_FloatTensor:$grad);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def GT_AllReduceOp : GT_Op<"all_reduce"> {
  let summary = "the mean over data-parallel processes of a bucket of gradients";
  let description = [{
    Made by gt-bucket in the training step of a data-parallel run: each
    process computes the gradients of its share of the global batch, and
    `all_reduce` gives every process the mean over all processes of each
    operand (a bucket of gradients, in the order the backward produces
    them), which the `gt.gradient` ops then hand to the optimizer. It has
    effects beyond its results (it communicates): it is never folded,
    moved or removed. `bucket` numbers the buckets in the order they are
    reduced. The plan reduces each operand in place.

    Example:

    ```mlir
    %r:2 = gt.all_reduce %dw, %db {bucket = 0 : i64}
        : (tensor<10x1024xf32>, tensor<10xf32>) -> (tensor<10x1024xf32>, tensor<10xf32>)
    ```
  }];
  let arguments = (ins Variadic<GT_FloatTensor>:$grads,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$bucket);
  let results = (outs Variadic<GT_FloatTensor>:$results);
  let assemblyFormat = "$grads attr-dict `:` functional-type($grads, $results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training configuration
//===----------------------------------------------------------------------===//

def GT_TrainOp : GT_Op<"train", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the training configuration of a model";
  let description = [{
    The `train` block of a `.gt` file: which model to train (`model`, a
    `func.func` with the `gt.model` attribute) and how. Each setting is an
    attribute; the verifier checks names, kinds and ranges:

    | attribute | value |
    |---|---|
    | `data`, `eval` | dictionary with `kind` (`"idx"`, `"tokens"`, `"text"`) and its fields |
    | `batch`, `epochs`, `steps`, `seed`, `log_every`, `eval_every` | positive integer (seed: >= 0) |
    | `optimizer` | dictionary with `name` (`"sgd"`, `"adam"`, `"adamw"`) and its hyperparameters |
    | `schedule` | dictionary with `name` (`"constant"`, `"linear"`, `"cosine"`), `warmup`, `final` |
    | `precision` | `"fp32"`, `"tf32"`, `"bf16"` or `"fp16"` |
    | `checkpoint` | dictionary with `mode` (`"none"`, `"auto"`, `"every"`) and `budget` / `every` |
    | `devices` | `"all"`, `"cpu"` or a positive integer |
    | `shard` | `"none"`, `"optimizer"` (ZeRO-1: each data-parallel process keeps and updates 1/N of the optimizer state) or `"gradients"` (ZeRO-2, GPUs: the reduced gradients kept 1/N a process too) |
    | `grad_clip` | positive float: clip the global gradient norm |
    | `shuffle` | boolean: `false` reads the training examples in file order |

    Example:

    ```mlir
    gt.train @mlp {batch = 128 : i64, epochs = 5 : i64,
                   optimizer = {name = "adamw", lr = 1.0e-03 : f64},
                   precision = "bf16"}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$model);
  let assemblyFormat = "$model attr-dict";
  let hasVerifier = 1;
}

#endif // GT_OPS
