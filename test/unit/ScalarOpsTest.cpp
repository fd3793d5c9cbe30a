//===- ScalarOpsTest.cpp - The activations' one definition ----------------===//
//
// runtime/include/gtc/Runtime/ScalarOps.h holds each activation's formula
// and derivative for the CPU executor and, as text, for the generated CUDA.
// Here every derivative agrees with a central difference of its formula
// (in double), and the float instances are finite where the op is defined.
// CudaEmitterTest compiles the same text with NVRTC.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/ScalarOps.h"
#include "gtest/gtest.h"
#include <cmath>
#include <string>
#include <vector>

namespace {

struct Activation {
  std::string name;
  double (*fwd)(double);
  double (*grad)(double);
  float (*fwdF)(float);
  float (*gradF)(float);
};

std::vector<Activation> activations() {
  std::vector<Activation> all;
#define GTC_KIND(Op, name)                                                     \
  all.push_back({#name, gtc_scalar::name##_fwd<double>,                        \
                 gtc_scalar::name##_grad<double>,                              \
                 gtc_scalar::name##_fwd<float>,                                \
                 gtc_scalar::name##_grad<float>});
  GTC_ACTIVATIONS(GTC_KIND)
#undef GTC_KIND
  return all;
}

TEST(ScalarOpsTest, DerivativesMatchTheFormulas) {
  std::vector<Activation> all = activations();
  ASSERT_GE(all.size(), 9u); // relu ... silu, gelu, gelu_tanh
  for (const Activation &a : all) {
    // log and sqrt are defined for x > 0; relu's kink is at 0.
    for (double x : {-2.5, -0.7, 0.05, 0.4, 1.3, 3.0}) {
      if ((a.name == "log" || a.name == "sqrt") && x <= 0)
        continue;
      const double h = 1e-6;
      double numeric = (a.fwd(x + h) - a.fwd(x - h)) / (2 * h);
      EXPECT_NEAR(a.grad(x), numeric, 1e-6 * std::max(1.0, std::fabs(numeric)))
          << a.name << " at " << x;
      EXPECT_TRUE(std::isfinite(a.fwdF(float(x))) &&
                  std::isfinite(a.gradF(float(x))))
          << a.name << " at " << x;
    }
  }
}

TEST(ScalarOpsTest, KnownValues) {
  EXPECT_EQ(gtc_scalar::relu_fwd(-1.0f), 0.0f);
  EXPECT_EQ(gtc_scalar::relu_grad(2.0f), 1.0f);
  EXPECT_NEAR(gtc_scalar::sigmoid_fwd(0.0), 0.5, 1e-15);
  // torch.nn.functional.gelu(torch.tensor(1.0, dtype=torch.float64)) and
  // with approximate="tanh".
  EXPECT_NEAR(gtc_scalar::gelu_fwd(1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(gtc_scalar::gelu_tanh_fwd(1.0), 0.8411919906082768, 1e-15);
  // torch.nn.functional.silu(torch.tensor(1.0, dtype=torch.float64)).
  EXPECT_NEAR(gtc_scalar::silu_fwd(1.0), 0.7310585786300049, 1e-15);
}

} // namespace
