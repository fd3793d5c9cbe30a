//===- NumericsTest.cpp - --check-numerics --------------------------------===//

#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Numerics.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace gtc::rt;

namespace {

/// y = log(w) with w a parameter, then loss = sum(y): buffers w (param),
/// y, loss (temp); kernel 0 computes the loss (forward), kernel 1 is after
/// it (backward).
Plan tinyPlan() {
  Plan plan;
  auto buffer = [&](const char *name, Region region, int64_t n) {
    Buffer b;
    b.name = name;
    b.region = region;
    b.shape = {n};
    plan.buffers.push_back(b);
    return static_cast<int>(plan.buffers.size()) - 1;
  };
  int w = buffer("fc.weight", Region::Param, 4), y = buffer("log", Region::Temp, 4),
      loss = buffer("loss", Region::Temp, 1), g = buffer("grad", Region::Temp, 4);
  Param p;
  p.name = "fc.weight";
  p.buffer = w;
  plan.params.push_back(p);
  Kernel log;
  log.op = OpKind::Log;
  log.inputs = {w};
  log.outputs = {y};
  log.loc = "m.gt:3:7";
  Kernel sum = log;
  sum.op = OpKind::Sum;
  sum.inputs = {y};
  sum.outputs = {loss};
  Kernel grad = sum;
  grad.inputs = {loss};
  grad.outputs = {g};
  plan.kernels = {log, sum, grad};
  plan.loss = loss;
  return plan;
}

std::string failure(const NumericsCheck &check, const Plan &plan, size_t k,
                    std::vector<std::vector<float>> &values) {
  try {
    check.after(k, plan.kernels[k], [&](int id, std::vector<float> &) {
      return static_cast<const float *>(values[id].data());
    });
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(NumericsTest, CountsNaNAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  float v[] = {1, NAN, inf, -inf, 0};
  EXPECT_EQ(NumericsCheck::count(v, 5), "1 NaN and 2 inf among 5 values");
  EXPECT_EQ(NumericsCheck::count(v, 1), "");
}

TEST(NumericsTest, NamesTheOpThatMadeTheValues) {
  Plan plan = tinyPlan();
  NumericsCheck check(plan);
  std::vector<std::vector<float>> values = {
      {1, 2, 3, 4}, {0, NAN, 1, 1}, {NAN}, {0, 0, 0, 0}};
  EXPECT_EQ(failure(check, plan, 0, values),
            "--check-numerics: log at m.gt:3:7 (forward, layer fc) is the "
            "step's first op whose output is not finite: 'log' f32[4] has 1 "
            "NaN and 0 inf among 4 values; its inputs are finite, so it made "
            "them (an overflow, a log or a division of 0?)");
}

TEST(NumericsTest, BlamesAParameterTheUpdateBroke) {
  Plan plan = tinyPlan();
  NumericsCheck check(plan);
  std::vector<std::vector<float>> values = {
      {NAN, 2, 3, 4}, {NAN, 1, 1, 1}, {0}, {0, 0, 0, 0}};
  std::string e = failure(check, plan, 0, values);
  EXPECT_NE(e.find("inputs already not finite: 'fc.weight' (1 NaN and 0 inf "
                   "among 4 values) (the last update made a parameter so"),
            std::string::npos)
      << e;
  // Finite outputs pass.
  values[1] = {1, 1, 1, 1};
  EXPECT_EQ(failure(check, plan, 0, values), "");
}

TEST(NumericsTest, LossScalingChecksTheForwardOnly) {
  Plan plan = tinyPlan();
  plan.lossScale = 3; // fp16: gradients may overflow by design
  plan.config.precision = Precision::Fp16;
  NumericsCheck check(plan);
  EXPECT_TRUE(check.checksForwardOnly());
  std::vector<std::vector<float>> values = {
      {1, 1, 1, 1}, {0, 0, 0, 0}, {0}, {INFINITY, 0, 0, 0}};
  EXPECT_EQ(failure(check, plan, 2, values), ""); // backward: not checked
  Plan fp32 = tinyPlan();
  NumericsCheck all(fp32);
  EXPECT_NE(failure(all, fp32, 2, values), "");
}
