//===- SettingsTest.cpp - The train settings' and run options' tables -----===//
//
// TrainSettings.def against the dialect, the front end and the run options:
// every setting is a gt.train attribute the verifier checks by its kind, is
// accepted in a train block, and names a run option that exists; the run
// options parse as their table says; resolveSettings puts a run option over
// the train block's setting, and that over the default.
//===----------------------------------------------------------------------===//

#include "CompileHelpers.h"
#include "gtc/Plan/Settings.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Runtime/Env.h"
#include "gtc/Runtime/RunArgs.h"
#include "gtest/gtest.h"
#include <string>
#include <vector>

using namespace gtc;

namespace {

/// A value of each kind that the train block accepts.
std::string sampleValue(mlir::gt::TrainSettingKind kind) {
  using K = mlir::gt::TrainSettingKind;
  switch (kind) {
  case K::Source:
    return "text(\"t.txt\", seq: 8)";
  case K::Count:
    return "4";
  case K::Seed:
    return "0";
  case K::Optimizer:
    return "adamw(lr: 1e-3)";
  case K::Schedule:
    return "cosine(warmup: 2)";
  case K::Precision:
    return "bf16";
  case K::Checkpoint:
    return "none";
  case K::Devices:
    return "2";
  case K::Shard:
    return "optimizer";
  case K::MicroBatch:
    return "2";
  case K::Positive:
    return "1.5";
  case K::Bool:
    return "false";
  }
  return "";
}

const char *kModel = "model m {\n  input x: f32[B, 8]\n  label y: i32[B]\n"
                     "  loss = cross_entropy(linear(x, 4), y)\n}\n";

} // namespace

/// Every setting of the table parses in a train block with a value of its
/// kind (eval_every with an eval source, which it needs; steps without
/// epochs), and its flag, if any, is a run option.
TEST(SettingsTest, EverySettingParsesAndItsFlagExists) {
  std::vector<std::string> names;
  for (const mlir::gt::TrainSetting &s : mlir::gt::trainSettings()) {
    SCOPED_TRACE(s.name.str());
    names.push_back(s.name.str());
    EXPECT_EQ(mlir::gt::lookupTrainSetting(s.name), &s);
    EXPECT_FALSE(s.help.empty());
    EXPECT_FALSE(s.defaultValue.empty());
    if (!s.flag.empty()) {
      EXPECT_TRUE(rt::isRunOption(s.flag.str())) << s.flag.str();
      EXPECT_NE(rt::runOptionsHelp().find("  " + s.flag.str() + " "),
                std::string::npos);
    }
    std::string block =
        "train {\n  " + s.name.str() + " = " + sampleValue(s.kind) + "\n";
    if (s.name == "eval_every")
      block += "  eval = text(\"e.txt\", seq: 8)\n";
    if (s.name == "micro_batch")
      block += "  batch = 4\n";
    block += "}\n";
    std::string errors;
    EXPECT_TRUE(test::compilePlan(std::string(kModel) + block, 4, errors))
        << block << errors;
    EXPECT_NE(rt::trainSettingsHelp().find("  " + s.name.str() + " "),
              std::string::npos);
  }
  EXPECT_EQ(names.size(), mlir::gt::trainSettingNames().size());
  EXPECT_EQ(mlir::gt::lookupTrainSetting("optimiser"), nullptr);
}

