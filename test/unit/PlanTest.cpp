//===- PlanTest.cpp - Plan building, memory planning, serialization -------===//

#include "CompileHelpers.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Profile.h"
#include "gtc/Runtime/Rng.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cstdint>

using namespace gtc;

namespace {

/// Compiles the example file at `path`; `eval` picks the evaluation pass,
/// `precision` overrides the train block's.
rt::Plan compileFile(const std::string &path, int64_t batch,
                     bool eval = false, const std::string &precision = "") {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  if (!buffer)
    return {};
  std::string errors;
  std::optional<rt::Plan> plan = test::compilePlan(
      (*buffer)->getBuffer().str(), batch, errors, eval, path, precision);
  EXPECT_TRUE(plan) << errors;
  return plan ? std::move(*plan) : rt::Plan();
}

std::string example(const char *name) {
  return std::string(GTC_SOURCE_DIR) + "/examples/" + name;
}

TEST(PlanTest, RoundTripsThroughText) {
  rt::Plan plan = compileFile(example("mlp.gt"), 16);
  std::string text = rt::serialize(plan);
  rt::Plan back;
  std::string error;
  ASSERT_TRUE(rt::deserialize(text, back, error)) << error;
  EXPECT_EQ(rt::serialize(back), text);
  EXPECT_EQ(back.parameterCount(), 1863690);
  EXPECT_EQ(back.config.optimizer, rt::OptimizerKind::AdamW);
  EXPECT_EQ(back.config.data.kind, "idx");
}

TEST(PlanTest, EvalPlansRoundTrip) {
  rt::Plan plan = compileFile(example("mlp.gt"), 16, /*eval=*/true);
  EXPECT_EQ(plan.kind, "eval");
  EXPECT_GE(plan.accuracy, 0);
  rt::Plan back;
  std::string error;
  ASSERT_TRUE(rt::deserialize(rt::serialize(plan), back, error)) << error;
  EXPECT_EQ(back.params.size(), plan.params.size());
}

TEST(PlanTest, RejectsDamagedText) {
  rt::Plan plan = compileFile(example("mlp.gt"), 4);
  std::string text = rt::serialize(plan), error;
  rt::Plan back;
  // Cut at a line boundary: the missing 'end' record tells.
  size_t cut = text.rfind('\n', text.size() / 2) + 1;
  EXPECT_FALSE(rt::deserialize(text.substr(0, cut), back, error));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  // Cut inside a record: that record is malformed.
  EXPECT_FALSE(rt::deserialize(text.substr(0, cut + 5), back, error));
  EXPECT_NE(error.find("plan line"), std::string::npos) << error;
  std::string future = text;
  future.replace(0, 10, "gtc-plan 9");
  EXPECT_FALSE(rt::deserialize(future, back, error));
  EXPECT_NE(error.find("version 9"), std::string::npos) << error;
  EXPECT_FALSE(rt::deserialize("garbage\n", back, error));
  // Typed settings and op kinds: an unknown name is an error, not a default.
  for (auto [from, to] :
       {std::pair{"config optimizer adamw", "config optimizer lion"},
        std::pair{"config schedule cosine", "config schedule step"},
        std::pair{"config precision fp32", "config precision fp8"},
        std::pair{"kernel linear", "kernel conv2d"}}) {
    std::string bad = text;
    size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, std::string(from).size(), to);
    EXPECT_FALSE(rt::deserialize(bad, back, error)) << to;
  }
  // Every prefix fails cleanly or parses; none crashes.
  for (size_t n = 0; n < text.size(); n += 97)
    rt::deserialize(text.substr(0, n), back, error);
}

/// A slice that is a contiguous, aligned block of a temporary is a view of
/// it some slots in (test/Run/slice-view.test trains one); the plan's text
/// keeps it, and a view reaching past its memory is rejected.
TEST(PlanTest, SliceViewsStayInsideTheirMemory) {
  rt::Plan plan = compileFile(
      std::string(GTC_SOURCE_DIR) + "/test/Run/Inputs/slice_view.gt", 8);
  auto view = std::find_if(
      plan.buffers.begin(), plan.buffers.end(),
      [](const rt::Buffer &b) { return b.viewOf >= 0 && b.name == "slice"; });
  ASSERT_NE(view, plan.buffers.end());
  const rt::Buffer &root = plan.buffers[view->viewOf];
  EXPECT_EQ(view->offset, root.offset + 16 * 64); // rows 16.. of [32, 64]
  EXPECT_EQ(view->region, root.region);
  std::string text = rt::serialize(plan), error;
  rt::Plan back;
  ASSERT_TRUE(rt::deserialize(text, back, error)) << error;
  EXPECT_EQ(rt::serialize(back), text);
  view->offset = root.offset + root.slots() - view->slots() + 64;
  EXPECT_FALSE(rt::deserialize(rt::serialize(plan), back, error));
}

