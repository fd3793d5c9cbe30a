//===- Decode.cpp - A model as a step of text generation ------------------===//
//
// gt-decode (Passes.td): the forward graph of a language model becomes a
// function from token ids to logits, and with a KV cache one that runs a
// window of positions anywhere in the sequence. The sequence dimension is
// followed from the tokens (and gt.positions) through every op; its size
// becomes the window's.
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Dialect/GT/GTTraits.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::gt {
#define GEN_PASS_DEF_GTDECODEPASS
#include "gtc/Transforms/Passes.h.inc"
} // namespace mlir::gt

using namespace mlir;
using namespace mlir::gt;

namespace {

/// The product of a shape's first `n` static dimensions and the count of
/// its dynamic ones (the batch): what a reshape keeps in front of an axis.
std::pair<int64_t, int> prefix(ArrayRef<int64_t> shape, int64_t n) {
  int64_t known = 1;
  int dynamic = 0;
  for (int64_t d : shape.take_front(n))
    ShapedType::isDynamic(d) ? ++dynamic : known *= d;
  return {known, dynamic};
}

RankedTensorType withDim(RankedTensorType type, int64_t axis, int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  return type.clone(shape);
}

struct Decoder {
  func::FuncOp func;
  int64_t window;
  bool cache;
  /// The model's sequence length (the tokens' second dimension).
  int64_t length = 0;
  /// The [B, window] positions input.
  Value positions;
  /// The sequence axis of each value that has one.
  DenseMap<Value, int64_t> seq;
  int attentions = 0;

  InFlightDiagnostic fail(Operation *op, const Twine &why) {
    return op->emitError("gt-decode: ") << why;
  }

  LogicalResult run();
  LogicalResult toLogits();
  LogicalResult carry(Operation *op);
  LogicalResult attention(AttentionOp op);
  LogicalResult positional(Operation *op, Value from);
};

LogicalResult Decoder::toLogits() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value loss = ret.getNumOperands() == 1 ? ret.getOperand(0) : Value();
  if (loss)
    if (auto cast = loss.getDefiningOp<CastOp>())
      loss = cast.getInput();
  auto ce = loss ? loss.getDefiningOp<CrossEntropyOp>() : CrossEntropyOp();
  if (!ce)
    return fail(ret, "generation samples from logits, and this model's loss "
                     "is not a cross_entropy of logits");
  auto logits = cast<RankedTensorType>(ce.getLogits().getType());
  if (logits.getRank() != 3)
    return fail(ce, "generation reads logits [B, T, V]; this cross_entropy's "
                    "are ")
           << formatType(logits);
  ret->setOperands(ce.getLogits());
  // The loss, the labels and what only they read go; so does dropout
  // (generation is inference).
  func.walk([](DropoutOp d) {
    d.replaceAllUsesWith(d.getInput());
    d.erase();
  });
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
  return success();
}

LogicalResult Decoder::attention(AttentionOp op) {
  if (!op.getCausal())
    return fail(op, "attention without causal: true sees later positions; "
                    "generation needs causal attention");
  if (!op.getLse().use_empty())
    return fail(op, "the attention's statistics are read");
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value q, k, v;
  int64_t heads = op.getHeads();
  if (op.getInputs().size() == 1) {
    // GPT-2's packed [B, S, 3D]: q, k and v sliced apart, heads split.
    Value qkv = op.getInputs()[0];
    auto type = cast<RankedTensorType>(qkv.getType());
    if (type.getRank() != 3 || seq.lookup(qkv) != 1)
      return fail(op, "a packed attention's operand must be [B, T, 3D]");
    int64_t width = type.getDimSize(2) / 3, d = width / heads;
    auto part = withDim(type, 2, width);
    auto split = part.clone({type.getDimSize(0), window, heads, d});
    Value parts[3];
    for (int i = 0; i < 3; ++i) {
      Value s = SliceOp::create(b, loc, part, qkv,
                                b.getI64ArrayAttr({0, 0, i * width}));
      parts[i] = ReshapeOp::create(b, loc, split, s);
    }
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = op.getInputs()[0], k = op.getInputs()[1], v = op.getInputs()[2];
    for (Value x : {q, k, v})
      if (seq.lookup(x) != 1 ||
          cast<RankedTensorType>(x.getType()).getRank() != 4)
        return fail(op, "attention's q, k and v must be [B, T, heads, "
                        "head_dim] along the tokens' positions");
  }
  auto kType = cast<RankedTensorType>(k.getType());
  if (ShapedType::isDynamic(kType.getDimSize(0)))
    return fail(op, "a KV cache needs a fixed batch (run "
                    "gt-shape-inference=batch=N first)");
  auto cacheType = withDim(kType, 1, length);
  std::string name = "kv." + std::to_string(attentions++);
  Value caches[2], windows[2] = {k, v};
  for (int i = 0; i < 2; ++i) {
    Value state =
        StateOp::create(b, loc, cacheType, name + (i == 0 ? ".k" : ".v"));
    caches[i] =
        CacheUpdateOp::create(b, loc, cacheType, state, windows[i], positions);
  }
  Value y = CachedAttentionOp::create(b, loc, q.getType(), q, caches[0],
                                      caches[1], positions);
  if (op.getInputs().size() == 1) {
    auto packed = cast<RankedTensorType>(op.getInputs()[0].getType());
    y = ReshapeOp::create(b, loc, withDim(packed, 2, packed.getDimSize(2) / 3),
                          y);
  }
  seq[y] = 1;
  op.getResult().replaceAllUsesWith(y);
  op.erase();
  return success();
}