/// The table's parsing: values after a space or '=', flags refuse values,
/// unknown options are left to the caller, bad values are refused with the
/// option's name.
TEST(SettingsTest, RunOptionsParse) {
  auto parse = [](std::vector<std::string> args, rt::RunArgs &out,
                  std::string &error) {
    for (size_t i = 0; i < args.size(); ++i)
      if (rt::parseRunArg(args, i, out, error) != rt::ArgResult::Ok)
        return false;
    return true;
  };
  rt::RunArgs out;
  std::string error;
  ASSERT_TRUE(parse({"--steps", "5", "--batch=auto", "--no-fuse",
                     "--devices=all", "--micro-batch", "2", "--seed", "7",
                     "--threads=3", "--log", "m.jsonl", "--init", "w.st",
                     "--bucket-size", "1MiB", "--checkpoint", "every(3)"},
                    out, error))
      << error;
  EXPECT_EQ(out.run.steps, 5);
  EXPECT_EQ(out.run.seed, 7u);
  EXPECT_EQ(out.run.threads, 3);
  EXPECT_EQ(out.run.logPath, "m.jsonl");
  EXPECT_EQ(out.run.initPath, "w.st");
  EXPECT_TRUE(out.batchAuto);
  EXPECT_TRUE(out.noFuse);
  EXPECT_EQ(out.devices, "all");
  EXPECT_EQ(out.microBatch, 2);
  EXPECT_EQ(out.bucketBytes, 1 << 20);
  EXPECT_EQ(out.checkpointEvery, 3);
  EXPECT_EQ(out.names,
            (std::vector<std::string>{"--steps", "--batch", "--no-fuse",
                                      "--devices", "--micro-batch", "--seed",
                                      "--threads", "--log", "--init",
                                      "--bucket-size", "--checkpoint"}));
  // What gtc compile takes: the options that choose what is compiled.
  EXPECT_TRUE(rt::isCompilingOption("--batch"));
  EXPECT_TRUE(rt::isCompilingOption("--no-fuse"));
  EXPECT_FALSE(rt::isCompilingOption("--steps"));
  EXPECT_FALSE(rt::isCompilingOption("--threads"));
  EXPECT_FALSE(rt::isCompilingOption("--device"));
  EXPECT_FALSE(rt::isCompilingOption("--rendezvous"));
  EXPECT_TRUE(rt::isCompilingOption("--explain")); // needs the compiler

  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--steps", "0"}, "--steps needs an integer >= 1, got '0'"},
      {{"--seed", "-1"}, "--seed needs an integer >= 0, got '-1'"},
      {{"--no-fuse=1"}, "--no-fuse takes no value"},
      {{"--log"}, "--log needs a value"},
      {{"--device", "tpu"}, "unknown device 'tpu'; expected cpu, cuda or auto"},
      {{"--shard", "all"},
       "--shard needs optimizer, gradients or none, got "
       "'all'"},
      // Nothing is cut short to the field's type, or past what a plan
      // holds.
      {{"--devices", "3000000000"},
       "--devices needs an integer from 1 to 65536, got '3000000000'"},
      {{"--threads", "4294967297"},
       "--threads needs an integer from 1 to 2147483647, got '4294967297'"},
      {{"--bench", "4294967296"},
       "--bench needs an integer from 1 to 2147483647, got '4294967296'"},
      {{"--steps", "99999999999999999999"},
       "--steps needs an integer from 1 to 9223372036854775807, got "
       "'99999999999999999999'"},
  };
  for (const auto &[args, message] : bad) {
    rt::RunArgs o;
    std::string e;
    EXPECT_FALSE(parse(args, o, e)) << args[0];
    EXPECT_EQ(e, message);
  }
  std::vector<std::string> other = {"--emit=mlir"};
  size_t i = 0;
  EXPECT_EQ(rt::parseRunArg(other, i, out, error), rt::ArgResult::NotMine);
}

/// devices = cpu is one CPU process: --device auto becomes cpu, --device
/// cuda is refused; other `devices` leave --device alone.
TEST(SettingsTest, DevicesCpuChoosesTheCpu) {
  std::string error;
  std::string device = "auto";
  EXPECT_TRUE(rt::deviceForDevices("cpu", device, error));
  EXPECT_EQ(device, "cpu");
  device = "cuda";
  EXPECT_FALSE(rt::deviceForDevices("cpu", device, error));
  EXPECT_NE(error.find("devices = cpu trains one CPU process"),
            std::string::npos)
      << error;
  for (const char *devices : {"", "1", "2", "all"}) {
    device = "auto";
    EXPECT_TRUE(rt::deviceForDevices(devices, device, error));
    EXPECT_EQ(device, "auto") << devices;
  }
}

/// The runtime's switches (GTC_NO_GRAPH, ...) are on unless unset, empty
/// or "0".
TEST(SettingsTest, EnvironmentSwitches) {
  const char *name = "GTC_TEST_SWITCH";
  ::unsetenv(name);
  EXPECT_FALSE(rt::envFlag(name));
  for (const auto &[value, on] :
       std::vector<std::pair<const char *, bool>>{
           {"", false}, {"0", false}, {"1", true}, {"yes", true}}) {
    ::setenv(name, value, 1);
    EXPECT_EQ(rt::envFlag(name), on) << "'" << value << "'";
  }
  ::unsetenv(name);
}

