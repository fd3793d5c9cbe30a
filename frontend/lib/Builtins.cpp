//===- Builtins.cpp - The model body's built-in functions ------------------===//
//
// Each built-in's signature and what it builds: the activations (from
// ScalarOps.h's list), layers, losses, shapes; and the initializers of
// `param`. frontend/LANGUAGE.md documents them.
//===----------------------------------------------------------------------===//

#include "Generator.h"
#include "gtc/Runtime/ScalarOps.h"
#include <cmath>
#include <limits>

namespace gtc::gen {

//===----------------------------------------------------------------------===//
// Built-in functions of the model body
//===----------------------------------------------------------------------===//


template <typename OpTy>
Builtin unary() {
  return {{req("x", K::FloatTensor)},
          [](Generator &g, Loc l, Bound &a) {
            return g.make<OpTy>(l, a[0]->tensor);
          }};
}

/// Creates the weight and bias of a linear layer and applies it.
FailureOr<Val> applyLinear(Generator &g, Loc l, const Val &x, int64_t out,
                           bool bias, const std::string &name,
                           std::optional<double> stddev) {
  if (out <= 0 || out > Limits::kMaxDim)
    return g.error(l) << "linear output size must be between 1 and "
                      << Limits::kMaxDim << ", got " << out;
  if (x.type().getRank() < 1)
    return g.error(l) << "linear needs an input of rank >= 1, got "
                      << gt::formatType(x.type());
  if (stddev && *stddev < 0)
    return g.error(l) << "std must be >= 0, got " << *stddev;
  FailureOr<int64_t> in =
      g.staticDim(l, x, x.type().getRank() - 1, "linear's input feature size");
  if (failed(in))
    return failure();
  Type et = x.type().getElementType();
  double bound = 1.0 / std::sqrt(double(*in));
  auto init = [&](bool isBias) -> std::pair<StringRef, std::vector<double>> {
    if (stddev)
      return isBias ? std::make_pair(StringRef("zeros"), std::vector<double>{})
                    : std::make_pair(StringRef("normal"),
                                     std::vector<double>{0.0, *stddev});
    return {"uniform", {-bound, bound}};
  };
  auto [wInit, wArgs] = init(false);
  FailureOr<Val> w =
      g.makeParam(l, name + ".weight", {out, *in}, et, wInit, wArgs);
  if (failed(w))
    return failure();
  SmallVector<Value> operands = {x.tensor, w->tensor};
  if (bias) {
    auto [bInit, bArgs] = init(true);
    FailureOr<Val> b = g.makeParam(l, name + ".bias", {out}, et, bInit, bArgs);
    if (failed(b))
      return failure();
    operands.push_back(b->tensor);
  }
  return g.make<gt::LinearOp>(l, operands);
}

std::optional<double> optDouble(const std::optional<Val> &v) {
  if (!v)
    return std::nullopt;
  return v->asDouble();
}

/// Normalizes a possibly negative axis; reports out-of-range axes.
FailureOr<int64_t> axisOf(Generator &g, Loc l, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return g.error(l) << "axis " << axis << " is out of range for a tensor of "
                      << "rank " << rank << "; expected " << -rank << " to "
                      << rank - 1;
  return axis < 0 ? axis + rank : axis;
}

/// The builtins of model blocks: the activations (ScalarOps.h), gelu and
/// softmax.
static void addElementwiseBuiltins(llvm::StringMap<Builtin> &t) {
#define GTC_ACTIVATION_BUILTIN(Kind, name) t[#name] = unary<gt::Kind##Op>();
  GTC_ACTIVATION_OPS(GTC_ACTIVATION_BUILTIN)
#undef GTC_ACTIVATION_BUILTIN
  t["gelu"] = {
      {req("x", K::FloatTensor), opt("approximate", K::Bool)},
      [](Generator &g, Loc l, Bound &a) {
        bool approx = a[1] && a[1]->b;
        return g.make<gt::GeluOp>(
            l, a[0]->tensor,
            {g.attr("approximate", g.getBuilder().getBoolAttr(approx))});
      }};
  t["softmax"] = {
      {req("x", K::FloatTensor), opt("axis", K::Int)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        int64_t axis = a[1] ? a[1]->i : -1;
        if (failed(axisOf(g, l, axis, a[0]->type().getRank())))
          return failure();
        return g.make<gt::SoftmaxOp>(
            l, a[0]->tensor,
            {g.attr("axis", g.getBuilder().getI64IntegerAttr(axis))});
      }};
}

/// layernorm(x, eps:, name:) and rmsnorm(x, eps:, name:): a norm over the
/// last dimension D (fixed) with a NAME.weight [D] of ones, and for
/// layernorm a NAME.bias [D] of zeros.
struct LayerNormKind {
  using Op = gt::LayerNormOp;
  static constexpr const char *name = "layernorm", *shortName = "ln";
  static constexpr bool bias = true;
  static constexpr double eps = 1e-5;
};
struct RmsNormKind {
  using Op = gt::RmsNormOp;
  static constexpr const char *name = "rmsnorm", *shortName = "norm";
  static constexpr bool bias = false;
  static constexpr double eps = 1e-6;
};

template <typename Kind> static Builtin normBuiltin() {
  return {
      {req("x", K::FloatTensor), opt("eps", K::Number), opt("name", K::Str)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        const Val &x = *a[0];
        if (x.type().getRank() < 1)
          return g.error(l) << Kind::name << " needs a tensor of rank >= 1";
        FailureOr<int64_t> d =
            g.staticDim(l, x, x.type().getRank() - 1, Kind::name);
        if (failed(d))
          return failure();
        FailureOr<std::string> name = g.layerName(l, Kind::shortName, a[2]);
        if (failed(name))
          return failure();
        Type et = x.type().getElementType();
        SmallVector<Value> operands = {x.tensor};
        for (auto [suffix, init] :
             {std::pair{".weight", "ones"}, std::pair{".bias", "zeros"}}) {
          if (!Kind::bias && StringRef(suffix) == ".bias")
            break;
          FailureOr<Val> p = g.makeParam(l, *name + suffix, {*d}, et, init, {});
          if (failed(p))
            return failure();
          operands.push_back(p->tensor);
        }
        double eps = a[1] ? a[1]->asDouble() : Kind::eps;
        return g.make<typename Kind::Op>(
            l, operands,
            {g.attr("epsilon", g.getBuilder().getF64FloatAttr(eps))});
      }};
}

/// The builtins of model blocks: linear, matmul, transpose and the norms.
static void addLayerBuiltins(llvm::StringMap<Builtin> &t) {
  t["linear"] = {{req("x", K::FloatTensor), req("out", K::Int),
                  opt("bias", K::Bool), opt("std", K::Number),
                  opt("name", K::Str)},
                 [](Generator &g, Loc l, Bound &a) {
                   FailureOr<std::string> name = g.layerName(l, "fc", a[4]);
                   if (failed(name))
                     return FailureOr<Val>(failure());
                   return applyLinear(g, l, *a[0], a[1]->i, !a[2] || a[2]->b,
                                      *name, optDouble(a[3]));
                 }};
  t["dropout"] = {
      {req("x", K::FloatTensor), req("p", K::Number)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        double p = a[1]->asDouble();
        if (!(p >= 0 && p < 1))
          return g.error(a[1]->loc)
                 << "dropout's p is the probability of dropping an element: "
                    "it must be in [0, 1), got "
                 << p;
        if (p == 0)
          return *a[0];
        OpBuilder &b = g.getBuilder();
        return g.make<gt::DropoutOp>(
            l, a[0]->tensor,
            {g.attr("p", b.getF64FloatAttr(p)),
             g.attr("salt", b.getI64IntegerAttr(g.nextDropoutSalt()))});
      }};
  t["matmul"] = {{req("a", K::FloatTensor), req("b", K::FloatTensor),
                  opt("transpose_a", K::Bool), opt("transpose_b", K::Bool)},
                 [](Generator &g, Loc l, Bound &a) {
                   OpBuilder &b = g.getBuilder();
                   return g.make<gt::MatmulOp>(
                       l, {a[0]->tensor, a[1]->tensor},
                       {g.attr("transpose_a", b.getBoolAttr(a[2] && a[2]->b)),
                        g.attr("transpose_b", b.getBoolAttr(a[3] && a[3]->b))});
                 }};
  t["transpose"] = {
      {req("x", K::Tensor), opt("dim0", K::Int), opt("dim1", K::Int)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        int64_t rank = a[0]->type().getRank();
        if (rank < 2)
          return g.error(l) << "transpose needs a tensor of rank >= 2, got "
                            << gt::formatType(a[0]->type());
        FailureOr<int64_t> d0 = axisOf(g, l, a[1] ? a[1]->i : -2, rank);
        FailureOr<int64_t> d1 = succeeded(d0)
                                    ? axisOf(g, l, a[2] ? a[2]->i : -1, rank)
                                    : FailureOr<int64_t>(failure());
        if (failed(d1))
          return failure();
        SmallVector<int64_t> perm =
            llvm::to_vector(llvm::seq<int64_t>(0, rank));
        std::swap(perm[*d0], perm[*d1]);
        return g.make<gt::TransposeOp>(
            l, a[0]->tensor,
            {g.attr("permutation", g.getBuilder().getI64ArrayAttr(perm))});
      }};
  t["layernorm"] = normBuiltin<LayerNormKind>();
  t["rmsnorm"] = normBuiltin<RmsNormKind>();
}

/// torch.cat of `parts` along `axis` into `whole`: each part placed at its
/// offset in a tensor of zeros (gt.pad {offsets}), the parts added.
static FailureOr<Val> concatParts(Generator &g, Loc l, ArrayRef<Val> parts,
                                  int64_t axis, RankedTensorType whole) {
  SmallVector<int64_t> offsets(whole.getRank(), 0);
  FailureOr<Val> sum = failure();
  for (const Val &p : parts) {
    FailureOr<Val> placed = g.makeTyped<gt::PadOp>(
        l, whole, p.tensor,
        {g.attr("offsets", g.getBuilder().getI64ArrayAttr(offsets))});
    if (failed(placed))
      return failure();
    offsets[axis] += p.type().getDimSize(axis);
    sum = succeeded(sum) ? g.make<gt::AddOp>(l, {sum->tensor, placed->tensor})
                         : placed;
    if (failed(sum))
      return failure();
  }
  return sum;
}

/// attention(q, k, v, causal:, scale:): q [B, T, H, d], k and v
/// [B, T, Hkv, d] with Hkv dividing H (grouped-query; multi-query at 1),
/// the result q's shape. Lowered onto gt.attention's packed [B, T, 3D]: the
/// K/V heads repeated to H (gt.broadcast), the three concatenated (gt.pad
/// at offsets, added); a scale other than 1/sqrt(d) multiplies q first.
static FailureOr<Val> attentionQKV(Generator &g, Loc l, const Val &q,
                                   const Val &k, const Val &v, bool causal,
                                   const std::optional<double> &scale) {
  RankedTensorType qt = q.type(), kt = k.type(), vt = v.type();
  auto shapeError = [&] {
    return g.error(l) << "attention(q, k, v) needs q [B, T, H, d] and k, v "
                         "[B, T, Hkv, d] of one dtype with Hkv dividing H "
                         "and T and d fixed, got "
                      << gt::formatType(qt) << ", " << gt::formatType(kt)
                      << ", " << gt::formatType(vt);
  };
  if (qt.getRank() != 4 || kt != vt || kt.getRank() != 4 ||
      qt.getElementType() != kt.getElementType())
    return shapeError();
  int64_t t = qt.getDimSize(1), heads = qt.getDimSize(2), d = qt.getDimSize(3),
          kvHeads = kt.getDimSize(2);
  if (ShapedType::isDynamic(t) || ShapedType::isDynamic(heads) ||
      ShapedType::isDynamic(d) || ShapedType::isDynamic(kvHeads) ||
      kt.getDimSize(1) != t || kt.getDimSize(3) != d || heads % kvHeads != 0 ||
      qt.getDimSize(0) != kt.getDimSize(0))
    return shapeError();
  if (scale && !(*scale > 0))
    return g.error(l) << "attention's scale must be > 0, got " << *scale;
  Val qs = q;
  if (scale && *scale != 1.0 / std::sqrt(static_cast<double>(d))) {
    FailureOr<Val> scaled = g.make<gt::MulOp>(
        l, {q.tensor, g.constant(*scale * std::sqrt(static_cast<double>(d)),
                                 qt.getElementType(), l)
                          .tensor});
    if (failed(scaled))
      return failure();
    qs = *scaled;
  }
  OpBuilder &ob = g.getBuilder();
  return g.make<gt::AttentionOp>(l, {qs.tensor, k.tensor, v.tensor},
                                 {g.attr("heads", ob.getI64IntegerAttr(heads)),
                                  g.attr("causal", ob.getBoolAttr(causal))});
}

/// The builtins of model blocks over sequences: attention, embedding and
/// positions.
static void addSequenceBuiltins(llvm::StringMap<Builtin> &t) {
  t["rope"] = {
      {req("x", K::FloatTensor), opt("theta", K::Number),
       opt("interleaved", K::Bool)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        RankedTensorType type = a[0]->type();
        int64_t rank = type.getRank();
        if (rank != 4)
          return g.error(l) << "rope needs [B, T, heads, head_dim], got "
                            << gt::formatType(type)
                            << "; reshape first, e.g. reshape(q, (-1, T, H, "
                               "D / H))";
        int64_t d = type.getDimSize(rank - 1);
        if (ShapedType::isDynamic(d) || d % 2 != 0)
          return g.error(l) << "rope turns features in pairs: head_dim (the "
                               "last dimension) must be a fixed even size, "
                               "got "
                            << gt::formatType(type);
        double theta = a[1] ? a[1]->asDouble() : 10000.0;
        // The kernels turn in f32: theta must be a positive normal f32.
        if (!(theta >= std::numeric_limits<float>::min() &&
              theta <= std::numeric_limits<float>::max()))
          return g.error(l) << "rope's theta must be > 0 and within f32's "
                               "normal range (1.2e-38 to 3.4e38), got "
                            << theta;
        bool interleaved = a[2] && a[2]->b;
        auto &b = g.getBuilder();
        return g.make<gt::RopeOp>(
            l, a[0]->tensor,
            {g.attr("theta", b.getF64FloatAttr(theta)),
             g.attr("interleaved", b.getBoolAttr(interleaved))});
      }};
  // attention(x, heads, causal:, std:, name:), GPT-2's block with its
  // layers, or attention(q, k, v, causal:, scale:) on given heads. The third
  // positional argument is v, or GPT-2's causal when it is a boolean.
  t["attention"] = {
      {req("x", K::FloatTensor), req("heads", K::Any), opt("v", K::Any),
       opt("causal", K::Bool), opt("std", K::Number), opt("name", K::Str),
       opt("scale", K::Number)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        const Val &x = *a[0];
        if (a[2] && a[2]->kind == Val::Kind::Bool && !a[3] &&
            !a.byKeyword[2])
          std::swap(a[2], a[3]); // attention(x, heads, false)
        const bool causal = !a[3] || a[3]->b;
        if (matches(*a[1], K::FloatTensor)) {
          if (!a[2] || !matches(*a[2], K::FloatTensor))
            return g.error(l) << "attention(q, k, v) needs three float "
                                 "tensors";
          if (a[4] || a[5])
            return g.error(l) << "attention(q, k, v) creates no layers: "
                                 "std: and name: belong to attention(x, "
                                 "heads)";
          return attentionQKV(g, l, x, *a[1], *a[2], causal, optDouble(a[6]));
        }
        if (!matches(*a[1], K::Int) || a[2] || a[6])
          return g.error(l) << "attention takes (x, heads, causal:, std:, "
                               "name:) with an integer heads, or (q, k, v, "
                               "causal:, scale:) with three tensors";
        if (x.type().getRank() != 3)
          return g.error(l) << "attention needs x of shape [B, T, D], got "
                            << gt::formatType(x.type());
        FailureOr<int64_t> d = g.staticDim(l, x, 2, "attention");
        if (failed(d))
          return failure();
        int64_t heads = a[1]->i;
        if (heads <= 0 || *d % heads != 0)
          return g.error(a[1]->loc)
                 << "heads = " << heads
                 << " must be positive and divide the model width " << *d;
        FailureOr<std::string> name = g.layerName(l, "attn", a[5]);
        if (failed(name))
          return failure();
        FailureOr<Val> qkv = applyLinear(g, l, x, 3 * *d, true,
                                         *name + ".c_attn", optDouble(a[4]));
        if (failed(qkv))
          return failure();
        OpBuilder &b = g.getBuilder();
        FailureOr<Val> y = g.make<gt::AttentionOp>(
            l, qkv->tensor,
            {g.attr("heads", b.getI64IntegerAttr(heads)),
             g.attr("causal", b.getBoolAttr(causal))});
        if (failed(y))
          return failure();
        return applyLinear(g, l, *y, *d, true, *name + ".c_proj",
                           optDouble(a[4]));
      }};
  t["embedding"] = {
      {req("ids", K::IndexTensor), req("table", K::Any), opt("dim", K::Int),
       opt("std", K::Number), opt("name", K::Str)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        Val table = *a[1];
        if (table.kind == Val::Kind::Int) {
          if (!a[2])
            return g.error(l) << "embedding(ids, " << table.i
                              << ", ...) creates a table and needs its "
                                 "width: add dim: D";
          int64_t v = table.i, d = a[2]->i;
          if (v <= 0 || d <= 0 || v > Limits::kMaxDim || d > Limits::kMaxDim)
            return g.error(l) << "embedding table sizes must be positive, "
                                 "got "
                              << v << " x " << d;
          FailureOr<std::string> name = g.layerName(l, "emb", a[4]);
          if (failed(name))
            return failure();
          if (a[3] && a[3]->asDouble() < 0)
            return g.error(a[3]->loc) << "std must be >= 0";
          FailureOr<Val> w = g.makeParam(
              l, *name + ".weight", {v, d}, Float32Type::get(&g.context()),
              "normal", {0.0, a[3] ? a[3]->asDouble() : 1.0});
          if (failed(w))
            return failure();
          table = *w;
        } else if (!matches(table, K::FloatTensor)) {
          return g.error(table.loc)
                 << "embedding's table must be a float tensor [V, D] or "
                    "the number of rows V, got "
                 << describe(table);
        } else {
          for (const std::optional<Val> &unused : {a[2], a[3], a[4]})
            if (unused)
              return g.error(unused->loc)
                     << "dim:, std: and name: only apply when embedding "
                        "creates its table (embedding(ids, V, dim: D))";
        }
        return g.make<gt::EmbeddingOp>(l, {a[0]->tensor, table.tensor});
      }};
  t["positions"] = {
      {req("length", K::Int)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        int64_t n = a[0]->i;
        if (n <= 0 || n > Limits::kMaxDim)
          return g.error(a[0]->loc)
                 << "positions needs a positive length, got " << n;
        return g.make<gt::PositionsOp>(
            l, {}, {g.attr("length", g.getBuilder().getI64IntegerAttr(n))});
      }};
}

/// The builtins of model blocks: cross_entropy, the reductions, reshape and
/// cast.
static void addLossAndShapeBuiltins(llvm::StringMap<Builtin> &t) {
  t["cross_entropy"] = {
      {req("logits", K::FloatTensor), req("labels", K::IndexTensor)},
      [](Generator &g, Loc l, Bound &a) {
        return g.make<gt::CrossEntropyOp>(l, {a[0]->tensor, a[1]->tensor});
      }};
  auto reduce = [](auto tag) -> Builtin {
    using OpTy = decltype(tag);
    return {{req("x", K::FloatTensor), opt("axis", K::IntOrTuple),
             opt("keepdim", K::Bool)},
            [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
              SmallVector<int64_t> axes;
              if (a[1] && a[1]->kind == Val::Kind::Int)
                axes.push_back(a[1]->i);
              else if (a[1])
                for (const Val &e : a[1]->elems)
                  axes.push_back(e.i);
              OpBuilder &b = g.getBuilder();
              return g.make<OpTy>(
                  l, a[0]->tensor,
                  {g.attr("axes", b.getI64ArrayAttr(axes)),
                   g.attr("keepdim", b.getBoolAttr(a[2] && a[2]->b))});
            }};
  };
  t["sum"] = reduce(gt::SumOp());
  t["mean"] = reduce(gt::MeanOp());
  t["reshape"] = {
      {req("x", K::Tensor), req("shape", K::IntOrTuple)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        RankedTensorType in = a[0]->type();
        std::vector<int64_t> want;
        if (a[1]->kind == Val::Kind::Int)
          want.push_back(a[1]->i);
        for (const Val &e : a[1]->elems)
          want.push_back(e.i);
        int64_t known = 1, inferred = -1;
        for (auto [i, d] : llvm::enumerate(want)) {
          if (d == -1 && inferred < 0) {
            inferred = i;
            continue;
          }
          if (d <= 0 || d > Limits::kMaxDim)
            return g.error(l) << "reshape sizes must be positive, with at "
                                 "most one -1; got "
                              << d;
          if (__builtin_mul_overflow(known, d, &known) ||
              known > Limits::kMaxElements)
            return g.error(l) << "reshape to too many elements (more than "
                              << Limits::kMaxElements << ")";
        }
        bool dynamic = !in.hasStaticShape();
        if (dynamic && inferred < 0)
          return g.error(l) << "reshape of " << gt::formatType(in)
                            << " (symbolic size) needs one -1 in the new shape";
        if (inferred >= 0) {
          if (dynamic) {
            want[inferred] = ShapedType::kDynamic;
          } else if (in.getNumElements() % known != 0) {
            return g.error(l) << "cannot reshape " << gt::formatType(in) << " ("
                              << in.getNumElements()
                              << " elements) into groups of " << known;
          } else {
            want[inferred] = in.getNumElements() / known;
          }
        }
        auto type = RankedTensorType::get(want, in.getElementType());
        return g.makeTyped<gt::ReshapeOp>(l, type, a[0]->tensor);
      }};
  t["cast"] = {{req("x", K::Tensor), req("dtype", K::Dtype)},
               [](Generator &g, Loc l, Bound &a) {
                 Type et = *parseDtype(a[1]->s, &g.context());
                 auto type = a[0]->type().clone(et);
                 return g.makeTyped<gt::CastOp>(l, type, a[0]->tensor);
               }};
}

/// The builtins that take blocks of tensors apart and put them together:
/// slice (gt.slice at an offset) and concat (a sum of gt.pad at offsets).
static void addBlockBuiltins(llvm::StringMap<Builtin> &t) {
  t["slice"] = {
      {req("x", K::FloatTensor), req("start", K::Int), req("end", K::Int),
       opt("axis", K::Int)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        RankedTensorType in = a[0]->type();
        FailureOr<int64_t> axis =
            axisOf(g, l, a[3] ? a[3]->i : -1, in.getRank());
        if (failed(axis))
          return failure();
        FailureOr<int64_t> n = g.staticDim(l, *a[0], *axis, "slice");
        if (failed(n))
          return failure();
        int64_t start = a[1]->i < 0 ? a[1]->i + *n : a[1]->i;
        int64_t end = a[2]->i < 0 ? a[2]->i + *n : a[2]->i;
        if (start < 0 || end > *n || start >= end)
          return g.error(l)
                 << "slice(" << a[1]->i << ", " << a[2]->i << ") along axis "
                 << *axis << " of " << gt::formatType(in)
                 << " is empty or out of range: start and end "
                    "(negative from the end) need 0 <= start < "
                    "end <= "
                 << *n;
        SmallVector<int64_t> shape(in.getShape()), offsets(in.getRank(), 0);
        shape[*axis] = end - start;
        offsets[*axis] = start;
        return g.makeTyped<gt::SliceOp>(
            l, in.clone(shape), a[0]->tensor,
            {g.attr("offsets", g.getBuilder().getI64ArrayAttr(offsets))});
      }};
  t["concat"] = {
      {req("parts", K::Any), opt("axis", K::Int)},
      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
        const Val &parts = *a[0];
        if (parts.kind != Val::Kind::Tuple || parts.elems.size() < 2 ||
            !llvm::all_of(parts.elems, [](const Val &v) {
              return v.kind == Val::Kind::Tensor &&
                     isa<FloatType>(v.type().getElementType());
            }))
          return g.error(l) << "concat takes a tuple of two or more float "
                               "tensors, e.g. concat((a, b), axis: -1)";
        RankedTensorType first = parts.elems[0].type();
        FailureOr<int64_t> axis =
            axisOf(g, l, a[1] ? a[1]->i : -1, first.getRank());
        if (failed(axis))
          return failure();
        SmallVector<int64_t> shape(first.getShape());
        shape[*axis] = 0;
        for (const Val &p : parts.elems) {
          RankedTensorType type = p.type();
          bool fits = type.getRank() == first.getRank() &&
                      type.getElementType() == first.getElementType();
          for (int64_t i = 0; fits && i < type.getRank(); ++i)
            fits = i == *axis || type.getDimSize(i) == first.getDimSize(i);
          if (!fits)
            return g.error(l)
                   << "concat along axis " << *axis
                   << " needs parts of one dtype and rank that "
                      "agree on every other dimension, got "
                   << gt::formatType(first) << " and " << gt::formatType(type);
          FailureOr<int64_t> n = g.staticDim(l, p, *axis, "concat");
          if (failed(n))
            return failure();
          shape[*axis] += *n;
        }
        return concatParts(g, l, parts.elems, *axis, first.clone(shape));
      }};
}

const llvm::StringMap<Builtin> &modelBuiltins() {
  static const llvm::StringMap<Builtin> table = [] {
    llvm::StringMap<Builtin> t;
    addElementwiseBuiltins(t);
    addLayerBuiltins(t);
    addSequenceBuiltins(t);
    addLossAndShapeBuiltins(t);
    addBlockBuiltins(t);
    return t;
  }();
  return table;
}

/// Signatures of parameter initializers (`param w: f32[..] = normal(0.02)`).
const llvm::StringMap<std::vector<ParamSpec>> &initializers() {
  static const llvm::StringMap<std::vector<ParamSpec>> table = {
      {"zeros", {}},
      {"ones", {}},
      {"constant", {req("value", K::Number)}},
      {"normal", {req("std", K::Number), opt("mean", K::Number)}},
      {"uniform", {req("low", K::Number), req("high", K::Number)}},
  };
  return table;
}

} // namespace gtc::gen
