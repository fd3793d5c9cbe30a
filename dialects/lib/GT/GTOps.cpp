//===- GTOps.cpp - Operations of the gt dialect ---------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Capabilities.h"
#include "gtc/Runtime/ScalarOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::gt;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

LogicalResult mlir::gt::reinferResultTypes(InferTypeOpInterface iface) {
  Operation *op = iface.getOperation();
  SmallVector<Type> types;
  if (failed(iface.inferReturnTypes(
          op->getContext(), op->getLoc(), op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), types)))
    return failure();
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  return success();
}

LogicalResult mlir::gt::broadcastShapes(ArrayRef<int64_t> a,
                                        ArrayRef<int64_t> b,
                                        SmallVectorImpl<int64_t> &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x == 1) {
      result[i] = y;
    } else if (y == 1) {
      result[i] = x;
    } else if (ShapedType::isDynamic(x)) {
      result[i] = y;
    } else if (ShapedType::isDynamic(y) || x == y) {
      result[i] = x;
    } else {
      return failure();
    }
  }
  return success();
}

static std::string formatElementType(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isInteger(32))
    return "i32";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

std::string mlir::gt::formatType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return formatElementType(type);
  std::string s = formatElementType(tensor.getElementType());
  if (tensor.getRank() == 0)
    return s;
  s += "[";
  llvm::interleave(
      tensor.getShape(),
      [&](int64_t d) {
        s += ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
      },
      [&] { s += ", "; });
  return s + "]";
}

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Normalizes `axis` against `rank` (negative counts from the end).
static std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

/// Reads a BoolAttr that may be absent (defaults are not yet filled in while
/// parsing, when type inference runs).
static bool flag(BoolAttr attr) { return attr && attr.getValue(); }

static bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks that every operand's element type is `elementType`.
static LogicalResult checkSameElementType(std::optional<Location> loc,
                                          StringRef opName, Value first,
                                          ValueRange others) {
  Type elementType = tensorOf(first).getElementType();
  for (Value other : others)
    if (other && tensorOf(other).getElementType() != elementType)
      return emitOptionalError(loc, "'", opName,
                               "' needs one element type, got ",
                               formatType(first.getType()), " and ",
                               formatType(other.getType()),
                               "; insert a cast()");
  return success();
}

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

template <typename DataOp>
static LogicalResult verifyDataOp(DataOp op) {
  if (op.getName().empty())
    return op.emitOpError("needs a non-empty name");
  return success();
}

LogicalResult InputOp::verify() { return verifyDataOp(*this); }
LogicalResult LabelOp::verify() { return verifyDataOp(*this); }

/// Whether a parameter's name is one a checkpoint keeps for itself: its
/// metadata ("__metadata__") and the optimizer's state ("optimizer.*").
static bool reservedParamName(StringRef name) {
  return name == "__metadata__" || name.starts_with("optimizer.");
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  SmallVector<StringRef> stored = {getName()};
  if (std::optional<ArrayAttr> parts = getParts())
    for (Attribute part : *parts)
      if (auto s = dyn_cast<StringAttr>(part))
        stored.push_back(s.getValue());
  for (StringRef name : stored)
    if (reservedParamName(name))
      return emitOpError("name '")
             << name
             << "' is a checkpoint's own (its metadata, or the optimizer "
                "state under 'optimizer.'), so the parameter could not be "
                "saved; rename it";
  if (!getType().hasStaticShape())
    return emitOpError("needs a static shape, got ") << getType();
  static const llvm::StringMap<unsigned> arity = {
      {"zeros", 0}, {"ones", 0}, {"constant", 1}, {"normal", 2},
      {"uniform", 2}};
  auto it = arity.find(getInit());
  if (it == arity.end())
    return emitOpError("has unknown initializer '")
           << getInit()
           << "'; expected zeros, ones, constant, normal or uniform";
  if (getArgs().size() != it->second)
    return emitOpError("initializer '")
           << getInit() << "' takes " << it->second << " arguments, got "
           << getArgs().size();
  if (getInit() == "normal" &&
      cast<FloatAttr>(getArgs()[1]).getValueAsDouble() < 0)
    return emitOpError("normal initializer needs std >= 0");
  if (getInit() == "uniform" &&
      cast<FloatAttr>(getArgs()[0]).getValueAsDouble() >
          cast<FloatAttr>(getArgs()[1]).getValueAsDouble())
    return emitOpError("uniform initializer needs low <= high");
  std::optional<ArrayAttr> parts = getParts(), rows = getPartRows();
  if (!parts && !rows)
    return success();
  if (!parts || !rows || parts->size() != rows->size() || parts->size() < 2)
    return emitOpError("a packed parameter needs 'parts' and 'part_rows' of "
                       "one length, at least 2");
  if (getType().getRank() < 1)
    return emitOpError("a packed parameter needs a dimension 0 to pack along");
  int64_t total = 0;
  llvm::StringSet<> names;
  for (auto [name, n] : llvm::zip(*parts, *rows)) {
    StringRef part = cast<StringAttr>(name).getValue();
    int64_t r = cast<IntegerAttr>(n).getInt();
    if (part.empty() || !names.insert(part).second)
      return emitOpError("a packed parameter's parts need distinct, "
                         "non-empty names");
    if (r < 1)
      return emitOpError("part '") << part << "' needs at least one row";
    total += r;
  }
  if (total != getType().getDimSize(0))
    return emitOpError("the parts' rows add up to ")
           << total << ", not dimension 0 of " << getType();
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(loc, "constant value must be a ranked tensor");
  types.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult PositionsOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get(
      {static_cast<int64_t>(adaptor.getLength())}, IntegerType::get(ctx, 32)));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult inferBinary(StringRef opName, std::optional<Location> loc,
                                 Value lhs, Value rhs,
                                 SmallVectorImpl<Type> &types) {
  if (failed(checkSameElementType(loc, opName, lhs, rhs)))
    return failure();
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(tensorOf(lhs).getShape(),
                             tensorOf(rhs).getShape(), shape)))
    return emitOptionalError(loc, "shapes ", formatType(lhs.getType()),
                             " and ", formatType(rhs.getType()),
                             " cannot be broadcast together for '", opName,
                             "'");
  types.push_back(
      RankedTensorType::get(shape, tensorOf(lhs).getElementType()));
  return success();
}

#define GT_BINARY_INFER(OP, NAME)                                              \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferBinary(NAME, loc, adaptor.getLhs(), adaptor.getRhs(), types);  \
  }
GT_BINARY_INFER(AddOp, "add")
GT_BINARY_INFER(SubOp, "sub")
GT_BINARY_INFER(MulOp, "mul")
GT_BINARY_INFER(DivOp, "div")
#undef GT_BINARY_INFER