/// In mixed precision a step keeps its parameters' bf16 casts between steps
/// (Plan::paramCopies): each in the Copy region at its parameter's element
/// offset, so an optimizer can write it with the parameter. The plan's text
/// keeps that, and a copy out of its place is rejected. Evaluation plans and
/// fp32 steps have none.
TEST(PlanTest, ParameterCopiesMirrorTheParameters) {
  rt::Plan plan = compileFile(example("mlp.gt"), 16, false, "bf16");
  ASSERT_GE(plan.paramCopies, 0);
  EXPECT_TRUE(plan.paramCopiesValid());
  EXPECT_EQ(plan.paramCopyType(), rt::DType::BF16);
  EXPECT_EQ(2 * plan.regionSize.at(rt::Region::Copy),
            plan.regionSize.at(rt::Region::Param));
  EXPECT_EQ(plan.memory().weightCopies, plan.memory().weights / 2);
  const rt::Kernel &k = plan.kernels[plan.paramCopies];
  ASSERT_EQ(k.body.size(), plan.params.size());
  for (const rt::Kernel &cast : k.body) {
    const rt::Buffer &from = plan.buffers[cast.inputs[0]];
    const rt::Buffer &to = plan.buffers[cast.outputs[0]];
    EXPECT_EQ(to.region, rt::Region::Copy) << from.name;
    EXPECT_EQ(2 * to.offset, from.offset) << from.name;
  }
  std::string text = rt::serialize(plan), error;
  rt::Plan back;
  ASSERT_TRUE(rt::deserialize(text, back, error)) << error;
  EXPECT_EQ(back.paramCopies, plan.paramCopies);
  EXPECT_EQ(rt::serialize(back), text);
  // fc1.bias's copy (element 802816 of the parameters) moved by one slot.
  std::string moved = text, from = "buffer bf16 copy 401408 ";
  size_t at = moved.find(from);
  ASSERT_NE(at, std::string::npos);
  moved.replace(at, from.size(), "buffer bf16 copy 401409 ");
  EXPECT_FALSE(rt::deserialize(moved, back, error));
  EXPECT_NE(error.find("copy region"), std::string::npos) << error;
  // No copies where nothing is cast, or nothing is updated.
  rt::Plan fp32 = compileFile(example("mlp.gt"), 16, false, "fp32");
  ASSERT_FALSE(fp32.buffers.empty());
  EXPECT_EQ(fp32.paramCopies, -1);
  EXPECT_EQ(fp32.regionSize.count(rt::Region::Copy), 0u);
  rt::Plan eval = compileFile(example("mlp.gt"), 16, true, "bf16");
  EXPECT_EQ(eval.kind, "eval");
  EXPECT_EQ(eval.paramCopies, -1);
}

/// The CPU runs the copies' kernel in every step: bf16 training reads the
/// parameters of the step before, cast, whether or not they are kept.
TEST(PlanTest, ParameterCopiesTrainOnTheCpu) {
  rt::Plan plan = compileFile(example("mlp.gt"), 8, false, "bf16");
  ASSERT_GE(plan.paramCopies, 0);
  rt::CpuExecutor<float> cpu(plan);
  cpu.initParams(3);
  const rt::Kernel &k = plan.kernels[plan.paramCopies];
  for (int step = 0; step < 2; ++step) {
    cpu.run();
    for (const rt::Kernel &cast : k.body) {
      const rt::Buffer &p = plan.buffers[cast.inputs[0]];
      const float *param = cpu.floats(cast.inputs[0]);
      const float *copy = cpu.floats(cast.outputs[0]);
      for (int64_t i = 0; i < p.elements(); i += 97)
        ASSERT_EQ(copy[i], rt::fromHalfBits(rt::toHalfBits(param[i],
                                                           rt::DType::BF16),
                                            rt::DType::BF16))
            << p.name << " " << i;
    }
    // A step of plain SGD on the parameters changes them for the next.
    float *params = cpu.region(rt::Region::Param);
    for (int64_t i = 0; i < cpu.regionElements(rt::Region::Param); ++i)
      params[i] -= 0.01f * cpu.region(rt::Region::Grad)[i];
  }
}

