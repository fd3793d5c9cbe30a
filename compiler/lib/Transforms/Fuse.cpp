//===- Fuse.cpp - Group ops into kernels ----------------------------------===//
//
// gt-fuse turns chains of elementwise ops (GT_Elementwise: arithmetic,
// activations, their gradients, casts, broadcasts) into `gt.fused` regions
// that run as one kernel: one loop over the elements, every intermediate in
// registers. A fused chain of n ops over E elements moves (inputs + outputs)
// x E elements instead of about 3n x E, and launches one kernel instead of n;
// each op of a region runs once per element, and reductions and
// contractions are never pulled in, so fusing elementwise ops with each
// other never costs bytes and the pass takes every such chance. The one
// op computed twice is a forward elementwise op whose result the backward
// would otherwise keep, where the backward's kernel reads its operands
// anyway (SwiGLU's silu(g): Fuser::recomputeInBackward), for a few FLOPs
// and fewer bytes and less memory.
//
// Groups are formed greedily in program order. An op joins the group of an
// operand's producer when its result has the group's shape (the region's
// iteration space) and every other operand is computed inside the group or
// before the group's first op, or else the group of a sibling on its side
// of the backward's seed (an op that reads one of its operands: a kernel
// with two results reads the shared value once); the region replaces the
// group at its first op, so it reads only values that exist there and no
// cycle can form. Values of the group used outside it become the region's
// results. A group of one op stays as it is. An op whose only user is
// elementwise sinks to just before it first, so that the user's other
// operands exist when the op's group begins.
//
// First, the classifier of a language model (the GEMM that makes the
// logits, the cross-entropy, its gradient and the two GEMMs of the logits'
// gradient) becomes one "classifier" region, which the GPU runs over chunks
// of rows so that the logits never exist in full (a small head, such as
// examples/mlp.gt's at batch 64, also takes its bias, the bias gradient and
// the ReLU gradient of dh: one kernel). Then a cross-entropy and its
// gradient become one "loss" region (one pass over the logits, which may
// stay in bf16). Then layer norms take the residual adds (also of a table
// of rows repeated over the batch, the position embedding) and casts around
// them ("norm" regions: one row kernel forward, one backward, which also
// sums the columns of its total when that is a linear's output gradient:
// the linear's bias gradient), and GEMMs what cuBLASLt can compute in their
// epilogue ("gemm" regions: an activation, the GELU gradient, the bias
// gradient, an addend: dX GEMMs add the other gradients of their input as
// cuBLASLt's C). Then a cast that is the only use of a
// GEMM, sum_to or layernorm (the
// GT_CastEpilogue trait: the kernel can store another float type) folds into
// that op as an `epilogue` region: bf16 dW GEMMs and bias gradients write
// their f32 gradients directly, layernorms write the bf16 input of the next
// GEMM. The column sums of a value an elementwise region computes, over few
// rows (a small batch's bias gradient: sum_to of a ReLU gradient), join
// that region instead of the dW GEMM (see columnSumJoins). Then the
// elementwise ops still alone that read only parameters (in mixed
// precision, the cast of each parameter to bf16/fp16, once a parameter
// even where gt-checkpoint recomputes it) become one `multi_tensor`
// region: a single launch that converts every parameter, as a multi-tensor
// optimizer updates them all at once. (The plan keeps its results between
// steps, and a GPU's optimizer writes them: Plan::paramCopies.) An embedding
// gradient added to another gradient of its table (a tied embedding) becomes a
// `scatter_add` region: the scatter onto that gradient. The gradient of
// attention over rope(q) and rope(k) becomes an `attention_grad` region with
// the inverse ropes of its dq and dk, which the attention kernels apply as
// they store them.
//
// Each region kind is one file under Fuse/ (a method of fuse::Fuser, whose
// shared state and steps Fuse/Fuser.h declares); kRules below orders them.
// What a region may hold on a GPU (cuBLASLt's epilogues, gtc's small
// kernels) is gtc/Runtime/Capabilities.h, which gt.fused's verifier and the
// CUDA emitter read too.
//===----------------------------------------------------------------------===//

#include "Fuse/Fuser.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTFUSEPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;
using fuse::Fuser;

namespace {

/// A fusion rule: the region kind it forms and the Fuser method (Fuse/) that
/// forms them.
struct FusionRule {
  const char *kind;
  void (Fuser::*apply)();
};

/// The rules in the order they run: each takes ops that the later ones
/// would otherwise take apart.
const FusionRule kRules[] = {
    {"classifier", &Fuser::foldClassifiers},
    {"loss", &Fuser::foldLosses},
    {"scatter_add", &Fuser::foldScatterAdds},
    // Before the GEMMs, as the norms: it takes the bias gradient of a
    // packed attention gradient.
    {"attention_grad", &Fuser::foldAttentionGrads},
    // Before the GEMMs: it takes bias gradients of a norm's total.
    {"norm", &Fuser::foldNorms},
    {"gemm", &Fuser::foldGemmEpilogues},
    // Column sums over few rows, computed beside the elementwise region that
    // computes their values, not by a GEMM.
    {"elementwise (column sums)", &Fuser::sumColumnsOfValues},
    {"epilogue", &Fuser::foldCasts},
    {"elementwise", &Fuser::fuseElementwise},
    {"multi_tensor", &Fuser::castParameters},
};

struct GtFusePass : public mlir::gt::impl::GtFusePassBase<GtFusePass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.getBody().empty())
      return;
    Fuser fuser(f.getBody().front());
    for (const FusionRule &rule : kRules)
      (fuser.*rule.apply)();
  }
};

} // namespace