LogicalResult SoftmaxOp::verify() {
  if (!normalizeAxis(getAxis(), getType().getRank()))
    return emitOpError("axis ")
           << getAxis() << " is out of range for " << formatType(getType());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Value a = adaptor.getA(), b = adaptor.getB();
  if (failed(checkSameElementType(loc, "matmul", a, b)))
    return failure();
  ArrayRef<int64_t> as = tensorOf(a).getShape(), bs = tensorOf(b).getShape();
  if (as.size() < 2 || bs.size() < 2)
    return emitOptionalError(loc, "'matmul' needs operands of rank >= 2, got ",
                             formatType(a.getType()), " and ",
                             formatType(b.getType()));
  size_t ra = as.size(), rb = bs.size();
  bool ta = flag(adaptor.getTransposeAAttr());
  bool tb = flag(adaptor.getTransposeBAttr());
  int64_t m = ta ? as[ra - 1] : as[ra - 2];
  int64_t ka = ta ? as[ra - 2] : as[ra - 1];
  int64_t kb = tb ? bs[rb - 1] : bs[rb - 2];
  int64_t n = tb ? bs[rb - 2] : bs[rb - 1];
  if (!dimsCompatible(ka, kb))
    return emitOptionalError(
        loc, "'matmul' contraction sizes differ: ", formatType(a.getType()),
        (ta ? " (transposed)" : ""), " has ", ka, ", ",
        formatType(b.getType()),
        (tb ? " (transposed)" : ""), " has ", kb);
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(as.drop_back(2), bs.drop_back(2), shape)))
    return emitOptionalError(loc, "'matmul' batch dimensions of ",
                             formatType(a.getType()), " and ",
                             formatType(b.getType()),
                             " cannot be broadcast together");
  shape.push_back(m);
  shape.push_back(n);
  types.push_back(RankedTensorType::get(shape, tensorOf(a).getElementType()));
  return success();
}

namespace {
/// Folds a transpose of the last two dimensions into the matmul's flags:
/// `matmul(a, transpose(b))` becomes `matmul(a, b) {transpose_b}`.
struct FoldTransposeIntoMatmul : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool swapsLastTwo(TransposeOp t) {
    auto perm = t.getPermutation().getValue();
    size_t rank = perm.size();
    if (rank < 2)
      return false;
    for (size_t i = 0; i < rank; ++i) {
      int64_t want = i == rank - 2 ? rank - 1 : i == rank - 1 ? rank - 2 : i;
      if (cast<IntegerAttr>(perm[i]).getInt() != want)
        return false;
    }
    return true;
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto ta = op.getA().getDefiningOp<TransposeOp>();
    auto tb = op.getB().getDefiningOp<TransposeOp>();
    bool foldA = ta && swapsLastTwo(ta);
    bool foldB = tb && swapsLastTwo(tb);
    if (!foldA && !foldB)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (foldA) {
        op.getAMutable().assign(ta.getInput());
        op.setTransposeA(!op.getTransposeA());
      }
      if (foldB) {
        op.getBMutable().assign(tb.getInput());
        op.setTransposeB(!op.getTransposeB());
      }
    });
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Value x = adaptor.getInput(), w = adaptor.getWeight(), b = adaptor.getBias();
  if (failed(checkSameElementType(loc, "linear", x, {w, b})))
    return failure();
  ArrayRef<int64_t> xs = tensorOf(x).getShape(), ws = tensorOf(w).getShape();
  if (xs.empty())
    return emitOptionalError(loc, "'linear' input must have rank >= 1, got ",
                             formatType(x.getType()));
  if (ws.size() != 2)
    return emitOptionalError(loc, "'linear' weight must be [out, in], got ",
                             formatType(w.getType()));
  if (!dimsCompatible(xs.back(), ws[1]))
    return emitOptionalError(loc, "'linear' input ", formatType(x.getType()),
                             " has ", xs.back(), " features but weight ",
                             formatType(w.getType()), " expects ", ws[1]);
  if (b) {
    ArrayRef<int64_t> bs = tensorOf(b).getShape();
    if (bs.size() != 1 || !dimsCompatible(bs[0], ws[0]))
      return emitOptionalError(loc, "'linear' bias must be [", ws[0],
                               "], got ", formatType(b.getType()));
  }
  SmallVector<int64_t> shape(xs.drop_back());
  shape.push_back(ws[0]);
  types.push_back(RankedTensorType::get(shape, tensorOf(x).getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, attention, losses
//===----------------------------------------------------------------------===//

/// gt.layernorm's and gt.rmsnorm's result: the input's type, with `[D]`
/// parameters (weight, and the bias) for input rows of D, and epsilon > 0.
static LogicalResult inferNormType(std::optional<Location> loc, StringRef name,
                                   Value x, ArrayRef<Value> params,
                                   FloatAttr epsilon,
                                   SmallVectorImpl<Type> &types) {
  if (failed(checkSameElementType(loc, name, x, params)))
    return failure();
  ArrayRef<int64_t> xs = tensorOf(x).getShape();
  if (xs.empty())
    return emitOptionalError(loc, "'", name, "' input must have rank >= 1");
  for (Value p : params) {
    ArrayRef<int64_t> ps = tensorOf(p).getShape();
    if (ps.size() != 1 || !dimsCompatible(ps[0], xs.back()))
      return emitOptionalError(
          loc, "'", name, "' ",
          params.size() == 1 ? "weight" : "weight and bias", " must be [",
          xs.back(), "] for input ", formatType(x.getType()), ", got ",
          formatType(p.getType()));
  }
  if (epsilon && !(epsilon.getValueAsDouble() > 0))
    return emitOptionalError(loc, "'", name, "' epsilon must be > 0");
  types.push_back(x.getType());
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferNormType(loc, "layernorm", adaptor.getInput(),
                       {adaptor.getWeight(), adaptor.getBias()},
                       adaptor.getEpsilonAttr(), types);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferNormType(loc, "rmsnorm", adaptor.getInput(),
                       {adaptor.getWeight()}, adaptor.getEpsilonAttr(), types);
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError("p must be in [0, 1), got ") << p;
  return success();
}

/// Whether two shapes are equal where both are known.
static bool compatibleDims(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y)
      return false;
  return true;
}

LogicalResult RopeOp::verify() {
  RankedTensorType x = getInput().getType();
  if (x.getRank() < 3)
    return emitOpError("input ")
           << formatType(x) << " must be [..., T, heads, head_dim] (rank >= 3)";
  int64_t d = x.getDimSize(x.getRank() - 1);
  if (ShapedType::isDynamic(d) || d % 2 != 0)
    return emitOpError("head_dim ")
           << (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d))
           << " of " << formatType(x)
           << " must be a fixed even size (features turn in pairs)";
  double theta = getTheta().convertToDouble();
  if (!(theta >= std::numeric_limits<float>::min() &&
        theta <= std::numeric_limits<float>::max()))
    return emitOpError("theta must be a positive normal f32 (the kernels "
                       "turn in f32), got ")
           << theta;
  int64_t heads = x.getDimSize(x.getRank() - 2);
  if (std::optional<uint64_t> n = getRotated();
      n && (ShapedType::isDynamic(heads) || int64_t(*n) > heads))
    return emitOpError("rotated = ")
           << *n << " must be at most the heads of " << formatType(x);
  if (getRotated() && getPositions())
    return emitOpError("rotated takes no positions (a training plan's "
                       "packed projection)");
  if (Value positions = getPositions()) {
    auto pos = cast<RankedTensorType>(positions.getType());
    if (x.getRank() != 4 || pos.getRank() != 2 ||
        !compatibleDims(pos.getShape(), x.getShape().take_front(2)))
      return emitOpError("positions ")
             << formatType(pos) << " must be [B, T] of the input "
             << formatType(x) << " [B, T, heads, head_dim]";
  }
  return success();
}

