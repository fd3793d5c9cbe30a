//===- MLIRGen.cpp - From the .gt syntax tree to the gt dialect -----------===//
//
// The model body is a small program: `let` constants, `def` functions and
// `repeat` loops are evaluated here, at compile time, and what remains is a
// dataflow graph of gt operations. Names, arity, keywords, kinds of values and
// the training settings are checked while evaluating; shapes and dtypes are
// checked by the ops' own type inference, whose diagnostics carry the source
// location of the expression.
//===----------------------------------------------------------------------===//

#include "gtc/Frontend/MLIRGen.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/ScalarOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include <cmath>
#include <functional>

using namespace gtc;
using namespace mlir;
using llvm::StringRef;
using llvm::Twine;

namespace {

//===----------------------------------------------------------------------===//
// Values of the evaluator
//===----------------------------------------------------------------------===//

/// A value while evaluating: a compile-time constant, a tensor (an SSA value
/// of the graph being built) or a bare word such as `bf16` or `all`.
struct Val {
  enum class Kind { Int, Float, Bool, Str, Tuple, Tensor, Word };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;          ///< Str, Word.
  std::vector<Val> elems; ///< Tuple.
  Value tensor;           ///< Tensor.
  Loc loc;

  static Val ofInt(int64_t v, Loc loc) {
    Val r;
    r.kind = Kind::Int;
    r.i = v;
    r.loc = loc;
    return r;
  }
  static Val ofFloat(double v, Loc loc) {
    Val r;
    r.kind = Kind::Float;
    r.f = v;
    r.loc = loc;
    return r;
  }
  static Val ofBool(bool v, Loc loc) {
    Val r;
    r.kind = Kind::Bool;
    r.b = v;
    r.loc = loc;
    return r;
  }
  static Val ofStr(std::string v, Loc loc, Kind kind = Kind::Str) {
    Val r;
    r.kind = kind;
    r.s = std::move(v);
    r.loc = loc;
    return r;
  }
  static Val ofTensor(Value v, Loc loc) {
    Val r;
    r.kind = Kind::Tensor;
    r.tensor = v;
    r.loc = loc;
    return r;
  }

  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
  double asDouble() const { return kind == Kind::Int ? double(i) : f; }
  RankedTensorType type() const {
    return cast<RankedTensorType>(tensor.getType());
  }
};

/// Describes a value for diagnostics: "an integer (3)", "a tensor f32[?, 10]".
std::string describe(const Val &v) {
  switch (v.kind) {
  case Val::Kind::Int:
    return "an integer (" + std::to_string(v.i) + ")";
  case Val::Kind::Float: {
    std::string s;
    llvm::raw_string_ostream(s) << "a number (" << v.f << ")";
    return s;
  }
  case Val::Kind::Bool:
    return v.b ? "true" : "false";
  case Val::Kind::Str:
    return "a string";
  case Val::Kind::Tuple:
    return "a tuple of " + std::to_string(v.elems.size());
  case Val::Kind::Tensor:
    return "a tensor " + gt::formatType(v.tensor.getType());
  case Val::Kind::Word:
    return "the name '" + v.s + "'";
  }
  return "a value";
}

/// What an argument of a built-in must be.
enum class ArgKind {
  Any,
  Tensor,
  FloatTensor,
  IndexTensor,
  Int,
  Number,
  Bool,
  Str,
  Dtype,
  IntOrTuple,
  Size,
};

const char *describe(ArgKind kind) {
  switch (kind) {
  case ArgKind::Any:
    return "a value";
  case ArgKind::Tensor:
    return "a tensor";
  case ArgKind::FloatTensor:
    return "a float tensor (f32, bf16 or f16)";
  case ArgKind::IndexTensor:
    return "an i32 tensor";
  case ArgKind::Int:
    return "an integer";
  case ArgKind::Number:
    return "a number";
  case ArgKind::Bool:
    return "true or false";
  case ArgKind::Str:
    return "a string";
  case ArgKind::Dtype:
    return "a dtype (f32, bf16, f16 or i32)";
  case ArgKind::IntOrTuple:
    return "an integer or a tuple of integers";
  case ArgKind::Size:
    return "a size (e.g. 12GiB)";
  }
  return "a value";
}

std::optional<Type> parseDtype(StringRef name, MLIRContext *ctx) {
  if (name == "f32")
    return Float32Type::get(ctx);
  if (name == "bf16")
    return BFloat16Type::get(ctx);
  if (name == "f16")
    return Float16Type::get(ctx);
  if (name == "i32")
    return IntegerType::get(ctx, 32);
  return std::nullopt;
}

bool matches(const Val &v, ArgKind kind) {
  switch (kind) {
  case ArgKind::Any:
    return true;
  case ArgKind::Tensor:
    return v.kind == Val::Kind::Tensor;
  case ArgKind::FloatTensor:
    return v.kind == Val::Kind::Tensor &&
           isa<FloatType>(v.type().getElementType());
  case ArgKind::IndexTensor:
    return v.kind == Val::Kind::Tensor &&
           v.type().getElementType().isInteger(32);
  case ArgKind::Int:
  case ArgKind::Size:
    return v.kind == Val::Kind::Int;
  case ArgKind::Number:
    return v.isNumber();
  case ArgKind::Bool:
    return v.kind == Val::Kind::Bool;
  case ArgKind::Str:
    return v.kind == Val::Kind::Str;
  case ArgKind::Dtype:
    return v.kind == Val::Kind::Word &&
           (v.s == "f32" || v.s == "bf16" || v.s == "f16" || v.s == "i32");
  case ArgKind::IntOrTuple:
    return v.kind == Val::Kind::Int ||
           (v.kind == Val::Kind::Tuple &&
            llvm::all_of(v.elems, [](const Val &e) {
              return e.kind == Val::Kind::Int;
            }));
  }
  return false;
}

/// One parameter of a built-in's signature.
struct ParamSpec {
  StringRef name;
  ArgKind kind;
  bool required = true; ///< Required ones come first.
};

/// Arguments bound to a signature; absent optional ones are nullopt.
using Bound = std::vector<std::optional<Val>>;

/// A function argument after evaluation.
struct EvalArg {
  std::string keyword;
  Val value;
  Loc loc;
};

/// Returns the candidate closest to `name`, for "did you mean" hints.
std::string closest(StringRef name, ArrayRef<StringRef> candidates) {
  std::string best;
  unsigned bestDist = 3; // only suggest close matches
  for (StringRef c : candidates) {
    unsigned d = name.edit_distance(c, true, bestDist);
    if (d < bestDist && d < name.size()) {
      bestDist = d;
      best = c.str();
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

//===----------------------------------------------------------------------===//
// The generator
//===----------------------------------------------------------------------===//

/// What a name is bound to in a frame.
struct Binding {
  enum class What { Let, Input, Label, Param, Var };
  What what;
  Val value;
  Loc loc;
  /// The statement that made the binding; a repeat body may run it again.
  const Stmt *origin = nullptr;
};

/// A scope of names: the model body, or one call of a `def`.
struct Frame {
  llvm::StringMap<Binding> names;
  bool inFunction = false;
  std::optional<Val> returned;
};

class Generator;
using BuiltinFn = std::function<FailureOr<Val>(Generator &, Loc, Bound &)>;

/// A function available in the model body or in the train block.
struct Builtin {
  std::vector<ParamSpec> params;
  BuiltinFn emit;
};

class Generator {
public:
  Generator(MLIRContext &ctx, const File &file)
      : ctx(ctx), file(file), builder(&ctx) {}

  OwningOpRef<ModuleOp> generate();

  // Used by the built-ins.
  Location loc(Loc l) {
    return FileLineColLoc::get(&ctx, file.path, l.line, l.col);
  }
  InFlightDiagnostic error(Loc l) { return emitError(loc(l)); }
  MLIRContext &context() { return ctx; }
  OpBuilder &getBuilder() { return builder; }

  template <typename OpTy>
  FailureOr<Val> make(Loc l, ValueRange operands,
                      ArrayRef<NamedAttribute> attrs = {});
  template <typename OpTy>
  FailureOr<Val> makeTyped(Loc l, Type type, ValueRange operands,
                           ArrayRef<NamedAttribute> attrs = {});
  FailureOr<Val> makeParam(Loc l, StringRef name, ArrayRef<int64_t> shape,
                           Type elementType, StringRef init,
                           ArrayRef<double> args);
  /// Checks that a layer, loop or parameter name is letters, digits and '_'
  /// in dot-separated parts; `what` names it in the error.
  LogicalResult checkName(StringRef name, Loc l, StringRef what);
  /// The full, scoped name of a layer: `name:` if given (checked to be a
  /// dotted identifier), else short + count.
  FailureOr<std::string> layerName(Loc l, StringRef shortName,
                                   const std::optional<Val> &given);
  /// Checks that a tensor's dimension `dim` is static; names it in the error.
  FailureOr<int64_t> staticDim(Loc l, const Val &v, int64_t dim,
                               StringRef what);
  Val constant(double v, Type elementType, Loc l);
  NamedAttribute attr(StringRef name, Attribute value) {
    return builder.getNamedAttr(name, value);
  }

private:
  // Model body.
  LogicalResult genModel(const ModelDecl &model);
  LogicalResult genBlock(const std::vector<StmtPtr> &body);
  LogicalResult genStmt(const Stmt &s);
  LogicalResult genDeclaration(const Stmt &s);
  LogicalResult genRepeat(const Stmt &s);
  LogicalResult bind(const Stmt &s, StringRef name, Loc nameLoc,
                     Binding::What what, Val value);
  FailureOr<RankedTensorType> genType(const TypeExpr &type, bool allowSymbolic);
  FailureOr<Val> genInitializer(const Stmt &s, RankedTensorType type);

  // Expressions.
  FailureOr<Val> eval(const Expr &e);
  FailureOr<Val> evalName(const Expr &e);
  FailureOr<Val> evalBinary(const Expr &e);
  /// One binary operator of `e` on its operands' values.
  FailureOr<Val> applyBinary(const Expr &e, Val l, Val r);
  FailureOr<Val> evalUnary(const Expr &e);
  FailureOr<Val> evalCall(const Expr &e);
  FailureOr<Val> callDef(const Expr &e, const Stmt &def,
                         std::vector<EvalArg> &args);
  FailureOr<std::vector<EvalArg>> evalArgs(const Expr &call);
  FailureOr<Bound> bindArgs(Loc l, StringRef callee,
                            ArrayRef<ParamSpec> params,
                            std::vector<EvalArg> &args);
  const Binding *lookup(StringRef name) const;
  std::vector<StringRef> visibleNames() const;

  // Train block.
  LogicalResult genTrain(const TrainDecl &train, StringRef modelName);
  FailureOr<Attribute> genSetting(const Setting &setting);
  FailureOr<Attribute> toAttr(const Val &v, Loc l);

  MLIRContext &ctx;
  const File &file;
  OpBuilder builder;
  ModuleOp module;

  std::vector<Frame> frames; ///< frames[0] is the model body.
  llvm::StringMap<const Stmt *> defs;
  std::vector<std::string> prefixes; ///< Scope of layer names (repeat).
  llvm::StringMap<unsigned> layerCounts;
  llvm::StringMap<Loc> paramNames;
  llvm::StringMap<const Stmt *> loopNames; ///< scope + loop name -> loop.
  bool inTrainBlock = false;
  size_t opCount = 0;
};

//===----------------------------------------------------------------------===//
// Building operations
//===----------------------------------------------------------------------===//

/// Builds an op whose result type is inferred. Inference failures (shape and
/// dtype errors) are reported at `l` by the op's own inference.
template <typename OpTy>
FailureOr<Val> Generator::make(Loc l, ValueRange operands,
                               ArrayRef<NamedAttribute> attrs) {
  if (++opCount > Limits::kMaxOps)
    return error(l) << "the model has more than " << Limits::kMaxOps
                    << " operations; reduce repeat counts";
  OperationState state(loc(l), OpTy::getOperationName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  // One result, or two (attention's output and its statistics); the
  // language sees the first.
  constexpr unsigned results =
      OpTy::template hasTrait<OpTrait::NResults<2>::Impl>() ? 2 : 1;
  state.addTypes(SmallVector<Type, 2>(results, builder.getNoneType()));
  Operation *op = builder.create(state);
  SmallVector<Type, 2> types;
  auto iface = cast<InferTypeOpInterface>(op);
  if (failed(iface.inferReturnTypes(&ctx, op->getLoc(), op->getOperands(),
                                    op->getRawDictionaryAttrs(),
                                    op->getPropertiesStorage(),
                                    op->getRegions(), types))) {
    op->erase();
    return failure();
  }
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  if (failed(verify(op))) {
    op->erase();
    return failure();
  }
  return Val::ofTensor(op->getResult(0), l);
}

/// Builds an op with an explicit result type and verifies it.
template <typename OpTy>
FailureOr<Val> Generator::makeTyped(Loc l, Type type, ValueRange operands,
                                    ArrayRef<NamedAttribute> attrs) {
  if (++opCount > Limits::kMaxOps)
    return error(l) << "the model has more than " << Limits::kMaxOps
                    << " operations; reduce repeat counts";
  OperationState state(loc(l), OpTy::getOperationName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(type);
  Operation *op = builder.create(state);
  if (failed(verify(op))) {
    op->erase();
    return failure();
  }
  return Val::ofTensor(op->getResult(0), l);
}

FailureOr<Val> Generator::makeParam(Loc l, StringRef name,
                                    ArrayRef<int64_t> shape, Type elementType,
                                    StringRef init, ArrayRef<double> args) {
  auto [it, inserted] = paramNames.try_emplace(name, l);
  if (!inserted) {
    Loc first = it->second;
    InFlightDiagnostic diag = error(l)
                              << "duplicate parameter '" << name
                              << "'; give the layer another name with "
                                 "name: \"...\" (or name the repeat loop "
                                 "with 'as')";
    diag.attachNote(loc(first)) << "'" << name << "' was first created here";
    return diag;
  }
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 1 || d > Limits::kMaxDim ||
        __builtin_mul_overflow(elements, d, &elements) ||
        elements > Limits::kMaxElements)
      return error(l) << "parameter '" << name << "' is too large (more than "
                      << Limits::kMaxElements << " elements)";
  }
  auto type = RankedTensorType::get(shape, elementType);
  return makeTyped<gt::ParamOp>(
      l, type, {},
      {attr("name", builder.getStringAttr(name)),
       attr("init", builder.getStringAttr(init)),
       attr("args", builder.getF64ArrayAttr(args))});
}

LogicalResult Generator::checkName(StringRef name, Loc l, StringRef what) {
  bool ok = !name.empty() && !name.starts_with(".") && !name.ends_with(".") &&
            !name.contains("..") && llvm::all_of(name, [](char c) {
              return llvm::isAlnum(static_cast<unsigned char>(c)) ||
                     c == '_' || c == '.';
            });
  if (ok)
    return success();
  return error(l) << what << " name \"" << name
                  << "\" must be letters, digits and '_' in dot-separated "
                     "parts, e.g. \"mlp.fc\"";
}

FailureOr<std::string> Generator::layerName(Loc l, StringRef shortName,
                                            const std::optional<Val> &given) {
  std::string prefix;
  for (const std::string &p : prefixes)
    prefix += p + ".";
  if (given) {
    if (failed(checkName(given->s, given->loc, "layer")))
      return failure();
    return prefix + given->s;
  }
  unsigned n = ++layerCounts[prefix + "/" + shortName.str()];
  return prefix + shortName.str() + std::to_string(n);
}

FailureOr<int64_t> Generator::staticDim(Loc l, const Val &v, int64_t dim,
                                        StringRef what) {
  int64_t d = v.type().getDimSize(dim);
  if (ShapedType::isDynamic(d))
    return error(l) << what << " needs a fixed size, but the input "
                    << gt::formatType(v.type())
                    << " is symbolic there; declare it with a number";
  return d;
}

Val Generator::constant(double v, Type elementType, Loc l) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute scalar = isa<FloatType>(elementType)
                         ? Attribute(builder.getFloatAttr(elementType, v))
                         : Attribute(builder.getIntegerAttr(
                               elementType, static_cast<int64_t>(v)));
  auto value = DenseElementsAttr::get(type, scalar);
  FailureOr<Val> c = make<gt::ConstantOp>(l, {}, {attr("value", value)});
  return *c; // A scalar constant always infers.
}

//===----------------------------------------------------------------------===//
// Built-in functions of the model body
//===----------------------------------------------------------------------===//

using K = ArgKind;

ParamSpec req(StringRef name, ArgKind kind) { return {name, kind, true}; }
ParamSpec opt(StringRef name, ArgKind kind) { return {name, kind, false}; }

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

const llvm::StringMap<Builtin> &modelBuiltins() {
  static const llvm::StringMap<Builtin> table = [] {
    llvm::StringMap<Builtin> t;
#define GTC_ACTIVATION_BUILTIN(Kind, name) t[#name] = unary<gt::Kind##Op>();
    GTC_ACTIVATION_OPS(GTC_ACTIVATION_BUILTIN)
#undef GTC_ACTIVATION_BUILTIN
    t["gelu"] = {{req("x", K::FloatTensor), opt("approximate", K::Bool)},
                 [](Generator &g, Loc l, Bound &a) {
                   bool approx = a[1] && a[1]->b;
                   return g.make<gt::GeluOp>(
                       l, a[0]->tensor,
                       {g.attr("approximate",
                               g.getBuilder().getBoolAttr(approx))});
                 }};
    t["softmax"] = {{req("x", K::FloatTensor), opt("axis", K::Int)},
                    [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
                      int64_t axis = a[1] ? a[1]->i : -1;
                      if (failed(axisOf(g, l, axis, a[0]->type().getRank())))
                        return failure();
                      return g.make<gt::SoftmaxOp>(
                          l, a[0]->tensor,
                          {g.attr("axis", g.getBuilder().getI64IntegerAttr(
                                              axis))});
                    }};
    t["linear"] = {{req("x", K::FloatTensor), req("out", K::Int),
                    opt("bias", K::Bool), opt("std", K::Number),
                    opt("name", K::Str)},
                   [](Generator &g, Loc l, Bound &a) {
                     FailureOr<std::string> name =
                         g.layerName(l, "fc", a[4]);
                     if (failed(name))
                       return FailureOr<Val>(failure());
                     return applyLinear(g, l, *a[0], a[1]->i,
                                        !a[2] || a[2]->b, *name,
                                        optDouble(a[3]));
                   }};
    t["matmul"] = {{req("a", K::FloatTensor), req("b", K::FloatTensor),
                    opt("transpose_a", K::Bool), opt("transpose_b", K::Bool)},
                   [](Generator &g, Loc l, Bound &a) {
                     OpBuilder &b = g.getBuilder();
                     return g.make<gt::MatmulOp>(
                         l, {a[0]->tensor, a[1]->tensor},
                         {g.attr("transpose_a",
                                 b.getBoolAttr(a[2] && a[2]->b)),
                          g.attr("transpose_b",
                                 b.getBoolAttr(a[3] && a[3]->b))});
                   }};
    t["transpose"] = {
        {req("x", K::Tensor), opt("dim0", K::Int), opt("dim1", K::Int)},
        [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
          int64_t rank = a[0]->type().getRank();
          if (rank < 2)
            return g.error(l) << "transpose needs a tensor of rank >= 2, got "
                              << gt::formatType(a[0]->type());
          FailureOr<int64_t> d0 = axisOf(g, l, a[1] ? a[1]->i : -2, rank);
          FailureOr<int64_t> d1 =
              succeeded(d0) ? axisOf(g, l, a[2] ? a[2]->i : -1, rank)
                            : FailureOr<int64_t>(failure());
          if (failed(d1))
            return failure();
          SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
          std::swap(perm[*d0], perm[*d1]);
          return g.make<gt::TransposeOp>(
              l, a[0]->tensor,
              {g.attr("permutation", g.getBuilder().getI64ArrayAttr(perm))});
        }};
    t["layernorm"] = {
        {req("x", K::FloatTensor), opt("eps", K::Number), opt("name", K::Str)},
        [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
          const Val &x = *a[0];
          if (x.type().getRank() < 1)
            return g.error(l) << "layernorm needs a tensor of rank >= 1";
          FailureOr<int64_t> d =
              g.staticDim(l, x, x.type().getRank() - 1, "layernorm");
          if (failed(d))
            return failure();
          FailureOr<std::string> name = g.layerName(l, "ln", a[2]);
          if (failed(name))
            return failure();
          Type et = x.type().getElementType();
          FailureOr<Val> w =
              g.makeParam(l, *name + ".weight", {*d}, et, "ones", {});
          FailureOr<Val> b = succeeded(w) ? g.makeParam(l, *name + ".bias",
                                                        {*d}, et, "zeros", {})
                                          : FailureOr<Val>(failure());
          if (failed(b))
            return failure();
          double eps = a[1] ? a[1]->asDouble() : 1e-5;
          return g.make<gt::LayerNormOp>(
              l, {x.tensor, w->tensor, b->tensor},
              {g.attr("epsilon", g.getBuilder().getF64FloatAttr(eps))});
        }};
    t["attention"] = {
        {req("x", K::FloatTensor), req("heads", K::Int), opt("causal", K::Bool),
         opt("std", K::Number), opt("name", K::Str)},
        [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
          const Val &x = *a[0];
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
          FailureOr<std::string> name = g.layerName(l, "attn", a[4]);
          if (failed(name))
            return failure();
          FailureOr<Val> qkv = applyLinear(g, l, x, 3 * *d, true,
                                           *name + ".c_attn", optDouble(a[3]));
          if (failed(qkv))
            return failure();
          OpBuilder &b = g.getBuilder();
          FailureOr<Val> y = g.make<gt::AttentionOp>(
              l, qkv->tensor,
              {g.attr("heads", b.getI64IntegerAttr(heads)),
               g.attr("causal", b.getBoolAttr(!a[2] || a[2]->b))});
          if (failed(y))
            return failure();
          return applyLinear(g, l, *y, *d, true, *name + ".c_proj",
                             optDouble(a[3]));
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
    t["positions"] = {{req("length", K::Int)},
                      [](Generator &g, Loc l, Bound &a) -> FailureOr<Val> {
                        int64_t n = a[0]->i;
                        if (n <= 0 || n > Limits::kMaxDim)
                          return g.error(a[0]->loc)
                                 << "positions needs a positive length, got "
                                 << n;
                        return g.make<gt::PositionsOp>(
                            l, {},
                            {g.attr("length",
                                    g.getBuilder().getI64IntegerAttr(n))});
                      }};
    t["cross_entropy"] = {{req("logits", K::FloatTensor),
                           req("labels", K::IndexTensor)},
                          [](Generator &g, Loc l, Bound &a) {
                            return g.make<gt::CrossEntropyOp>(
                                l, {a[0]->tensor, a[1]->tensor});
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
            known *= d;
            if (known > Limits::kMaxElements)
              return g.error(l) << "reshape to too many elements";
          }
          bool dynamic = !in.hasStaticShape();
          if (dynamic && inferred < 0)
            return g.error(l)
                   << "reshape of " << gt::formatType(in)
                   << " (symbolic size) needs one -1 in the new shape";
          if (inferred >= 0) {
            if (dynamic) {
              want[inferred] = ShapedType::kDynamic;
            } else if (in.getNumElements() % known != 0) {
              return g.error(l) << "cannot reshape " << gt::formatType(in)
                                << " (" << in.getNumElements()
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

//===----------------------------------------------------------------------===//
// Model body
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Generator::generate() {
  module = ModuleOp::create(loc(file.model->loc));
  if (failed(genModel(*file.model)))
    return nullptr;
  if (file.train && failed(genTrain(*file.train, file.model->name)))
    return nullptr;
  return module;
}

LogicalResult Generator::genModel(const ModelDecl &model) {
  builder.setInsertionPointToEnd(module.getBody());
  auto f32 = RankedTensorType::get({}, builder.getF32Type());
  auto func = func::FuncOp::create(builder, loc(model.loc), model.name,
                                   builder.getFunctionType({}, {f32}));
  func->setAttr(gt::kModelAttrName, builder.getUnitAttr());
  builder.setInsertionPointToStart(func.addEntryBlock());

  frames.emplace_back();
  if (failed(genBlock(model.body)))
    return failure();

  auto it = frames.front().names.find("loss");
  if (it == frames.front().names.end())
    return error(model.nameLoc)
           << "model '" << model.name
           << "' never assigns 'loss'; end it with a line such as "
              "loss = cross_entropy(logits, y)";
  const Val &loss = it->second.value;
  Loc lossLoc = it->second.loc;
  if (loss.kind != Val::Kind::Tensor)
    return error(lossLoc) << "'loss' must be a tensor, got " << describe(loss);
  if (loss.type().getRank() != 0)
    return error(lossLoc) << "'loss' must be a scalar, got "
                          << gt::formatType(loss.type())
                          << "; reduce it, e.g. with mean(...)";
  Value result = loss.tensor;
  if (!loss.type().getElementType().isF32()) {
    FailureOr<Val> cast = makeTyped<gt::CastOp>(lossLoc, f32, result);
    if (failed(cast))
      return failure();
    result = cast->tensor;
  }
  func::ReturnOp::create(builder, loc(lossLoc), result);
  return success();
}

LogicalResult Generator::genBlock(const std::vector<StmtPtr> &body) {
  for (const StmtPtr &s : body) {
    if (frames.back().returned)
      return error(s->loc) << "statement after 'return' is never run; "
                              "'return' must be the last statement";
    if (failed(genStmt(*s)))
      return failure();
  }
  return success();
}

const Binding *Generator::lookup(StringRef name) const {
  auto it = frames.back().names.find(name);
  if (it != frames.back().names.end())
    return &it->second;
  it = frames.front().names.find(name);
  if (it != frames.front().names.end())
    return &it->second;
  return nullptr;
}

std::vector<StringRef> Generator::visibleNames() const {
  std::vector<StringRef> names;
  for (const Frame *f : {&frames.front(), &frames.back()})
    for (const auto &entry : f->names)
      names.push_back(entry.getKey());
  for (const auto &entry : defs)
    names.push_back(entry.getKey());
  for (const auto &entry : modelBuiltins())
    names.push_back(entry.getKey());
  return names;
}

LogicalResult Generator::bind(const Stmt &s, StringRef name, Loc nameLoc,
                              Binding::What what, Val value) {
  if (modelBuiltins().count(name) || defs.count(name))
    return error(nameLoc) << "'" << name
                          << "' is a function; choose another name";
  auto &names = frames.back().names;
  auto it = names.find(name);
  if (it != names.end()) {
    bool rebind = (what == Binding::What::Var &&
                   it->second.what == Binding::What::Var) ||
                  it->second.origin == &s;
    if (!rebind) {
      static const char *kinds[] = {"a constant", "an input", "a label",
                                    "a parameter", "a variable"};
      InFlightDiagnostic diag =
          error(nameLoc) << "duplicate definition of '" << name << "'; it is "
                         << "already " << kinds[int(it->second.what)]
                         << (what == Binding::What::Var
                                 ? " and cannot be reassigned"
                                 : "");
      diag.attachNote(loc(it->second.loc)) << "first defined here";
      return diag;
    }
    it->second.value = std::move(value);
    return success();
  }
  // Assigning in a function must not silently shadow a model-level input,
  // label or parameter.
  if (frames.size() > 1 && what == Binding::What::Var) {
    auto outer = frames.front().names.find(name);
    if (outer != frames.front().names.end() &&
        outer->second.what != Binding::What::Var) {
      InFlightDiagnostic diag = error(nameLoc)
                                << "'" << name
                                << "' is a model-level name and cannot be "
                                   "assigned in a function; use a new name";
      diag.attachNote(loc(outer->second.loc)) << "defined here";
      return diag;
    }
  }
  names.try_emplace(name, Binding{what, std::move(value), nameLoc, &s});
  return success();
}

LogicalResult Generator::genStmt(const Stmt &s) {
  bool inFunction = frames.back().inFunction;
  switch (s.kind) {
  case Stmt::Kind::Input:
  case Stmt::Kind::Label:
    if (inFunction || !prefixes.empty())
      return error(s.loc) << "'" << (s.kind == Stmt::Kind::Input ? "input"
                                                                 : "label")
                          << "' is only allowed at the top of the model body";
    return genDeclaration(s);
  case Stmt::Kind::Param:
    return genDeclaration(s);
  case Stmt::Kind::Let: {
    FailureOr<Val> v = eval(*s.value);
    if (failed(v))
      return failure();
    if (v->kind == Val::Kind::Tensor)
      return error(s.value->loc)
             << "'let' defines a compile-time constant, but this is "
             << describe(*v) << "; use '" << s.name << " = ...' for tensors";
    return bind(s, s.name, s.nameLoc, Binding::What::Let, *v);
  }
  case Stmt::Kind::Assign: {
    FailureOr<Val> v = eval(*s.value);
    if (failed(v))
      return failure();
    return bind(s, s.name, s.nameLoc, Binding::What::Var, *v);
  }
  case Stmt::Kind::Def: {
    if (inFunction || !prefixes.empty())
      return error(s.loc) << "'def' is only allowed at the top of the model "
                             "body";
    if (modelBuiltins().count(s.name))
      return error(s.nameLoc) << "'" << s.name
                              << "' is a built-in function; choose another "
                                 "name";
    if (lookup(s.name))
      return error(s.nameLoc) << "duplicate definition of '" << s.name
                              << "'";
    auto [it, inserted] = defs.try_emplace(s.name, &s);
    if (!inserted) {
      InFlightDiagnostic diag = error(s.nameLoc)
                                << "duplicate definition of function '"
                                << s.name << "'";
      diag.attachNote(loc(it->second->nameLoc)) << "first defined here";
      return diag;
    }
    llvm::StringSet<> seen;
    for (auto [p, pl] : llvm::zip(s.params, s.paramLocs))
      if (!seen.insert(p).second)
        return error(pl) << "duplicate parameter name '" << p << "'";
    if (s.body.empty() || s.body.back()->kind != Stmt::Kind::Return)
      return error(s.nameLoc) << "function '" << s.name
                              << "' must end with 'return EXPR'";
    return success();
  }
  case Stmt::Kind::Return: {
    if (!inFunction)
      return error(s.loc) << "'return' is only allowed inside a 'def'";
    FailureOr<Val> v = eval(*s.value);
    if (failed(v))
      return failure();
    frames.back().returned = *v;
    return success();
  }
  case Stmt::Kind::Repeat:
    return genRepeat(s);
  }
  return success();
}

LogicalResult Generator::genRepeat(const Stmt &s) {
  FailureOr<Val> count = eval(*s.value);
  if (failed(count))
    return failure();
  if (count->kind != Val::Kind::Int || count->i < 1 ||
      count->i > Limits::kMaxRepeat)
    return error(s.value->loc) << "repeat needs a count between 1 and "
                               << Limits::kMaxRepeat << ", got "
                               << describe(*count);
  // Unnamed loops are blocks, blocks_2, blocks_3, ... in their scope; a name
  // given with 'as' must be unique there.
  std::string scope;
  for (const std::string &p : prefixes)
    scope += p + ".";
  std::string name = s.name.empty() ? "blocks" : s.name;
  if (!s.name.empty() && failed(checkName(s.name, s.nameLoc, "loop")))
    return failure();
  for (unsigned k = 2;; ++k) {
    auto [it, inserted] = loopNames.try_emplace(scope + name, &s);
    if (inserted || it->second == &s)
      break;
    if (!s.name.empty()) {
      InFlightDiagnostic diag = error(s.nameLoc)
                                << "another repeat loop here is already "
                                   "named '"
                                << name << "'; choose another name";
      diag.attachNote(loc(it->second->loc)) << "the other loop";
      return diag;
    }
    name = "blocks_" + std::to_string(k);
  }
  for (int64_t i = 0; i < count->i; ++i) {
    prefixes.push_back(name + "." + std::to_string(i));
    for (const StmtPtr &b : s.body) {
      if (b->kind == Stmt::Kind::Return)
        return error(b->loc) << "'return' cannot be inside 'repeat'";
      if (failed(genStmt(*b)))
        return failure();
    }
    prefixes.pop_back();
  }
  return success();
}

FailureOr<RankedTensorType> Generator::genType(const TypeExpr &type,
                                               bool allowSymbolic) {
  std::optional<Type> et = parseDtype(type.dtype, &ctx);
  if (!et)
    return error(type.dtypeLoc) << "unknown dtype '" << type.dtype
                                << "'; expected f32, bf16, f16 or i32"
                                << closest(type.dtype,
                                           {"f32", "bf16", "f16", "i32"});
  SmallVector<int64_t> shape;
  int64_t elements = 1;
  for (const ExprPtr &d : type.dims) {
    if (d->kind == Expr::Kind::Name && !lookup(d->text)) {
      if (!allowSymbolic)
        return error(d->loc)
               << "'" << d->text
               << "' is not a constant; parameter shapes must be fixed "
                  "(define it with 'let', or use a number)";
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    FailureOr<Val> v = eval(*d);
    if (failed(v))
      return failure();
    if (v->kind != Val::Kind::Int)
      return error(d->loc) << "a dimension must be an integer, got "
                           << describe(*v);
    if (v->i < 1 || v->i > Limits::kMaxDim)
      return error(d->loc) << "a dimension must be between 1 and "
                           << Limits::kMaxDim << ", got " << v->i;
    elements *= v->i;
    if (elements > Limits::kMaxElements)
      return error(d->loc) << "the tensor has more than "
                           << Limits::kMaxElements << " elements";
    shape.push_back(v->i);
  }
  return RankedTensorType::get(shape, *et);
}

LogicalResult Generator::genDeclaration(const Stmt &s) {
  bool isParam = s.kind == Stmt::Kind::Param;
  FailureOr<RankedTensorType> type = genType(s.type, !isParam);
  if (failed(type))
    return failure();
  FailureOr<Val> v;
  if (isParam) {
    if (!isa<FloatType>(type->getElementType()))
      return error(s.type.dtypeLoc) << "a parameter must be f32, bf16 or f16, "
                                       "got "
                                    << s.type.dtype;
    v = genInitializer(s, *type);
  } else if (s.kind == Stmt::Kind::Input) {
    v = makeTyped<gt::InputOp>(s.loc, *type, {},
                               {attr("name", builder.getStringAttr(s.name))});
  } else {
    v = makeTyped<gt::LabelOp>(s.loc, *type, {},
                               {attr("name", builder.getStringAttr(s.name))});
  }
  if (failed(v))
    return failure();
  Binding::What what = isParam                          ? Binding::What::Param
                       : s.kind == Stmt::Kind::Input ? Binding::What::Input
                                                      : Binding::What::Label;
  return bind(s, s.name, s.nameLoc, what, *v);
}

FailureOr<Val> Generator::genInitializer(const Stmt &s,
                                         RankedTensorType type) {
  if (!s.storedName.empty() &&
      failed(checkName(s.storedName, s.storedNameLoc, "parameter")))
    return failure();
  FailureOr<std::string> scoped =
      s.storedName.empty()
          ? layerName(s.nameLoc, "", Val::ofStr(s.name, s.nameLoc))
          : layerName(s.storedNameLoc, "",
                      Val::ofStr(s.storedName, s.storedNameLoc));
  if (failed(scoped))
    return failure();
  const std::string &name = *scoped;
  if (!s.value)
    return makeParam(s.loc, name, type.getShape(), type.getElementType(),
                     "normal", {0.0, 0.02});
  const Expr &e = *s.value;
  if (e.kind != Expr::Kind::Name && e.kind != Expr::Kind::Call)
    return error(e.loc) << "expected an initializer: zeros, ones, "
                           "constant(v), normal(std) or uniform(low, high)";
  auto it = initializers().find(e.text);
  if (it == initializers().end())
    return error(e.loc) << "unknown initializer '" << e.text
                        << "'; expected zeros, ones, constant(v), "
                           "normal(std) or uniform(low, high)"
                        << closest(e.text, {"zeros", "ones", "constant",
                                            "normal", "uniform"});
  std::vector<EvalArg> args;
  if (e.kind == Expr::Kind::Call) {
    FailureOr<std::vector<EvalArg>> evaluated = evalArgs(e);
    if (failed(evaluated))
      return failure();
    args = std::move(*evaluated);
  }
  FailureOr<Bound> bound = bindArgs(e.loc, e.text, it->second, args);
  if (failed(bound))
    return failure();
  std::vector<double> values;
  for (const std::optional<Val> &a : *bound)
    if (a)
      values.push_back(a->asDouble());
  StringRef init = e.text;
  if (init == "normal") // stored as (mean, std)
    values = {values.size() > 1 ? values[1] : 0.0, values[0]};
  if (init == "normal" && values[1] < 0)
    return error(e.loc) << "normal(std) needs std >= 0";
  if (init == "uniform" && values[0] > values[1])
    return error(e.loc) << "uniform(low, high) needs low <= high";
  return makeParam(s.loc, name, type.getShape(), type.getElementType(), init,
                   values);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

FailureOr<Val> Generator::eval(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number:
    return e.isInteger ? Val::ofInt(e.integer, e.loc)
                       : Val::ofFloat(e.number, e.loc);
  case Expr::Kind::String:
    return Val::ofStr(e.text, e.loc);
  case Expr::Kind::Name:
    return evalName(e);
  case Expr::Kind::Unary:
    return evalUnary(e);
  case Expr::Kind::Binary:
    return evalBinary(e);
  case Expr::Kind::Call:
    return evalCall(e);
  case Expr::Kind::Tuple: {
    Val t;
    t.kind = Val::Kind::Tuple;
    t.loc = e.loc;
    for (const ExprPtr &o : e.operands) {
      FailureOr<Val> v = eval(*o);
      if (failed(v))
        return failure();
      t.elems.push_back(*v);
    }
    return t;
  }
  }
  return failure();
}

FailureOr<Val> Generator::evalName(const Expr &e) {
  if (e.text == "true" || e.text == "false")
    return Val::ofBool(e.text == "true", e.loc);
  if (const Binding *b = lookup(e.text)) {
    Val v = b->value;
    v.loc = e.loc;
    return v;
  }
  if (inTrainBlock || parseDtype(e.text, &ctx))
    return Val::ofStr(e.text, e.loc, Val::Kind::Word);
  if (defs.count(e.text) || modelBuiltins().count(e.text))
    return error(e.loc) << "'" << e.text
                        << "' is a function; call it with arguments: "
                        << e.text << "(...)";
  return error(e.loc) << "unknown name '" << e.text << "'"
                      << closest(e.text, visibleNames());
}

FailureOr<Val> Generator::evalUnary(const Expr &e) {
  FailureOr<Val> v = eval(*e.operands[0]);
  if (failed(v))
    return failure();
  if (v->kind == Val::Kind::Int) {
    if (v->i == INT64_MIN)
      return error(e.loc) << "integer overflow";
    return Val::ofInt(-v->i, e.loc);
  }
  if (v->kind == Val::Kind::Float)
    return Val::ofFloat(-v->f, e.loc);
  if (matches(*v, K::FloatTensor))
    return make<gt::NegOp>(e.loc, v->tensor);
  return error(e.loc) << "cannot negate " << describe(*v);
}

FailureOr<Val> Generator::evalBinary(const Expr &e) {
  // A chain (`a + b - c ...`, a left spine of Binary nodes, 10,000 long
  // for a sum of 10,000 terms) in a loop, from its first operand on.
  std::vector<const Expr *> spine;
  const Expr *x = &e;
  for (; x->kind == Expr::Kind::Binary; x = x->operands[0].get())
    spine.push_back(x);
  FailureOr<Val> l = eval(*x);
  for (auto it = spine.rbegin(); succeeded(l) && it != spine.rend(); ++it) {
    FailureOr<Val> r = eval(*(*it)->operands[1]);
    if (failed(r))
      return failure();
    l = applyBinary(**it, *l, *r);
  }
  return l;
}

FailureOr<Val> Generator::applyBinary(const Expr &e, Val lv, Val rv) {
  Val *l = &lv, *r = &rv;
  char op = e.text[0];

  // Compile-time arithmetic.
  if (l->isNumber() && r->isNumber()) {
    if (l->kind == Val::Kind::Int && r->kind == Val::Kind::Int) {
      int64_t a = l->i, b = r->i, out = 0;
      bool overflow = false;
      switch (op) {
      case '+':
        overflow = __builtin_add_overflow(a, b, &out);
        break;
      case '-':
        overflow = __builtin_sub_overflow(a, b, &out);
        break;
      case '*':
        overflow = __builtin_mul_overflow(a, b, &out);
        break;
      case '/':
        if (b == 0)
          return error(e.loc) << "division by zero";
        if (a % b == 0 && !(a == INT64_MIN && b == -1))
          return Val::ofInt(a / b, e.loc);
        return Val::ofFloat(double(a) / double(b), e.loc);
      }
      if (overflow)
        return error(e.loc) << "integer overflow in '" << op << "'";
      return Val::ofInt(out, e.loc);
    }
    double a = l->asDouble(), b = r->asDouble(), out = 0;
    switch (op) {
    case '+':
      out = a + b;
      break;
    case '-':
      out = a - b;
      break;
    case '*':
      out = a * b;
      break;
    case '/':
      if (b == 0)
        return error(e.loc) << "division by zero";
      out = a / b;
      break;
    }
    if (!std::isfinite(out))
      return error(e.loc) << "the result of '" << op << "' is not finite";
    return Val::ofFloat(out, e.loc);
  }

  // Tensor arithmetic; a number next to a tensor becomes a scalar constant
  // of the tensor's element type.
  bool lt = l->kind == Val::Kind::Tensor, rt = r->kind == Val::Kind::Tensor;
  if (!(lt || rt) || !(lt || l->isNumber()) || !(rt || r->isNumber()))
    return error(e.loc) << "cannot apply '" << op << "' to " << describe(*l)
                        << " and " << describe(*r);
  Type et = (lt ? l->type() : r->type()).getElementType();
  for (Val *v : {&*l, &*r}) {
    if (v->kind == Val::Kind::Tensor)
      continue;
    if (v->kind == Val::Kind::Float && !isa<FloatType>(et))
      return error(v->loc) << "cannot combine the number " << v->f
                           << " with an i32 tensor";
    *v = constant(v->asDouble(), et, v->loc);
  }
  switch (op) {
  case '+':
    return make<gt::AddOp>(e.loc, {l->tensor, r->tensor});
  case '-':
    return make<gt::SubOp>(e.loc, {l->tensor, r->tensor});
  case '*':
    return make<gt::MulOp>(e.loc, {l->tensor, r->tensor});
  default:
    return make<gt::DivOp>(e.loc, {l->tensor, r->tensor});
  }
}

FailureOr<std::vector<EvalArg>> Generator::evalArgs(const Expr &call) {
  std::vector<EvalArg> args;
  for (const Arg &a : call.args) {
    FailureOr<Val> v = eval(*a.value);
    if (failed(v))
      return failure();
    args.push_back({a.keyword, *v, a.loc});
  }
  return args;
}

/// Prints a signature such as `linear(x, out, bias:, std:, name:)`.
static std::string signature(StringRef callee, ArrayRef<ParamSpec> params) {
  std::string s = callee.str() + "(";
  for (auto [i, p] : llvm::enumerate(params))
    s += (i ? ", " : "") + p.name.str() + (p.required ? "" : ": ...");
  return s + ")";
}

FailureOr<Bound> Generator::bindArgs(Loc l, StringRef callee,
                                     ArrayRef<ParamSpec> params,
                                     std::vector<EvalArg> &args) {
  Bound bound(params.size());
  size_t positional = 0;
  for (EvalArg &a : args) {
    size_t index;
    if (a.keyword.empty()) {
      if (positional >= params.size())
        return error(a.loc) << "too many arguments to '" << callee
                            << "': it takes " << params.size()
                            << (params.size() == 1 ? " argument, "
                                                   : " arguments, ")
                            << signature(callee, params);
      index = positional++;
    } else {
      auto it = llvm::find_if(
          params, [&](const ParamSpec &p) { return p.name == a.keyword; });
      if (it == params.end()) {
        std::vector<StringRef> names;
        for (const ParamSpec &p : params)
          names.push_back(p.name);
        return error(a.loc) << "'" << callee << "' has no argument named '"
                            << a.keyword << "'; expected "
                            << signature(callee, params)
                            << closest(a.keyword, names);
      }
      index = it - params.begin();
      if (bound[index])
        return error(a.loc) << "argument '" << a.keyword << "' of '" << callee
                            << "' is given twice";
    }
    const ParamSpec &p = params[index];
    if (!matches(a.value, p.kind))
      return error(a.loc) << "argument '" << p.name << "' of '" << callee
                          << "' must be " << describe(p.kind) << ", got "
                          << describe(a.value);
    bound[index] = a.value;
  }
  for (auto [i, p] : llvm::enumerate(params))
    if (p.required && !bound[i])
      return error(l) << "missing argument '" << p.name << "' in call to '"
                      << callee << "'; expected " << signature(callee, params);
  return bound;
}

FailureOr<Val> Generator::evalCall(const Expr &e) {
  if (inTrainBlock)
    return error(e.loc) << "unexpected call to '" << e.text
                        << "' in this setting";
  auto def = defs.find(e.text);
  auto builtin = modelBuiltins().find(e.text);
  if (def == defs.end() && builtin == modelBuiltins().end()) {
    if (lookup(e.text))
      return error(e.loc) << "'" << e.text << "' is a value, not a function";
    return error(e.loc) << "unknown function '" << e.text << "'"
                        << closest(e.text, visibleNames());
  }
  FailureOr<std::vector<EvalArg>> args = evalArgs(e);
  if (failed(args))
    return failure();
  if (def != defs.end())
    return callDef(e, *def->second, *args);
  FailureOr<Bound> bound =
      bindArgs(e.loc, e.text, builtin->second.params, *args);
  if (failed(bound))
    return failure();
  return builtin->second.emit(*this, e.loc, *bound);
}

FailureOr<Val> Generator::callDef(const Expr &e, const Stmt &def,
                                  std::vector<EvalArg> &args) {
  if (frames.size() > Limits::kMaxCallDepth)
    return error(e.loc) << "calls nest more than " << Limits::kMaxCallDepth
                        << " levels deep; functions cannot be recursive";
  std::vector<ParamSpec> params;
  for (const std::string &p : def.params)
    params.push_back(req(p, K::Any));
  FailureOr<Bound> bound = bindArgs(e.loc, def.name, params, args);
  if (failed(bound))
    return failure();
  Frame frame;
  frame.inFunction = true;
  for (auto [i, p] : llvm::enumerate(def.params))
    frame.names.try_emplace(p, Binding{Binding::What::Var, *(*bound)[i],
                                       def.paramLocs[i], &def});
  frames.push_back(std::move(frame));
  LogicalResult ok = genBlock(def.body);
  std::optional<Val> result = frames.back().returned;
  frames.pop_back();
  if (failed(ok))
    return failure();
  result->loc = e.loc;
  return *result;
}

//===----------------------------------------------------------------------===//
// Train block
//===----------------------------------------------------------------------===//

/// A train-block function builds a dictionary attribute.
using SettingFn =
    std::function<FailureOr<Attribute>(Generator &, Loc, Bound &)>;
struct SettingBuiltin {
  std::vector<ParamSpec> params;
  SettingFn build;
};

/// Builds a dictionary from `kind`-style fixed entries and bound arguments;
/// absent arguments take the given defaults.
struct DictBuilder {
  Generator &g;
  SmallVector<NamedAttribute> entries;

  DictBuilder &str(StringRef key, StringRef value) {
    entries.push_back(g.attr(key, g.getBuilder().getStringAttr(value)));
    return *this;
  }
  DictBuilder &f64(StringRef key, const std::optional<Val> &v, double def) {
    entries.push_back(
        g.attr(key, g.getBuilder().getF64FloatAttr(v ? v->asDouble() : def)));
    return *this;
  }
  DictBuilder &i64(StringRef key, const std::optional<Val> &v, int64_t def) {
    entries.push_back(
        g.attr(key, g.getBuilder().getI64IntegerAttr(v ? v->i : def)));
    return *this;
  }
  DictBuilder &boolean(StringRef key, const std::optional<Val> &v, bool def) {
    entries.push_back(g.attr(key, g.getBuilder().getBoolAttr(v ? v->b : def)));
    return *this;
  }
  Attribute build() { return g.getBuilder().getDictionaryAttr(entries); }
};

/// `betas: (0.9, 0.999)` as a two-element f64 array.
FailureOr<Attribute> betasAttr(Generator &g, const std::optional<Val> &v,
                               double b1, double b2) {
  if (v) {
    if (v->kind != Val::Kind::Tuple || v->elems.size() != 2 ||
        !v->elems[0].isNumber() || !v->elems[1].isNumber())
      return g.error(v->loc) << "betas must be a pair of numbers, e.g. "
                                "(0.9, 0.999)";
    b1 = v->elems[0].asDouble();
    b2 = v->elems[1].asDouble();
    if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1)
      return g.error(v->loc) << "betas must be in [0, 1)";
  }
  return Attribute(g.getBuilder().getF64ArrayAttr({b1, b2}));
}

FailureOr<Attribute> adamLike(Generator &g, StringRef name, Bound &a,
                              double defaultDecay) {
  FailureOr<Attribute> betas = betasAttr(g, a[1], 0.9, 0.999);
  if (failed(betas))
    return failure();
  DictBuilder d{g, {}};
  d.str("name", name).f64("lr", a[0], 1e-3).f64("eps", a[2], 1e-8);
  d.f64("weight_decay", a[3], defaultDecay);
  d.entries.push_back(g.attr("betas", *betas));
  return d.build();
}

const llvm::StringMap<SettingBuiltin> &settingBuiltins() {
  static const llvm::StringMap<SettingBuiltin> table = [] {
    llvm::StringMap<SettingBuiltin> t;
    t["idx"] = {{req("images", K::Str), req("labels", K::Str),
                 opt("scale", K::Number)},
                [](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                  DictBuilder d{g, {}};
                  d.str("kind", "idx").str("images", a[0]->s);
                  d.str("labels", a[1]->s).f64("scale", a[2], 1.0);
                  return d.build();
                }};
    auto seqData = [](StringRef kind) -> SettingBuiltin {
      return {{req("path", K::Str), req("seq", K::Int)},
              [kind](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                if (a[1]->i < 1)
                  return g.error(a[1]->loc) << "seq must be >= 1";
                DictBuilder d{g, {}};
                d.str("kind", kind).str("path", a[0]->s).i64("seq", a[1], 0);
                return d.build();
              }};
    };
    t["tokens"] = seqData("tokens");
    t["text"] = seqData("text");
    t["sgd"] = {{opt("lr", K::Number), opt("momentum", K::Number),
                 opt("dampening", K::Number), opt("nesterov", K::Bool),
                 opt("weight_decay", K::Number)},
                [](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                  // Arguments that would do nothing (torch.optim.SGD
                  // refuses the nesterov cases too).
                  const double momentum = a[1] ? a[1]->asDouble() : 0;
                  if (momentum == 0 && a[2])
                    return g.error(a[2]->loc)
                           << "dampening has no effect without momentum (it "
                              "damps the momentum buffer); give momentum: M "
                              "or drop dampening";
                  if (a[3] && a[3]->b && momentum == 0)
                    return g.error(a[3]->loc)
                           << "nesterov: true has no effect without "
                              "momentum; give momentum: M or drop nesterov";
                  if (a[3] && a[3]->b && a[2] && a[2]->asDouble() != 0)
                    return g.error(a[2]->loc)
                           << "Nesterov momentum needs dampening: 0";
                  DictBuilder d{g, {}};
                  d.str("name", "sgd").f64("lr", a[0], 1e-3);
                  d.f64("momentum", a[1], 0).f64("dampening", a[2], 0);
                  d.boolean("nesterov", a[3], false);
                  d.f64("weight_decay", a[4], 0);
                  return d.build();
                }};
    std::vector<ParamSpec> adamParams = {
        opt("lr", K::Number), opt("betas", K::Any), opt("eps", K::Number),
        opt("weight_decay", K::Number)};
    t["adam"] = {adamParams, [](Generator &g, Loc, Bound &a) {
                   return adamLike(g, "adam", a, 0.0);
                 }};
    t["adamw"] = {adamParams, [](Generator &g, Loc, Bound &a) {
                    return adamLike(g, "adamw", a, 0.01);
                  }};
    auto schedule = [](StringRef name) -> SettingBuiltin {
      return {{opt("warmup", K::Int), opt("final", K::Number)},
              [name](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                if (a[0] && a[0]->i < 0)
                  return g.error(a[0]->loc) << "warmup must be >= 0";
                if (name == "constant" && a[1])
                  return g.error(a[1]->loc)
                         << "final has no effect in a constant schedule (it "
                            "keeps lr after the warm-up); decay to it with "
                            "linear(...) or cosine(...), or drop final";
                DictBuilder d{g, {}};
                d.str("name", name).i64("warmup", a[0], 0);
                d.f64("final", a[1], 0.0);
                return d.build();
              }};
    };
    t["constant"] = schedule("constant");
    t["linear"] = schedule("linear");
    t["cosine"] = schedule("cosine");
    t["auto"] = {{opt("budget", K::Size)},
                 [](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                   DictBuilder d{g, {}};
                   d.str("mode", "auto");
                   if (a[0])
                     d.i64("budget", a[0], 0);
                   return d.build();
                 }};
    t["every"] = {{req("n", K::Int)},
                  [](Generator &g, Loc, Bound &a) -> FailureOr<Attribute> {
                    if (a[0]->i < 1)
                      return g.error(a[0]->loc) << "every(n) needs n >= 1";
                    DictBuilder d{g, {}};
                    return d.str("mode", "every").i64("every", a[0], 1).build();
                  }};
    return t;
  }();
  return table;
}

/// Which train-block functions each setting accepts.
const llvm::StringMap<std::vector<StringRef>> &settingFunctions() {
  static const llvm::StringMap<std::vector<StringRef>> table = {
      {"data", {"idx", "tokens", "text"}},
      {"eval", {"idx", "tokens", "text"}},
      {"optimizer", {"sgd", "adam", "adamw"}},
      {"schedule", {"constant", "linear", "cosine"}},
      {"checkpoint", {"auto", "every"}},
  };
  return table;
}

FailureOr<Attribute> Generator::toAttr(const Val &v, Loc l) {
  switch (v.kind) {
  case Val::Kind::Int:
    return Attribute(builder.getI64IntegerAttr(v.i));
  case Val::Kind::Float:
    return Attribute(builder.getF64FloatAttr(v.f));
  case Val::Kind::Bool:
    return Attribute(builder.getBoolAttr(v.b));
  case Val::Kind::Str:
  case Val::Kind::Word:
    return Attribute(builder.getStringAttr(v.s));
  default:
    return error(l) << "expected a number, a name or a function call here, "
                       "got "
                    << describe(v);
  }
}

FailureOr<Attribute> Generator::genSetting(const Setting &setting) {
  const Expr &e = *setting.value;
  auto fns = settingFunctions().find(setting.key);
  bool takesCall = fns != settingFunctions().end();
  bool isCallable = e.kind == Expr::Kind::Call || e.kind == Expr::Kind::Name;
  if (takesCall && isCallable &&
      llvm::is_contained(fns->second, StringRef(e.text))) {
    std::vector<EvalArg> args;
    if (e.kind == Expr::Kind::Call) {
      FailureOr<std::vector<EvalArg>> evaluated = evalArgs(e);
      if (failed(evaluated))
        return failure();
      args = std::move(*evaluated);
    }
    const SettingBuiltin &fn = settingBuiltins().find(e.text)->second;
    FailureOr<Bound> bound = bindArgs(e.loc, e.text, fn.params, args);
    if (failed(bound))
      return failure();
    return fn.build(*this, e.loc, *bound);
  }
  if (takesCall && e.kind == Expr::Kind::Call) {
    auto diag = error(e.loc) << "unknown " << setting.key << " '" << e.text
                             << "'; expected one of ";
    llvm::interleaveComma(fns->second, diag);
    diag << closest(e.text, fns->second);
    return diag;
  }
  FailureOr<Val> v = eval(e);
  if (failed(v))
    return failure();
  // `checkpoint = none` is the one bare word that stands for a dictionary.
  if (setting.key == "checkpoint" && v->kind == Val::Kind::Word &&
      v->s == "none")
    return DictBuilder{*this, {}}.str("mode", "none").build();
  if (takesCall && v->kind == Val::Kind::Word) {
    auto diag = error(e.loc) << "unknown " << setting.key << " '" << v->s
                             << "'; expected one of ";
    if (setting.key == "checkpoint")
      diag << "none, ";
    llvm::interleaveComma(fns->second, diag);
    diag << closest(v->s, fns->second);
    return diag;
  }
  if (setting.key == "grad_clip" && v->kind == Val::Kind::Int)
    return Attribute(builder.getF64FloatAttr(double(v->i)));
  return toAttr(*v, e.loc);
}

LogicalResult Generator::genTrain(const TrainDecl &train,
                                  StringRef modelName) {
  builder.setInsertionPointToEnd(module.getBody());
  inTrainBlock = true;
  SmallVector<NamedAttribute> settings;
  llvm::StringMap<Loc> seen;
  ArrayRef<StringRef> known = gt::trainSettingNames();
  for (const Setting &s : train.settings) {
    if (!llvm::is_contained(known, StringRef(s.key))) {
      auto diag = error(s.loc) << "unknown setting '" << s.key
                               << "'; expected one of ";
      llvm::interleaveComma(known, diag);
      diag << closest(s.key, known);
      return diag;
    }
    auto [it, inserted] = seen.try_emplace(s.key, s.loc);
    if (!inserted) {
      InFlightDiagnostic diag = error(s.loc) << "setting '" << s.key
                                             << "' is given twice";
      diag.attachNote(loc(it->second)) << "first given here";
      return diag;
    }
    FailureOr<Attribute> value = genSetting(s);
    if (failed(value))
      return failure();
    // Check the value where it is written: a one-setting gt.train op at the
    // setting's location runs the dialect's own checks.
    NamedAttribute entry = attr(s.key, *value);
    auto probe = gt::TrainOp::create(builder, loc(s.loc), modelName);
    probe->setAttr(entry.getName(), entry.getValue());
    LogicalResult ok = verify(probe);
    probe->erase();
    if (failed(ok))
      return failure();
    settings.push_back(entry);
  }
  if (seen.count("epochs") && seen.count("steps"))
    return error(seen["steps"])
           << "set either 'epochs' or 'steps', not both";
  // Settings that would do nothing (--eval replaces the train block's eval
  // data, so it cannot supply what the block lacks).
  if (seen.count("eval_every") && !seen.count("eval"))
    return error(seen["eval_every"])
           << "eval_every has no effect: this train block names no data to "
              "evaluate on; add eval = ... or drop eval_every";
  auto intSetting = [&](StringRef key) -> int64_t {
    for (const NamedAttribute &s : settings)
      if (s.getName() == key)
        if (auto i = dyn_cast<IntegerAttr>(s.getValue()))
          return i.getInt();
    return 0;
  };
  if (int64_t micro = intSetting("micro_batch"), batch = intSetting("batch");
      micro > 0 && batch > 0 && batch % micro != 0)
    return error(seen["micro_batch"])
           << "micro_batch = " << micro << " does not divide batch = "
           << batch << "; give a divisor of it (or auto)";
  auto op = gt::TrainOp::create(builder, loc(train.loc), modelName);
  for (const NamedAttribute &s : settings)
    op->setAttr(s.getName(), s.getValue());
  inTrainBlock = false;
  return success();
}

} // namespace

OwningOpRef<ModuleOp> gtc::mlirGen(MLIRContext &context, const File &file) {
  return Generator(context, file).generate();
}
