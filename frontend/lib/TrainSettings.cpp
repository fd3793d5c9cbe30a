//===- TrainSettings.cpp - The train block ---------------------------------===//
//
// The train block's settings as gt.train's attributes: each checked where it
// is written (a one-setting gt.train runs the dialect's checks), and the
// combinations in which a setting would do nothing refused.
//===----------------------------------------------------------------------===//

#include "Generator.h"
#include "mlir/IR/Verifier.h"

namespace gtc::gen {

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

/// The train-block functions a setting accepts, by its kind
/// (TrainSettings.def); empty for a setting that takes none.
ArrayRef<StringRef> settingFunctions(StringRef key) {
  static const StringRef sources[] = {"idx", "tokens", "text"};
  static const StringRef optimizers[] = {"sgd", "adam", "adamw"};
  static const StringRef schedules[] = {"constant", "linear", "cosine"};
  static const StringRef checkpoints[] = {"auto", "every"};
  const gt::TrainSetting *setting = gt::lookupTrainSetting(key);
  if (!setting)
    return {};
  switch (setting->kind) {
  case gt::TrainSettingKind::Source:
    return sources;
  case gt::TrainSettingKind::Optimizer:
    return optimizers;
  case gt::TrainSettingKind::Schedule:
    return schedules;
  case gt::TrainSettingKind::Checkpoint:
    return checkpoints;
  default:
    return {};
  }
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
  ArrayRef<StringRef> fns = settingFunctions(setting.key);
  bool takesCall = !fns.empty();
  bool isCallable = e.kind == Expr::Kind::Call || e.kind == Expr::Kind::Name;
  if (takesCall && isCallable && llvm::is_contained(fns, StringRef(e.text))) {
    const SettingBuiltin &fn = settingBuiltins().find(e.text)->second;
    FailureOr<Bound> bound = bindCall(e, fn.params);
    if (failed(bound))
      return failure();
    return fn.build(*this, e.loc, *bound);
  }
  if (takesCall && e.kind == Expr::Kind::Call) {
    auto diag = error(e.loc) << "unknown " << setting.key << " '" << e.text
                             << "'; expected one of ";
    llvm::interleaveComma(fns, diag);
    diag << closest(e.text, fns);
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
    llvm::interleaveComma(fns, diag);
    diag << closest(v->s, fns);
    return diag;
  }
  // A quoted name is a string, not the name: `optimizer = "adam"`.
  if (takesCall && v->kind == Val::Kind::Str) {
    const bool known = llvm::is_contained(fns, StringRef(v->s)) ||
                       (setting.key == "checkpoint" && v->s == "none");
    auto diag = error(e.loc) << setting.key << " takes a name or a call (";
    if (setting.key == "checkpoint")
      diag << "none, ";
    llvm::interleaveComma(fns, diag);
    diag << "), not a string";
    if (known)
      diag << "; write " << v->s << " without quotes";
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
      diag.attachNote(fileLoc(it->second)) << "first given here";
      return diag;
    }
    FailureOr<Attribute> value = genSetting(s);
    if (failed(value))
      return failure();
    // Check the value where it is written: the dialect's own checks, on a
    // gt.train op at the setting's location.
    NamedAttribute entry = attr(s.key, *value);
    auto probe = gt::TrainOp::create(builder, loc(s.loc), modelName);
    LogicalResult ok = gt::checkTrainSetting(probe, entry);
    probe->erase();
    if (failed(ok))
      return failure();
    settings.push_back(entry);
  }
  if (auto conflict =
          gt::trainSettingConflict(builder.getDictionaryAttr(settings)))
    return error(seen[conflict->setting]) << conflict->message;
  // Located at the block, and at each setting (gt::trainSettingLoc), for
  // the errors that later checks find in a setting.
  SmallVector<Location> locs{loc(train.loc)};
  for (const Setting &s : train.settings)
    locs.push_back(NameLoc::get(builder.getStringAttr(s.key), loc(s.loc)));
  auto op = gt::TrainOp::create(builder, FusedLoc::get(&ctx, locs),
                                modelName);
  for (const NamedAttribute &s : settings)
    op->setAttr(s.getName(), s.getValue());
  inTrainBlock = false;
  return success();
}

} // namespace gtc::gen