LogicalResult Decoder::positional(Operation *op, Value from) {
  // An operand [T, D] broadcast along the sequence is a table of positions
  // (canonicalization folds embedding(positions(T), table) to the table):
  // each window row looks up its own.
  auto fromType = cast<RankedTensorType>(from.getType());
  int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  int64_t at = rank - fromType.getRank() + seq.lookup(from);
  for (OpOperand &use : op->getOpOperands()) {
    Value other = use.get();
    if (seq.count(other))
      continue;
    auto type = cast<RankedTensorType>(other.getType());
    int64_t j = at - (rank - type.getRank());
    if (j < 0 || type.getDimSize(j) == 1)
      continue;
    if (type.getRank() != 2 || j != 0 || type.getDimSize(0) != length ||
        !isa<FloatType>(type.getElementType()))
      return fail(op, "an operand of ")
             << formatType(type)
             << " varies along the sequence without being a [T, D] table of "
                "positions";
    OpBuilder b(op);
    Value rows = EmbeddingOp::create(b, op->getLoc(), positions, other);
    seq[rows] = 1;
    use.set(rows);
  }
  return success();
}

LogicalResult Decoder::carry(Operation *op) {
  // The operand that carries the sequence, and its axis.
  Value from;
  for (Value v : op->getOperands())
    if (seq.count(v)) {
      from = v;
      break;
    }
  if (!from)
    return success();
  const int64_t axis = seq.lookup(from);
  if (auto a = dyn_cast<AttentionOp>(op))
    return attention(a);
  auto result = [&]() {
    return cast<RankedTensorType>(op->getResult(0).getType());
  };
  auto keep = [&](int64_t at) -> LogicalResult {
    if (at < 0 || at >= result().getRank() || result().getDimSize(at) != window)
      return fail(op, "the sequence dimension does not reach this op's "
                      "result as a dimension of its own");
    seq[op->getResult(0)] = at;
    return success();
  };
  if (auto rope = dyn_cast<RopeOp>(op)) {
    if (axis != 1 || rope.getInput().getType().getRank() != 4)
      return fail(op, "rope's input must be [B, T, heads, head_dim] along "
                      "the tokens' positions");
    rope.getPositionsMutable().assign(positions);
    rope.getResult().setType(rope.getInput().getType());
    return keep(1);
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    // The result axis with the same dimensions in front as the sequence
    // axis of the input, and the sequence's length.
    RankedTensorType out = reshape.getType();
    auto in = cast<RankedTensorType>(from.getType());
    auto before = prefix(in.getShape(), axis);
    for (int64_t j = 0; j < out.getRank(); ++j)
      if (out.getDimSize(j) == length && prefix(out.getShape(), j) == before) {
        reshape.getResult().setType(withDim(out, j, window));
        return keep(j);
      }
    return fail(op, "this reshape merges or splits the sequence dimension");
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    SmallVector<int64_t> shape;
    int64_t at = -1;
    auto in = cast<RankedTensorType>(from.getType());
    for (auto [j, p] : llvm::enumerate(transpose.getPermutation())) {
      int64_t src = cast<IntegerAttr>(p).getInt();
      shape.push_back(in.getDimSize(src));
      if (src == axis)
        at = j;
    }
    transpose.getResult().setType(result().clone(shape));
    return keep(at);
  }
  if (auto cast = dyn_cast<CastOp>(op)) {
    cast.getResult().setType(
        result().clone(cast.getInput().getType().getShape()));
    return keep(axis);
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
    int64_t at = result().getRank() -
                 cast<RankedTensorType>(from.getType()).getRank() + axis;
    broadcast.getResult().setType(withDim(result(), at, window));
    return keep(at);
  }
  if (op->hasTrait<OpTrait::gt::Broadcasting>() && failed(positional(op, from)))
    return failure();
  // Ops that keep positions apart: elementwise, and along other axes.
  bool last = axis == cast<RankedTensorType>(from.getType()).getRank() - 1;
  bool fits =
      TypeSwitch<Operation *, bool>(op)
          .Case<LinearOp, LayerNormOp, RmsNormOp>(
              [&](Operation *) { return from == op->getOperand(0) && !last; })
          .Case<MatmulOp>([&](MatmulOp m) {
            return from == m.getA() && !last && !seq.count(m.getB());
          })
          .Case<SoftmaxOp>([&](SoftmaxOp s) {
            int64_t rank = s.getInput().getType().getRank();
            return (s.getAxis() + rank) % rank != static_cast<uint64_t>(axis);
          })
          .Case<EmbeddingOp>(
              [&](EmbeddingOp e) { return from == e.getIndices(); })
          .Default([](Operation *op) {
            return op->hasTrait<OpTrait::gt::Elementwise>() &&
                   isa<InferTypeOpInterface>(op);
          });
  if (!fits)
    return fail(op, "this op mixes or reduces the positions of a sequence, "
                    "which generation with a KV cache cannot split into "
                    "windows; give --no-cache to recompute the whole "
                    "sequence for each token");
  if (failed(reinferResultTypes(cast<InferTypeOpInterface>(op))))
    return failure();
  // Where the sequence axis lands: broadcasting aligns at the right.
  int64_t at = axis;
  if (op->hasTrait<OpTrait::gt::Broadcasting>())
    at = result().getRank() - cast<RankedTensorType>(from.getType()).getRank() +
         axis;
  return keep(at);
}

