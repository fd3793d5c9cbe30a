//===- GTOps.h - Operations of the gt dialect -------------------*- C++ -*-===//

#ifndef GTC_DIALECT_GT_GTOPS_H
#define GTC_DIALECT_GT_GTOPS_H

#include "gtc/Dialect/GT/GTDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "gtc/Dialect/GT/GTTraits.h"
#include <optional>
#include <string>

#define GET_OP_CLASSES
#include "gtc/Dialect/GT/GTOps.h.inc"

namespace mlir::gt {

/// Broadcasts two shapes with NumPy rules (a dynamic dimension matches any
/// size). Returns failure and leaves `result` unspecified when a pair of
/// dimensions differs and neither is 1.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &result);

/// Sets the result types of `op` to what its InferTypeOpInterface infers
/// from its operands and attributes (after a pass changed an operand's
/// shape); failure, with the op's error, where they do not agree.
LogicalResult reinferResultTypes(InferTypeOpInterface op);

/// Formats a shape the way a `.gt` file writes it, e.g. `f32[?, 784]`.
std::string formatType(Type type);

/// The forms of a train-block setting's value (gtc/Runtime/TrainSettings.def
/// gives each setting's).
enum class TrainSettingKind {
  Source,     ///< idx(...), tokens(...) or text(...): a dictionary with kind
  Count,      ///< an integer >= 1
  Seed,       ///< an integer >= 0
  Optimizer,  ///< sgd(...), adam(...) or adamw(...): a dictionary with name
  Schedule,   ///< constant(...), linear(...) or cosine(...), likewise
  Precision,  ///< fp32, tf32, bf16 or fp16
  Checkpoint, ///< none, auto(...) or every(n): a dictionary with mode
  Devices,    ///< an integer >= 1, all or cpu
  Shard,      ///< none, optimizer or gradients
  MicroBatch, ///< an integer >= 1 or auto
  Positive,   ///< a number > 0
  Bool,       ///< true or false
};

/// A row of gtc/Runtime/TrainSettings.def: a `gt.train` attribute that
/// configures training.
struct TrainSetting {
  StringRef name;
  TrainSettingKind kind;
  StringRef defaultValue; ///< what training does without it
  StringRef flag;         ///< the run option that overrides it, or ""
  StringRef help;
};

/// Every train setting, in TrainSettings.def's order.
ArrayRef<TrainSetting> trainSettings();

/// The setting called `name`, or nullptr.
const TrainSetting *lookupTrainSetting(StringRef name);

/// The names of the `gt.train` attributes that configure training.
ArrayRef<StringRef> trainSettingNames();

/// Checks one of a gt.train op's settings (its name, form and range), with
/// errors at `op`.
LogicalResult checkTrainSetting(TrainOp op, NamedAttribute setting);

/// A rule between a train block's settings that `settings` (a gt.train
/// op's attributes) breaks: the setting to change and why. The verifier
/// reports it at the op, the front end at that setting's line.
struct TrainSettingConflict {
  StringRef setting;
  std::string message;
};
std::optional<TrainSettingConflict>
trainSettingConflict(DictionaryAttr settings);

/// A `checkpoint` setting in the encoding of gt-checkpoint's and gtc run's
/// --checkpoint: `every` > 0 keeps the input of every n-th repeat iteration,
/// -1 none; `budget` > 0 is auto(budget: that many bytes), -1 auto (the
/// device's free memory), 0 not auto.
struct CheckpointSetting {
  int64_t every = -1, budget = 0;
};

/// The train block's `checkpoint` (none when it has none): the one reader of
/// the attribute's dictionary.
CheckpointSetting checkpointSetting(TrainOp train);

/// Where the train block gives `setting`: the front end locates a gt.train
/// op at a fused location, the block's own first, then one NameLoc for each
/// setting, named as the setting, around the setting's location. The op's
/// location when the setting has none.
Location trainSettingLoc(TrainOp train, StringRef setting);

} // namespace mlir::gt

#endif // GTC_DIALECT_GT_GTOPS_H
