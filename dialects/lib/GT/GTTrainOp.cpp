//===- GTTrainOp.cpp - The gt.train op: a model's training settings -------===//
//
// gt.train names its model and carries the train block's settings as
// attributes; its verifier checks each one and the rules between them
// (trainSettingConflict, which the front end reports at the setting's line).
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Capabilities.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <vector>

using namespace mlir;
using namespace mlir::gt;

//===----------------------------------------------------------------------===//
// Training configuration
//===----------------------------------------------------------------------===//

ArrayRef<TrainSetting> mlir::gt::trainSettings() {
  static const TrainSetting settings[] = {
#define GTC_TRAIN_SETTING(NAME, KIND, DEFAULT, FLAG, HELP)                     \
  {#NAME, TrainSettingKind::KIND, DEFAULT, FLAG, HELP},
#include "gtc/Runtime/TrainSettings.def"
  };
  return settings;
}

const TrainSetting *mlir::gt::lookupTrainSetting(StringRef name) {
  for (const TrainSetting &s : trainSettings())
    if (s.name == name)
      return &s;
  return nullptr;
}

ArrayRef<StringRef> mlir::gt::trainSettingNames() {
  static const std::vector<StringRef> names = [] {
    std::vector<StringRef> n;
    for (const TrainSetting &s : trainSettings())
      n.push_back(s.name);
    return n;
  }();
  return names;
}

namespace {
/// Checks the attributes of a gt.train op one by one.
class TrainChecker {
public:
  explicit TrainChecker(TrainOp op) : op(op) {}

  LogicalResult positiveInt(StringRef key, Attribute v, int64_t min = 1) {
    // (a BoolAttr is an IntegerAttr of i1: `seed = false` is no seed)
    auto i = dyn_cast<IntegerAttr>(v);
    if (!i || isa<BoolAttr>(v) || i.getInt() < min)
      return op.emitError("setting '") << key << "' must be an integer >= "
                                       << min;
    return success();
  }

  LogicalResult positiveFloat(StringRef key, Attribute v) {
    auto f = dyn_cast<FloatAttr>(v);
    if (!f || !(f.getValueAsDouble() > 0))
      return op.emitError("setting '") << key << "' must be a number > 0";
    return success();
  }

  LogicalResult oneOf(StringRef key, Attribute v,
                      ArrayRef<StringRef> choices) {
    auto s = dyn_cast<StringAttr>(v);
    if (!s || !llvm::is_contained(choices, s.getValue())) {
      auto diag = op.emitError("setting '") << key << "' must be one of ";
      llvm::interleaveComma(choices, diag,
                            [&](StringRef c) { diag << "\"" << c << "\""; });
      return diag;
    }
    return success();
  }

  /// A dictionary with a string `tag` key, selecting `kinds`, whose other
  /// keys are among `keys`.
  LogicalResult tagged(StringRef key, Attribute v, StringRef tag,
                       ArrayRef<StringRef> kinds, ArrayRef<StringRef> keys) {
    auto dict = dyn_cast<DictionaryAttr>(v);
    if (!dict)
      return op.emitError("setting '") << key << "' must be a dictionary";
    if (failed(oneOf((key + "." + tag).str(), dict.get(tag), kinds)))
      return failure();
    for (NamedAttribute entry : dict)
      if (entry.getName() != tag &&
          !llvm::is_contained(keys, entry.getName().getValue()))
        return op.emitError("setting '")
               << key << "' has unknown field '" << entry.getName().getValue()
               << "'";
    return success();
  }

  /// Checks that the numeric field `field` of the dictionary `key`, if
  /// present, is a number >= min (> min when `strict`).
  LogicalResult atLeast(StringRef key, Attribute v, StringRef field,
                        double min, bool strict = false) {
    Attribute a = cast<DictionaryAttr>(v).get(field);
    if (!a)
      return success();
    std::optional<double> x;
    if (auto f = dyn_cast<FloatAttr>(a))
      x = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(a))
      x = static_cast<double>(i.getInt());
    if (!x || !std::isfinite(*x) || (strict ? *x <= min : *x < min))
      return op.emitError("setting '")
             << key << "." << field << "' must be a number "
             << (strict ? "> " : ">= ")
             << (min == std::floor(min)
                     ? std::to_string(static_cast<long long>(min))
                     : llvm::formatv("{0}", min).str());
    return success();
  }

  /// Checks one attribute by its setting's kind (TrainSettings.def).
  LogicalResult check(NamedAttribute attr) {
    StringRef key = attr.getName().getValue();
    Attribute v = attr.getValue();
    if (key == "model")
      return success();
    const TrainSetting *setting = lookupTrainSetting(key);
    if (!setting)
      return op.emitError("gt.train has unknown setting '") << key << "'";
    switch (setting->kind) {
    case TrainSettingKind::Source:
      return failure(
          failed(tagged(key, v, "kind", {"idx", "tokens", "text"},
                        {"images", "labels", "path", "scale", "seq"})) ||
          failed(atLeast(key, v, "seq", 1)));
    case TrainSettingKind::Count:
      return positiveInt(key, v);
    case TrainSettingKind::Seed:
      return positiveInt(key, v, 0);
    case TrainSettingKind::Optimizer:
      return failure(
          failed(tagged(key, v, "name", {"sgd", "adam", "adamw"},
                        {"lr", "momentum", "nesterov", "weight_decay",
                         "betas", "eps", "dampening"})) ||
          failed(atLeast(key, v, "lr", 0)) ||
          failed(atLeast(key, v, "momentum", 0)) ||
          failed(atLeast(key, v, "dampening", 0)) ||
          failed(atLeast(key, v, "weight_decay", 0)) ||
          failed(atLeast(key, v, "eps", 0, /*strict=*/true)));
    case TrainSettingKind::Schedule:
      return failure(
          failed(tagged(key, v, "name", {"constant", "linear", "cosine"},
                        {"warmup", "final"})) ||
          failed(atLeast(key, v, "warmup", 0)) ||
          failed(atLeast(key, v, "final", 0)));
    case TrainSettingKind::Precision:
      return oneOf(key, v, {"fp32", "tf32", "bf16", "fp16"});
    case TrainSettingKind::Checkpoint:
      return failure(failed(tagged(key, v, "mode", {"none", "auto", "every"},
                                   {"budget", "every"})) ||
                     failed(atLeast(key, v, "budget", 0, /*strict=*/true)) ||
                     failed(atLeast(key, v, "every", 1)));
    case TrainSettingKind::Devices:
      if (auto n = dyn_cast<IntegerAttr>(v);
          n && (n.getInt() < 1 || n.getInt() > gtc::rt::kMaxDevices))
        return op.emitError("setting 'devices' must be an integer from 1 to ")
               << gtc::rt::kMaxDevices << ", all or cpu";
      if (auto s = dyn_cast<StringAttr>(v);
          (isa<IntegerAttr>(v) && !isa<BoolAttr>(v)) ||
          (s && (s.getValue() == "all" || s.getValue() == "cpu")))
        return success();
      return op.emitError("setting 'devices' must be an integer from 1 to ")
             << gtc::rt::kMaxDevices << ", all or cpu";
    case TrainSettingKind::Shard:
      return oneOf(key, v, {"none", "optimizer", "gradients"});
    case TrainSettingKind::MicroBatch:
      if (auto s = dyn_cast<StringAttr>(v); s && s.getValue() == "auto")
        return success();
      if (!isa<IntegerAttr>(v) || isa<BoolAttr>(v))
        return op.emitError("setting '")
               << key << "' must be an integer >= 1 or auto";
      return positiveInt(key, v);
    case TrainSettingKind::Positive:
      return positiveFloat(key, v);
    case TrainSettingKind::Bool:
      if (isa<BoolAttr>(v))
        return success();
      return op.emitError("setting '") << key << "' must be true or false";
    }
    llvm_unreachable("a kind of TrainSettings.def");
  }

private:
  TrainOp op;
};
} // namespace