LogicalResult StateOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  if (!getType().hasStaticShape())
    return emitOpError("type ")
           << formatType(getType()) << " must be static (a buffer made once)";
  return success();
}

/// Checks a KV cache [B, Tmax, Hkv, d] against a window [B, S, heads, d]
/// (`heads` a multiple of Hkv) and its positions [B, S].
static LogicalResult verifyCacheWindow(Operation *op, RankedTensorType cache,
                                       RankedTensorType window,
                                       RankedTensorType positions) {
  if (cache.getRank() != 4 || window.getRank() != 4)
    return op->emitOpError("the cache ")
           << formatType(cache) << " and the window " << formatType(window)
           << " must be [B, T, heads, head_dim]";
  ArrayRef<int64_t> c = cache.getShape(), w = window.getShape();
  if (!compatibleDims({c[0], c[3]}, {w[0], w[3]}) ||
      (!ShapedType::isDynamic(c[2]) && !ShapedType::isDynamic(w[2]) &&
       (c[2] == 0 || w[2] % c[2] != 0)))
    return op->emitOpError("the window ")
           << formatType(window) << " does not fit the cache "
           << formatType(cache)
           << ": the batch and head size must match, and the cache's heads "
              "divide the window's";
  if (positions.getRank() != 2 ||
      !compatibleDims(positions.getShape(), w.take_front(2)))
    return op->emitOpError("positions ")
           << formatType(positions) << " must be [B, S] of the window "
           << formatType(window);
  return success();
}

LogicalResult CacheUpdateOp::verify() {
  if (!getCache().getDefiningOp<StateOp>())
    return emitOpError("writes a gt.state in place; its cache operand is not "
                       "one");
  if (getUpdate().getType().getRank() == 4 &&
      getCache().getType().getRank() == 4 &&
      getUpdate().getType().getDimSize(2) != getCache().getType().getDimSize(2))
    return emitOpError("the update ")
           << formatType(getUpdate().getType()) << " and the cache "
           << formatType(getCache().getType()) << " differ in heads";
  return verifyCacheWindow(*this, getCache().getType(), getUpdate().getType(),
                           getPositions().getType());
}

LogicalResult CachedAttentionOp::verify() {
  if (getKCache().getType() != getVCache().getType())
    return emitOpError("the key cache ")
           << formatType(getKCache().getType()) << " and the value cache "
           << formatType(getVCache().getType()) << " differ";
  return verifyCacheWindow(*this, getKCache().getType(), getQ().getType(),
                           getPositions().getType());
}

/// The result types of attention on `inputs` (packed qkv, or q, k, v):
/// the output and the [B, H, T] log-sum-exp.
static LogicalResult inferAttention(std::optional<Location> loc,
                                    ValueRange inputs, int64_t heads,
                                    SmallVectorImpl<Type> &types) {
  if (inputs.size() == 3) {
    RankedTensorType q = tensorOf(inputs[0]), k = tensorOf(inputs[1]),
                     v = tensorOf(inputs[2]);
    ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape();
    bool fixed = q.getRank() == 4 && k.getRank() == 4 &&
                 !ShapedType::isDynamic(qs[1]) &&
                 !ShapedType::isDynamic(qs[2]) &&
                 !ShapedType::isDynamic(qs[3]) && !ShapedType::isDynamic(ks[2]);
    if (!fixed || k != v || q.getElementType() != k.getElementType() ||
        ks[0] != qs[0] || ks[1] != qs[1] || ks[3] != qs[3] || ks[2] <= 0 ||
        qs[2] % ks[2] != 0)
      return emitOptionalError(
          loc,
          "'attention' needs q [B, T, H, d] and k, v [B, T, Hkv, d] of one "
          "dtype with Hkv dividing H and T, H, d fixed, got ",
          formatType(q), ", ", formatType(k), ", ", formatType(v));
    if (heads != qs[2])
      return emitOptionalError(loc, "'attention' heads = ", heads,
                               " must be q's heads ", qs[2]);
    types.push_back(q);
    types.push_back(RankedTensorType::get({qs[0], heads, qs[1]},
                                          Float32Type::get(q.getContext())));
    return success();
  }
  if (inputs.size() != 1)
    return emitOptionalError(loc,
                             "'attention' takes packed qkv or q, k, v, "
                             "got ",
                             inputs.size(), " operands");
  RankedTensorType qkv = tensorOf(inputs[0]);
  ArrayRef<int64_t> s = qkv.getShape();
  if (s.size() == 4) {
    // Packed heads: H query heads, then Hkv key and Hkv value heads.
    int64_t all = s[2], kv = (all - heads) / 2;
    if (ShapedType::isDynamic(all) || ShapedType::isDynamic(s[3]) ||
        heads <= 0 || kv <= 0 || heads + 2 * kv != all || heads % kv != 0)
      return emitOptionalError(
          loc, "'attention' needs packed heads [B, T, H + 2 Hkv, d] with ",
          "Hkv dividing H = ", heads, ", got ", formatType(qkv));
    types.push_back(
        RankedTensorType::get({s[0], s[1], heads, s[3]}, qkv.getElementType()));
    types.push_back(RankedTensorType::get({s[0], heads, s[1]},
                                          Float32Type::get(qkv.getContext())));
    return success();
  }
  if (s.size() != 3)
    return emitOptionalError(loc,
                             "'attention' needs qkv of shape [B, T, 3D] "
                             "or [B, T, H + 2 Hkv, d], got ",
                             formatType(qkv));
  if (ShapedType::isDynamic(s[2]) || s[2] % 3 != 0)
    return emitOptionalError(loc, "'attention' qkv's last dimension must be "
                                  "a static multiple of 3, got ",
                             formatType(qkv));
  int64_t d = s[2] / 3;
  if (heads <= 0 || d % heads != 0)
    return emitOptionalError(loc, "'attention' heads = ", heads,
                             " must be positive and divide the model width ",
                             d);
  types.push_back(
      RankedTensorType::get({s[0], s[1], d}, qkv.getElementType()));
  types.push_back(RankedTensorType::get({s[0], heads, s[1]},
                                        Float32Type::get(qkv.getContext())));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferAttention(loc, adaptor.getInputs(), adaptor.getHeads(), types);
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location>,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  for (Value x : adaptor.getInputs())
    types.push_back(x.getType());
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType table = tensorOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "'embedding' table must be [V, D], got ",
                             formatType(table));
  SmallVector<int64_t> shape(tensorOf(adaptor.getIndices()).getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto positions = getIndices().getDefiningOp<PositionsOp>();
  RankedTensorType table = tensorOf(getTable());
  if (!positions || table.getRank() != 2) // the rank: inferReturnTypes's
    return success();
  int64_t rows = table.getDimSize(0);
  if (!ShapedType::isDynamic(rows) &&
      positions.getLength() > static_cast<uint64_t>(rows))
    return emitOpError("looks up positions 0 to ")
           << positions.getLength() - 1 << " in a table of " << rows
           << " rows; the table needs at least " << positions.getLength()
           << " rows (one a position)";
  return success();
}

