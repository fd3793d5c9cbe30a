//===- OptimizerTest.cpp - Optimizer steps against hand-computed values ---===//

#include "gtc/Runtime/Optimizer.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace gtc::rt;

namespace {

/// One parameter p = 1 with gradient g, stepped `steps` times.
double run(TrainConfig c, double lr, double g, int steps) {
  double p = 1.0;
  OptimizerState<double> state;
  for (int i = 0; i < steps; ++i)
    optimizerStep(c, lr, &p, &g, 1, state);
  return p;
}

TrainConfig sgd(double momentum = 0, bool nesterov = false, double wd = 0,
                double dampening = 0) {
  TrainConfig c;
  c.optimizer = gtc::rt::OptimizerKind::Sgd;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weightDecay = wd;
  c.dampening = dampening;
  return c;
}

TrainConfig adam(const char *name, double wd) {
  TrainConfig c;
  EXPECT_TRUE(gtc::rt::parse(name, c.optimizer)) << name;
  c.weightDecay = wd;
  return c;
}

TEST(OptimizerTest, PlainSgd) { EXPECT_DOUBLE_EQ(run(sgd(), 0.1, 0.5, 1), 0.95); }

TEST(OptimizerTest, SgdMomentum) {
  // buf1 = g = 0.5 -> p = 0.95; buf2 = 0.9 * 0.5 + 0.5 = 0.95 -> p = 0.855.
  EXPECT_DOUBLE_EQ(run(sgd(0.9), 0.1, 0.5, 1), 0.95);
  EXPECT_NEAR(run(sgd(0.9), 0.1, 0.5, 2), 0.855, 1e-15);
}

TEST(OptimizerTest, SgdDampening) {
  // buf2 = 0.9 * 0.5 + (1 - 0.5) * 0.5 = 0.7 -> p = 0.95 - 0.07 = 0.88.
  EXPECT_NEAR(run(sgd(0.9, false, 0, 0.5), 0.1, 0.5, 2), 0.88, 1e-15);
}

TEST(OptimizerTest, SgdNesterov) {
  // buf = 0.5, g' = 0.5 + 0.9 * 0.5 = 0.95 -> p = 1 - 0.095.
  EXPECT_NEAR(run(sgd(0.9, true), 0.1, 0.5, 1), 0.905, 1e-15);
}

TEST(OptimizerTest, SgdWeightDecay) {
  // g' = 0.5 + 0.1 * 1 -> p = 1 - 0.1 * 0.6.
  EXPECT_NEAR(run(sgd(0, false, 0.1), 0.1, 0.5, 1), 0.94, 1e-15);
}

TEST(OptimizerTest, AdamFirstStep) {
  // m = 0.05, v = 0.00025; m / bc1 = 0.5, sqrt(v / bc2) = 0.5 -> p = 1 - lr.
  EXPECT_NEAR(run(adam("adam", 0), 0.01, 0.5, 1), 1 - 0.01 / (1 + 2e-8),
              1e-12);
}

TEST(OptimizerTest, AdamL2WeightDecay) {
  // g' = 0.6: still |m_hat| / sqrt(v_hat) = 1 on the first step.
  EXPECT_NEAR(run(adam("adam", 0.1), 0.01, 0.5, 1), 0.99, 1e-9);
}

TEST(OptimizerTest, AdamWDecoupledDecay) {
  // p = 1 * (1 - 0.01 * 0.1) - 0.01.
  EXPECT_NEAR(run(adam("adamw", 0.1), 0.01, 0.5, 1), 0.989, 1e-9);
}

TEST(OptimizerTest, AdamSecondStep) {
  // Constant gradient: m_hat = g and v_hat = g^2 at every step.
  EXPECT_NEAR(run(adam("adam", 0), 0.01, 0.5, 2), 0.98, 1e-9);
}

TEST(OptimizerTest, ClipGradNorm) {
  double g[2] = {3, 4};
  EXPECT_DOUBLE_EQ(clipGradNorm(g, 2, 1.0), 5.0);
  EXPECT_NEAR(g[0], 3 / (5 + 1e-6), 1e-15);
  EXPECT_NEAR(g[1], 4 / (5 + 1e-6), 1e-15);
  double small[2] = {0.3, 0.4};
  clipGradNorm(small, 2, 1.0);
  EXPECT_EQ(small[0], 0.3); // under the limit: unchanged
}

TEST(OptimizerTest, Schedules) {
  TrainConfig c;
  c.lr = 1.0;
  c.warmup = 10;
  c.schedule = gtc::rt::ScheduleKind::Constant;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 0, 100), 0.1);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 9, 100), 1.0);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 50, 100), 1.0);
  c.schedule = gtc::rt::ScheduleKind::Linear;
  c.final = 0.1;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 60, 110), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(scheduledLr(c, 110, 110), 0.1);
  c.schedule = gtc::rt::ScheduleKind::Cosine;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 10, 110), 1.0);
  EXPECT_NEAR(scheduledLr(c, 60, 110), 0.1 + 0.9 * 0.5, 1e-15);
  EXPECT_NEAR(scheduledLr(c, 35, 110),
              0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
}

} // namespace