LogicalResult TrainOp::verify() {
  for (NamedAttribute attr : (*this)->getAttrs())
    if (failed(checkTrainSetting(*this, attr)))
      return failure();
  if (auto conflict = trainSettingConflict((*this)->getAttrDictionary()))
    return emitOpError(conflict->message);
  return success();
}

LogicalResult mlir::gt::checkTrainSetting(TrainOp op, NamedAttribute setting) {
  return TrainChecker(op).check(setting);
}

std::optional<TrainSettingConflict>
mlir::gt::trainSettingConflict(DictionaryAttr settings) {
  if (settings.contains("epochs") && settings.contains("steps"))
    return TrainSettingConflict{"steps",
                                "set either 'epochs' or 'steps', not both"};
  // A setting that would do nothing (--eval replaces the train block's eval
  // data, so it cannot supply what the block lacks).
  if (settings.contains("eval_every") && !settings.contains("eval"))
    return TrainSettingConflict{
        "eval_every", "eval_every has no effect: this train block names no "
                      "data to evaluate on; add eval = ... or drop eval_every"};
  auto batch = settings.getAs<IntegerAttr>("batch");
  auto micro = settings.getAs<IntegerAttr>("micro_batch");
  if (batch && micro && micro.getInt() > 0 &&
      batch.getInt() % micro.getInt() != 0)
    return TrainSettingConflict{
        "micro_batch", llvm::formatv("micro_batch = {0} does not divide batch "
                                     "= {1}; give a divisor of it (or auto)",
                                     micro.getInt(), batch.getInt())
                           .str()};
  return std::nullopt;
}

Location mlir::gt::trainSettingLoc(TrainOp train, StringRef setting) {
  if (auto fused = dyn_cast<FusedLoc>(train.getLoc()))
    for (Location part : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(part);
          name && name.getName() == setting)
        return name.getChildLoc();
  return train.getLoc();
}

CheckpointSetting mlir::gt::checkpointSetting(TrainOp train) {
  CheckpointSetting setting;
  auto c = train ? train->getAttrOfType<DictionaryAttr>("checkpoint")
                 : DictionaryAttr();
  auto mode = c ? c.getAs<StringAttr>("mode") : StringAttr();
  if (mode && mode.getValue() == "every")
    if (auto every = c.getAs<IntegerAttr>("every"))
      setting.every = every.getInt();
  if (mode && mode.getValue() == "auto") {
    auto budget = c.getAs<IntegerAttr>("budget");
    setting.budget = budget ? budget.getInt() : -1;
  }
  return setting;
}

LogicalResult TrainOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto func =
      symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getModelAttr());
  if (!func || !func->hasAttr(kModelAttrName))
    return emitOpError("names '")
           << getModel() << "', which is not a func.func with the '"
           << kModelAttrName << "' attribute";
  return success();
}