/// Temporaries whose lifetimes overlap never share memory, and memory is
/// reused (the temp region is smaller than all temporaries together). A
/// view (a reshape) and its buffer are one piece of memory, live from the
/// buffer's definition to the last use of either. The gradients are in the
/// temporaries' memory (Plan::gradsInTemp), each live from its first write
/// to the update; their alignment gaps are never a temporary's.
TEST(PlanTest, MemoryPlanIsSoundAndReuses) {
  rt::Plan plan = compileFile(example("char_gpt.gt"), 4);
  ASSERT_EQ(plan.gradsInTemp, 0);
  size_t n = plan.buffers.size();
  auto storage = [&](int id) {
    return plan.buffers[id].viewOf < 0 ? id : plan.buffers[id].viewOf;
  };
  std::vector<int64_t> def(n, -1), last(n, -1);
  int views = 0;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (int in : plan.kernels[k].inputs)
      last[storage(in)] = k;
    for (int out : plan.kernels[k].outputs)
      if (def[storage(out)] < 0)
        def[storage(out)] = k;
  }
  last[storage(plan.loss)] = plan.kernels.size();
  // The gradients, moved into the temporaries' slots, and their gaps.
  std::vector<rt::Buffer> placed = plan.buffers;
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t gapless = 0, gapStart = INT64_MAX;
  for (const rt::Param &p : plan.params) {
    rt::Buffer &g = placed[p.grad];
    ASSERT_EQ(g.region, rt::Region::Grad) << p.name;
    g.region = rt::Region::Temp;
    g.offset += plan.gradsInTemp;
    last[p.grad] = plan.kernels.size();
    int64_t end = g.offset + g.slots(), next = (end + 127) / 128 * 128;
    if (end < next) {
      gaps.push_back({end, next});
      gapStart = std::min(gapStart, g.offset);
    } else {
      gapless = std::max(gapless, next);
    }
  }
  EXPECT_FALSE(gaps.empty()) << "char_gpt's 192-wide parameters leave gaps";
  EXPECT_LE(gapless, gapStart) << "the gaps should be together at the end";
  EXPECT_LE(plan.gradsInTemp + plan.regionSize[rt::Region::Grad],
            plan.regionSize[rt::Region::Temp]);
  int64_t total = 0;
  for (size_t a = 0; a < n; ++a) {
    const rt::Buffer &ba = placed[a];
    if (ba.viewOf >= 0) {
      ++views;
      EXPECT_EQ(ba.offset, plan.buffers[ba.viewOf].offset);
      EXPECT_EQ(ba.region, plan.buffers[ba.viewOf].region);
      continue;
    }
    if (ba.region != rt::Region::Temp)
      continue;
    if (plan.buffers[a].region == rt::Region::Temp) {
      total += ba.slots();
      for (auto [lo, hi] : gaps)
        EXPECT_FALSE(ba.offset < hi && lo < ba.offset + ba.slots())
            << ba.name << " is in a gradient's gap";
    }
    for (size_t b = a + 1; b < n; ++b) {
      const rt::Buffer &bb = placed[b];
      if (bb.region != rt::Region::Temp || bb.viewOf >= 0)
        continue;
      bool live = def[a] <= std::max(last[b], def[b]) &&
                  def[b] <= std::max(last[a], def[a]);
      EXPECT_FALSE(live && ba.overlaps(bb)) << ba.name << " and " << bb.name;
    }
  }
  // Reuse saves at least a third, with fusion (which leaves fewer
  // short-lived temporaries to reuse: 4.9 of 9.6 MB at the time of writing).
  EXPECT_LT(plan.regionSize[rt::Region::Temp], total * 2 / 3);
  EXPECT_GT(views, 0) << "char_gpt's reshapes should be views";
}

