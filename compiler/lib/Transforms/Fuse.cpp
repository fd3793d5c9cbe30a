//===- Fuse.cpp - Group ops into kernels ----------------------------------===//
//
// gt-fuse turns chains of elementwise ops (GT_Elementwise: arithmetic,
// activations, their gradients, casts, broadcasts) into `gt.fused` regions
// that run as one kernel: one loop over the elements, every intermediate in
// registers. A fused chain of n ops over E elements moves (inputs + outputs)
// x E elements instead of about 3n x E, and launches one kernel instead of n;
// nothing is computed twice (each op of a region runs once per element, and
// reductions and contractions are never pulled in), so fusing elementwise
// ops with each other never costs bytes or FLOPs and the pass takes every
// such chance.
//
// Groups are formed greedily in program order. An op joins the group of an
// operand's producer when its result has the group's shape (the region's
// iteration space) and every other operand is computed inside the group or
// before the group's first op; the region replaces the group at its first
// op, so it reads only values that exist there and no cycle can form. Values
// of the group used outside it become the region's results. A group of one
// op stays as it is.
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
// gradient). Then a cast that is the only use of a
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
// steps, and a GPU's optimizer writes them: Plan::paramCopies.) An embedding gradient
// added to another gradient of its table (a tied embedding) becomes a
// `scatter_add` region: the scatter onto that gradient.
//===----------------------------------------------------------------------===//

