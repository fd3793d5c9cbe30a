//===- MLIRGen.cpp - From the .gt syntax tree to the gt dialect -----------===//
//
// The model body is a small program: `let` constants, `def` functions and
// `repeat` loops are evaluated here, at compile time, and what remains is a
// dataflow graph of gt operations. Names, arity, keywords, kinds of values and
// the training settings are checked while evaluating; shapes and dtypes are
// checked by the ops' own type inference, whose diagnostics carry the source
// location of the expression.
//===----------------------------------------------------------------------===//

#include "Generator.h"
#include "gtc/Frontend/MLIRGen.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ProgramStack.h"
#include <cmath>
#include <limits>

using namespace gtc;
using namespace gtc::gen;

namespace gtc::gen {

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
    diag.attachNote(fileLoc(first))
        << "'" << name << "' was first created here";
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

/// Whether the number `v` is a finite value of `elementType` (an i32 holds
/// whole numbers to 2^31 - 1; a float type, to its largest finite value).
static bool fitsDtype(const Val &v, Type elementType) {
  if (auto f = dyn_cast<FloatType>(elementType))
    return std::fabs(v.asDouble()) <=
           llvm::APFloat::getLargest(f.getFloatSemantics()).convertToDouble();
  const int64_t i = v.kind == Val::Kind::Int
                        ? v.i
                        : static_cast<int64_t>(v.asDouble());
  return i >= std::numeric_limits<int32_t>::min() &&
         i <= std::numeric_limits<int32_t>::max();
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
// Model body
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Generator::generate() {
  stackBase = llvm::getStackPointer();
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

/// Why `name` cannot be bound, as a value, a function or a parameter:
/// `true` and `false` read as booleans wherever they appear, so a binding
/// of them would never be read. Empty when it can.
static std::string reservedName(StringRef name) {
  if (name == "true" || name == "false")
    return "'" + name.str() + "' is a boolean";
  return "";
}

LogicalResult Generator::bind(const Stmt &s, StringRef name, Loc nameLoc,
                              Binding::What what, Val value) {
  if (std::string why = reservedName(name); !why.empty())
    return error(nameLoc) << why << "; choose another name";
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
      diag.attachNote(fileLoc(it->second.loc)) << "first defined here";
      return diag;
    }
    it->second.value = std::move(value);
    // (a variable's place is its latest assignment: `loss` is checked there)
    it->second.loc = nameLoc;
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
      diag.attachNote(fileLoc(outer->second.loc)) << "defined here";
      return diag;
    }
  }
  names.try_emplace(name, Binding{what, std::move(value), nameLoc, &s});
  return success();
}

LogicalResult Generator::checkStack(Loc l) {
  // (the stack grows down)
  if (stackBase - llvm::getStackPointer() <= kStackBudget)
    return success();
  return error(l) << "the model nests too deeply here: expressions inside "
                     "calls inside repeat loops take more than "
                  << (kStackBudget >> 20)
                  << " MiB of the compiler's stack; name intermediate "
                     "values with statements, or nest fewer calls and loops";
}

LogicalResult Generator::genStmt(const Stmt &s) {
  if (failed(checkStack(s.loc)))
    return failure();
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
    if (std::string why = reservedName(s.name); !why.empty())
      return error(s.nameLoc) << why << "; choose another name";
    if (lookup(s.name))
      return error(s.nameLoc) << "duplicate definition of '" << s.name
                              << "'";
    auto [it, inserted] = defs.try_emplace(s.name, &s);
    if (!inserted) {
      InFlightDiagnostic diag = error(s.nameLoc)
                                << "duplicate definition of function '"
                                << s.name << "'";
      diag.attachNote(fileLoc(it->second->nameLoc)) << "first defined here";
      return diag;
    }
    llvm::StringSet<> seen;
    for (auto [p, pl] : llvm::zip(s.params, s.paramLocs)) {
      if (!seen.insert(p).second)
        return error(pl) << "duplicate parameter name '" << p << "'";
      if (std::string why = reservedName(p); !why.empty())
        return error(pl) << why << "; choose another name";
    }
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
      diag.attachNote(fileLoc(it->second->loc)) << "the other loop";
      return diag;
    }
    name = "blocks_" + std::to_string(k);
  }
  for (int64_t i = 0; i < count->i; ++i) {
    if (++iterations > Limits::kMaxIterations)
      return error(s.value->loc)
             << "repeat loops unroll to more than " << Limits::kMaxIterations
             << " iterations in all; reduce the (nested) repeat counts";
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
    if (__builtin_mul_overflow(elements, v->i, &elements) ||
        elements > Limits::kMaxElements)
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
  FailureOr<Bound> bound = bindCall(e, it->second);
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
  if (failed(checkStack(e.loc)))
    return failure();
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
    // The number must fit the tensor's dtype (it would wrap, or be inf).
    if (!fitsDtype(*v, et))
      return error(v->loc)
             << "the number "
             << (v->kind == Val::Kind::Int ? std::to_string(v->i)
                                           : llvm::formatv("{0:e}", v->f).str())
             << " does not fit the "
             << gt::formatType(RankedTensorType::get({}, et))
             << " tensor it is combined with";
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

FailureOr<Bound> Generator::bindCall(const Expr &e,
                                     ArrayRef<ParamSpec> params) {
  std::vector<EvalArg> args;
  if (e.kind == Expr::Kind::Call) {
    FailureOr<std::vector<EvalArg>> evaluated = evalArgs(e);
    if (failed(evaluated))
      return failure();
    args = std::move(*evaluated);
  }
  return bindArgs(e.loc, e.text, params, args);
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
    bound.byKeyword[index] = !a.keyword.empty();
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
  if (frames.size() > Limits::kMaxCallDepth) {
    // One note, at the model's call that began it, not 64 "called from".
    InFlightDiagnostic d = emitError(fileLoc(e.loc))
                           << "calls nest more than " << Limits::kMaxCallDepth
                           << " levels deep; functions cannot be recursive";
    d.attachNote(frames[1].caller) << "the model's call that led here";
    return d;
  }
  std::vector<ParamSpec> params;
  for (const std::string &p : def.params)
    params.push_back(req(p, K::Any));
  FailureOr<Bound> bound = bindArgs(e.loc, def.name, params, args);
  if (failed(bound))
    return failure();
  Frame frame;
  frame.inFunction = true;
  frame.caller = loc(e.loc);
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

} // namespace gtc::gen

OwningOpRef<ModuleOp> gtc::mlirGen(MLIRContext &context, const File &file) {
  // On a stack of its own: its depth is checked against it, whatever the
  // calling thread's (ulimit -s, a worker thread's).
  OwningOpRef<ModuleOp> module;
  llvm::runOnNewStack(Generator::kStackSize, [&] {
    module = Generator(context, file).generate();
  });
  return module;
}
