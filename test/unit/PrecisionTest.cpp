//===- PrecisionTest.cpp - 16-bit element types on the CPU ----------------===//
//
// The BF16/F16 conversions every runtime shares (round to nearest even,
// f16 overflow and subnormals), and the CPU executor on autocast plans:
// 16-bit buffers hold exactly representable values, parameters and
// gradients stay f32, and the loss and gradients track the f32 plan.
//===----------------------------------------------------------------------===//

#include "CompileHelpers.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Rng.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cmath>
#include <cstring>

using namespace gtc;
using rt::DType;

namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(PrecisionTest, Bf16Rounding) {
  EXPECT_EQ(rt::toHalfBits(1.0f, DType::BF16), 0x3f80);
  EXPECT_EQ(rt::toHalfBits(-2.0f, DType::BF16), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down).
  EXPECT_EQ(rt::toHalfBits(1.0f + 0x1p-8f, DType::BF16), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up, to even.
  EXPECT_EQ(rt::toHalfBits(1.0f + 3 * 0x1p-8f, DType::BF16), 0x3f82);
  EXPECT_EQ(rt::toHalfBits(1.0f + 0x1p-8f + 0x1p-20f, DType::BF16), 0x3f81);
  EXPECT_EQ(rt::toHalfBits(INFINITY, DType::BF16), 0x7f80);
  EXPECT_TRUE(std::isnan(
      rt::fromHalfBits(rt::toHalfBits(NAN, DType::BF16), DType::BF16)));
  // The largest float rounds to infinity.
  EXPECT_EQ(rt::toHalfBits(bitsToFloat(0x7f7fffff), DType::BF16), 0x7f80);
}

TEST(PrecisionTest, F16Rounding) {
  EXPECT_EQ(rt::toHalfBits(1.0f, DType::F16), 0x3c00);
  EXPECT_EQ(rt::toHalfBits(-2.0f, DType::F16), 0xc000);
  EXPECT_EQ(rt::toHalfBits(65504.0f, DType::F16), 0x7bff);
  EXPECT_EQ(rt::toHalfBits(65519.0f, DType::F16), 0x7bff);
  EXPECT_EQ(rt::toHalfBits(65520.0f, DType::F16), 0x7c00); // overflow
  EXPECT_EQ(rt::toHalfBits(-1e6f, DType::F16), 0xfc00);
  EXPECT_EQ(rt::toHalfBits(0x1p-14f, DType::F16), 0x0400); // smallest normal
  EXPECT_EQ(rt::toHalfBits(0x1p-24f, DType::F16), 0x0001); // subnormal
  EXPECT_EQ(rt::toHalfBits(0x1p-25f, DType::F16), 0x0000); // tie to even
  EXPECT_EQ(rt::toHalfBits(3 * 0x1p-25f, DType::F16), 0x0002);
  EXPECT_EQ(rt::toHalfBits(1.0f + 0x1p-11f, DType::F16), 0x3c00); // tie
  EXPECT_EQ(rt::toHalfBits(1.0f + 3 * 0x1p-11f, DType::F16), 0x3c02);
  // Rounding up carries into the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(rt::toHalfBits(2.0f - 0x1p-12f, DType::F16), 0x4000);
}

/// Every finite 16-bit value converts to float and back to its own bits.
TEST(PrecisionTest, EveryValueRoundTrips) {
  for (DType d : {DType::BF16, DType::F16})
    for (uint32_t b = 0; b < 65536; ++b) {
      float v = rt::fromHalfBits(static_cast<uint16_t>(b), d);
      if (std::isnan(v))
        continue;
      ASSERT_EQ(rt::toHalfBits(v, d), b) << rt::dtypeName(d) << " " << b;
    }
  // F16 values against the formula (-1)^s 2^(e-15) (1 + m/1024).
  EXPECT_EQ(rt::fromHalfBits(0x3555, DType::F16), 0x1p-2f * (1 + 341 / 1024.f));
  EXPECT_EQ(rt::fromHalfBits(0x0200, DType::F16), 0x1p-15f);
}

const char *kModel = R"(model m {
  input x: f32[B, 24]
  label y: i32[B]
  h = gelu(linear(x, 40))
  h = layernorm(h) + linear(h, 40, bias: false)
  loss = cross_entropy(linear(h, 5), y)
})";