namespace {
/// Looking up the positions 0, ..., N-1 in a table of N rows reads the whole
/// table, in order: the table itself (no gather kernel; its gradient is
/// summed directly instead of scattered into a zeroed buffer). A table of
/// more rows keeps the look-up: its leading slice would be a copy kernel
/// and its gradient a pad, no fewer kernels.
struct LookUpPositions : OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getIndices().getDefiningOp<PositionsOp>() ||
        op.getType() != op.getTable().getType())
      return failure();
    rewriter.replaceOp(op, op.getTable());
    return success();
  }
};
} // namespace

void EmbeddingOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<LookUpPositions>(context);
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *ctx,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  RankedTensorType logits = tensorOf(adaptor.getLogits());
  RankedTensorType labels = tensorOf(adaptor.getLabels());
  bool ok = logits.getRank() >= 1 && labels.getRank() == logits.getRank() - 1;
  for (int64_t i = 0; ok && i < labels.getRank(); ++i)
    ok = dimsCompatible(labels.getDimSize(i), logits.getDimSize(i));
  if (!ok)
    return emitOptionalError(loc, "'cross_entropy' labels must have the "
                                  "logits' shape without the class "
                                  "dimension: logits ",
                             formatType(logits), ", labels ",
                             formatType(labels));
  types.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and shape manipulation
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(StringRef opName, std::optional<Location> loc,
                                 Value input, ArrayAttr axes, bool keepdim,
                                 SmallVectorImpl<Type> &types) {
  RankedTensorType type = tensorOf(input);
  if (!axes)
    axes = ArrayAttr::get(input.getContext(), {});
  int64_t rank = type.getRank();
  llvm::SmallSet<int64_t, 4> reduced;
  for (Attribute a : axes) {
    auto axis = normalizeAxis(cast<IntegerAttr>(a).getInt(), rank);
    if (!axis)
      return emitOptionalError(loc, "'", opName, "' axis ",
                               cast<IntegerAttr>(a).getInt(),
                               " is out of range for ", formatType(type));
    if (!reduced.insert(*axis).second)
      return emitOptionalError(loc, "'", opName, "' axis ", *axis,
                               " appears twice");
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    bool r = axes.empty() || reduced.contains(i);
    if (!r)
      shape.push_back(type.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult SumOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  return inferReduce("sum", loc, adaptor.getInput(), adaptor.getAxesAttr(),
                     flag(adaptor.getKeepdimAttr()), types);
}

LogicalResult MeanOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  return inferReduce("mean", loc, adaptor.getInput(), adaptor.getAxesAttr(),
                     flag(adaptor.getKeepdimAttr()), types);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType type = tensorOf(adaptor.getInput());
  ArrayAttr perm = adaptor.getPermutation();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(perm.size()) != rank)
    return emitOptionalError(loc, "'transpose' permutation has ", perm.size(),
                             " entries for ", formatType(type));
  SmallVector<int64_t> shape;
  llvm::SmallSet<int64_t, 4> seen;
  for (Attribute a : perm) {
    int64_t p = cast<IntegerAttr>(a).getInt();
    if (p < 0 || p >= rank || !seen.insert(p).second)
      return emitOptionalError(loc, "'transpose' permutation is not a "
                                    "permutation of 0..",
                               rank - 1);
    shape.push_back(type.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, a] : llvm::enumerate(getPermutation()))
    if (cast<IntegerAttr>(a).getInt() != static_cast<int64_t>(i))
      return {};
  return getInput();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  int64_t dynIn = llvm::count_if(in.getShape(), ShapedType::isDynamic);
  int64_t dynOut = llvm::count_if(out.getShape(), ShapedType::isDynamic);
  if (dynIn == 0 && dynOut == 0) {
    if (in.getNumElements() != out.getNumElements())
      return emitOpError("cannot reshape ")
             << formatType(in) << " (" << in.getNumElements()
             << " elements) to " << formatType(out) << " ("
             << out.getNumElements() << " elements)";
    return success();
  }
  if ((dynIn == 0) != (dynOut == 0) || dynOut > 1)
    return emitOpError("cannot reshape ")
           << formatType(in) << " to " << formatType(out)
           << ": a dynamic input size needs exactly one dynamic result "
              "dimension";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  SmallVector<int64_t> shape;
  if (in.getRank() > out.getRank() ||
      failed(broadcastShapes(in.getShape(), out.getShape(), shape)) ||
      ArrayRef<int64_t>(shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << formatType(in) << " to " << formatType(out);
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

LogicalResult SumToOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  SmallVector<int64_t> shape;
  if (out.getRank() > in.getRank() ||
      failed(broadcastShapes(out.getShape(), in.getShape(), shape)) ||
      ArrayRef<int64_t>(shape) != in.getShape())
    return emitOpError("cannot sum ")
           << formatType(in) << " to " << formatType(out)
           << ": the result must broadcast to the input";
  return success();
}

OpFoldResult SumToOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

/// The offsets of a gt.pad or gt.slice, one a dimension (zeros when absent).
static SmallVector<int64_t> offsetsOf(std::optional<ArrayAttr> attr,
                                      int64_t rank) {
  SmallVector<int64_t> offsets(rank, 0);
  if (attr && static_cast<int64_t>(attr->size()) == rank)
    for (auto [i, a] : llvm::enumerate(*attr))
      offsets[i] = cast<IntegerAttr>(a).getInt();
  return offsets;
}

/// Checks that `small` lies inside `big` at `offsets`, dimension by
/// dimension (same rank, static sizes).
static LogicalResult verifyFits(Operation *op, RankedTensorType small,
                                RankedTensorType big,
                                std::optional<ArrayAttr> offsetsAttr,
                                StringRef what) {
  if (offsetsAttr && static_cast<int64_t>(offsetsAttr->size()) != big.getRank())
    return op->emitOpError("has ")
           << offsetsAttr->size() << " offsets for rank " << big.getRank();
  SmallVector<int64_t> offsets = offsetsOf(offsetsAttr, big.getRank());
  // A dimension both leave dynamic (the batch) is whole, at offset 0.
  auto whole = [&](int64_t i) {
    return small.isDynamicDim(i) && big.isDynamicDim(i) && offsets[i] == 0;
  };
  bool ok = small.getRank() == big.getRank();
  for (int64_t i = 0; ok && i < small.getRank(); ++i)
    ok = whole(i) || (!small.isDynamicDim(i) && !big.isDynamicDim(i) &&
                      small.getDimSize(i) <= big.getDimSize(i));
  if (!ok)
    return op->emitOpError("cannot ")
           << what << " " << formatType(op->getOperand(0).getType()) << " to "
           << formatType(op->getResult(0).getType())
           << ": the ranks must agree and every dimension be static and "
           << (what == "pad" ? "no smaller" : "no larger")
           << " (or dynamic in both, whole)";
  for (int64_t i = 0; i < big.getRank(); ++i)
    if (!whole(i) && (offsets[i] < 0 ||
                      offsets[i] + small.getDimSize(i) > big.getDimSize(i)))
      return op->emitOpError("offset ")
             << offsets[i] << " of dimension " << i << " puts "
             << small.getDimSize(i) << " elements outside "
             << big.getDimSize(i);
  return success();
}

LogicalResult PadOp::verify() {
  return verifyFits(*this, getInput().getType(), getType(), getOffsets(),
                    "pad");
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult SliceOp::verify() {
  return verifyFits(*this, getType(), getInput().getType(), getOffsets(),
                    "slice");
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // slice(pad(x)) back to x's shape, at the same offsets, is x.
  if (auto pad = getInput().getDefiningOp<PadOp>())
    if (pad.getInput().getType() == getType() &&
        offsetsOf(pad.getOffsets(), getType().getRank()) ==
            offsetsOf(getOffsets(), getType().getRank()))
      return pad.getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Fusion regions
//===----------------------------------------------------------------------===//

YieldOp FusedOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

/// An epilogue region: one op with the GT_CastEpilogue trait and the gt.cast of
/// its result, which it yields.
static LogicalResult verifyEpilogueRegion(FusedOp fused, Block &body,
                                          YieldOp yield) {
  auto ops = body.without_terminator();
  Operation &first = *ops.begin();
  auto cast = dyn_cast<CastOp>(first.getNextNode());
  if (std::distance(ops.begin(), ops.end()) != 2 ||
      !first.hasTrait<OpTrait::gt::CastEpilogue>() ||
      first.getNumResults() != 1 || !cast ||
      cast.getInput() != first.getResult(0) ||
      yield.getValues() != ValueRange(cast.getResult()))
    return fused.emitOpError("an epilogue region is one op with the "
                             "GT_CastEpilogue trait and the gt.cast of its "
                             "result, which it yields");
  return success();
}

/// A norm region: one gt.layernorm, gt.rmsnorm or their gradient and
/// elementwise ops over its rows; a backward one may end with the column sums
/// of a value it computes.
static LogicalResult verifyNormRegion(FusedOp fused, Block &body,
                                      YieldOp yield) {
  auto isNorm = [](Operation &op) {
    return isa<LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp>(op);
  };
  auto ops = body.without_terminator();
  auto it = llvm::find_if(ops, isNorm);
  if (it == ops.end() || std::count_if(ops.begin(), ops.end(), isNorm) != 1)
    return fused.emitOpError("a norm region has one gt.layernorm, "
                             "gt.rmsnorm or their gradient");
  Type rows = it->getOperand(0).getType();
  ArrayRef<int64_t> shape = cast<ShapedType>(rows).getShape();
  // A backward region may end with the column sums of a value it computes
  // (a linear's bias gradient; gt-fuse's addBiasGradient) and their cast.
  Operation *colSum = nullptr;
  for (Operation &op : ops) {
    if (isNorm(op))
      continue;
    if (auto sum = dyn_cast<SumToOp>(op)) {
      Operation *from = sum.getInput().getDefiningOp();
      if (colSum || !isa<LayerNormGradOp, RmsNormGradOp>(*it) || !from ||
          from->getBlock() != &body ||
          sum.getType().getShape() != shape.take_back())
        return op.emitOpError("in a norm region sums the columns of a "
                              "value the backward region computes, once");
      colSum = &op;
      continue;
    }
    if (auto c = dyn_cast<CastOp>(op);
        c && colSum && c.getInput() == colSum->getResult(0))
      continue;
    if (!op.hasTrait<OpTrait::gt::Elementwise>() ||
        cast<ShapedType>(op.getResult(0).getType()).getShape() != shape)
      return op.emitOpError("in a norm region is an elementwise op over "
                            "the normalized rows ")
             << rows;
  }
  return success();
}

/// A loss region: [a cast to the logits,] the cross-entropy and its gradient[,
/// the gradient's cast]; or an evaluation's.
static LogicalResult verifyLossRegion(FusedOp fused, Block &body,
                                      YieldOp yield) {
  // [cast to the logits,] cross_entropy, cross_entropy_grad of the same
  // logits and labels[, cast of the gradient]; yields the loss and the
  // gradient. An evaluation's: [cast to the logits,] cross_entropy[,
  // accuracy of the same (16-bit) logits and labels], at least one of the
  // two others; yields the loss[ and the accuracy].
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto accuracy = ops.empty() ? AccuracyOp() : dyn_cast<AccuracyOp>(ops.back());
  if (accuracy)
    ops.pop_back();
  size_t i = 0;
  auto widening = ops.size() > i ? dyn_cast<CastOp>(ops[i]) : CastOp();
  i += widening ? 1 : 0;
  auto ce = ops.size() > i ? dyn_cast<CrossEntropyOp>(ops[i]) : nullptr;
  auto grad =
      ops.size() > i + 1 ? dyn_cast<CrossEntropyGradOp>(ops[i + 1]) : nullptr;
  auto narrowing = ops.size() > i + 2 ? dyn_cast<CastOp>(ops[i + 2]) : CastOp();
  bool lossOnly = ce && (widening || accuracy) && ops.size() == i + 1;
  if (!ce ||
      (!lossOnly &&
       (!grad || accuracy || ops.size() != i + 2 + (narrowing ? 1 : 0) ||
        grad.getLogits() != ce.getLogits() ||
        grad.getLabels() != ce.getLabels() ||
        (narrowing && narrowing.getInput() != grad.getResult()))) ||
      (widening && widening.getResult() != ce.getLogits()) ||
      (accuracy && (accuracy.getLabels() != ce.getLabels() ||
                    accuracy.getLogits() !=
                        (widening ? widening.getInput() : ce.getLogits()))))
    return fused.emitOpError(
        "a loss region is [a gt.cast to the logits,] "
        "gt.cross_entropy, the gt.cross_entropy_grad of the "
        "same logits and labels[, and the gt.cast of the "
        "gradient], or [a gt.cast to the logits,] gt.cross_entropy[ and the "
        "gt.accuracy of the same logits and labels]");
  if (lossOnly) {
    SmallVector<Value> results = {ce.getResult()};
    if (accuracy)
      results.push_back(accuracy.getResult());
    if (yield.getValues() != ValueRange(results))
      return fused.emitOpError("a loss region without a gradient yields the "
                               "loss[ and the accuracy]");
    return success();
  }
  Value dx = narrowing ? narrowing.getResult() : grad.getResult();
  if (yield.getValues() != ValueRange{ce.getResult(), dx})
    return fused.emitOpError("a loss region yields the loss and the gradient");
  return success();
}

/// A scatter_add region: gt.embedding_grad and the gt.add of its result to a
/// region input.
static LogicalResult verifyScatterAddRegion(FusedOp fused, Block &body,
                                            YieldOp yield) {
  // gt.embedding_grad and the gt.add of its result to a region input of
  // the same type (no broadcasting); yields the sum.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto scatter =
      ops.size() == 2 ? dyn_cast<EmbeddingGradOp>(ops[0]) : EmbeddingGradOp();
  auto add = ops.size() == 2 ? dyn_cast<AddOp>(ops[1]) : AddOp();
  Value other;
  if (scatter && add)
    other = add.getLhs() == scatter.getResult()   ? add.getRhs()
            : add.getRhs() == scatter.getResult() ? add.getLhs()
                                                  : Value();
  if (!other || !isa<BlockArgument>(other) ||
      other.getType() != scatter.getType() ||
      add.getType() != scatter.getType())
    return fused.emitOpError(
        "a scatter_add region is a gt.embedding_grad and "
        "the gt.add of its result to a region input of its "
        "type");
  if (yield.getValues() != ValueRange(add.getResult()))
    return fused.emitOpError("a scatter_add region yields the sum");
  return success();
}

/// A classifier region: the logits' GEMM, the cross-entropy and its gradient,
/// the GEMMs reading it.
static LogicalResult verifyClassifierRegion(FusedOp fused, Block &body,
                                            YieldOp yield) {
  // The logits' GEMM, [a widening cast,] the cross-entropy and its
  // gradient, [casts and reshapes of the gradient,] the GEMMs reading it.
  // The logits and their gradient stay inside (chunks of rows at a time).
  // A small head also has the column sums of values it computes (bias
  // gradients) and the ReLU gradient of dh.
  auto ops = body.without_terminator();
  Operation &first = *ops.begin();
  CrossEntropyOp ce;
  CrossEntropyGradOp grad;
  auto computedInside = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->getBlock() == &body;
  };
  for (Operation &op : ops) {
    if (auto c = dyn_cast<CrossEntropyOp>(op); c && !ce) {
      ce = c;
    } else if (auto g = dyn_cast<CrossEntropyGradOp>(op); g && !grad) {
      grad = g;
    } else if (auto sum = dyn_cast<SumToOp>(op)) {
      auto in = cast<ShapedType>(sum.getInput().getType());
      if (!computedInside(sum.getInput()) ||
          sum.getType().getShape() != in.getShape().take_back())
        return op.emitOpError("in a classifier region sums the columns of "
                              "a value the region computes");
    } else if (auto ag = dyn_cast<ActivationGradOp>(op)) {
      Operation *gemm = ag.getGrad().getDefiningOp();
      if (ag.getKind() != "relu" || !computedInside(ag.getGrad()) ||
          !gemm->hasTrait<OpTrait::gt::Contraction>())
        return op.emitOpError("in a classifier region is the ReLU "
                              "gradient of a GEMM's result");
    } else if (!isa<CastOp, ReshapeOp>(op) &&
               !op.hasTrait<OpTrait::gt::Contraction>()) {
      return op.emitOpError("cannot be part of a classifier region: it is "
                            "not a GEMM, a cast, a reshape, the "
                            "cross-entropy, a column sum or a ReLU "
                            "gradient");
    }
  }
  Value logits = ce ? ce.getLogits() : Value();
  if (auto c = logits ? logits.getDefiningOp<CastOp>() : CastOp())
    logits = c.getInput();
  if (!first.hasTrait<OpTrait::gt::Contraction>() || !ce || !grad ||
      logits != first.getResult(0) || grad.getLogits() != ce.getLogits() ||
      grad.getLabels() != ce.getLabels())
    return fused.emitOpError(
        "a classifier region starts with the GEMM of the "
        "logits and has one gt.cross_entropy and the "
        "gt.cross_entropy_grad of the same logits and labels");
  if (!llvm::is_contained(yield.getValues(), ce.getResult()))
    return fused.emitOpError("a classifier region yields its loss");
  for (Value v : yield.getValues())
    if (v == logits || v == ce.getLogits() || v == grad.getResult())
      return fused.emitOpError(
          "a classifier region cannot yield the logits or "
          "their gradient: they exist a chunk of rows at a "
          "time");
  return success();
}

/// A gemm region: a GEMM and what cuBLASLt or gtc's small GEMM run in its
/// epilogue.
static LogicalResult verifyGemmRegion(FusedOp fused, Block &body,
                                      YieldOp yield) {
  auto ops = body.without_terminator();
  Operation &first = *ops.begin();
  if (!first.hasTrait<OpTrait::gt::Contraction>())
    return fused.emitOpError(
        "a gemm region starts with a GEMM (GT_Contraction)");
  for (Operation &op : llvm::drop_begin(ops)) {
    if (auto gelu = dyn_cast<GeluOp>(op); gelu && !gelu.getApproximate())
      return op.emitOpError("cannot run in a GEMM epilogue: cuBLASLt "
                            "computes the tanh approximation only");
    if (auto grad = dyn_cast<ActivationGradOp>(op);
        grad && !gtc::rt::gemmEpilogueGrad(grad.getKind()))
      return op.emitOpError("cannot run in a GEMM epilogue: only the "
                            "gradients of gelu_tanh (cuBLASLt) and relu "
                            "(gtc's small GEMM) do");
    // cuBLASLt's GELU epilogues keep the GELU's input (aux) when the region
    // yields it, and its gradient reads it.
    auto ag = dyn_cast<ActivationGradOp>(op);
    if ((ag && ag.getKind() == "gelu_tanh") ||
        (isa<GeluOp>(op) &&
         llvm::is_contained(yield.getValues(), op.getOperand(0)))) {
      auto aux = cast<ShapedType>(op.getOperand(0).getType());
      if (aux.hasStaticShape() && aux.getRank() >= 1 &&
          !gtc::rt::gemmAuxFits(aux.getShape().back()))
        return op.emitOpError("cannot run in a GEMM epilogue: cuBLASLt's "
                              "GELU epilogues need rows of a multiple of ")
               << gtc::rt::kGemmAuxAlign << " elements";
    }
    // The bias gradient of the GEMM's first operand (BGRADB), or the
    // column sums of a value the region computes (gtc's small GEMM).
    if (auto s = dyn_cast<SumToOp>(op)) {
      Operation *from = s.getInput().getDefiningOp();
      auto in = cast<ShapedType>(s.getInput().getType());
      bool columns = from && from->getBlock() == &body && from != &first &&
                     in.getRank() >= 2 &&
                     s.getType().getShape() == in.getShape().take_back();
      if (s.getInput() != first.getOperand(0) && !columns)
        return op.emitOpError("in a gemm region sums the GEMM's first "
                              "operand (the bias gradient) or the columns "
                              "of a value the epilogue computes");
    }
    // An addend (cuBLASLt's C): a value from outside, of the sum's type.
    if (auto add = dyn_cast<AddOp>(op)) {
      bool outside = false;
      for (Value v : add->getOperands())
        outside = outside || (isa<BlockArgument>(v) &&
                              cast<BlockArgument>(v).getOwner() == &body &&
                              v.getType() == add.getType());
      if (!outside)
        return op.emitOpError("in a gemm region adds one of the region's "
                              "inputs of the sum's type (cuBLASLt's C)");
    }
    if (!isa<CastOp, ReshapeOp, ReluOp, GeluOp, ActivationGradOp, SumToOp,
             AddOp>(op))
      return op.emitOpError("cannot run in a GEMM epilogue");
  }
  return success();
}

/// An elementwise or multi_tensor region: elementwise ops over one
/// iteration shape (each over its own inputs, multi_tensor), an elementwise
/// one possibly ending with the column sums of values it computes.
static LogicalResult verifyElementwiseRegion(FusedOp fused, Block &body,
                                             YieldOp yield) {
  bool multi = fused.getKind() == "multi_tensor";
  // The iteration shape is the first op's. An elementwise region may end
  // with the column sums of values it computes (sums over all rows to the
  // last dimension: gt-fuse's addColumnSums), each with the cast of its
  // result.
  auto ops = body.without_terminator();
  Operation *first = ops.empty() ? nullptr : &*ops.begin();
  Type iteration = multi || !first || first->getNumResults() != 1
                       ? fused.getResult(0).getType()
                       : first->getResult(0).getType();
  auto shape = cast<RankedTensorType>(iteration).getShape();
  llvm::SmallPtrSet<Operation *, 4> sums;
  for (Operation &op : body.without_terminator()) {
    if (auto sum = dyn_cast<SumToOp>(op); sum && !multi) {
      Operation *from = sum.getInput().getDefiningOp();
      if (!from || from->getBlock() != &body || sums.count(from) ||
          cast<ShapedType>(sum.getInput().getType()).getShape() != shape ||
          shape.size() < 2 || sum.getType().getShape() != shape.take_back())
        return op.emitOpError("in an elementwise region sums a value the "
                              "region computes over its rows, to its last "
                              "dimension");
      sums.insert(&op);
      continue;
    }
    if (auto c = dyn_cast<CastOp>(op);
        c && sums.count(c.getInput().getDefiningOp())) {
      sums.insert(&op);
      continue;
    }
    if (!sums.empty())
      return op.emitOpError("follows the column sums of its elementwise "
                            "region: only their casts may");
    if (!op.hasTrait<OpTrait::gt::Elementwise>())
      return op.emitOpError("cannot be fused elementwise: it is not "
                            "elementwise (GT_Elementwise)");
    if (multi) {
      // Independent ops, each over its own elements.
      for (Value v : op.getOperands())
        if (!isa<BlockArgument>(v) ||
            cast<ShapedType>(v.getType()).getShape() !=
                cast<ShapedType>(op.getResult(0).getType()).getShape())
          return op.emitOpError("in a multi_tensor region reads only region "
                                "inputs of its own shape");
      continue;
    }
    for (Type t : op.getResultTypes())
      if (cast<RankedTensorType>(t).getShape() != shape)
        return op.emitOpError("result shape differs from the fusion "
                              "region's iteration shape ")
               << iteration;
  }
  for (Value v : yield.getValues())
    if (isa<BlockArgument>(v))
      return fused.emitOpError("yields its own input; use the value directly");
  return success();
}

/// Why an attention_grad region's kernels do not apply.
static constexpr const char *kAttentionGradKernels =
    "an attention_grad region needs 16-bit q, k and v with heads of 64 or "
    "128 (the GPU kernels that turn dq and dk and sum dqkv as they store "
    "them)";

static LogicalResult verifyAttentionGradRegion(FusedOp fused, Block &body,
                                               YieldOp yield) {
  // gt.attention_grad of q, k and v, then the inverse ropes (without
  // positions, one theta and convention) of its dq and dk; yields their
  // results and dv, each once. Or, over packed heads (one input), the
  // gt.attention_grad, the inverse rope of the first H + Hkv heads of its
  // dqkv ([B, T, H + 2 Hkv, d]) or the sum of the columns of its dqkv
  // ([B, T, W]) over all rows with that sum's cast; yields the gradient
  // and the sum.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto at = [&](size_t i) {
    return i < ops.size() ? ops[i] : static_cast<Operation *>(nullptr);
  };
  auto grad = dyn_cast_or_null<AttentionGradOp>(at(0));
  auto isInverse = [](RopeOp r) {
    return r && r.getInverse() && !r.getPositions();
  };
  if (grad && grad.getInputs().size() == 1) {
    auto qkv = cast<RankedTensorType>(grad.getInputs()[0].getType());
    int64_t h = grad.getHeads();
    size_t next = 1;
    Value stored = grad.getResults()[0];
    if (auto rope = dyn_cast_or_null<RopeOp>(at(next))) {
      if (qkv.getRank() != 4 || !isInverse(rope) || rope.getInput() != stored ||
          rope.getRotated() != uint64_t(h + (qkv.getDimSize(2) - h) / 2))
        return fused.emitOpError(
            "an attention_grad region over packed heads turns the first H + "
            "Hkv heads of [B, T, H + 2 Hkv, d] by one inverse gt.rope "
            "(without positions)");
      stored = rope.getResult();
      ++next;
    }
    Value sum;
    if (auto s = dyn_cast_or_null<SumToOp>(at(next))) {
      auto type = cast<RankedTensorType>(stored.getType());
      if (s.getInput() != stored || type.getRank() != 3 ||
          s.getType().getShape() != type.getShape().take_back())
        return fused.emitOpError(
            "an attention_grad region sums the columns of a packed gradient "
            "[B, T, W] over all rows");
      sum = s.getResult();
      ++next;
      if (auto c = dyn_cast_or_null<CastOp>(at(next));
          c && c.getInput() == sum) {
        sum = c.getResult();
        ++next;
      }
    }
    if (next != ops.size() || next == 1)
      return fused.emitOpError(
          "an attention_grad region over packed heads is a gt.attention_grad, "
          "the inverse gt.rope of its gradient and the sum of the gradient's "
          "columns (with its cast), one of the two at least, in that order");
    int64_t headDim = qkv.getRank() == 4 ? qkv.getDimSize(3)
                                         : qkv.getDimSize(2) / (3 * h);
    if (!gtc::rt::attentionGradTakesRope(qkv.getElementTypeBitWidth(),
                                         headDim))
      return fused.emitOpError(kAttentionGradKernels);
    SmallVector<Value> yields(yield.getValues());
    SmallVector<Value> expected = {stored};
    if (sum)
      expected.push_back(sum);
    if (yields != expected)
      return fused.emitOpError("an attention_grad region over packed heads "
                               "yields the (turned) gradient and then its "
                               "column sums");
    return success();
  }
  auto ropeQ = ops.size() == 3 ? dyn_cast<RopeOp>(ops[1]) : RopeOp();
  auto ropeK = ops.size() == 3 ? dyn_cast<RopeOp>(ops[2]) : RopeOp();
  if (ops.size() != 3 || !grad || !ropeQ || !ropeK ||
      grad.getResults().size() != 3 ||
      ropeQ.getInput() != grad.getResults()[0] ||
      ropeK.getInput() != grad.getResults()[1] || !isInverse(ropeQ) ||
      !isInverse(ropeK) || ropeQ.getRotated() || ropeK.getRotated() ||
      ropeQ.getTheta() != ropeK.getTheta() ||
      ropeQ.getInterleaved() != ropeK.getInterleaved())
    return fused.emitOpError(
        "an attention_grad region is a gt.attention_grad of q, k and v and "
        "the inverse gt.rope (without positions, one theta and convention) "
        "of its dq and then its dk");
  auto q = cast<RankedTensorType>(grad.getInputs()[0].getType());
  if (!gtc::rt::attentionGradTakesRope(q.getElementTypeBitWidth(),
                                       q.getDimSize(q.getRank() - 1)))
    return fused.emitOpError(kAttentionGradKernels);
  SmallVector<Value> yields(yield.getValues());
  SmallVector<Value> expected = {ropeQ.getResult(), ropeK.getResult(),
                                 grad.getResults()[2]};
  if (yields.size() != 3 ||
      !std::is_permutation(yields.begin(), yields.end(), expected.begin()))
    return fused.emitOpError("an attention_grad region yields the turned dq "
                             "and dk and dv, each once");
  return success();
}

/// The region kinds of gt.fused and the verifier of each.
static const std::pair<StringRef, LogicalResult (*)(FusedOp, Block &, YieldOp)>
    kFusionKinds[] = {
        {"elementwise", verifyElementwiseRegion},
        {"multi_tensor", verifyElementwiseRegion},
        {"epilogue", verifyEpilogueRegion},
        {"gemm", verifyGemmRegion},
        {"norm", verifyNormRegion},
        {"loss", verifyLossRegion},
        {"classifier", verifyClassifierRegion},
        {"scatter_add", verifyScatterAddRegion},
        {"attention_grad", verifyAttentionGradRegion},
};

LogicalResult FusedOp::verify() {
  auto kind = llvm::find_if(
      kFusionKinds, [&](const auto &k) { return k.first == getKind(); });
  if (kind == std::end(kFusionKinds)) {
    auto diag = emitOpError("unknown fusion kind '")
                << getKind() << "'; expected ";
    for (size_t i = 0; i < std::size(kFusionKinds); ++i)
      diag << (i == 0                             ? ""
               : i + 1 == std::size(kFusionKinds) ? " or "
                                                  : ", ")
           << "'" << kFusionKinds[i].first << "'";
    return diag;
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but its body "
                               << body.getNumArguments() << " arguments";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments())))
    if (std::get<0>(pair).getType() != std::get<1>(pair).getType())
      return emitOpError("input ")
             << i << " has type " << std::get<0>(pair).getType()
             << " but its body argument " << std::get<1>(pair).getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with gt.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes().size()
           << " values whose types differ from its results";
  if (getNumResults() == 0)
    return emitOpError("computes nothing: it needs at least one result");
  return kind->second(*this, body, yield);
}