TEST(PlanTest, GradientsMirrorParameters) {
  rt::Plan plan = compileFile(example("gpt2.gt"), 1);
  EXPECT_EQ(plan.parameterCount(), 124475904);
  EXPECT_EQ(plan.regionSize[rt::Region::Grad],
            plan.regionSize[rt::Region::Param]);
  for (const rt::Param &p : plan.params) {
    ASSERT_GE(p.grad, 0) << p.name;
    EXPECT_EQ(plan.buffers[p.grad].offset, plan.buffers[p.buffer].offset);
    EXPECT_EQ(plan.buffers[p.grad].region, rt::Region::Grad);
  }
  // Inside the temporaries, which the memory counts once; the text keeps
  // the place, and a place outside the temporaries is an error.
  ASSERT_EQ(plan.gradsInTemp, 0);
  rt::Plan::Memory m = plan.memory();
  EXPECT_EQ(m.gradients, 0);
  EXPECT_GE(m.temporaries, plan.regionSize[rt::Region::Grad] * 4);
  std::string text = rt::serialize(plan), error;
  rt::Plan back;
  ASSERT_TRUE(rt::deserialize(text, back, error)) << error;
  EXPECT_EQ(back.gradsInTemp, 0);
  std::string moved = text;
  size_t at = moved.find("grads_in_temp 0\n");
  ASSERT_NE(at, std::string::npos);
  moved.replace(at, 16,
                "grads_in_temp " +
                    std::to_string(plan.regionSize[rt::Region::Temp]) + "\n");
  EXPECT_FALSE(rt::deserialize(moved, back, error));
  EXPECT_NE(error.find("grads_in_temp"), std::string::npos) << error;
  // Evaluation has no gradients.
  EXPECT_EQ(compileFile(example("gpt2.gt"), 1, true).gradsInTemp, -1);
}

/// gt-pack-projections' packed parameter: q, k and v's weights one buffer,
/// each of the plan's three parameters a view of its rows, and so are their
/// gradients of the one gradient the dW GEMM writes; no kernel stacks the
/// weights or splits the gradient. The step's 16-bit copy casts the packed
/// buffer. The text keeps the views. Without gt-fuse, three parameters.
TEST(PlanTest, PackedProjectionsAreOneParameter) {
  const char *model = R"(model m {
    input x: f32[B, 16, 64]
    q = reshape(linear(x, 128, bias: false, name: "attn.q"), (-1, 16, 4, 32))
    k = reshape(linear(x, 64, bias: false, name: "attn.k"), (-1, 16, 2, 32))
    v = reshape(linear(x, 64, bias: false, name: "attn.v"), (-1, 16, 2, 32))
    y = reshape(attention(rope(q), rope(k), v), (-1, 16, 128))
    loss = sum(linear(y, 64, bias: false, name: "o"))
  })";
  for (const char *precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    std::string errors, error;
    std::optional<rt::Plan> plan =
        test::compilePlan(model, 2, errors, false, "t.gt", precision);
    ASSERT_TRUE(plan) << errors;
    std::vector<std::string> names;
    int packed = -1, packedGrad = -1;
    int64_t row = 0;
    ASSERT_EQ(plan->params.size(), 4u);
    for (const rt::Param &p : llvm::ArrayRef(plan->params).take_front(3)) {
      names.push_back(p.name);
      const rt::Buffer &b = plan->buffers[p.buffer];
      const rt::Buffer &g = plan->buffers[p.grad];
      ASSERT_GE(b.viewOf, 0) << p.name;
      ASSERT_GE(g.viewOf, 0) << p.name;
      packed = packed < 0 ? b.viewOf : packed;
      packedGrad = packedGrad < 0 ? g.viewOf : packedGrad;
      EXPECT_EQ(b.viewOf, packed);
      EXPECT_EQ(g.viewOf, packedGrad);
      EXPECT_EQ(b.offset, plan->buffers[packed].offset + row * 64) << p.name;
      EXPECT_EQ(g.offset, plan->buffers[packedGrad].offset + row * 64)
          << p.name;
      EXPECT_EQ(b.region, rt::Region::Param);
      EXPECT_EQ(g.region, rt::Region::Grad);
      row += b.shape[0];
    }
    EXPECT_EQ(names, (std::vector<std::string>{"attn.q.weight", "attn.k.weight",
                                               "attn.v.weight"}));
    EXPECT_EQ(plan->buffers[packed].shape, (std::vector<int64_t>{256, 64}));
    EXPECT_EQ(plan->buffers[packedGrad].offset, plan->buffers[packed].offset);
    // Profiles and --check-numerics name the kernels that read the packed
    // weight or write its gradient by the scope its parts share.
    std::vector<rt::KernelContext> contexts = rt::kernelContexts(*plan);
    bool written = false;
    for (size_t i = 0; i < plan->kernels.size(); ++i) {
      const rt::Kernel &k = plan->kernels[i];
      EXPECT_NE(k.op, rt::OpKind::Pad);
      EXPECT_NE(k.op, rt::OpKind::Slice);
      EXPECT_NE(k.op, rt::OpKind::Copy);
      if (llvm::is_contained(k.outputs, packedGrad)) {
        written = true;
        EXPECT_EQ(contexts[i].layer, "attn");
      }
    }
    EXPECT_TRUE(written) << "no kernel writes the packed gradient";
    if (std::string(precision) == "bf16") {
      ASSERT_GE(plan->paramCopies, 0);
      const rt::Kernel &copies = plan->kernels[plan->paramCopies];
      ASSERT_EQ(copies.body.size(), 2u); // the packed weight and o's
      EXPECT_TRUE(llvm::any_of(copies.body, [&](const rt::Kernel &cast) {
        return cast.inputs[0] == packed;
      }));
    }
    std::string text = rt::serialize(*plan);
    rt::Plan back;
    ASSERT_TRUE(rt::deserialize(text, back, error)) << error;
    EXPECT_EQ(rt::serialize(back), text);
  }
  std::string errors;
  std::optional<rt::Plan> apart = test::compilePlan(
      model, 2, errors, false, "t.gt", "bf16", /*fuse=*/false);
  ASSERT_TRUE(apart) << errors;
  ASSERT_EQ(apart->params.size(), 4u);
  for (const rt::Param &p : apart->params)
    EXPECT_LT(apart->buffers[p.buffer].viewOf, 0) << p.name;
}

} // namespace