/// Every field of the runtime's TrainConfig comes from a setting of the
/// table.
TEST(SettingsTest, ConfigFieldsComeFromSettings) {
  int fields = 0;
#define GTC_TRAIN_CONFIG_FIELD(SETTING, KEY, MEMBER, KIND, TYPE, DEFAULT)      \
  ++fields;                                                                    \
  EXPECT_NE(mlir::gt::lookupTrainSetting(#SETTING), nullptr) << KEY;
#include "gtc/Runtime/TrainSettings.def"
  EXPECT_GE(fields, 21);
}

namespace {

/// resolveSettings of kModel with `train` (a train block, or "") and `args`.
Settings resolve(const std::string &train, const rt::RunArgs &args) {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(std::string(kModel) + train, "t.gt"),
      llvm::SMLoc());
  auto module = compileSource(context, sourceMgr, "t.gt");
  EXPECT_TRUE(module) << train;
  if (!module)
    return Settings();
  Settings s = resolveSettings(*module, args);
  // Where each setting came from: the option that gave it (a NameLoc of
  // it), or the train block. (The locations die with the context.)
  auto from = [](mlir::LocationAttr loc) -> std::string {
    if (auto name = llvm::dyn_cast_or_null<mlir::NameLoc>(loc))
      return name.getName().str();
    return loc ? "train block" : "";
  };
  const bool cliCheckpoint =
      args.checkpointEvery != 0 || args.checkpointBudget != 0;
  EXPECT_EQ(from(s.compile.checkpointFrom),
            cliCheckpoint ? "--checkpoint"
            : train.find("checkpoint") != std::string::npos ? "train block"
                                                            : "");
  EXPECT_EQ(from(s.compile.microBatchFrom),
            args.microBatch != 0 ? "--micro-batch"
            : train.find("micro_batch") != std::string::npos ? "train block"
                                                             : "");
  s.compile.checkpointFrom = s.compile.microBatchFrom = {};
  return s;
}

} // namespace

/// Each setting a run option overrides: the default without either, the
/// train block's, and the run option over it.
TEST(SettingsTest, RunOptionsOverrideTheTrainBlock) {
  rt::RunArgs none;
  Settings d = resolve("", none);
  EXPECT_EQ(d.compile.batch, rt::TrainConfig().batch);
  EXPECT_EQ(d.compile.precision, "fp32");
  EXPECT_FALSE(checkpointRequested(d.compile));
  EXPECT_EQ(d.compile.microBatch, 0);
  EXPECT_EQ(d.devices, "");
  EXPECT_EQ(d.shard, "none");
  EXPECT_FALSE(d.shardGiven);

  const std::string block =
      "train {\n  batch = 8\n  precision = bf16\n  checkpoint = every(2)\n"
      "  micro_batch = 4\n  devices = 2\n  shard = optimizer\n}\n";
  Settings t = resolve(block, none);
  EXPECT_EQ(t.compile.batch, 8);
  EXPECT_EQ(t.compile.precision, "bf16");
  EXPECT_EQ(t.compile.checkpointEvery, 2);
  EXPECT_EQ(t.compile.checkpointBudget, 0);
  EXPECT_EQ(t.compile.microBatch, 4);
  EXPECT_EQ(t.devices, "2");
  EXPECT_EQ(t.shard, "optimizer");
  EXPECT_FALSE(t.shardGiven);

  rt::RunArgs args;
  args.batch = 16;
  args.precision = "fp16";
  args.checkpointEvery = -1;
  args.microBatch = -1;
  args.devices = "cpu";
  args.shard = "none";
  args.noFuse = args.noPad = true;
  Settings r = resolve(block, args);
  EXPECT_EQ(r.compile.batch, 16);
  EXPECT_EQ(r.compile.precision, "fp16");
  EXPECT_FALSE(checkpointRequested(r.compile));
  EXPECT_EQ(r.compile.microBatch, -1);
  EXPECT_EQ(r.devices, "cpu");
  EXPECT_EQ(r.shard, "none");
  EXPECT_TRUE(r.shardGiven);
  EXPECT_FALSE(r.compile.fuse);
  EXPECT_FALSE(r.compile.pad);

  // The forms of checkpoint and micro_batch that plan for memory.
  Settings a = resolve("train {\n  checkpoint = auto(budget: 1GiB)\n"
                       "  micro_batch = auto\n}\n",
                       none);
  EXPECT_EQ(a.compile.checkpointBudget, int64_t(1) << 30);
  EXPECT_EQ(checkpointBudget(a.compile), int64_t(1) << 30);
  EXPECT_EQ(a.compile.microBatch, -1);
  Settings f = resolve("train {\n  checkpoint = auto\n}\n", none);
  EXPECT_EQ(f.compile.checkpointBudget, -1);
  f.compile.deviceMemory = 2000;
  EXPECT_EQ(checkpointBudget(f.compile), 1900);
}