LogicalResult AllReduceOp::verify() {
  if (getGrads().empty())
    return emitOpError("reduces at least one gradient");
  if (getGrads().getTypes() != getResults().getTypes())
    return emitOpError("results must have the types of its operands, in "
                       "order");
  return success();
}

/// The activations whose function and derivative the executors have
/// (ScalarOps.h): the kinds of gt.activation_grad, gt.glu and gt.glu_grad.
static ArrayRef<StringRef> activationKinds() {
  static const StringRef kinds[] = {
#define GTC_KIND(Op, name) #name,
      GTC_ACTIVATIONS(GTC_KIND)
#undef GTC_KIND
  };
  return kinds;
}

/// The error for an activation kind the executors do not have.
static std::string unknownKindMessage(StringRef kind) {
  std::string msg = "has unknown kind '" + kind.str() + "'; expected ";
  llvm::raw_string_ostream os(msg);
  llvm::interleave(activationKinds(), os, ", ");
  return msg;
}

LogicalResult ActivationGradOp::verify() {
  if (llvm::is_contained(activationKinds(), getKind()))
    return success();
  return emitOpError(unknownKindMessage(getKind()));
}

/// A glu's input `x` [..., 2F] gives its result [..., F] (a dynamic last
/// dimension stays dynamic).
static FailureOr<RankedTensorType> gluResultType(std::optional<Location> loc,
                                                 StringRef name, Value x,
                                                 StringRef kind) {
  if (!llvm::is_contained(activationKinds(), kind))
    return emitOptionalError(loc, "'", name, "' ", unknownKindMessage(kind));
  auto t = cast<RankedTensorType>(x.getType());
  if (t.getRank() == 0)
    return emitOptionalError(loc, "'", name, "' needs an input of rank >= 1");
  SmallVector<int64_t> shape(t.getShape());
  if (!ShapedType::isDynamic(shape.back())) {
    if (shape.back() % 2 != 0)
      return emitOptionalError(loc, "'", name,
                               "' needs an even last dimension (two halves), "
                               "got ",
                               formatType(t));
    shape.back() /= 2;
  }
  return t.clone(shape);
}