// Parameter initialization is split over threads; every thread count draws
// what one generator per parameter draws element by element.
TEST(PlanTest, ParameterInitIsIndependentOfThreads) {
  std::string errors;
  std::optional<rt::Plan> plan = test::compilePlan(R"(model m {
    input x: f32[B, 300]
    param w: f32[300, 1000] = normal(0.02)
    param u: f32[200000] = uniform(-0.5, 0.5)
    param o: f32[1000] = ones
    loss = mean(matmul(x, w) * o) + mean(u)
  })", 2, errors);
  ASSERT_TRUE(plan.has_value()) << errors;
  int64_t n = plan->regionSize.at(rt::Region::Param);
  std::vector<float> one(n), many(n);
  rt::setThreads(1);
  rt::initParameters(*plan, 42, one.data());
  rt::setThreads(4);
  rt::initParameters(*plan, 42, many.data());
  rt::setThreads(0);
  EXPECT_EQ(one, many);
  for (const rt::Param &p : plan->params) {
    const rt::Buffer &b = plan->buffers[p.buffer];
    rt::Rng rng(rt::mixSeed(42, p.name));
    for (int64_t i = 0; i < b.elements(); ++i) {
      double v = p.init == "normal"    ? p.args[0] + p.args[1] * rng.normal()
                 : p.init == "uniform" ? p.args[0] + (p.args[1] - p.args[0]) *
                                                         rng.uniform()
                                       : 1.0;
      ASSERT_EQ(one[b.offset + i], static_cast<float>(v)) << p.name << i;
    }
  }
}

