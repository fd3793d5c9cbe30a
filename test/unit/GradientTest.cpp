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
#include "mlir/IR/Diagnostics.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace gtc;

namespace {

/// Compiles `source` into a training-step plan at `batch`; fails the test
/// with the diagnostics otherwise.
std::optional<rt::Plan> compile(const std::string &source, int64_t batch,
                                std::string &errors) {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "t.gt"), llvm::SMLoc());
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  auto module = compileSource(context, sourceMgr, "t.gt");
  if (!module)
    return std::nullopt;
  mlir::FailureOr<rt::Plan> plan = compileStep(*module, batch);
  if (mlir::failed(plan))
    return std::nullopt;
  return std::move(*plan);
}

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
  std::optional<rt::Plan> plan = compile(source, batch, errors);
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

TEST(GradientTest, ElementwiseWithBroadcasting) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    param b: f32[4] = normal(1.0)
    param c: f32[1, 4] = normal(1.0)
    loss = mean((a * x + b) / (b * b + 2) - a * c + x / (c * c + 1) - b)
  })"), 0);
}

TEST(GradientTest, Negation) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 4]
    param a: f32[4] = normal(1.0)
    loss = mean(-(a * x) * a)
  })"), 0);
}

TEST(GradientTest, Activations) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 5]
    param a: f32[5] = normal(1.0)
    h = relu(a * x) + tanh(a * x) + sigmoid(a - x) + exp(a * 0.5)
    h = h + log(a * a + 1) + sqrt(a * a + 0.5) + gelu(a * x)
    h = h + gelu(x - a, approximate: true)
    loss = mean(h * x)
  })"), 0);
}

TEST(GradientTest, Softmax) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    loss = mean(softmax(a * x) * x) + mean(softmax(a + x, axis: 1) * x)
  })"), 0);
}

TEST(GradientTest, MatmulTransposesAndBatches) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 4]
    param w: f32[4, 5] = normal(1.0)
    param v: f32[5, 4] = normal(1.0)
    param u: f32[4, 3] = normal(1.0)
    param p: f32[2, 4, 3] = normal(1.0)
    param q: f32[2, 4, 5] = normal(1.0)
    h = matmul(x, w) + matmul(x, v, transpose_b: true)
    g = matmul(u, x, transpose_a: true, transpose_b: true)
    r = matmul(p, q, transpose_a: true)
    loss = mean(h * h) + mean(g) + mean(r * r)
  })"), 0);
}

TEST(GradientTest, LinearRanksAndBias) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 4]
    input z: f32[B, 4]
    h = linear(x, 6)
    g = linear(z, 3, bias: false)
    loss = mean(h * h) + mean(g * g)
  })"), 0);
}

TEST(GradientTest, LayerNorm) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 8]
    param a: f32[8] = normal(1.0)
    h = layernorm(x * a, eps: 1e-3)
    param w: f32[8] = normal(1.0)
    loss = mean(h * w * x)
  })"), 0);
}

TEST(GradientTest, CausalAndFullAttention) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 5, 8]
    h = attention(x, heads: 2, causal: true)
    g = attention(x, heads: 4, causal: false)
    loss = mean(h * x) + mean(g * g)
  })"), 0);
}

TEST(GradientTest, EmbeddingAndCrossEntropy) {
  EXPECT_GT(checkGradients(R"(model m {
    input t: i32[B, 4]
    label y: i32[B, 4]
    h = embedding(t, 5, dim: 6) + embedding(positions(4), 4, dim: 6)
    loss = cross_entropy(linear(h, 5), y)
  })", 3, 5), 0);
}

TEST(GradientTest, ReductionsTransposeReshape) {
  EXPECT_GT(checkGradients(R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    h = a * x
    s = sum(h, axis: -1) + mean(h, axis: (-1,))
    k = mean(h, axis: (0, 2), keepdim: true)
    t = transpose(h) * transpose(x)
    r = reshape(h, (-1, 2)) * reshape(x, (-1, 2))
    loss = mean(s * s) + sum(k * k) + mean(t) + sum(r) + mean(h)
  })"), 0);
}

TEST(GradientTest, TiedWeights) {
  // wte is used by the embedding and by the output projection.
  EXPECT_GT(checkGradients(R"(model m {
    input t: i32[B, 3]
    label y: i32[B, 3]
    param wte: f32[6, 4] = normal(0.5)
    x = embedding(t, wte)
    loss = cross_entropy(matmul(layernorm(x), transpose(wte)), y)
  })", 2, 6), 0);
}

TEST(GradientTest, UnusedParameterGetsZero) {
  std::string errors;
  auto plan = compile(R"(model m {
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
  for (const rt::Param &p : plan->params)
    if (p.name == "unused")
      for (int64_t i = 0; i < 3; ++i)
        EXPECT_EQ(ex.floats(p.grad)[i], 0.0);
}

TEST(GradientTest, WholeMlp) {
  EXPECT_GT(checkGradients(R"(model mlp {
    input x: f32[B, 12]
    label y: i32[B]
    h = relu(linear(x, 16))
    h = relu(linear(h, 16))
    loss = cross_entropy(linear(h, 4), y)
  })", 4, 4), 0);
}

TEST(GradientTest, WholeTwoLayerCharGpt) {
  EXPECT_GT(checkGradients(R"(model char_gpt {
    let V = 11, T = 6, D = 8, H = 2, L = 2
    input  tokens: i32[B, T]
    label  targets: i32[B, T]
    def block(x) {
      x = x + attention(layernorm(x, name: "ln_1"), heads: H, causal: true, name: "attn")
      return x + linear(gelu(linear(layernorm(x, name: "ln_2"), 4 * D, name: "mlp.fc"), approximate: true), D, name: "mlp.proj")
    }
    x = embedding(tokens, V, dim: D, std: 0.5, name: "wte") + embedding(positions(T), T, dim: D, std: 0.5, name: "wpe")
    repeat L { x = block(x) }
    loss = cross_entropy(linear(layernorm(x, name: "ln_f"), V, bias: false, name: "lm_head"), targets)
  })", 2, 11, 12), 0);
}

} // namespace
