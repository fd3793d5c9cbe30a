//===- Fuser.h - gt-fuse's rules and their shared state ---------*- C++ -*-===//
//
// The state of gt-fuse over one block (its groups of ops, each becoming a
// gt.fused region) and its rules, one file a region kind (Fuse/*.cpp). The
// pass (Fuse.cpp) applies the rules in the order of its table, kRules.
//===----------------------------------------------------------------------===//

#ifndef GTC_TRANSFORMS_FUSE_FUSER_H
#define GTC_TRANSFORMS_FUSE_FUSER_H

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Capabilities.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SetVector.h"
#include <vector>

namespace mlir::gt::fuse {

/// Whether `op` may be part of an elementwise region: an elementwise op
/// with one statically shaped tensor result.
inline bool isFusable(Operation *op) {
  if (!op->hasTrait<OpTrait::gt::Elementwise>() || op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape();
}

/// A value every op may read (GT_Leaf: a parameter, input, constant...).
inline bool isLeaf(Operation *op) { return op->hasTrait<OpTrait::gt::Leaf>(); }

inline ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

/// Ops that become one region, at `anchor` (the first of them).
struct Group {
  Operation *anchor;
  SmallVector<Operation *> ops;
};

/// Forms the groups of one block and outlines them.
class Fuser {
public:
  explicit Fuser(Block &block) : block(block) {}

  /// The rules, one a region kind (Fuse.cpp's kRules orders them).
  /// A language model's classifier becomes a "classifier" region: the GEMM
  /// h W^T that makes the logits (a bias-free linear, or a matmul with
  /// transpose_b of a rank-2 W: GPT-2's tied embedding), the widening cast
  /// of 16-bit logits, the cross-entropy and its gradient, that gradient's
  /// cast and reshapes, and the two GEMMs that read it: dh = dlogits W and
  /// dW = dlogits^T h (with its cast). Every op reading the logits or their
  /// gradient must be one of these. The CUDA emitter runs the region over
  /// chunks of rows (logits, loss and gradient, then both GEMMs, a chunk at
  /// a time), so the logits and their gradient never exist in full: for
  /// GPT-2 at batch 16 they are 1.6 GB in bf16 (3.3 GB in f32), the largest
  /// tensor of the step. Nothing is recomputed.
  ///
  /// A small head (isSmallHead: at most 64 rows of at most 32 classes, a K
  /// of at most 2048; examples/mlp.gt at batch 64) runs as one kernel on
  /// the GPU, which also computes a linear's bias and its gradient (the
  /// column sums of the logits' gradient, with their cast) and, when h is
  /// the output of a ReLU, the ReLU gradient of dh and its column sums (the
  /// bias gradient of the linear below, with their cast): those join the
  /// region too, where dh's ReLU gradient is dh's only use and reads h.
  void foldClassifiers();
  /// A cross_entropy and the cross_entropy_grad of the same logits and
  /// labels become a "loss" region at the cross-entropy: one row kernel
  /// computes each row's log-sum-exp once and writes the loss and the
  /// gradient, instead of reading the logits three times. When the logits
  /// are the widening cast of a 16-bit value read by nothing else, the cast
  /// joins (the kernel converts as it loads: a bf16 classifier's f32 logits
  /// never exist), and so does the narrowing cast of the gradient that is
  /// its only use. The scalar gradient of the loss (a constant) is declared
  /// before the region, which needs it. Without a gradient (an evaluation),
  /// a cross-entropy of such a widened 16-bit value is a region with its
  /// cast: the f32 logits (3.3 GB for GPT-2 at batch 16) never exist. An
  /// accuracy of the same logits and labels joins the region (the row
  /// kernel's pass takes the argmax too).
  void foldLosses();
  /// An embedding gradient read by nothing but a gt.add with another
  /// value of its type (a tied embedding: GPT-2's table also receives the
  /// classifier's dW) becomes a "scatter_add" region at the embedding
  /// gradient: the table's rows are scattered onto the other value (in
  /// place when the plan can), instead of zeroing a table, scattering into
  /// it and adding two tables (test/bench/NOTES.md, "gt-fuse's measured
  /// choices").
  void foldScatterAdds();
  /// The gradient of attention over rope(q) and rope(k) (q, k, v apart,
  /// the Llama block), whose dq and dk go only to their inverse ropes,
  /// becomes an "attention_grad" region with the two ropes when the GPU's
  /// kernels can apply them as they store dq and dk
  /// (rt::attentionGradTakesRope): 24 launches fewer a step for llama124m,
  /// each of which read and wrote a [B, T, heads, d] tensor. A packed
  /// gradient (q, k and v one projection) takes its inverse rope, if any,
  /// and the column sums of the gradient over all rows with their cast (the
  /// projection's bias gradient, addBiasGradient), which the same kernels
  /// compute as they store it: GPT-2's c_attn weight gradient then needs no
  /// BGRADB epilogue.
  void foldAttentionGrads();
  /// Layer norms with the elementwise ops around them that touch the same
  /// rows become "norm" regions (one row kernel, no round trip through
  /// memory for the values in between):
  ///  - forward, residual + layernorm: x = r + cast(a) (the residual
  ///    stream, which the region stores as well), layernorm(x), and the
  ///    cast of the normalized rows to the next GEMM's type;
  ///  - backward: the cast of the incoming gradient, layernorm_grad, the add
  ///    of its input gradient to the residual gradient, and that sum's cast.
  /// Only adds over whole rows join: both operands of the result's shape,
  /// or, in the forward, one of them a table of rows that repeats along the
  /// leading dimensions (the position embedding added to the token
  /// embedding: [T, D] to [B, T, D]).
  void foldNorms();
  /// What cuBLASLt computes in a GEMM's epilogue joins the GEMM as a "gemm"
  /// region (one cuBLASLt call; the bias of a linear is already there):
  ///  - linear -> relu or gelu(approximate: true): the activation (GELU_BIAS,
  ///    RELU_BIAS); a GELU's input that the backward reads is stored on the
  ///    way (GELU_AUX), and relu gradients are rewritten to read the relu's
  ///    output (relu(x) > 0 exactly when x > 0), so nothing else needs x;
  ///  - matmul (dy W, rows by a matrix) -> [reshape] -> activation_grad of
  ///    gelu_tanh: the GELU gradient of a saved input (DGELU);
  ///    (cuBLASLt keeps saved inputs in rows of a multiple of 8 elements);
  ///    in bf16 at the sizes of gtc's Hopper GEMM (rt::dgeluSumsFit) also
  ///    the column sums of that gradient with their cast (the bias gradient
  ///    of the linear below, directly or through a view), which that GEMM
  ///    adds as it stores the gradient: the weight gradient's GEMM then
  ///    reads the gradient without BGRADB;
  ///  - matmul (dy W) of at most kSmallGemmRows rows -> [reshape] ->
  ///    activation_grad of relu, and the column sums of that gradient with
  ///    their cast (the bias gradient of the linear below): gtc's own
  ///    small GEMM applies the ReLU mask and sums the columns it holds
  ///    (examples/mlp.gt at batch 64: one kernel instead of the GEMM, its
  ///    split-K reduction and the ReLU-gradient kernel);
  ///  - matmul (dy W) -> [reshape] -> add of a value of the sum's type that
  ///    exists at the GEMM (another gradient of the GEMM's input: SwiGLU's
  ///    gate and up projections, attention's q, k and v): cuBLASLt reads
  ///    it as C (CudaLaunch::addend), so no kernel reads both products
  ///    again to add them;
  ///  - matmul (dy^T x) and sum_to(dy) over the rows of the same dy, each
  ///    with the cast of its result: the weight and bias gradients of a
  ///    linear (BGRADB), so dy is read once.
  /// Nothing is recomputed: every op of such a region runs once.
  void foldGemmEpilogues();
  /// Each column sum that joins its value's region (columnSumJoins) and
  /// sums it through a reshape sums the value itself: the same sum.
  void sumColumnsOfValues();
  /// A gt.cast that is the only use of an op whose kernel can store another
  /// float type (GT_CastEpilogue: GEMMs, sum_to, layernorm) folds into it:
  /// an "epilogue" region, one kernel (or GEMM) writing the cast's type.
  void foldCasts();
  /// Every fusable op into a producer's group (or else a sibling's: a
  /// group that reads one of its operands) or a new one, the column sums
  /// that join them, and each group of more than one op outlined as an
  /// "elementwise" region. First, recomputeInBackward and sinkIntoUsers.
  void fuseElementwise();
  /// The elementwise ops left alone that read only parameters (their casts
  /// to the low precision, one per parameter) become one multi-tensor
  /// region at the first of them: one launch instead of one per parameter.
  void castParameters();

private:
  /// Puts `op` into a producer's group, else into a sibling's (a group on
  /// op's side of the backward's seed with an op that reads one of op's
  /// operands), or into a new one.
  void place(Operation *op);

  /// The op that seeds the backward (gt.loss_grad), or null (no backward).
  Operation *backwardSeed();
  /// Whether `op` comes at or after the backward's seed.
  bool inBackward(Operation *op);

  /// A forward elementwise op whose result the backward reads, only in
  /// elementwise ops, and whose operands stay alive into the backward
  /// anyway (or are leaves), is computed again there (a clone before its
  /// first backward user) instead of being kept: a SwiGLU's silu(g), whose
  /// g the silu gradient reads. The forward's value then dies in the
  /// forward (llama124m: 64 MiB a layer at B 16), the forward fuses the op
  /// into its user, and the backward's clone joins the region that reads
  /// its operand already (a sibling, see place), so no kernel reads more.
  void recomputeInBackward();

  /// Moves each elementwise op whose only user is an elementwise op of its
  /// shape (on its side of the seed) to just before that user, so that
  /// the user's other operands exist when the op's group begins: silu(g)
  /// * up, with up's GEMM after the silu, becomes one kernel. (Later ops
  /// first, so a chain sinks whole.)
  void sinkIntoUsers();

  /// Whether group `g`'s region, placed at its first op, can read `v`.
  bool availableTo(Value v, int g);

  /// Whether sum_to `s` sums a value over all its rows to its last
  /// dimension and that value is computed by an elementwise op of this
  /// block: then the sum joins that op's region (addColumnSums), whose
  /// kernel sums the columns of what it computes. That saves reading the
  /// value again, and for a linear's bias gradient the separate kernels
  /// that cuBLASLt's BGRADB epilogue launches (a split-K GEMM, its
  /// reduction and a column-sum kernel that reads dy again: for GPT-2's
  /// c_fc, 104 + 11 + 39 us in Nsight Compute on an H200; examples/mlp.gt at
  /// batch 64, tf32, on an H100: two launches fewer, 0.0708 -> 0.0693 ms a
  /// step).
  bool columnSumJoins(SumToOp s);

  /// What sum_to `s` sums: its operand, or the operand of the reshape it
  /// sums when that reshape keeps the last dimension (gt-autodiff sums a
  /// linear's output gradient in the dW GEMM's rank-2 form).
  Value summedValue(SumToOp s);

  /// Replaces `sum` (of a reshape) by the same sum of summedValue(sum).
  SumToOp sumDirectly(SumToOp sum);

  /// Each column sum that columnSumJoins joins its operand's region, with
  /// the cast of its result when that cast is the sum's only use and alone
  /// in its own group. The region is placed at its first op, which is
  /// before the sum; every value the sum reads is the region's.
  void addColumnSums();

  /// The only user of `v` in this block, or null.
  Operation *soleUser(Value v);

  /// Appends `op` and, when it is the only use of op's result, that gt.cast.
  void addWithCast(Operation *op, SmallVectorImpl<Operation *> &ops);

  /// The cross_entropy_grad of `ce`'s logits and labels after it in this
  /// block, or null.
  CrossEntropyGradOp gradientOf(CrossEntropyOp ce);

  /// Declares the scalar gradient of the loss that `grad` reads (a
  /// constant, the seed of the backward) before `anchor`, where a region
  /// that reads it will start.
  void hoistSeed(CrossEntropyGradOp grad, Operation *anchor);

  /// The widening gt.cast that makes `ce`'s logits from a 16-bit value read
  /// by nothing but the cross-entropy and its gradient `grad` (if any), or
  /// null.
  CastOp wideningOf(CrossEntropyOp ce, CrossEntropyGradOp grad);

  /// The rows of `v` (its elements over its last dimension).
  static int64_t rowsOf(Value v);
  /// Whether cuBLASLt's GELU epilogues can keep `v` as their aux matrix
  /// (Capabilities.h).
  static bool auxFits(Value v);

  /// A linear's bias gradient over the rows of a norm region's total (the
  /// residual gradient, which is the linear's output gradient): the
  /// sum_to(reshape(total)) to the last dimension that gt-autodiff wrote
  /// becomes sum_to(total) and joins the region with its cast, so the
  /// norm's row kernel sums the columns it already holds (the linear's dW
  /// GEMM then needs no BGRADB epilogue, which keeps cuBLASLt from
  /// splitting K).
  void addBiasGradient(Value total, SmallVectorImpl<Operation *> &ops);

  /// Declares the parameters the group reads (leaves: a gt.param reads
  /// nothing) before its anchor, with every parameter declared between
  /// them, in their order (which is the plan's parameter layout).
  void hoistParams(const Group &g);

  /// Whether every value the group reads from outside exists at its anchor.
  bool readsOnlyAvailable(const Group &g);

  /// Whether `v` exists before `op` (a block argument or an earlier op's).
  bool availableAt(Value v, Operation *op);

  /// Replaces the group's ops by one gt.fused region at its first op.
  void outline(Group &g, StringRef kind);

  Block &block;
  Operation *seed = nullptr; // backwardSeed(), set by fuseElementwise
  std::vector<Group> groups;
  DenseMap<Operation *, int> groupOf;
};

} // namespace mlir::gt::fuse

#endif // GTC_TRANSFORMS_FUSE_FUSER_H
