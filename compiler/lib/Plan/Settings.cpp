//===- Settings.cpp - One command's train settings, resolved once ---------===//

#include "gtc/Plan/Settings.h"
#include "gtc/Dialect/GT/GTOps.h"

using namespace mlir;
using namespace mlir::gt;

gtc::Settings gtc::resolveSettings(ModuleOp module, const rt::RunArgs &args) {
  TrainOp train;
  for (auto t : module.getOps<TrainOp>())
    train = t;
  auto attr = [&](StringRef name) {
    return train ? train->getAttr(name) : Attribute();
  };
  Settings s;
  CompileOptions &c = s.compile;

  // A setting the command line gives is located at its option.
  auto option = [&](const char *name) {
    return NameLoc::get(StringAttr::get(module.getContext(), name));
  };
  if (args.batch || args.batchAuto) {
    if (args.batch)
      c.batch = *args.batch;
    s.batchFrom = option("--batch");
  } else if (auto b = dyn_cast_or_null<IntegerAttr>(attr("batch"))) {
    c.batch = b.getInt();
    s.batchFrom = trainSettingLoc(train, "batch");
  }
  s.batchAuto = args.batchAuto;
  s.fixedRows = fixedBatch(module);

  if (!args.precision.empty())
    c.precision = args.precision;
  else if (auto p = dyn_cast_or_null<StringAttr>(attr("precision")))
    c.precision = p.str();

  c.pad = !args.noPad;
  c.padAll = args.padAll;
  c.fuse = !args.noFuse;

  if (args.checkpointEvery != 0 || args.checkpointBudget != 0) {
    c.checkpointEvery = args.checkpointEvery;
    c.checkpointBudget = args.checkpointBudget;
    c.checkpointFrom = option("--checkpoint");
  } else if (train) {
    CheckpointSetting checkpoint = checkpointSetting(train);
    c.checkpointEvery = checkpoint.every;
    c.checkpointBudget = checkpoint.budget;
    c.checkpointFrom = trainSettingLoc(train, "checkpoint");
  }

  if (args.microBatch != 0) {
    c.microBatch = args.microBatch;
    c.microBatchFrom = option("--micro-batch");
  } else if (Attribute micro = attr("micro_batch")) {
    auto n = dyn_cast<IntegerAttr>(micro);
    c.microBatch = n ? n.getInt() : -1; // `auto`
    c.microBatchFrom = trainSettingLoc(train, "micro_batch");
  }

  s.devices = args.devices;
  if (!s.devices.empty())
    s.devicesFrom = option("--devices");
  else if (Attribute devices = attr("devices")) {
    if (auto n = dyn_cast<IntegerAttr>(devices))
      s.devices = std::to_string(n.getInt());
    else if (auto w = dyn_cast<StringAttr>(devices))
      s.devices = w.str();
    s.devicesFrom = trainSettingLoc(train, "devices");
  }

  s.shardGiven = !args.shard.empty();
  if (s.shardGiven)
    s.shard = args.shard;
  else if (auto shard = dyn_cast_or_null<StringAttr>(attr("shard")))
    s.shard = shard.str();
  return s;
}
