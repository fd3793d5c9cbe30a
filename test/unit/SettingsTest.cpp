//===- SettingsTest.cpp - The train settings' and run options' tables -----===//
//
// TrainSettings.def against the dialect, the front end and the run options:
// every setting is a gt.train attribute the verifier checks by its kind, is
// accepted in a train block, and names a run option that exists; the run
// options parse as their table says.
//===----------------------------------------------------------------------===//

#include "CompileHelpers.h"
#include "gtc/Dialect/GT/GTOps.h"
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
  EXPECT_TRUE(out.given);

  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--steps", "0"}, "--steps needs an integer >= 1, got '0'"},
      {{"--seed", "-1"}, "--seed needs an integer >= 0, got '-1'"},
      {{"--no-fuse=1"}, "--no-fuse takes no value"},
      {{"--log"}, "--log needs a value"},
      {{"--device", "tpu"}, "unknown device 'tpu'; expected cpu, cuda or auto"},
      {{"--shard", "all"},
       "--shard needs optimizer, gradients or none, got "
       "'all'"},
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
