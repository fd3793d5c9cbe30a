//===- MLIRGenTest.cpp - Unit tests for checking and emitting .gt files ---===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Frontend/Driver.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "gtest/gtest.h"
#include <random>

using namespace gtc;

namespace {

struct Compiled {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<std::string> errors;
};

std::unique_ptr<Compiled> compile(llvm::StringRef source) {
  auto c = std::make_unique<Compiled>();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "t.gt"), llvm::SMLoc());
  mlir::ScopedDiagnosticHandler handler(
      &c->context, [&](mlir::Diagnostic &d) {
        if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
          c->errors.push_back(d.str());
        return mlir::success();
      });
  c->module = compileSource(c->context, sourceMgr, "t.gt");
  return c;
}

std::vector<std::string> paramNames(mlir::ModuleOp module) {
  std::vector<std::string> names;
  module.walk([&](mlir::gt::ParamOp p) { names.push_back(p.getName().str()); });
  return names;
}

TEST(MLIRGenTest, LayersCreatePyTorchStyleNames) {
  auto c = compile("model m { input x: f32[B, 4]\n label y: i32[B]\n"
                   "h = relu(linear(x, 8))\n"
                   "h = layernorm(linear(h, 8, name: \"proj\"))\n"
                   "loss = cross_entropy(linear(h, 3), y) }");
  ASSERT_TRUE(c->module) << (c->errors.empty() ? "" : c->errors[0]);
  std::vector<std::string> want = {"fc1.weight", "fc1.bias",   "proj.weight",
                                   "proj.bias",  "ln1.weight", "ln1.bias",
                                   "fc2.weight", "fc2.bias"};
  EXPECT_EQ(paramNames(*c->module), want);
}

TEST(MLIRGenTest, RepeatGivesEachIterationItsOwnParameters) {
  auto c = compile("model m { input x: f32[B, 4]\n"
                   "def block(h) { return h + linear(h, 4) }\n"
                   "h = x\n repeat 3 { h = block(h) }\n loss = mean(h) }");
  ASSERT_TRUE(c->module) << (c->errors.empty() ? "" : c->errors[0]);
  std::vector<std::string> want = {
      "blocks.0.fc1.weight", "blocks.0.fc1.bias", "blocks.1.fc1.weight",
      "blocks.1.fc1.bias",   "blocks.2.fc1.weight", "blocks.2.fc1.bias"};
  EXPECT_EQ(paramNames(*c->module), want);
}

TEST(MLIRGenTest, TiedWeightIsOneParameter) {
  auto c = compile("model m { let V = 10, D = 4\n input t: i32[B, 3]\n"
                   "label y: i32[B, 3]\n param wte: f32[V, D] = normal(0.02)\n"
                   "x = embedding(t, wte)\n"
                   "loss = cross_entropy(matmul(x, transpose(wte)), y) }");
  ASSERT_TRUE(c->module) << (c->errors.empty() ? "" : c->errors[0]);
  EXPECT_EQ(paramNames(*c->module), std::vector<std::string>{"wte"});
  mlir::gt::ParamOp wte;
  c->module->walk([&](mlir::gt::ParamOp p) { wte = p; });
  EXPECT_EQ(std::distance(wte->getUses().begin(), wte->getUses().end()), 2);
}

TEST(MLIRGenTest, LetArithmetic) {
  auto c = compile("model m { let D = 6, H = 2\n input x: f32[B, D * H / 3 + 1]"
                   "\n loss = mean(x) }");
  ASSERT_TRUE(c->module);
  mlir::gt::InputOp in;
  c->module->walk([&](mlir::gt::InputOp op) { in = op; });
  EXPECT_EQ(in.getType().getDimSize(1), 5);
  EXPECT_TRUE(in.getType().isDynamicDim(0));
}

TEST(MLIRGenTest, ShapeErrorNamesBothShapes) {
  auto c = compile("model m { input a: f32[B, 3]\n input b: f32[B, 4]\n"
                   "loss = mean(a + b) }");
  EXPECT_FALSE(c->module);
  ASSERT_EQ(c->errors.size(), 1u);
  EXPECT_NE(c->errors[0].find("f32[?, 3] and f32[?, 4]"), std::string::npos)
      << c->errors[0];
}

TEST(MLIRGenTest, ExactlyOneErrorPerFailure) {
  auto c = compile("model m { x = nope(1)\n y = alsonope(2) }");
  EXPECT_FALSE(c->module);
  EXPECT_EQ(c->errors.size(), 1u);
}

TEST(MLIRGenTest, RecursionIsCaught) {
  auto c = compile("model m { def f(x) { return f(x) }\n loss = f(1) }");
  EXPECT_FALSE(c->module);
  ASSERT_EQ(c->errors.size(), 1u);
  EXPECT_NE(c->errors[0].find("cannot be recursive"), std::string::npos);
}

