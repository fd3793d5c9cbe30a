//===- Settings.h - One command's train settings, resolved once -*- C++ -*-===//
//
// The train settings a run option overrides (TrainSettings.def's rows with a
// flag: batch, precision, checkpoint, micro_batch, devices, shard) are
// resolved here, once per command: the run option, else the train block's
// setting, else the default. gtc run, gtc compile and the tests read the
// result; nothing after this compares a run option with the train block.
//===----------------------------------------------------------------------===//

#ifndef GTC_PLAN_SETTINGS_H
#define GTC_PLAN_SETTINGS_H

#include "gtc/Plan/Pipeline.h"
#include "gtc/Runtime/RunArgs.h"

namespace gtc {

struct Settings {
  /// The batch (the global one, with data parallelism), precision, padding,
  /// fusion, checkpointing and micro-batch, as compileStep takes them; the
  /// caller adds deviceMemory, and a data-parallel process's share.
  CompileOptions compile;
  /// --batch auto: the largest batch that fits the memory (compile.batch is
  /// the train block's or the default until it is chosen).
  bool batchAuto = false;
  /// Where the batch was given: --batch, or the train block's setting (null
  /// for the default).
  mlir::LocationAttr batchFrom;
  /// The rows of a model whose inputs have no symbolic dimension
  /// (fixedBatch): each process takes them; a batch given must be them
  /// times the processes, and no micro-batch can split them.
  std::optional<int64_t> fixedRows;
  /// "N", "all" or "cpu"; empty when neither --devices nor the train block
  /// says (one device).
  std::string devices;
  /// Where `devices` was given: its option or its setting (null when
  /// neither gives it: one device, or a launcher's processes).
  mlir::LocationAttr devicesFrom;
  /// "none", "optimizer" or "gradients".
  std::string shard = "none";
  /// Whether --shard set it (else the train block, or the default).
  bool shardGiven = false;
};

/// The module's train settings with `args`' run options over them.
Settings resolveSettings(mlir::ModuleOp module, const rt::RunArgs &args);

} // namespace gtc

#endif // GTC_PLAN_SETTINGS_H
