//===- SampleTest.cpp - Drawing the next token (gtc sample) ---------------===//

#include "gtc/Runtime/Sample.h"
#include <cmath>
#include <gtest/gtest.h>
#include <vector>

using namespace gtc::rt;

namespace {

/// The distribution a draw must follow: softmax(logits / temperature),
/// top-k, then top-p (the fewest most likely whose mass reaches p),
/// renormalized.
std::vector<double> truncated(const std::vector<float> &logits,
                              const SamplingOptions &o) {
  const size_t v = logits.size();
  std::vector<size_t> order(v);
  for (size_t i = 0; i < v; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t keep = o.topK > 0 ? std::min<size_t>(o.topK, v) : v;
  std::vector<double> p(v, 0.0);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i)
    sum += p[order[i]] = std::exp(logits[order[i]] / o.temperature);
  double mass = 0;
  size_t n = keep;
  for (size_t i = 0; i < keep; ++i) {
    mass += p[order[i]] / sum;
    if (mass >= o.topP) {
      n = i + 1;
      break;
    }
  }
  double total = 0;
  for (size_t i = 0; i < v; ++i) {
    bool in = false;
    for (size_t j = 0; j < n; ++j)
      in |= order[j] == i;
    if (!in)
      p[i] = 0;
    total += p[i];
  }
  for (double &x : p)
    x /= total;
  return p;
}

/// 10^5 draws of a fixed distribution match the truncated one: each
/// token's count within 5 standard deviations, and none outside the kept set.
void expectDistribution(const SamplingOptions &o) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f};
  const std::vector<double> p = truncated(logits, o);
  const int n = 100000;
  std::vector<int> count(logits.size(), 0);
  Rng rng(42);
  for (int i = 0; i < n; ++i)
    ++count[sampleToken(logits.data(), logits.size(), o, rng)];
  for (size_t i = 0; i < logits.size(); ++i) {
    const double sd = std::sqrt(n * p[i] * (1 - p[i]));
    if (p[i] == 0)
      EXPECT_EQ(count[i], 0) << "token " << i << " is outside the kept set";
    else
      EXPECT_NEAR(count[i], n * p[i], 5 * sd + 1)
          << "token " << i << ", probability " << p[i];
  }
}

TEST(SampleTest, GreedyTakesTheFirstLargest) {
  const std::vector<float> logits = {0.5f, 3.0f, -2.0f, 3.0f};
  Rng rng(1);
  SamplingOptions o;
  o.temperature = 0;
  EXPECT_EQ(sampleToken(logits.data(), 4, o, rng), 1);
}

TEST(SampleTest, FullDistribution) { expectDistribution({}); }

TEST(SampleTest, Temperature) {
  SamplingOptions o;
  o.temperature = 0.6;
  expectDistribution(o);
}

TEST(SampleTest, TopK) {
  SamplingOptions o;
  o.topK = 3;
  expectDistribution(o);
}

TEST(SampleTest, TopP) {
  SamplingOptions o;
  o.topP = 0.7;
  expectDistribution(o);
}

TEST(SampleTest, TopKThenTopP) {
  SamplingOptions o;
  o.temperature = 1.3;
  o.topK = 4;
  o.topP = 0.8;
  expectDistribution(o);
}

TEST(SampleTest, SeedReproduces) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f};
  SamplingOptions o;
  Rng a(7), b(7), c(8);
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 64; ++i) {
    x.push_back(sampleToken(logits.data(), 4, o, a));
    y.push_back(sampleToken(logits.data(), 4, o, b));
    z.push_back(sampleToken(logits.data(), 4, o, c));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

} // namespace