TEST(MLIRGenTest, TrainSettingsBecomeAttributes) {
  auto c = compile("model m { input x: f32[B, 2]\n loss = mean(x) }\n"
                   "train { batch = 32 steps = 10 seed = 0\n"
                   "optimizer = sgd(lr: 0.1, momentum: 0.9, nesterov: true)\n"
                   "schedule = cosine(warmup: 5) precision = bf16\n"
                   "checkpoint = auto(budget: 2GiB) devices = all }");
  ASSERT_TRUE(c->module) << (c->errors.empty() ? "" : c->errors[0]);
  mlir::gt::TrainOp train;
  c->module->walk([&](mlir::gt::TrainOp op) { train = op; });
  ASSERT_TRUE(train);
  EXPECT_EQ(train.getModel(), "m");
  auto opt = train->getAttrOfType<mlir::DictionaryAttr>("optimizer");
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt.getAs<mlir::StringAttr>("name").getValue(), "sgd");
  EXPECT_TRUE(opt.getAs<mlir::BoolAttr>("nesterov").getValue());
  auto ckpt = train->getAttrOfType<mlir::DictionaryAttr>("checkpoint");
  EXPECT_EQ(ckpt.getAs<mlir::IntegerAttr>("budget").getInt(),
            int64_t(2) << 30);
  EXPECT_EQ(train->getAttrOfType<mlir::StringAttr>("precision").getValue(),
            "bf16");
}

/// Every train setting in each state where it would do nothing is refused
/// with a message that says why; the same settings where they act pass.
TEST(MLIRGenTest, SettingsWithoutEffectAreRefused) {
  struct Row {
    const char *settings, *error; // error: empty where the block is fine
  };
  const Row rows[] = {
      {"schedule = constant(final: 0.5)",
       "final has no effect in a constant schedule"},
      {"schedule = constant(warmup: 3)", ""},
      {"schedule = cosine(warmup: 3, final: 0.1)", ""},
      {"schedule = linear(final: 0.5)", ""},
      {"eval_every = 10", "eval_every has no effect: this train block names "
                          "no data to evaluate on"},
      {"eval = text(\"e.txt\", seq: 8)\n eval_every = 10", ""},
      {"optimizer = sgd(dampening: 0.1)",
       "dampening has no effect without momentum"},
      {"optimizer = sgd(momentum: 0, dampening: 0.1)",
       "dampening has no effect without momentum"},
      {"optimizer = sgd(nesterov: true)",
       "nesterov: true has no effect without momentum"},
      {"optimizer = sgd(momentum: 0.9, dampening: 0.1, nesterov: true)",
       "Nesterov momentum needs dampening: 0"},
      {"optimizer = sgd(momentum: 0.9, dampening: 0.1)", ""},
      {"optimizer = sgd(momentum: 0.9, nesterov: true)", ""},
      {"optimizer = sgd(nesterov: false)", ""},
  };
  for (const Row &row : rows) {
    auto c = compile(std::string("model m { input x: f32[B, 2]\n"
                                 "loss = mean(x) }\n"
                                 "train { data = text(\"d.txt\", seq: 8)\n") +
                     row.settings + " }");
    if (!*row.error) {
      EXPECT_TRUE(c->module) << row.settings << ": "
                             << (c->errors.empty() ? "" : c->errors[0]);
      continue;
    }
    EXPECT_FALSE(c->module) << row.settings;
    ASSERT_EQ(c->errors.size(), 1u) << row.settings;
    EXPECT_NE(c->errors[0].find(row.error), std::string::npos)
        << row.settings << ": " << c->errors[0];
  }
}

/// Mutations of a valid file through the whole front end: each ends in a
/// module or exactly one error.
TEST(MLIRGenTest, MutatedModelsNeverCrash) {
  const std::string good =
      "model m {\n let D = 8, H = 2\n input x: i32[B, 4]\n label y: i32[B, 4]"
      "\n param wte: f32[16, D] = normal(0.02)\n"
      " def block(h) { h = h + attention(layernorm(h), heads: H)\n"
      "   return h + linear(gelu(linear(h, 4 * D)), D) }\n"
      " h = embedding(x, wte) + embedding(positions(4), 4, dim: D)\n"
      " repeat 2 { h = block(h) }\n"
      " loss = cross_entropy(matmul(layernorm(h), transpose(wte)), y)\n}\n"
      "train { batch = 4 steps = 3 optimizer = adamw(lr: 1e-3) }\n";
  auto ok = compile(good);
  ASSERT_TRUE(ok->module) << (ok->errors.empty() ? "" : ok->errors[0]);
  std::mt19937 rng(42);
  const std::string pieces[] = {"(", ")", "{", "}", ",", "0", "-1", "x",
                                "h", "D", "B", "1e30", "\"s\"", "relu(",
                                ":", "=", "*", "/", "f16", "i32", "repeat 3"};
  for (int iter = 0; iter < 400; ++iter) {
    std::string s = good;
    int edits = 1 + rng() % 3;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
      case 0:
        s.erase(at, 1 + rng() % 8);
        break;
      case 1:
        s.insert(at, pieces[rng() % std::size(pieces)]);
        break;
      default:
        s[at] = char(rng() % 128);
        break;
      }
    }
    auto c = compile(s);
    EXPECT_TRUE(c->module || c->errors.size() == 1)
        << "input:\n" << s << "\nerrors: " << c->errors.size();
  }
}

} // namespace