/// Runs one step of `kModel` at `precision` on fixed data; returns the loss
/// and copies the gradients out.
double step(const std::string &precision, std::vector<float> &grads,
            const rt::Plan **planOut = nullptr) {
  std::string errors;
  static std::map<std::string, rt::Plan> plans;
  auto it = plans.find(precision);
  if (it == plans.end()) {
    std::optional<rt::Plan> plan =
        test::compilePlan(kModel, 16, errors, false, "t.gt", precision);
    EXPECT_TRUE(plan.has_value()) << errors;
    if (!plan)
      return NAN;
    it = plans.emplace(precision, std::move(*plan)).first;
  }
  const rt::Plan &plan = it->second;
  if (planOut)
    *planOut = &plan;
  rt::CpuExecutor<float> ex(plan);
  ex.initParams(5);
  rt::Rng rng(9);
  for (const rt::Feed &f : plan.feeds)
    for (int64_t i = 0; i < plan.buffers[f.buffer].elements(); ++i) {
      if (f.label)
        ex.ints(f.buffer)[i] = static_cast<int32_t>(rng.below(5));
      else
        ex.floats(f.buffer)[i] = static_cast<float>(rng.normal());
    }
  ex.run();
  // Where the GPU stores 16 bits, the CPU holds the rounded value (checked
  // on the buffers whose memory no other temporary reuses).
  int checked = 0;
  for (const rt::Buffer &b : plan.buffers) {
    if (rt::dtypeBytes(b.dtype) != 2 ||
        std::any_of(plan.buffers.begin(), plan.buffers.end(),
                    [&](const rt::Buffer &o) {
                      return &o != &b && o.overlaps(b);
                    }))
      continue;
    ++checked;
    int id = static_cast<int>(&b - plan.buffers.data());
    const float *v = ex.floats(id);
    for (int64_t i = 0; i < b.elements(); ++i) {
      EXPECT_EQ(rt::fromHalfBits(rt::toHalfBits(v[i], b.dtype), b.dtype), v[i])
          << b.name << "[" << i << "]";
    }
  }
  if (precision != "fp32") {
    EXPECT_GT(checked, 0);
  }
  const float *g = ex.region(rt::Region::Grad);
  grads.assign(g, g + ex.regionElements(rt::Region::Grad));
  return ex.floats(plan.loss)[0];
}

TEST(PrecisionTest, CpuAutocastTracksFp32) {
  std::vector<float> g32;
  double l32 = step("fp32", g32);
  for (const char *p : {"bf16", "fp16"}) {
    SCOPED_TRACE(p);
    std::vector<float> g16;
    const rt::Plan *plan = nullptr;
    double l16 = step(p, g16, &plan);
    ASSERT_TRUE(plan);
    // Parameters and gradients stay f32; some temporaries are 16-bit.
    int low = 0;
    for (const rt::Buffer &b : plan->buffers) {
      if (b.region == rt::Region::Param || b.region == rt::Region::Grad) {
        EXPECT_EQ(b.dtype, DType::F32) << b.name;
      }
      low += rt::dtypeBytes(b.dtype) == 2;
    }
    EXPECT_GT(low, 10);
    EXPECT_NE(l16, l32); // rounding happened
    EXPECT_NEAR(l16, l32, 0.02 * std::fabs(l32));
    ASSERT_EQ(g16.size(), g32.size());
    double dot = 0, n16 = 0, n32 = 0;
    for (size_t i = 0; i < g32.size(); ++i) {
      dot += double(g16[i]) * g32[i];
      n16 += double(g16[i]) * g16[i];
      n32 += double(g32[i]) * g32[i];
    }
    // The gradient points the same way (cosine) and has the same size.
    EXPECT_GT(dot / std::sqrt(n16 * n32), 0.999);
    EXPECT_NEAR(std::sqrt(n16 / n32), 1.0, 0.02);
  }
}

} // namespace