/// Dropout on the CPU: about p of the elements are zero, the rest scaled by
/// 1 / (1 - p); the gradient keeps the forward's mask; the mask is a
/// function of (seed, step, salt): the same again for the same step, a
/// different one for the next step, for another seed and for the model's
/// other dropout; evaluation has no dropout.
TEST(PlanTest, DropoutMasks) {
  const char *src = R"(model m {
    input x: f32[B, 4096]
    param w: f32[4096] = ones
    loss = mean(dropout(x * w, 0.25) + dropout(x * w, 0.25))
  })";
  std::string errors;
  std::optional<rt::Plan> plan = test::compilePlan(src, 2, errors);
  ASSERT_TRUE(plan) << errors;
  const rt::Kernel *drops[2] = {nullptr, nullptr};
  int n = 0;
  for (const rt::Kernel &k : plan->kernels)
    if (k.op == rt::OpKind::Dropout && n < 2 &&
        plan->buffers[k.inputs[0]].elements() == 2 * 4096)
      drops[n++] = &k;
  ASSERT_EQ(n, 2) << "two forward dropouts of the whole batch";
  rt::CpuExecutor<float> cpu(*plan);
  cpu.initParams(0);
  // The dropouts' results as they come (their memory is reused later).
  std::vector<std::vector<float>> results(2);
  cpu.afterOp = [&](size_t, const rt::Kernel &k) {
    for (int d = 0; d < 2; ++d)
      if (&k == drops[d]) {
        const float *y = cpu.floats(k.outputs[0]);
        results[d].assign(y, y + 2 * 4096);
      }
  };
  auto masks = [&](int64_t step, uint64_t seed) {
    cpu.step = step;
    cpu.seed = seed;
    std::fill_n(cpu.floats(plan->feeds[0].buffer), 2 * 4096, 1.0f);
    cpu.run();
    std::vector<std::vector<bool>> kept;
    for (const std::vector<float> &y : results) {
      std::vector<bool> m;
      for (float v : y) {
        EXPECT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6f) << v;
        m.push_back(v != 0.0f);
      }
      kept.push_back(m);
    }
    return kept;
  };
  auto dropped = [](const std::vector<bool> &m) {
    return static_cast<double>(std::count(m.begin(), m.end(), false)) /
           static_cast<double>(m.size());
  };
  auto step7 = masks(7, 1);
  EXPECT_NEAR(dropped(step7[0]), 0.25, 0.02);
  EXPECT_NEAR(dropped(step7[1]), 0.25, 0.02);
  EXPECT_NE(step7[0], step7[1]) << "each dropout draws its own mask";
  // d loss / d w: each kept element of both dropouts adds
  // 1 / (0.75 * 2 * 4096 * ... ); zero where both dropped the element.
  const float *dw = cpu.floats(plan->params[0].grad);
  for (int64_t i = 0; i < 4096; ++i) {
    int keptBoth =
        step7[0][i] + step7[0][4096 + i] + step7[1][i] + step7[1][4096 + i];
    EXPECT_NEAR(dw[i], keptBoth / 0.75f / (2 * 4096), 1e-7f) << i;
  }
  EXPECT_EQ(masks(7, 1), step7) << "the same step draws the same masks";
  EXPECT_NE(masks(8, 1)[0], step7[0]) << "the next step draws new masks";
  EXPECT_NE(masks(7, 2)[0], step7[0]) << "another seed draws new masks";

  std::optional<rt::Plan> eval = test::compilePlan(src, 2, errors, true);
  ASSERT_TRUE(eval) << errors;
  for (const rt::Kernel &k : eval->kernels)
    EXPECT_NE(k.op, rt::OpKind::Dropout) << "evaluation keeps every element";
}

TEST(PlanTest, PowerReadingsForTheBenchLine) {
  // NVML's clock-limiting reasons: the software power cap (0x4) apart from
  // the thermal and hardware slowdowns (0x8, 0x20, 0x40, 0x80); idle (0x1)
  // and application clocks (0x2) are neither.
  EXPECT_TRUE(rt::clockPowerCapped(0x4));
  EXPECT_TRUE(rt::clockPowerCapped(0x5));
  EXPECT_FALSE(rt::clockPowerCapped(0x1 | 0x2 | 0x8));
  for (unsigned long long bit : {0x8ull, 0x20ull, 0x40ull, 0x80ull})
    EXPECT_TRUE(rt::clockThermalLimited(bit)) << bit;
  EXPECT_FALSE(rt::clockThermalLimited(0x1 | 0x2 | 0x4 | 0x10));
  // Nothing without NVML (a CPU run, or a driver without the library).
  EXPECT_EQ(rt::describePower(rt::PowerReading()), "");
  rt::PowerReading r;
  r.valid = true;
  r.joulesPerStep = 19.8412;
  r.watts = 661.2;
  r.windowSeconds = 0.4012;
  r.powerLimitW = 700;
  r.smMHz = 1613.1;
  r.samples = 74;
  r.powerCapped = 74;
  EXPECT_EQ(rt::describePower(r),
            "19.84 J/step at 661 W over 0.40 s (limit 700 W), SM clock 1613 "
            "MHz, power-limited in 74 of 74 samples");
  r.thermal = 3;
  r.powerLimitW = 0;
  EXPECT_EQ(rt::describePower(r),
            "19.84 J/step at 661 W over 0.40 s, SM clock 1613 MHz, "
            "power-limited in 74 of 74 samples, slowed by a thermal or "
            "hardware limit in 3");
  r.samples = 0; // a run shorter than one sample
  EXPECT_EQ(rt::describePower(r), "19.84 J/step at 661 W over 0.40 s");
}

