//===- Generator.h - The evaluator of a .gt syntax tree --------*- C++ -*-===//
//
// Private to the front end: the values the evaluator computes with, the
// signatures of built-in functions, and the Generator that walks the syntax
// tree and builds the gt dialect. MLIRGen.cpp evaluates the model body,
// Builtins.cpp holds the model's built-in functions, TrainSettings.cpp the
// train block.
//===----------------------------------------------------------------------===//

#ifndef GTC_FRONTEND_LIB_GENERATOR_H
#define GTC_FRONTEND_LIB_GENERATOR_H

#include "gtc/Frontend/MLIRGen.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include <functional>

namespace gtc::gen {

using namespace mlir;
using llvm::StringRef;
using llvm::Twine;

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
inline std::string describe(const Val &v) {
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

inline const char *describe(ArgKind kind) {
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

inline std::optional<Type> parseDtype(StringRef name, MLIRContext *ctx) {
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

inline bool matches(const Val &v, ArgKind kind) {
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
struct Bound : std::vector<std::optional<Val>> {
  explicit Bound(size_t n) : vector(n), byKeyword(n) {}
  /// Whether argument i was given by name (for a builtin whose positional
  /// argument stands for another one, as attention's third does).
  std::vector<bool> byKeyword;
};

/// A function argument after evaluation.
struct EvalArg {
  std::string keyword;
  Val value;
  Loc loc;
};

/// Returns the candidate closest to `name`, for "did you mean" hints.
inline std::string closest(StringRef name, ArrayRef<StringRef> candidates) {
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
  /// A function's frame: where it was called (itself inside its caller's
  /// calls, if any).
  std::optional<Location> caller;
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

  /// An error when evaluating deeper would take more than kStackBudget of
  /// the stack from where generate() began: expressions, calls and repeat
  /// loops each within their own limits can nest into one another deeply
  /// enough to overflow it. (mlirGen gives generate() a stack of
  /// kStackSize.)
  LogicalResult checkStack(Loc l);
  static constexpr unsigned kStackSize = 256u << 20;
  static constexpr uintptr_t kStackBudget = 192u << 20;

  // Used by the built-ins.
  /// Inside a function, a call-site location: its diagnostics end with a
  /// "called from" note at each call that led there.
  Location loc(Loc l) {
    Location at = fileLoc(l);
    if (!frames.empty() && frames.back().caller)
      return CallSiteLoc::get(at, *frames.back().caller);
    return at;
  }
  /// The place alone, without the calls that led there (a note at a
  /// model-level place).
  Location fileLoc(Loc l) {
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
  /// A new dropout's salt: 0, 1, ... in the order of the model's dropouts,
  /// so that each draws its own mask.
  int64_t nextDropoutSalt() { return dropouts++; }
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
  /// `name` or `name(args)` (an initializer, a train-block function) bound
  /// to `params`: a bare name has no arguments.
  FailureOr<Bound> bindCall(const Expr &e, ArrayRef<ParamSpec> params);
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
  size_t iterations = 0; ///< repeat iterations unrolled, nested ones too
  int64_t dropouts = 0;
  uintptr_t stackBase = 0; ///< the stack pointer where generate() began
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

using K = ArgKind;

inline ParamSpec req(StringRef name, ArgKind kind) { return {name, kind, true}; }
inline ParamSpec opt(StringRef name, ArgKind kind) { return {name, kind, false}; }

/// The model body's built-in functions by name, and the initializers of
/// `param` (Builtins.cpp).
const llvm::StringMap<Builtin> &modelBuiltins();
const llvm::StringMap<std::vector<ParamSpec>> &initializers();

} // namespace gtc::gen

#endif // GTC_FRONTEND_LIB_GENERATOR_H
