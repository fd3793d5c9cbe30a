//===- GradientTest.cpp - Finite-difference checks of every backward ------===//
//
// Each test compiles a small .gt model into a training step, runs it with the
// CPU executor in float64, and compares every parameter's gradient (a sample
// of elements for large ones) with central differences of the loss.
//===----------------------------------------------------------------------===//

#include "gtc/Frontend/Driver.h"
#include "gtc/Plan/Pipeline.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Rng.h"
#include "CompileHelpers.h"
#include "OpModels.h"
#include "mlir/IR/Diagnostics.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cmath>

using namespace gtc;

namespace {

/// Fills the feeds: floats ~ N(0, 1), ints uniform in [0, intRange).
void fillFeeds(rt::CpuExecutor<double> &ex, int32_t intRange, uint64_t seed) {
  rt::Rng rng(seed);
  for (const rt::Feed &f : ex.plan().feeds) {
    const rt::Buffer &b = ex.plan().buffers[f.buffer];
    for (int64_t i = 0; i < b.elements(); ++i) {
      if (b.dtype == rt::DType::F32)
        ex.floats(f.buffer)[i] = rng.normal();
      else
        ex.ints(f.buffer)[i] = static_cast<int32_t>(rng.below(intRange));
    }
  }
}

/// Checks analytic against numeric gradients; returns the number of
/// elements compared.
int64_t checkGradients(const std::string &source, int64_t batch = 2,
                       int32_t intRange = 3, int64_t samplesPerParam = 24) {
  std::string errors;
  std::optional<rt::Plan> plan = test::compilePlan(source, batch, errors);
  EXPECT_TRUE(plan.has_value()) << errors;
  if (!plan)
    return 0;
  rt::CpuExecutor<double> ex(*plan);
  ex.initParams(7);
  fillFeeds(ex, intRange, 11);
  ex.run();
  std::vector<double> analytic(ex.region(rt::Region::Grad),
                               ex.region(rt::Region::Grad) +
                                   ex.regionElements(rt::Region::Grad));
  double *params = ex.region(rt::Region::Param);
  auto loss = [&] {
    ex.run();
    return ex.floats(plan->loss)[0];
  };
  rt::Rng pick(3);
  int64_t compared = 0;
  for (const rt::Param &p : plan->params) {
    int64_t n = plan->buffers[p.buffer].elements();
    int64_t base = ex.floats(p.buffer) - params;
    for (int64_t s = 0; s < std::min(n, samplesPerParam); ++s) {
      int64_t i = n <= samplesPerParam ? s : int64_t(pick.below(n));
      double &w = params[base + i];
      double saved = w, h = 1e-5 * std::max(1.0, std::fabs(saved));
      w = saved + h;
      double up = loss();
      w = saved - h;
      double down = loss();
      w = saved;
      double numeric = (up - down) / (2 * h);
      double a = analytic[base + i];
      EXPECT_NEAR(a, numeric, 1e-7 + 1e-5 * std::max(std::fabs(a),
                                                     std::fabs(numeric)))
          << "parameter " << p.name << "[" << i << "]";
      ++compared;
    }
  }
  return compared;
}

/// Every model of OpModels.h: analytic gradients against central differences.
class ModelGradientTest : public ::testing::TestWithParam<test::OpModel> {};

TEST_P(ModelGradientTest, MatchesFiniteDifferences) {
  const test::OpModel &m = GetParam();
#ifdef GTC_SANITIZED
  // Each sample runs the step twice, and the attention models' steps take
  // seconds under ASan: two samples a parameter run every kernel there,
  // which is what the sanitizers look at; the plain build checks them all.
  const int64_t samples = std::min<int64_t>(m.samples, 2);
#else
  const int64_t samples = m.samples;
#endif
  EXPECT_GT(checkGradients(m.source, m.batch, m.intRange, samples), 0);
}

/// The models whose gradients central differences can check.
std::vector<test::OpModel> smoothModels() {
  std::vector<test::OpModel> models;
  for (const test::OpModel &m : test::opModels())
    if (m.finiteDifferences)
      models.push_back(m);
  return models;
}

INSTANTIATE_TEST_SUITE_P(
    OpModels, ModelGradientTest, ::testing::ValuesIn(smoothModels()),
    [](const ::testing::TestParamInfo<test::OpModel> &info) {
      return info.param.name;
    });

TEST(GradientTest, UnusedParameterGetsZero) {
  std::string errors;
  auto plan = test::compilePlan(R"(model m {
    input x: f32[B, 2]
    param a: f32[2] = normal(1.0)
    param unused: f32[3] = normal(1.0)
    loss = mean(a * x) + mean(unused * 0)
  })", 2, errors);
  ASSERT_TRUE(plan) << errors;
  rt::CpuExecutor<double> ex(*plan);
  ex.initParams(1);
  fillFeeds(ex, 1, 2);
  ex.run();
  bool found = false;
  for (const rt::Param &p : plan->params) {
    if (p.name != "unused")
      continue;
    found = true;
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(ex.floats(p.grad)[i], 0.0);
  }
  EXPECT_TRUE(found) << "the plan lost the unused parameter";
}

} // namespace