LogicalResult Decoder::run() {
  if (failed(toLogits()))
    return failure();
  SmallVector<InputOp> inputs(func.getOps<InputOp>());
  auto tokens = inputs.size() == 1
                    ? dyn_cast<RankedTensorType>(inputs[0].getType())
                    : RankedTensorType();
  if (!tokens || tokens.getRank() != 2 ||
      !tokens.getElementType().isInteger(32) ||
      ShapedType::isDynamic(tokens.getDimSize(1)))
    return fail(inputs.empty() ? func.getOperation() : inputs[0].getOperation(),
                "generation feeds the model token ids [B, T] i32 (one "
                "input); this model does not take them");
  length = tokens.getDimSize(1);
  if (cache) {
    if (window == 0)
      window = length;
    if (window < 1 || window > length)
      return fail(func, "the window must be 1 to the sequence length ")
             << length << ", got " << window;
    OpBuilder b(inputs[0]);
    positions = InputOp::create(b, inputs[0].getLoc(),
                                withDim(tokens, 1, window), "positions");
    seq[positions] = 1;
    inputs[0].getResult().setType(withDim(tokens, 1, window));
    seq[inputs[0].getResult()] = 1;
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front().without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (auto pos = dyn_cast<PositionsOp>(op)) {
        if (static_cast<int64_t>(pos.getLength()) != length)
          return fail(op, "positions(")
                 << pos.getLength() << ") is not the sequence length " << length
                 << " of the tokens";
        pos.getResult().replaceAllUsesWith(positions);
        pos.erase();
        continue;
      }
      if (failed(carry(op)))
        return failure();
    }
  }
  // Logits in f32 for the host.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value logits = ret.getOperand(0);
  auto type = cast<RankedTensorType>(logits.getType());
  if (!type.getElementType().isF32()) {
    OpBuilder b(ret);
    ret->setOperands(
        CastOp::create(b, logits.getLoc(), type.clone(b.getF32Type()), logits)
            .getResult());
  }
  func.setFunctionType(
      FunctionType::get(func.getContext(), {}, ret.getOperandTypes()));
  func->removeAttr(kModelAttrName);
  func->setAttr(kDecodeAttrName, UnitAttr::get(func.getContext()));
  return success();
}

struct GtDecodePass : public mlir::gt::impl::GtDecodePassBase<GtDecodePass> {
  using GtDecodePassBase::GtDecodePassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(kModelAttrName))
      return;
    Decoder decoder;
    decoder.func = func;
    decoder.window = window;
    decoder.cache = cache;
    if (failed(decoder.run()))
      signalPassFailure();
  }
};

} // namespace