#include "gtc/CodeGen/SmallKernels.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTFUSEPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// Whether `op` may be part of an elementwise region: an elementwise op
/// with one statically shaped tensor result.
bool isFusable(Operation *op) {
  if (!op->hasTrait<OpTrait::gt::Elementwise>() || op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.hasStaticShape();
}

ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

struct Group {
  Operation *anchor;
  SmallVector<Operation *> ops;
};

/// Forms the groups of one block.
class Grouper {
public:
  explicit Grouper(Block &block) : block(block) {}

  void run() {
    foldClassifiers();
    foldLosses();
    foldScatterAdds();
    foldNorms(); // before the GEMMs: it takes bias gradients of a norm's total
    foldGemmEpilogues();
    sumColumnsOfValues();
    foldCasts();
    for (Operation &op : block.without_terminator())
      if (isFusable(&op))
        place(&op);
    addColumnSums();
    for (Group &g : groups)
      if (g.ops.size() > 1)
        outline(g, "elementwise");
    castParameters();
  }

private:
  /// Puts `op` into a producer's group, or into a new one.
  void place(Operation *op) {
    // Producers' groups, the most recently started first.
    SmallVector<int> candidates;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = groupOf.find(def); it != groupOf.end() &&
                                         !llvm::is_contained(candidates,
                                                             it->second))
          candidates.push_back(it->second);
    llvm::sort(candidates, std::greater<int>());
    for (int g : candidates) {
      if (shapeOf(op) != shapeOf(groups[g].anchor))
        continue; // another iteration space
      if (!llvm::all_of(op->getOperands(),
                        [&](Value v) { return availableTo(v, g); }))
        continue; // an operand computed after the group began
      groups[g].ops.push_back(op);
      groupOf[op] = g;
      return;
    }
    groupOf[op] = static_cast<int>(groups.size());
    groups.push_back({op, {op}});
  }

  /// Whether group `g`'s region, placed at its first op, can read `v`.
  bool availableTo(Value v, int g) {
    auto it = groupOf.find(v.getDefiningOp());
    return (it != groupOf.end() && it->second == g) ||
           availableAt(v, groups[g].anchor);
  }

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
  bool columnSumJoins(SumToOp s) {
    Value v = summedValue(s);
    auto in = cast<RankedTensorType>(v.getType());
    Operation *def = v.getDefiningOp();
    return s->getBlock() == &block && in.hasStaticShape() &&
           in.getRank() >= 2 &&
           s.getType().getShape() == in.getShape().take_back() && def &&
           def->getBlock() == &block && isFusable(def);
  }

  /// What sum_to `s` sums: its operand, or the operand of the reshape it
  /// sums when that reshape keeps the last dimension (gt-autodiff sums a
  /// linear's output gradient in the dW GEMM's rank-2 form).
  Value summedValue(SumToOp s) {
    auto view = s.getInput().getDefiningOp<ReshapeOp>();
    if (!view || view->getBlock() != &block)
      return s.getInput();
    auto type = cast<RankedTensorType>(view.getInput().getType());
    return type.getRank() >= 2 &&
                   type.getShape().back() ==
                       cast<RankedTensorType>(view.getType()).getShape().back()
               ? view.getInput()
               : s.getInput();
  }

  /// Replaces `sum` (of a reshape) by the same sum of summedValue(sum).
  SumToOp sumDirectly(SumToOp sum) {
    OpBuilder b(sum);
    auto direct =
        SumToOp::create(b, sum.getLoc(), sum.getType(), summedValue(sum));
    sum.getResult().replaceAllUsesWith(direct.getResult());
    sum.erase();
    return direct;
  }

  /// Each column sum that joins its value's region (columnSumJoins) and
  /// sums it through a reshape sums the value itself: the same sum.
  void sumColumnsOfValues() {
    for (SumToOp sum : llvm::make_early_inc_range(block.getOps<SumToOp>()))
      if (summedValue(sum) != sum.getInput() && columnSumJoins(sum))
        sumDirectly(sum);
  }

  /// Each column sum that columnSumJoins joins its operand's region, with
  /// the cast of its result when that cast is the sum's only use and alone
  /// in its own group. The region is placed at its first op, which is
  /// before the sum; every value the sum reads is the region's.
  void addColumnSums() {
    for (SumToOp sum : block.getOps<SumToOp>()) {
      if (!columnSumJoins(sum))
        continue;
      Group &g = groups[groupOf.at(sum.getInput().getDefiningOp())];
      g.ops.push_back(sum);
      auto c = dyn_cast_or_null<CastOp>(soleUser(sum.getResult()));
      if (!c)
        continue;
      if (auto it = groupOf.find(c); it != groupOf.end()) {
        if (groups[it->second].ops.size() != 1)
          continue;
        groups[it->second].ops.clear();
        groupOf.erase(it);
      }
      g.ops.push_back(c);
    }
  }

  /// The only user of `v` in this block, or null.
  Operation *soleUser(Value v) {
    if (!v.hasOneUse())
      return nullptr;
    Operation *user = *v.getUsers().begin();
    return user->getBlock() == &block ? user : nullptr;
  }

  /// Appends `op` and, when it is the only use of op's result, that gt.cast.
  void addWithCast(Operation *op, SmallVectorImpl<Operation *> &ops) {
    ops.push_back(op);
    if (auto c = dyn_cast_or_null<CastOp>(soleUser(op->getResult(0))))
      ops.push_back(c);
  }

  /// The cross_entropy_grad of `ce`'s logits and labels after it in this
  /// block, or null.
  CrossEntropyGradOp gradientOf(CrossEntropyOp ce) {
    for (Operation *u : ce.getLogits().getUsers())
      if (auto g = dyn_cast<CrossEntropyGradOp>(u);
          g && g->getBlock() == &block && g.getLogits() == ce.getLogits() &&
          g.getLabels() == ce.getLabels() && ce->isBeforeInBlock(g))
        return g;
    return nullptr;
  }

  /// Declares the scalar gradient of the loss that `grad` reads (a
  /// constant, the seed of the backward) before `anchor`, where a region
  /// that reads it will start.
  void hoistSeed(CrossEntropyGradOp grad, Operation *anchor) {
    Operation *seed = grad.getGrad().getDefiningOp();
    if (seed && isa<ConstantOp>(seed) && seed->getBlock() == &block &&
        !availableAt(grad.getGrad(), anchor))
      seed->moveBefore(anchor);
  }

  /// The widening gt.cast that makes `ce`'s logits from a 16-bit value read
  /// by nothing but the cross-entropy and its gradient `grad`, or null.
  CastOp wideningOf(CrossEntropyOp ce, CrossEntropyGradOp grad) {
    auto widening = ce.getLogits().getDefiningOp<CastOp>();
    if (widening && widening->getBlock() == &block &&
        isa<FloatType>(getElementTypeOrSelf(widening.getInput().getType())) &&
        llvm::all_of(ce.getLogits().getUsers(), [&](Operation *u) {
          return u == ce.getOperation() || u == grad.getOperation();
        }))
      return widening;
    return nullptr;
  }

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
  void foldClassifiers() {
    SmallVector<Group> folds;
    for (auto ce : block.getOps<CrossEntropyOp>()) {
      CrossEntropyGradOp grad = gradientOf(ce);
      if (!grad)
        continue;
      CastOp widening = wideningOf(ce, grad);
      Value stored = widening ? widening.getInput() : ce.getLogits();
      Operation *fwd = stored.getDefiningOp();
      Value h, w;
      auto logitsType = cast<RankedTensorType>(stored.getType());
      bool small = false;
      if (auto hType = fwd && fwd->getNumOperands() >= 1
                           ? dyn_cast<RankedTensorType>(
                                 fwd->getOperand(0).getType())
                           : RankedTensorType();
          hType && hType.getRank() >= 1)
        small = gtc::codegen::isSmallHead(rowsOf(stored),
                                          logitsType.getShape().back(),
                                          hType.getShape().back());
      if (auto lin = dyn_cast_or_null<LinearOp>(fwd);
          lin && (!lin.getBias() || small)) {
        h = lin.getInput();
        w = lin.getWeight();
      } else if (auto mm = dyn_cast_or_null<MatmulOp>(fwd);
                 mm && mm.getTransposeB() && !mm.getTransposeA() &&
                 cast<RankedTensorType>(mm.getB().getType()).getRank() == 2) {
        h = mm.getA();
        w = mm.getB();
      } else {
        continue;
      }
      if (fwd->getBlock() != &block ||
          !llvm::all_of(stored.getUsers(), [&](Operation *u) {
            return u == widening.getOperation() || u == ce.getOperation() ||
                   u == grad.getOperation();
          }))
        continue;
      Group g{fwd, {fwd}};
      if (widening)
        g.ops.push_back(widening);
      g.ops.push_back(ce);
      addWithCast(grad, g.ops);
      // The gradient, through reshapes, feeds exactly dh and dW.
      SmallVector<Value> forms = {g.ops.back()->getResult(0)};
      MatmulOp dh, dw;
      SumToOp db; // a small head's bias gradient
      bool ok = true;
      for (size_t i = 0; i < forms.size() && ok; ++i)
        for (Operation *u : forms[i].getUsers()) {
          auto mm = dyn_cast<MatmulOp>(u);
          auto sum = dyn_cast<SumToOp>(u);
          if (u->getBlock() != &block) {
            ok = false;
          } else if (sum && small && !db &&
                     sum.getType().getShape() ==
                         logitsType.getShape().take_back()) {
            db = sum;
          } else if (auto r = dyn_cast<ReshapeOp>(u)) {
            g.ops.push_back(r);
            forms.push_back(r.getResult());
          } else if (mm && !dh && mm.getA() == forms[i] && mm.getB() == w &&
                     !mm.getTransposeA() && !mm.getTransposeB()) {
            dh = mm;
          } else if (mm && !dw && mm.getA() == forms[i] &&
                     mm.getTransposeA() && !mm.getTransposeB() &&
                     shapeOf(mm) == cast<RankedTensorType>(w.getType())
                                        .getShape()) {
            dw = mm;
          } else {
            ok = false;
          }
          if (!ok)
            break;
        }
      if (!ok || !dh || !dw)
        continue;
      // dW reads h or a reshape of it (kept outside when it exists at the
      // region's start, else taken in).
      Value hb = dw.getB();
      auto hr = hb.getDefiningOp<ReshapeOp>();
      if (hb != h && !(hr && hr.getInput() == h && hr->getBlock() == &block))
        continue;
      if (hb != h && !availableAt(hb, fwd))
        g.ops.push_back(hr);
      g.ops.push_back(dh);
      addWithCast(dw, g.ops);
      if (db)
        addWithCast(db, g.ops);
      // A small head's dh: the ReLU gradient of h = relu(z) and its column
      // sums. The gradient reads h instead of z (relu(z) > 0 exactly when
      // z > 0, as in the gemm regions), so the region reads h alone.
      auto ag = dyn_cast_or_null<ActivationGradOp>(soleUser(dh.getResult()));
      auto relu = h.getDefiningOp<ReluOp>();
      if (small && ag && relu && ag.getKind() == "relu" &&
          ag.getGrad() == dh.getResult() &&
          (ag.getInput() == h || ag.getInput() == relu.getInput())) {
        ag.getInputMutable().assign(h);
        g.ops.push_back(ag);
        for (Operation *u : ag.getResult().getUsers())
          if (auto sum = dyn_cast<SumToOp>(u);
              sum && sum->getBlock() == &block &&
              sum.getType().getShape() ==
                  cast<RankedTensorType>(ag.getType()).getShape().take_back()) {
            addWithCast(sum, g.ops);
            break;
          }
      }
      llvm::sort(g.ops, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      hoistSeed(grad, fwd);
      if (readsOnlyAvailable(g))
        folds.push_back(g);
    }
    for (Group &g : folds)
      outline(g, "classifier");
  }

  /// A cross_entropy and the cross_entropy_grad of the same logits and
  /// labels become a "loss" region at the cross-entropy: one row kernel
  /// computes each row's log-sum-exp once and writes the loss and the
  /// gradient, instead of reading the logits three times. When the logits
  /// are the widening cast of a 16-bit value read by nothing else, the cast
  /// joins (the kernel converts as it loads: a bf16 classifier's f32 logits
  /// never exist), and so does the narrowing cast of the gradient that is
  /// its only use. The scalar gradient of the loss (a constant) is declared
  /// before the region, which needs it.
  void foldLosses() {
    SmallVector<Group> folds;
    for (auto ce : block.getOps<CrossEntropyOp>()) {
      CrossEntropyGradOp grad = gradientOf(ce);
      if (!grad)
        continue;
      Group g{ce, {}};
      if (CastOp widening = wideningOf(ce, grad)) {
        g.ops.push_back(widening);
        g.anchor = widening;
      }
      g.ops.push_back(ce);
      addWithCast(grad, g.ops);
      hoistSeed(grad, g.anchor);
      if (readsOnlyAvailable(g))
        folds.push_back(g);
    }
    for (Group &g : folds)
      outline(g, "loss");
  }

  /// An embedding gradient read by nothing but a gt.add with another
  /// value of its type (a tied embedding: GPT-2's table also receives the
  /// classifier's dW) becomes a "scatter_add" region at the embedding
  /// gradient: the table's rows are scattered onto the other value (in
  /// place when the plan can), instead of zeroing a table, scattering into
  /// it and adding two tables (for GPT-2, 154 MB each in f32: 277 us of an
  /// H100's step, 211 of them the zeroing and the add).
  void foldScatterAdds() {
    SmallVector<Group> folds;
    for (auto scatter : block.getOps<EmbeddingGradOp>()) {
      auto add = dyn_cast_or_null<AddOp>(soleUser(scatter.getResult()));
      if (!add || add.getLhs().getType() != add.getRhs().getType() ||
          add.getType() != scatter.getType())
        continue;
      Group g{scatter, {scatter, add}};
      if (readsOnlyAvailable(g))
        folds.push_back(g);
    }
    for (Group &g : folds)
      outline(g, "scatter_add");
  }

  /// What cuBLASLt computes in a GEMM's epilogue joins the GEMM as a "gemm"
  /// region (one cuBLASLt call; the bias of a linear is already there):
  ///  - linear -> relu or gelu(approximate: true): the activation (GELU_BIAS,
  ///    RELU_BIAS); a GELU's input that the backward reads is stored on the
  ///    way (GELU_AUX), and relu gradients are rewritten to read the relu's
  ///    output (relu(x) > 0 exactly when x > 0), so nothing else needs x;
  ///  - matmul (dy W, rows by a matrix) -> [reshape] -> activation_grad of
  ///    gelu_tanh: the GELU gradient of a saved input (DGELU);
  ///    (cuBLASLt keeps saved inputs in rows of a multiple of 8 elements);
  ///  - matmul (dy W) of at most kSmallGemmRows rows -> [reshape] ->
  ///    activation_grad of relu, and the column sums of that gradient with
  ///    their cast (the bias gradient of the linear below): gtc's own
  ///    small GEMM applies the ReLU mask and sums the columns it holds
  ///    (examples/mlp.gt at batch 64: one kernel instead of the GEMM, its
  ///    split-K reduction and the ReLU-gradient kernel);
  ///  - matmul (dy^T x) and sum_to(dy) over the rows of the same dy, each
  ///    with the cast of its result: the weight and bias gradients of a
  ///    linear (BGRADB), so dy is read once.
  /// Nothing is recomputed: every op of such a region runs once.
  void foldGemmEpilogues() {
    SmallVector<Group> folds;
    llvm::SmallPtrSet<Operation *, 16> taken;
    auto isGemm = [](MatmulOp mm) {
      return cast<RankedTensorType>(mm.getB().getType()).getRank() == 2 &&
             cast<RankedTensorType>(mm.getA().getType()).getRank() == 2;
    };
    for (Operation &op : block.without_terminator()) {
      if (taken.count(&op))
        continue;
      Group g{&op, {&op}};
      if (auto lin = dyn_cast<LinearOp>(op)) {
        Value z = lin.getResult();
        Operation *act = nullptr;
        for (Operation *u : z.getUsers())
          if ((isa<ReluOp>(u) ||
               (isa<GeluOp>(u) && cast<GeluOp>(u).getApproximate())) &&
              u->getBlock() == &block && (!act || u->isBeforeInBlock(act)))
            act = u;
        if (!act)
          continue;
        // cuBLASLt saves a GELU's input (read by the backward) in rows of a
        // multiple of 8 elements.
        if (isa<GeluOp>(act) && !z.hasOneUse() && !rowsOf8(z))
          continue;
        if (isa<ReluOp>(act)) {
          SmallVector<ActivationGradOp> grads;
          bool ok = true;
          for (Operation *u : z.getUsers()) {
            auto ag = dyn_cast<ActivationGradOp>(u);
            if (u == act)
              continue;
            if (ag && ag.getKind() == "relu" && ag.getInput() == z &&
                ag.getGrad() != z && act->isBeforeInBlock(ag))
              grads.push_back(ag);
            else
              ok = false;
          }
          if (!ok)
            continue;
          for (ActivationGradOp ag : grads)
            ag.getInputMutable().assign(act->getResult(0));
        }
        g.ops.push_back(act);
      } else if (auto mm = dyn_cast<MatmulOp>(op)) {
        if (!isGemm(mm))
          continue;
        Operation *next = soleUser(mm.getResult());
        if (auto r = dyn_cast_or_null<ReshapeOp>(next)) {
          g.ops.push_back(r);
          next = soleUser(r.getResult());
        }
        auto ag = dyn_cast_or_null<ActivationGradOp>(next);
        bool feeds = ag && ag.getGrad() == g.ops.back()->getResult(0) &&
                     availableAt(ag.getInput(), &op);
        // (Measured and not kept, on an H200: leaving a GELU gradient with
        // a bias gradient out of the GEMM, as an elementwise kernel that
        // sums its columns. The plain GEMM and dW without BGRADB saved what
        // that kernel cost: GPT-2's attention-free variant 28.46 against
        // 28.41 ms.)
        if (!mm.getTransposeA() && feeds && ag.getKind() == "gelu_tanh" &&
            rowsOf8(ag.getInput())) {
          g.ops.push_back(ag);
        } else if (!mm.getTransposeA() && feeds && ag.getKind() == "relu" &&
                   rowsOf(mm.getResult()) <= gtc::codegen::kSmallGemmRows) {
          g.ops.push_back(ag);
          // Its column sums (the bias gradient of the linear below).
          for (Operation *u : ag.getResult().getUsers())
            if (auto sum = dyn_cast<SumToOp>(u);
                sum && sum->getBlock() == &block && !taken.count(sum) &&
                sum.getType().getShape() ==
                    cast<RankedTensorType>(ag.getType()).getShape().take_back()) {
              addWithCast(sum, g.ops);
              break;
            }
        } else if (!mm.getTransposeA()) {
          continue;
        } else {
          // dW = dy^T x; the bias gradient sums dy over its rows, unless
          // that sum joins the elementwise region computing dy (not when a
          // GEMM of this loop takes dy's op, as DGELU does).
          g.ops.clear();
          SumToOp bias;
          for (Operation *u : mm.getA().getUsers())
            if (auto s = dyn_cast<SumToOp>(u);
                s && s->getBlock() == &block && !taken.count(s) &&
                !(columnSumJoins(s) &&
                  !taken.count(summedValue(s).getDefiningOp())) &&
                cast<RankedTensorType>(s.getType()).getShape() ==
                    ArrayRef<int64_t>(cast<RankedTensorType>(mm.getA().getType())
                                          .getShape()
                                          .back()))
              bias = s;
          if (!bias || !availableAt(mm.getB(), bias))
            continue;
          addWithCast(mm, g.ops);
          size_t gemmOps = g.ops.size();
          addWithCast(bias, g.ops);
          if (getElementTypeOrSelf(g.ops[gemmOps - 1]->getResult(0)) !=
              getElementTypeOrSelf(g.ops.back()->getResult(0)))
            continue; // cuBLASLt writes both in one type
          g.anchor = bias->isBeforeInBlock(mm) ? bias.getOperation() : &op;
        }
      } else {
        continue;
      }
      taken.insert(g.ops.begin(), g.ops.end());
      folds.push_back(g);
    }
    for (Group &g : folds)
      outline(g, "gemm");
  }

  static int64_t rowsOf(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return type.getNumElements() / std::max<int64_t>(1, type.getShape().back());
  }
  static bool rowsOf8(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape().back() % 8 == 0;
  }

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
  void foldNorms() {
    SmallVector<Group> folds;
    llvm::SmallPtrSet<Operation *, 16> taken;
    auto sameShape = [](Operation *op) {
      return llvm::all_of(op->getOperandTypes(), [&](Type t) {
        return t == op->getResult(0).getType();
      });
    };
    auto overRows = [](AddOp add) {
      auto result = cast<RankedTensorType>(add.getType());
      ArrayRef<int64_t> rs = result.getShape();
      int full = 0;
      for (Type t : add->getOperandTypes()) {
        auto type = cast<RankedTensorType>(t);
        ArrayRef<int64_t> s = type.getShape();
        if (type == result) {
          ++full;
          continue;
        }
        if (type.getElementType() != result.getElementType() || s.empty() ||
            s.size() > rs.size() || s != rs.take_back(s.size()))
          return false;
      }
      return full >= 1;
    };
    auto castFeeding = [&](Value v, Operation *user) -> Operation * {
      auto c = v.getDefiningOp<CastOp>();
      return c && c->getBlock() == &block && soleUser(c.getResult()) == user
                 ? c.getOperation()
                 : nullptr;
    };
    for (Operation &op : block.without_terminator()) {
      Group g{nullptr, {}};
      Value total; // a backward region's total
      if (auto ln = dyn_cast<LayerNormOp>(op)) {
        auto add = ln.getInput().getDefiningOp<AddOp>();
        if (!add || add->getBlock() != &block || !overRows(add) ||
            add.getResult().hasOneUse())
          continue; // no residual stream to store on the way
        for (Value v : add->getOperands())
          if (Operation *c = castFeeding(v, add))
            g.ops.push_back(c);
        g.ops.push_back(add);
        g.ops.push_back(ln);
        if (auto c = dyn_cast_or_null<CastOp>(soleUser(ln.getResult())))
          g.ops.push_back(c);
      } else if (auto lg = dyn_cast<LayerNormGradOp>(op)) {
        if (Operation *c = castFeeding(lg.getGrad(), lg))
          g.ops.push_back(c);
        g.ops.push_back(lg);
        // The input gradient plus the residual gradient (none for the
        // backward's first norm), and its cast: the total.
        total = lg.getInputGrad();
        if (auto add = dyn_cast_or_null<AddOp>(soleUser(total));
            add && sameShape(add)) {
          g.ops.push_back(add);
          total = add.getResult();
        }
        for (Operation *u : total.getUsers())
          if (isa<CastOp>(u) && u->getBlock() == &block) {
            g.ops.push_back(u);
            total = u->getResult(0);
            break;
          }
      }
      if (g.ops.size() < 2)
        continue;
      llvm::sort(g.ops, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      g.anchor = g.ops.front();
      // A residual add that two layer norms read (the forward's and one
      // that gt-checkpoint recomputes from the kept residual stream) joins
      // the first one's region only.
      if (llvm::any_of(g.ops, [&](Operation *o) { return taken.count(o); }))
        continue;
      hoistParams(g);
      if (readsOnlyAvailable(g)) {
        // The bias gradient joins only an accepted region (it rewrites IR).
        if (total)
          addBiasGradient(total, g.ops);
        folds.push_back(g);
        taken.insert(g.ops.begin(), g.ops.end());
      }
    }
    for (Group &g : folds)
      outline(g, "norm");
  }

  /// A linear's bias gradient over the rows of a norm region's total (the
  /// residual gradient, which is the linear's output gradient): the
  /// sum_to(reshape(total)) to the last dimension that gt-autodiff wrote
  /// becomes sum_to(total) and joins the region with its cast, so the
  /// norm's row kernel sums the columns it already holds (the linear's dW
  /// GEMM then needs no BGRADB epilogue, which keeps cuBLASLt from
  /// splitting K).
  void addBiasGradient(Value total, SmallVectorImpl<Operation *> &ops) {
    auto type = cast<RankedTensorType>(total.getType());
    for (Operation *u : total.getUsers()) {
      auto view = dyn_cast<ReshapeOp>(u);
      if (!view || view->getBlock() != &block)
        continue;
      for (Operation *vu : view.getResult().getUsers()) {
        auto sum = dyn_cast<SumToOp>(vu);
        if (!sum || sum->getBlock() != &block || summedValue(sum) != total ||
            sum.getType().getShape() != type.getShape().take_back())
          continue;
        addWithCast(sumDirectly(sum), ops);
        return;
      }
    }
  }

  /// Declares the parameters the group reads (leaves: a gt.param reads
  /// nothing) before its anchor, with every parameter declared between
  /// them, in their order (which is the plan's parameter layout).
  void hoistParams(const Group &g) {
    Operation *last = nullptr;
    for (Operation *op : g.ops)
      for (Value v : op->getOperands())
        if (auto p = v.getDefiningOp<ParamOp>();
            p && g.anchor->isBeforeInBlock(p) &&
            (!last || last->isBeforeInBlock(p)))
          last = p;
    if (!last)
      return;
    for (Operation &op : llvm::make_early_inc_range(llvm::make_range(
             g.anchor->getIterator(), std::next(last->getIterator()))))
      if (isa<ParamOp>(op))
        op.moveBefore(g.anchor);
  }

  /// Whether every value the group reads from outside exists at its anchor.
  bool readsOnlyAvailable(const Group &g) {
    llvm::SmallPtrSet<Operation *, 8> members(g.ops.begin(), g.ops.end());
    for (Operation *op : g.ops)
      for (Value v : op->getOperands())
        if (!members.count(v.getDefiningOp()) && !availableAt(v, g.anchor))
          return false;
    return true;
  }

  /// Whether `v` exists before `op` (a block argument or an earlier op's).
  bool availableAt(Value v, Operation *op) {
    Operation *def = v.getDefiningOp();
    return !def || (def->getBlock() == op->getBlock() &&
                    def->isBeforeInBlock(op));
  }

  /// A gt.cast that is the only use of an op whose kernel can store another
  /// float type (GT_CastEpilogue: GEMMs, sum_to, layernorm) folds into it:
  /// an "epilogue" region, one kernel (or GEMM) writing the cast's type.
  void foldCasts() {
    SmallVector<Group> folds;
    for (Operation &op : block.without_terminator()) {
      if (!op.hasTrait<OpTrait::gt::CastEpilogue>() ||
          op.getNumResults() != 1)
        continue;
      if (auto sum = dyn_cast<SumToOp>(op); sum && columnSumJoins(sum))
        continue; // it joins its operand's elementwise region, cast and all
      auto cast = dyn_cast_or_null<CastOp>(soleUser(op.getResult(0)));
      if (cast && !cast->use_empty() &&
          isa<FloatType>(getElementTypeOrSelf(cast.getType())))
        folds.push_back({&op, {&op, cast}});
    }
    for (Group &g : folds)
      outline(g, "epilogue");
  }

  /// The elementwise ops left alone that read only parameters (their casts
  /// to the low precision, one per parameter) become one multi-tensor
  /// region at the first of them: one launch instead of one per parameter.
  void castParameters() {
    auto readsParams = [&](Operation &op) {
      return isFusable(&op) && op.getNumOperands() > 0 &&
             llvm::all_of(op.getOperands(), [&](Value v) {
               auto type = cast<RankedTensorType>(v.getType());
               return v.getDefiningOp<ParamOp>() &&
                      type.getShape() == shapeOf(&op);
             });
    };
    // One cast a parameter and type: gt-checkpoint's recomputed casts of a
    // parameter compute what the first does, and the region runs before
    // every use of either.
    DenseMap<std::pair<Value, Type>, CastOp> firstCast;
    for (CastOp c : llvm::make_early_inc_range(block.getOps<CastOp>())) {
      if (!readsParams(*c))
        continue;
      auto [it, first] =
          firstCast.try_emplace({c.getInput(), c.getType()}, c);
      if (!first) {
        c.getResult().replaceAllUsesWith(it->second.getResult());
        c->erase();
      }
    }
    Group g{nullptr, {}};
    for (Operation &op : block.without_terminator())
      if (readsParams(op)) {
        if (!g.anchor)
          g.anchor = &op;
        g.ops.push_back(&op);
      }
    if (g.ops.size() < 2)
      return;
    // Parameters are leaves: declare every one before the region, in their
    // order (which is the plan's parameter layout).
    for (ParamOp p : llvm::make_early_inc_range(block.getOps<ParamOp>()))
      if (g.anchor->isBeforeInBlock(p))
        p->moveBefore(g.anchor);
    outline(g, "multi_tensor");
  }

  /// Replaces the group's ops by one gt.fused region at its first op.
  void outline(Group &g, StringRef kind) {
    llvm::SmallPtrSet<Operation *, 8> members(g.ops.begin(), g.ops.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    for (Operation *op : g.ops) {
      for (Value v : op->getOperands())
        if (!v.getDefiningOp() || !members.count(v.getDefiningOp()))
          inputs.insert(v);
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(),
                         [&](Operation *u) { return !members.count(u); }))
          outputs.push_back(r);
    }
    OpBuilder b(g.anchor);
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    auto fused = FusedOp::create(b, g.anchor->getLoc(), resultTypes,
                                 b.getStringAttr(kind),
                                 inputs.getArrayRef());
    Block *body = b.createBlock(&fused.getBody());
    IRMapping map;
    for (Value v : inputs)
      map.map(v, body->addArgument(v.getType(), v.getLoc()));
    for (Operation *op : g.ops)
      b.clone(*op, map);
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    YieldOp::create(b, g.anchor->getLoc(), yielded);
    for (auto [old, now] : llvm::zip(outputs, fused.getResults()))
      old.replaceAllUsesWith(now);
    for (Operation *op : llvm::reverse(g.ops))
      op->erase();
  }

  Block &block;
  std::vector<Group> groups;
  DenseMap<Operation *, int> groupOf;
};

struct GtFusePass : public mlir::gt::impl::GtFusePassBase<GtFusePass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (!f.getBody().empty())
      Grouper(f.getBody().front()).run();
  }
};

} // namespace