TEST(PlanTest, EnergyWindowBetweenTheCountersChanges) {
  // NVML's counter (mJ) moves about every 100 ms. The first poll is the
  // value before the steps; the window runs from the first change to the
  // last, so the stale first read (1000 mJ, from up to 100 ms earlier) and
  // the polls after the last change count for nothing.
  rt::EnergyWindow w;
  // Polls every millisecond from 0 to 0.29 s; the counter reads 1000 mJ
  // (from up to 100 ms earlier) and moves by 70 J at 0.05, 0.15 and 0.25 s.
  auto counter = [](int ms) {
    return 1000ull + 70000ull * (ms >= 50) + 70000ull * (ms >= 150) +
           70000ull * (ms >= 250);
  };
  for (int ms = 0; ms <= 290; ++ms) {
    w.read(ms / 1000.0, ms / 1000.0, counter(ms));
    if (ms == 100) {
      EXPECT_FALSE(w.valid()); // one change: no span
    }
  }
  ASSERT_TRUE(w.valid()); // first change 0.05 s, last 0.25: 140 J over 0.2 s
  EXPECT_NEAR(w.seconds(), 0.2, 1e-12);
  EXPECT_NEAR(w.watts(), 700, 1e-9);
  // The difference of the first and last reads would give 210 J over
  // 0.29 s (724 W), the error the window removes.

  // A change seen after a gap (the poller stalled for 0.4 s) may have
  // happened anywhere in it, so it marks no end; fresh changes after it do.
  // The counter moves by 70 J every 100 ms from 0.05 s on.
  auto steady = [](int ms) { return 1000ull + 70000ull * ((ms + 50) / 100); };
  rt::EnergyWindow late;
  late.read(0.0, 0.0, steady(0));
  for (int ms = 400; ms <= 560; ++ms) // the read at 0.4 s is 0.05 s stale
    late.read(ms / 1000.0, ms / 1000.0, steady(ms));
  ASSERT_TRUE(late.valid()); // 0.45 to 0.55 s: 70 J over 0.1 s
  EXPECT_NEAR(late.seconds(), 0.1, 1e-12);
  EXPECT_NEAR(late.watts(), 700, 1e-9);
  // Taking the stale read as an end would give 140 J over 0.15 s (933 W).
  // A read that itself took 30 ms is no fresher: the change fell somewhere
  // in it.
  rt::EnergyWindow slow;
  slow.read(0.040, 0.040, steady(40));
  slow.read(0.041, 0.071, steady(71)); // moved at 0.05, seen at 0.041-0.071
  slow.read(0.072, 0.072, steady(72));
  for (int ms = 149; ms <= 151; ++ms)
    slow.read(ms / 1000.0, ms / 1000.0, steady(ms));
  EXPECT_FALSE(slow.valid()); // only the change at 0.15 s was fresh
  // Reads of 3 ms, 1 ms apart (an H100's NVML): each change is dated at
  // the middle of its 7 ms gap, so the span stays exact.
  rt::EnergyWindow typical;
  for (int ms = 0; ms <= 300; ms += 4)
    typical.read(ms / 1000.0, (ms + 3) / 1000.0, steady(ms + 3));
  ASSERT_TRUE(typical.valid()); // changes at 0.05, 0.15, 0.25 s
  EXPECT_NEAR(typical.seconds(), 0.2, 1e-12);
  EXPECT_NEAR(typical.watts(), 700, 1e-9);

  rt::EnergyWindow still; // a counter that never moves measures nothing
  for (int i = 0; i < 5; ++i)
    still.read(0.1 * i, 0.1 * i, 5000);
  EXPECT_FALSE(still.valid());
  EXPECT_EQ(still.watts(), 0);
}