LogicalResult GluOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> t =
      gluResultType(loc, "glu", adaptor.getInput(), adaptor.getKind());
  if (failed(t))
    return failure();
  types.push_back(*t);
  return success();
}

LogicalResult GluGradOp::verify() {
  FailureOr<RankedTensorType> t =
      gluResultType(getLoc(), "glu_grad", getInput(), getKind());
  if (failed(t))
    return failure();
  if (!compatibleDims(getGrad().getType().getShape(), t->getShape()) ||
      getGrad().getType().getElementType() != t->getElementType())
    return emitOpError("gradient ")
           << formatType(getGrad().getType()) << " does not match the result "
           << formatType(*t) << " of glu on " << formatType(getInput().getType());
  return success();
}

/// A norm gradient's operands: `dy` of the input's type, a `[D]` weight
/// for input rows of D.
template <typename NormGradOp>
static LogicalResult verifyNormGradOperands(NormGradOp op) {
  RankedTensorType dy = op.getGrad().getType(), x = op.getInput().getType();
  RankedTensorType w = op.getWeight().getType();
  if (dy != x)
    return op.emitOpError("gradient ")
           << formatType(dy) << " and input " << formatType(x) << " differ";
  if (x.getRank() < 1 || w.getRank() != 1 ||
      w.getDimSize(0) != x.getDimSize(x.getRank() - 1))
    return op.emitOpError("weight ")
           << formatType(w) << " does not match input " << formatType(x);
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(verifyNormGradOperands(*this)))
    return failure();
  RankedTensorType x = getInput().getType(), w = getWeight().getType();
  if (getInputGrad().getType() != x || getWeightGrad().getType() != w ||
      getBiasGrad().getType() != w)
    return emitOpError("results must have the types of input, weight and "
                       "weight");
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifyNormGradOperands(*this)))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightGrad().getType() != getWeight().getType())
    return emitOpError("results must have the types of input and weight");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  SmallVector<Type> forward;
  if (failed(inferAttention(getLoc(), getInputs(), getHeads(), forward)))
    return failure();
  std::string on;
  for (Type t : getInputs().getTypes())
    on += (on.empty() ? "" : ", ") + formatType(t);
  if (forward.front() != getGrad().getType())
    return emitOpError("gradient ")
           << formatType(getGrad().getType()) << " does not match the output "
           << formatType(forward.front()) << " of attention on " << on;
  if (getLse().getType() != forward[1])
    return emitOpError("lse ")
           << formatType(getLse().getType()) << " does not match the "
           << formatType(forward[1]) << " of attention on " << on;
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType dy = getGrad().getType(), table = getType();
  ArrayRef<int64_t> ids = getIndices().getType().getShape();
  if (table.getRank() != 2 || dy.getRank() != static_cast<int64_t>(ids.size()) + 1 ||
      dy.getShape().drop_back() != ids ||
      dy.getDimSize(dy.getRank() - 1) != table.getDimSize(1))
    return emitOpError("gradient ")
           << formatType(dy) << " does not match indices "
           << formatType(getIndices().getType()) << " and table "
           << formatType(table);
  return success();
}

LogicalResult AccuracyOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  return CrossEntropyOp::inferReturnTypes(
      ctx, loc,
      CrossEntropyOp::Adaptor(
          ValueRange{adaptor.getLogits(), adaptor.getLabels()}),
      types);
}

LogicalResult CrossEntropyGradOp::verify() {
  SmallVector<Type> loss;
  if (failed(CrossEntropyOp::inferReturnTypes(
          getContext(), getLoc(),
          CrossEntropyOp::Adaptor(ValueRange{getLogits(), getLabels()}),
          loss)))
    return failure();
  if (getType() != getLogits().getType())
    return emitOpError("result must have the type of the logits");
  return success();
}

#define GET_OP_CLASSES
#include "gtc/Dialect/GT/GTOps.cpp.inc"
