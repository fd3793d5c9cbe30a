//===- Passes.td - Passes of gtc -----------------------------*- tablegen -*-===//

#ifndef GTC_TRANSFORMS_PASSES
#define GTC_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def GtShapeInferencePass : Pass<"gt-shape-inference", "mlir::ModuleOp"> {
  let summary = "Fixes the batch dimension and re-infers every result type";
  let description = [{
    Replaces the symbolic (dynamic) dimensions of every `gt.input` and
    `gt.label` by `batch`, then walks each model in order and recomputes the
    result type of every operation: through InferTypeOpInterface where the op
    implements it, and from the operand for `gt.cast`, `gt.reshape` and
    `gt.broadcast`. The model's function type follows its return value.
    With `batch=0` (the default) only the re-inference runs, which checks
    that the printed types are the inferred ones.

    Example: `gtc-opt --gt-shape-inference=batch=64` turns
    `gt.input "x" : tensor<?x784xf32>` into `tensor<64x784xf32>` and every
    tensor computed from it accordingly.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "size given to symbolic dimensions (0: keep them symbolic)">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtPadDimsPass : Pass<"gt-pad-dims", "mlir::ModuleOp"> {
  let summary = "Pads GEMM dimensions to tensor-core multiples and slices the results back";
  let description = [{
    For every bf16/f16 `gt.linear` of a model whose output size N or
    reduction size K is not a multiple of the tensor-core tile (8; 64 from
    4096 on, e.g. a vocabulary of 50257 -> 50304): pads the weight
    to [Np, Kp] and the bias to [Np] with zeros (`gt.pad`), the input's last
    dimension to Kp, and slices the [.., Np] result back to [.., N]
    (`gt.slice`). The padded logits never reach a softmax or a loss, and the
    padded weights get no gradient (they are constants, not parameters), so
    the model computes the same function. Aligned and f32 linears are left
    alone (`multiple=N` pads every linear, f32 too, to multiples of N), and
    so are linears of fewer than `min-macs` multiply-adds (rows x N x K;
    2^28 by default): such a GEMM takes about a microsecond whatever its
    alignment, less than the pad and slice kernels padding adds to every
    step (examples/mlp.gt's 10-class head at batch 64 in bf16: 7 launches,
    0.068 -> 0.063 ms a step on an H100). Runs after gt-autocast (the tile depends on the element type) and before
    gt-autodiff, on static shapes.

    Example: `gtc-opt --gt-shape-inference=batch=8 --gt-pad-dims`, or
    `--gt-pad-dims=multiple=16` to use one multiple for every dimension.
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"0",
           "pad every dimension to this multiple (0: by element type and size)">,
    Option<"minMacs", "min-macs", "int64_t", /*default=*/"int64_t(1) << 28",
           "pad only linears of at least this many multiply-adds (0: all)">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtPackProjectionsPass : Pass<"gt-pack-projections", "mlir::ModuleOp"> {
  let summary = "Makes attention's q, k and v projections, and a gated MLP's two, one linear each";
  let description = [{
    For every `gt.attention` of q, k and v in a model function, where each
    is a reshaped bias-free `gt.linear` of one input (q and k turned by one
    `gt.rope`, or neither), read by nothing else: stacks the three weights
    along their rows (`gt.pad` at row offsets, added), projects once to
    `[B, T, H + 2 Hkv, d]`, turns the first `H + Hkv` heads with one rope
    (`rotated`) and attends over the packed heads. The function computed is
    the same; one wide GEMM replaces three narrow ones forward, and
    gt-autodiff gives one dX and one dW GEMM for them backward. Only where
    the K/V projections are narrower than `max-kv-width` outputs (512):
    there the separate GEMMs fill few tiles, and packing took llama124m's
    kernels from 27.77 to 27.25 ms a step on an H200; at llama1b's 512 the
    GEMMs took 15.0 ms a step either way, while attention's kernels read
    the packed rows more slowly and the weights' stacking cost 1.7 ms
    (test/bench/NOTES.md, thirty-fourth session). Weights that are
    parameters of one initializer become one packed `gt.param` of parts.

    Likewise every `act(linear(x, Wg)) * linear(x, Wu)` (SwiGLU, GeGLU: an
    activation of gt.activation_grad's kinds, two bias-free linears of one
    input read by nothing else) becomes `gt.glu` of one linear over
    `[Wg; Wu]`: at llama124m one GEMM of 2 FF outputs where two ran, and
    its step 25.93 -> 25.46 ms on an H200 (thirty-seventh session). Runs
    before gt-autocast and gt-autodiff, on static shapes.

    Example: `gtc-opt --gt-shape-inference=batch=8 --gt-pack-projections`.
  }];
  let options = [
    Option<"maxKvWidth", "max-kv-width", "int64_t", /*default=*/"512",
           "pack only K/V projections of fewer outputs (Hkv * d) than this">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtAutodiffPass : Pass<"gt-autodiff", "mlir::ModuleOp"> {
  let summary = "Builds the training step of each model by reverse-mode differentiation";
  let description = [{
    For every function with the `gt.model` attribute, adds a function
    `<model>_step` with the `gt.step` attribute: a copy of the forward graph,
    then the backward graph in reverse order, ending in one `gt.gradient` per
    parameter. Gradients of values used several times are summed (so a tied
    weight such as GPT-2's `wte` gets one gradient); broadcasting is undone
    with `gt.sum_to`; a parameter the loss does not depend on gets a zero
    gradient. The optimizer update is not part of the IR: the plan applies it
    to the contiguous gradient buffer.

    Every shape must be static: run `gt-shape-inference=batch=N` first.

    Example: `gtc-opt --gt-shape-inference=batch=64 --gt-autodiff`.
  }];
  let dependentDialects = ["mlir::gt::GTDialect", "mlir::func::FuncDialect"];
}

def GtCheckpointPass : Pass<"gt-checkpoint", "mlir::ModuleOp"> {
  let summary = "Recomputes forward values in the backward instead of keeping them (gradient checkpointing)";
  let description = [{
    Runs on each training step (`gt.step`, after gt-autodiff, before
    gt-fuse). With `every=n` (or the train block's `checkpoint = every(n)`)
    the forward ops of each `repeat` loop are grouped n iterations at a time
    (an op belongs to the iteration of the parameters it reads, `blocks.3.*`,
    else to the latest iteration among its operands; ops reading a parameter
    outside any loop belong to none). Of a group's values, only those a
    later group or an op outside the loops reads are kept (the input of
    every n-th iteration, what torch.utils.checkpoint per block keeps);
    every other value the backward reads is recomputed: the group's ops it
    depends on are cloned just before the group's first backward use, and
    the backward reads the clones, so the forward values die with the
    forward. `groups=k` recomputes only the first k groups (program order);
    `cheap-groups=c` lets the first c groups of the others recompute only
    their cheap values (selective checkpointing): those computed without a
    contraction (no GEMM, no attention) from values the backward keeps
    anyway, such as a layernorm's output from its input or a GELU's from
    the GEMM output its gradient reads. gtc run's
    `checkpoint = auto(budget: SIZE)` searches the fewest cheap groups, then
    the fewest whole groups, whose memory plan fits SIZE. The pass itself rejects the auto
    modes (they need the memory plan, which comes after gt-fuse), and
    every(n) on a model without repeat loops (nothing to recompute); `none`
    does nothing.

    Example: `gtc-opt --gt-shape-inference=batch=2 --gt-autodiff
    --gt-checkpoint=every=1`.
  }];
  let options = [
    Option<"every", "every", "int64_t", /*default=*/"0",
           "keep the input of every n-th repeat iteration (0: the train block's setting; -1: none)">,
    Option<"groups", "groups", "int64_t", /*default=*/"-1",
           "recompute only the first this many groups (-1: all; gtc's search for a memory budget)">,
    Option<"cheapGroups", "cheap-groups", "int64_t", /*default=*/"0",
           "of the other groups, the first this many recompute only their cheap values (-1: all)">,
    Option<"from", "from", "std::string", /*default=*/"\"\"",
           "the run option that gave `every` (e.g. --checkpoint), where its errors are reported; empty: the train block's checkpoint setting">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtAutocastPass : Pass<"gt-autocast", "mlir::ModuleOp"> {
  let summary = "Assigns each op a precision, PyTorch-AMP style";
  let description = [{
    With `precision` bf16 or fp16 (the option, else the model's `gt.train`
    setting), rewrites each model's forward graph by a per-op policy:

    | policy | ops | computes in |
    |---|---|---|
    | low | linear, matmul, attention | bf16/fp16 (f32 accumulation in the kernels) |
    | fp32 | softmax, layernorm, sum, mean, exp, log, sqrt, cross_entropy | f32 |
    | follow | everything else | the widest float type of its operands |

    Parameters stay f32 (master weights): each gets one cast to the low type
    right after its declaration, shared by all its low-precision uses, so
    the backward's cast rule returns f32 gradients to the optimizer. Integer
    tensors and ops already in the chosen type are left alone. fp32 and tf32
    change nothing (tf32 is a GEMM mode of the runtime), except that, at
    any precision, a parameter declared bf16 or f16 becomes an f32 master
    weight used through a cast to its declared type.
    `--gt-autocast=print-policy=1` prints the table.

    Example: `gtc-opt --gt-autocast=precision=bf16`.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"\"",
           "fp32, tf32, bf16 or fp16 (default: the gt.train setting)">,
    Option<"printPolicy", "print-policy", "bool", /*default=*/"false",
           "print the per-op policy table to stderr">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtFusePass : Pass<"gt-fuse", "mlir::func::FuncOp"> {
  let summary = "Groups ops into gt.fused kernels";
  let description = [{
    Makes `gt.fused` regions (see gt.fused for each kind): a language
    model's `classifier` (logits GEMM, cross-entropy, its gradient and the
    gradient's GEMMs, run by the GPU a chunk of rows at a time; a small
    head of at most 64 rows, 32 classes and a K of 2048 also takes a
    linear's bias and its gradient and the ReLU gradient of dh with its
    column sums, and runs as one kernel), `loss`
    (cross-entropy and its gradient in one row kernel), `gemm` (GEMM
    epilogues: cuBLASLt's, and over at most 64 rows a ReLU gradient and its
    column sums, which gtc's small-GEMM kernel computes), `norm` (residual add + layernorm and its backward),
    `epilogue` (a cast folded into the op before it), `scatter_add` (an
    embedding gradient added to another gradient of its table: a tied
    embedding's), `multi_tensor` (the casts of all parameters in one
    launch, one a parameter and type: gt-checkpoint's recomputed casts are
    the first's) and `elementwise`.

    Replaces each chain of elementwise ops (the `GT_Elementwise` trait:
    arithmetic, activations and their gradients, casts, broadcasts) over one
    iteration shape by a `gt.fused "elementwise"` region, which the CUDA
    emitter turns into one kernel and the CPU executor runs op by op. An op
    joins the region of an operand's producer when its result has the
    region's shape and its other operands are computed in the region or
    before the region's first op; values used outside become the region's
    results. Reductions, contractions and layout ops other than broadcasts
    stay outside, except column sums (gt.sum_to of a region's value to its
    last dimension, directly or through the dW GEMM's rank-2 reshape, with
    its cast: a bias gradient), which join the region of their operand
    instead of the dW GEMM's epilogue. Runs after gt-autodiff, over forward
    and backward alike.

    Example: `gtc-opt --gt-shape-inference=batch=8 --gt-autodiff --gt-fuse`.
  }];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtDecodePass : Pass<"gt-decode", "mlir::func::FuncOp"> {
  let summary = "Turns a model into a step of text generation: a window of positions against a KV cache";
  let description = [{
    For `gtc sample`: rewrites a `gt.model` function whose loss is a
    `gt.cross_entropy` of logits `[B, T, V]` and whose one input is token
    ids `[B, T]` into a `gt.decode` function that returns those logits (in
    f32). Dropout goes (generation is inference), and so do the loss and
    the labels.

    With `cache` (the default) the function runs a window of `window`
    positions: the tokens become `[B, window]`, a new input `positions :
    [B, window] i32` says where each sits in its sequence (the host fills
    it), `gt.positions` reads it, every `gt.rope` turns by it, and each
    causal `gt.attention` writes its keys and values into two `gt.state`
    KV caches `[B, T, Hkv, d]` (`gt.cache_update`) and attends over them
    (`gt.cached_attention`; a packed GPT-2 attention is sliced into q, k
    and v first). The prompt runs as one window of T positions, then each
    new token as a window of 1. The sequence dimension is followed through
    every op from the tokens and positions; an op that mixes positions
    other than attention (a sum or softmax over them, a slice of them) is
    an error, as is a non-causal attention. Without `cache` the shapes
    stay as they are: generation recomputes the whole window each token.

    Example: `gtc-opt --gt-decode=window=1`.
  }];
  let options = [
    Option<"window", "window", "int64_t", /*default=*/"1",
           "Positions a step runs (1 to T; 0: T); with cache">,
    Option<"cache", "cache", "bool", /*default=*/"true",
           "Keep keys and values in a KV cache">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

def GtBucketPass : Pass<"gt-bucket", "mlir::func::FuncOp"> {
  let summary = "Groups gradients into buckets, each all-reduced when produced";
  let description = [{
    For data parallelism: in a training step (a function with `gt.step`),
    takes the values that `gt.gradient` ops hand to the optimizer in the
    order the backward computes them (the position of their defining ops),
    groups them into buckets of at most `bucket-bytes` bytes (a gradient
    larger than that is a bucket alone; a value handed over twice counts
    once), and inserts one `gt.all_reduce` per bucket right after the op
    that computes its last gradient, so that a bucket's communication can
    start while the backward goes on; the `gt.gradient` ops move after
    their bucket and read its results. Like PyTorch DDP's gradient buckets
    (64 MiB by default, kDefaultBucketBytes in Passes.h; PyTorch's are 25 MiB,
    which measured slower on GPUs). Runs last, after gt-fuse; gtc runs it only in
    processes of a data-parallel run without gradient accumulation.

    Example: `gtc-opt --gt-bucket=bucket-bytes=1048576`.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "::mlir::gt::kDefaultBucketBytes",
           "The largest bucket, in bytes (a larger gradient is a bucket alone)">
  ];
  let dependentDialects = ["mlir::gt::GTDialect"];
}

#endif // GTC_TRANSFORMS_PASSES
