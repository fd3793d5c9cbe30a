//===- CudaEmitterTest.cpp - The CUDA code generator ----------------------===//
//
// Emits CUDA for the plans of the examples and of a model that uses every op,
// checks the launches (unique names, GEMM shapes, buffer ids), and compiles
// every kernel with NVRTC for sm_80 and sm_90. No GPU is needed. Identical
// kernels (the same source up to the kernel's name, as in the repeated blocks
// of a transformer) are compiled once.
//===----------------------------------------------------------------------===//

#include "gtc/CodeGen/CudaEmitter.h"
#include "CompileHelpers.h"
#include "OpModels.h"
#include "gtc/Frontend/Driver.h"
#include "gtc/Plan/Pipeline.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/ScalarOps.h"
#include "gtc/Runtime/Streams.h"
#include "mlir/IR/Diagnostics.h"
#include "gtest/gtest.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nvrtc.h>
#include <set>
#include <sstream>

using namespace gtc;

namespace {

std::string readExample(const std::string &name) {
  std::ifstream in(std::string(GTC_SOURCE_DIR) + "/examples/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// ScalarOps.h's text, as the emitter embeds it in kernels' preludes.
const char *const kScalarOpsText =
#include "gtc/Runtime/ScalarOpsText.inc"
    ;

/// Compiles one kernel; returns the empty string or the NVRTC log.
std::string nvrtcCompile(const std::string &source, const std::string &name,
                         const std::string &arch) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(),
                                     (name + ".cu").c_str(), 0, nullptr,
                                     nullptr);
  if (r != NVRTC_SUCCESS)
    return std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r);
  std::string archOpt = "--gpu-architecture=" + arch;
  const char *opts[] = {archOpt.c_str(), "--std=c++17"};
  r = nvrtcCompileProgram(prog, 2, opts);
  std::string log;
  size_t size = 0;
  nvrtcGetProgramLogSize(prog, &size);
  if (size > 1) {
    log.resize(size);
    nvrtcGetProgramLog(prog, log.data());
  }
  nvrtcDestroyProgram(&prog);
  if (r == NVRTC_SUCCESS)
    return "";
  return std::string(nvrtcGetErrorString(r)) + "\n" + log;
}

/// The activations' formulas (ScalarOps.h), as the emitter embeds them,
/// compile with NVRTC: each forward and derivative called at float.
TEST(CudaEmitterTest, ScalarOpsCompileWithNvrtc) {
  std::string src = kScalarOpsText;
  src += "\nextern \"C\" __global__ void k(float *y, const float *x) {\n";
  int i = 0;
#define GTC_KIND(Op, name)                                                     \
  src += "  y[" + std::to_string(i++) + "] = gtc_scalar::" #name               \
         "_fwd(x[0]) + gtc_scalar::" #name "_grad(x[0]);\n";
  GTC_ACTIVATIONS(GTC_KIND)
#undef GTC_KIND
  src += "}\n";
  EXPECT_GE(i, 8);
  for (const char *arch : {"sm_80", "sm_90"})
    EXPECT_EQ(nvrtcCompile(src, "scalar_ops", arch), "") << src;
}

/// The runtime's own kernels (Optimizer.cuh after ScalarOps.h: the update,
/// the norm, gradient accumulation) compile with NVRTC.
TEST(CudaEmitterTest, RuntimeKernelsCompileWithNvrtc) {
  std::vector<std::string> sources = rt::runtimeKernelSources();
  ASSERT_FALSE(sources.empty());
  for (const std::string &src : sources) {
    EXPECT_NE(src.find("gtc_update"), std::string::npos);
    for (const char *arch : {"sm_80", "sm_90"})
      EXPECT_EQ(nvrtcCompile(src, "runtime", arch), "");
  }
}

struct Stats {
  std::set<std::string> ops;
  size_t launches = 0, compiled = 0;
  double seconds = 0; ///< in NVRTC
  ~Stats() {
    std::printf("[ stats    ] %zu launches, %zu distinct kernels compiled for "
                "sm_80 and sm_90 in %.1f s\n",
                launches, compiled, seconds);
  }
};

/// With GTC_KERNEL_DUMP=file, every kernel the tests emit (comment and
/// source, in the tests' order) is appended to that file: run before and
/// after a change to the emitter or its .cuh files and compare the two dumps
/// (`tools/dev.sh kernel-dump`).
void dumpKernel(const rt::CudaLaunch &l) {
  static const char *path = std::getenv("GTC_KERNEL_DUMP");
  if (!path)
    return;
  std::ofstream out(path, std::ios::app);
  out << "//// " << l.name << ": " << l.comment << "\n" << l.source << "\n";
  for (const rt::CudaLaunch::Variant &v : l.variants)
    out << "//// " << l.name << " (" << v.arch << "): " << v.what << "\n"
        << v.source << "\n";
}

/// The stream schedule (scheduleStreams) orders every two plan kernels
/// that the plan's data flow orders: one writes (outputs) memory the other
/// reads or writes, by the plan's own input and output lists, whatever the
/// launches pass.
void streamsAreSound(const rt::Plan &plan, const rt::CudaProgram &program) {
  // Any kernel may go beside others here (a million multiprocessors).
  std::vector<rt::StreamGroup> groups =
      rt::scheduleStreams(plan, program, 1 << 20);
  size_t n = groups.size();
  // after[g][h]: group g starts after group h ends (stream order, waits).
  std::vector<std::vector<bool>> after(n, std::vector<bool>(n, false));
  int last[2] = {-1, -1};
  for (size_t g = 0; g < n; ++g) {
    std::vector<int> preds = groups[g].waits;
    if (last[groups[g].stream] >= 0)
      preds.push_back(last[groups[g].stream]);
    for (int p : preds) {
      after[g][p] = true;
      for (size_t h = 0; h < n; ++h)
        if (after[p][h])
          after[g][h] = true;
    }
    last[groups[g].stream] = static_cast<int>(g);
  }
  auto overlap = [&](const std::vector<int> &a, const std::vector<int> &b) {
    for (int x : a)
      for (int y : b)
        if (plan.buffers[x].region != rt::Region::Local &&
            plan.buffers[x].overlaps(plan.buffers[y]))
          return true;
    return false;
  };
  for (size_t g = 0; g < n; ++g)
    for (size_t h = 0; h < g; ++h) {
      const rt::Kernel &kg = plan.kernels[groups[g].planKernel];
      const rt::Kernel &kh = plan.kernels[groups[h].planKernel];
      if (overlap(kh.outputs, kg.inputs) || overlap(kh.outputs, kg.outputs) ||
          overlap(kh.inputs, kg.outputs)) {
        EXPECT_TRUE(after[g][h])
            << "plan kernel " << groups[g].planKernel << " may run beside "
            << groups[h].planKernel << " (" << rt::opName(kh.op)
            << "), whose memory it shares";
      }
    }
}

/// Emits and checks `plan`; compiles its kernels (once per distinct source).
void checkPlan(const rt::Plan &plan, Stats &stats,
               std::map<std::string, std::string> &seen) {
  rt::CudaProgram program;
  std::string error;
  ASSERT_TRUE(codegen::emitCuda(plan, program, error)) << error;
  ASSERT_EQ(program.kernels.size(), plan.kernels.size());
  streamsAreSound(plan, program);
  std::set<std::string> names;
  auto validBuffer = [&](int id) {
    return id >= 0 && id < static_cast<int>(plan.buffers.size());
  };
  auto count = [&](int id) { return plan.buffers[id].elements(); };
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const rt::Kernel &k = plan.kernels[i];
    stats.ops.insert(rt::opName(k.op));
    for (const rt::Kernel &sub : k.body)
      stats.ops.insert(rt::opName(sub.op));
    if (program.kernels[i].empty()) {
      // Only the cross-entropy gradient computed with its loss emits
      // nothing (every other fusion is a gt.fused region of its own).
      bool fused = false;
      for (size_t j = 0; j < i; ++j)
        for (const rt::CudaLaunch &l : program.kernels[j])
          fused |= l.kind == rt::CudaLaunch::Kind::Kernel &&
                   std::count(l.buffers.begin(), l.buffers.end(),
                              k.outputs[0]);
      EXPECT_TRUE(k.op == rt::OpKind::CrossEntropyGrad && fused)
          << "kernel " << i << " " << rt::opName(k.op);
    }
    for (const rt::CudaLaunch &l : program.kernels[i]) {
      ++stats.launches;
      SCOPED_TRACE("kernel " + std::to_string(i) + " (" + rt::opName(k.op) +
                   "), launch " +
                   l.name);
      EXPECT_TRUE(names.insert(l.name).second) << "duplicate name " << l.name;
      switch (l.kind) {
      case rt::CudaLaunch::Kind::Gemm: {
        ASSERT_TRUE(validBuffer(l.a) && validBuffer(l.b) && validBuffer(l.c));
        // One float type (f32, or 16-bit under autocast), or 16-bit
        // operands with an f32 output (a folded cast) and no epilogue.
        rt::DType ab = plan.buffers[l.a].dtype, out = plan.buffers[l.c].dtype;
        EXPECT_EQ(plan.buffers[l.b].dtype, ab);
        bool activation = l.act != rt::CudaLaunch::Activation::None ||
                          l.dgelu;
        if (ab != out) {
          EXPECT_EQ(out, rt::DType::F32);
          EXPECT_EQ(k.op, rt::OpKind::Fused);
          EXPECT_TRUE(l.bias < 0 && !activation);
        }
        for (int id : {l.bias, l.aux, l.biasGrad})
          if (id >= 0) {
            ASSERT_TRUE(validBuffer(id));
            EXPECT_EQ(plan.buffers[id].dtype, out);
          }
        // Epilogues come from gt.fused "gemm" regions and write its outputs.
        if (activation || l.biasGrad >= 0) {
          EXPECT_EQ(k.op, rt::OpKind::Fused);
          EXPECT_EQ(k.strAttr("kind", ""), "gemm");
          EXPECT_TRUE(std::count(k.outputs.begin(), k.outputs.end(), l.c));
        }
        if (l.aux >= 0) {
          EXPECT_TRUE(l.dgelu || l.act == rt::CudaLaunch::Activation::Gelu);
          EXPECT_EQ(count(l.aux), count(l.c));
          EXPECT_EQ(l.n % 8, 0);
        }
        if (l.biasGrad >= 0) {
          EXPECT_EQ(count(l.biasGrad), l.m);
          EXPECT_TRUE(std::count(k.outputs.begin(), k.outputs.end(),
                                 l.biasGrad));
        }
        EXPECT_NE(plan.buffers[l.c].dtype, rt::DType::I32);
        EXPECT_GT(l.m, 0);
        EXPECT_GT(l.n, 0);
        EXPECT_GT(l.k, 0);
        EXPECT_GE(l.batch, 1);
        EXPECT_EQ(l.strideC, l.batch > 1 ? l.m * l.n : 0);
        EXPECT_TRUE(l.strideA == 0 || l.strideA == l.m * l.k);
        EXPECT_TRUE(l.strideB == 0 || l.strideB == l.k * l.n);
        // A classifier's GEMMs cover a chunk of rows of their buffers (at
        // 256-byte aligned offsets); every other GEMM all of them.
        const bool chunked = k.intAttr("chunk_buffer", -1) >= 0;
        auto covers = [&](int id, int64_t offset, int64_t elements) {
          int64_t bytes = rt::dtypeBytes(plan.buffers[id].dtype);
          if (offset % 256 != 0 || offset % bytes != 0)
            return false;
          int64_t need = offset / bytes + elements;
          return chunked ? need <= count(id) : need == count(id);
        };
        // beta = 1 adds C's contents, or an addend of C's type and size.
        EXPECT_TRUE(chunked ||
                    (l.offsetA == 0 && l.offsetB == 0 && l.offsetC == 0 &&
                     l.beta == (l.addend >= 0 ? 1 : 0)));
        if (l.addend >= 0) {
          ASSERT_TRUE(validBuffer(l.addend));
          EXPECT_EQ(plan.buffers[l.addend].dtype, plan.buffers[l.c].dtype);
          EXPECT_EQ(count(l.addend), count(l.c));
        }
        EXPECT_TRUE(covers(l.c, l.offsetC, l.batch * l.m * l.n));
        EXPECT_TRUE(covers(l.a, l.offsetA,
                           (l.strideA ? l.batch : 1) * l.m * l.k));
        EXPECT_TRUE(covers(l.b, l.offsetB,
                           (l.strideB ? l.batch : 1) * l.k * l.n));
        if (l.bias >= 0) {
          ASSERT_TRUE(validBuffer(l.bias));
          EXPECT_EQ(count(l.bias), l.n);
        }
        // The operands' row-major shapes agree with the flags.
        const auto &as = plan.buffers[l.a].shape;
        const auto &bs = plan.buffers[l.b].shape;
        if (as.size() >= 2 && l.batch > 1) {
          EXPECT_EQ(as[as.size() - (l.transA ? 1 : 2)], l.m);
        }
        if (!as.empty() && !chunked) {
          EXPECT_EQ(as[as.size() - (l.transA ? 2 : 1)], l.k);
        }
        if (bs.size() >= 2 && !chunked) {
          EXPECT_EQ(bs[bs.size() - (l.transB ? 1 : 2)], l.k);
          EXPECT_EQ(bs[bs.size() - (l.transB ? 2 : 1)], l.n);
        }
        break;
      }
      case rt::CudaLaunch::Kind::Memset:
        EXPECT_TRUE(validBuffer(l.c));
        break;
      case rt::CudaLaunch::Kind::AllReduce:
        EXPECT_EQ(l.buffers.size() % 2, 0u);
        for (int id : l.buffers)
          EXPECT_TRUE(validBuffer(id));
        break;
      case rt::CudaLaunch::Kind::Kernel: {
        dumpKernel(l);
        EXPECT_GE(l.grid, 1);
        EXPECT_TRUE(l.block >= 32 && l.block <= 1024 && l.block % 32 == 0);
        // No headers under NVRTC: ScalarOps.h's one include is for the
        // CPU (#ifndef __CUDACC_RTC__).
        std::string source = l.source;
        if (size_t at = source.find(kScalarOpsText); at != std::string::npos)
          source.erase(at, std::strlen(kScalarOpsText));
        EXPECT_EQ(source.find("#include"), std::string::npos);
        // Nothing in the source names the plan kernel (identical kernels
        // compile once); the comment does.
        EXPECT_EQ(l.source.find("gtc plan kernel"), std::string::npos);
        EXPECT_NE(l.comment.find(l.name + ": "), std::string::npos);
        EXPECT_NE(l.source.find("extern \"C\" __global__"), std::string::npos);
        for (int id : l.buffers) {
          if (id == rt::CudaLaunch::kWorkspace)
            EXPECT_GT(program.workspaceBytes, 0);
          else if (id == rt::CudaLaunch::kStepCounter)
            EXPECT_EQ(plan.kind, "step") << "the counters of a training step";
          else
            EXPECT_TRUE(validBuffer(id)) << id;
        }
        // One pointer parameter per buffer, in the entry's signature.
        size_t sig =
            l.source.find(std::string(rt::CudaLaunch::kKernelEntry) + "(");
        ASSERT_NE(sig, std::string::npos);
        std::string params =
            l.source.substr(sig, l.source.find(')', sig) - sig);
        size_t pointers = 0;
        for (size_t at = params.find('*'); at != std::string::npos;
             at = params.find('*', at + 1))
          ++pointers;
        EXPECT_EQ(pointers, l.buffers.size()) << params;
        // The executor launches every kernel as a programmatic dependent of
        // the launch before it (sm_90+): the body must wait for that launch
        // before it reads or writes anything.
        size_t bodyAt = l.source.find(") {\n", sig);
        ASSERT_NE(bodyAt, std::string::npos);
        EXPECT_EQ(l.source.compare(bodyAt + 4,
                                   std::strlen(rt::CudaLaunch::kDependentWait),
                                   rt::CudaLaunch::kDependentWait),
                  0)
            << l.name;
        EXPECT_TRUE(l.offsets.empty() || l.offsets.size() == l.buffers.size());
        // The profile's tensor-core flag marks exactly the mma kernels.
        EXPECT_EQ(l.tensorCores, l.source.find("mma.sync") != std::string::npos);
        const std::string &key = l.source;
        if (seen.count(key))
          break;
        auto start = std::chrono::steady_clock::now();
        for (const char *arch : {"sm_80", "sm_90"}) {
          std::string log = nvrtcCompile(l.source, l.name, arch);
          EXPECT_EQ(log, "") << "NVRTC (" << arch << ") failed on " << l.name
                             << ":\n"
                             << log << "\n--- source ---\n"
                             << l.source;
        }
        // Variants compile for their own architecture only; one without
        // a source drops its launch, with gtc's own GEMMs only.
        for (const rt::CudaLaunch::Variant &v : l.variants) {
          EXPECT_GE(v.major, 9) << l.name;
          EXPECT_EQ(v.arch, "sm_" + std::to_string(v.major) +
                                std::to_string(v.minor) + "a")
              << l.name;
          if (v.source.empty()) {
            EXPECT_TRUE(v.withOwnGemm) << l.name;
            EXPECT_NE(v.what, "") << l.name;
            continue;
          }
          EXPECT_NE(v.source.find(rt::CudaLaunch::kDependentWait),
                    std::string::npos)
              << l.name;
          std::string log = nvrtcCompile(v.source, l.name, v.arch);
          EXPECT_EQ(log, "")
              << "NVRTC (" << v.arch << ") failed on " << l.name << ":\n"
              << log << "\n--- source ---\n"
              << v.source;
        }
        stats.seconds += std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        ++stats.compiled;
        seen[key] = l.name;
        break;
      }
      }
    }
  }
}

/// A small Llama-style model (rope, grouped-query attention) for the
/// generation plans.
const char *kDecodeModel = R"(model tiny_llama {
  let V = 64, T = 16, D = 32, H = 4, KV = 2, HD = 8
  input  tokens: i32[B, T]
  label  targets: i32[B, T]
  x = embedding(tokens, V, dim: D, name: "embed")
  q = reshape(linear(rmsnorm(x, name: "n"), H * HD, bias: false, name: "q"), (-1, T, H, HD))
  k = reshape(linear(x, KV * HD, bias: false, name: "k"), (-1, T, KV, HD))
  v = reshape(linear(x, KV * HD, bias: false, name: "v"), (-1, T, KV, HD))
  y = attention(rope(q, theta: 10000), rope(k, theta: 10000), v, causal: true)
  x = x + linear(reshape(y, (-1, T, D)), D, bias: false, name: "o")
  loss = cross_entropy(linear(x, V, bias: false, name: "head"), targets)
})";

/// Compiles a .gt source to a plan (at `precision`, empty: the train
/// block's) and checks its CUDA program.
void checkSource(const std::string &source, int64_t batch, bool eval,
                 Stats &stats, std::map<std::string, std::string> &seen,
                 const std::string &precision = "", bool fuse = true) {
  std::string errors;
  std::optional<rt::Plan> plan = test::compilePlan(source, batch, errors, eval,
                                                   "t.gt", precision, fuse);
  ASSERT_TRUE(plan.has_value()) << errors;
  checkPlan(*plan, stats, seen);
}

TEST(CudaEmitterTest, NvrtcReportsErrors) {
  EXPECT_EQ(nvrtcCompile("extern \"C\" __global__ void k(float *p) { p[0] = 1.f; }\n",
                         "k", "sm_80"),
            "");
  EXPECT_NE(nvrtcCompile("extern \"C\" __global__ void k(float *p) { q[0] = 1.f; }\n",
                         "k", "sm_90"),
            "");
}

TEST(CudaEmitterTest, Mlp) {
  Stats stats;
  std::map<std::string, std::string> seen;
  checkSource(readExample("mlp.gt"), 4, false, stats, seen);
  checkSource(readExample("mlp.gt"), 4, true, stats, seen);
  EXPECT_TRUE(stats.ops.count("accuracy"));
}

/// An evaluation's accuracy is taken in the cross-entropy's row kernel
/// (gt-fuse's loss region): no kernel of its own reads the logits again,
/// and the accuracy is the mean of the rows' hits after their losses in
/// the workspace. char_gpt's 16-bit logits (8-element loads) and
/// examples/mlp.gt's f32 ones (10 classes: element loads).
TEST(CudaEmitterTest, EvalLossTakesTheAccuracy) {
  for (auto [example, precision] :
       {std::pair{"char_gpt.gt", "bf16"}, std::pair{"mlp.gt", "fp32"}}) {
    SCOPED_TRACE(example);
    Stats stats;
    std::map<std::string, std::string> seen;
    std::string errors;
    std::optional<rt::Plan> plan = test::compilePlan(
        readExample(example), 4, errors, /*eval=*/true, "t.gt", precision);
    ASSERT_TRUE(plan.has_value()) << errors;
    checkPlan(*plan, stats, seen);
    rt::CudaProgram program;
    std::string error;
    ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
    int argmaxRows = 0, accuracySums = 0;
    for (const std::vector<rt::CudaLaunch> &kernel : program.kernels)
      for (const rt::CudaLaunch &l : kernel) {
        EXPECT_EQ(l.source.find("row_argmax<RT>(v, best"), std::string::npos)
            << "a kernel of the accuracy alone: " << l.name;
        if (l.source.find("constexpr bool ARGMAX = true;") != std::string::npos)
          ++argmaxRows;
        if (l.name.find("accuracy") != std::string::npos) {
          ++accuracySums;
          // The hits follow the rows' losses in the workspace.
          EXPECT_NE(l.source.find("constexpr i64 FIRST = "), std::string::npos);
          EXPECT_EQ(l.source.find("constexpr i64 FIRST = 0;"),
                    std::string::npos);
        }
      }
    EXPECT_EQ(argmaxRows, 1);
    EXPECT_EQ(accuracySums, 1);
  }
}

/// examples/mlp.gt at batch 64: the 10-class head is one kernel (a small
/// classifier region) and every other GEMM gtc's small-GEMM kernel (64
/// rows, or a K of 64 in the dW GEMMs), K split over clusters where the
/// grid is small, the dX GEMM masking with the ReLU and summing the bias
/// gradient's columns.
TEST(CudaEmitterTest, SmallGemm) {
  for (const char *precision : {"fp32", "tf32", "bf16"}) {
    SCOPED_TRACE(precision);
    Stats stats;
    std::map<std::string, std::string> seen;
    std::string errors;
    std::optional<rt::Plan> plan = test::compilePlan(
        readExample("mlp.gt"), 64, errors, false, "t.gt", precision, true);
    ASSERT_TRUE(plan.has_value()) << errors;
    checkPlan(*plan, stats, seen);
    rt::CudaProgram program;
    std::string error;
    ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
    int own = 0, masked = 0, rowSums = 0, cublas = 0, heads = 0;
    for (const auto &launches : program.kernels)
      for (const rt::CudaLaunch &l : launches) {
        cublas += l.kind == rt::CudaLaunch::Kind::Gemm;
        if (l.name.find("_head") != std::string::npos) {
          // The 10-class head (a small classifier region) is one kernel on
          // a cluster of 8 CTAs, each a slice of 128 of K = 1024, with the
          // bias, the ReLU gradient of dh and both bias gradients.
          ++heads;
          EXPECT_EQ(l.grid, 8);
          EXPECT_EQ(l.block, 512);
          EXPECT_GT(l.shared, 48 * 1024);
          for (const char *part :
               {"M = 64, N = 10, K = 1024, S = 8, KC = 128", "GTC_CLUSTER",
                "v += (float)bias[j];", "hv[p] > 0.f", "colsum[", "db[j]",
                "y[0] = "})
            EXPECT_NE(l.source.find(part), std::string::npos) << part;
        }
        if (l.kind != rt::CudaLaunch::Kind::Kernel || l.gemmFlops() == 0)
          continue;
        ++own;
        EXPECT_TRUE(l.m <= 64 || l.k <= 64);
        EXPECT_EQ(l.block, 256);
        EXPECT_EQ(l.tensorCores, std::string(precision) != "fp32");
        if (l.m == 64 && l.n == 1024 && l.k >= 784) { // K split in 8
          EXPECT_EQ(l.grid, 16 * 8);
          EXPECT_NE(l.source.find("S = 8"), std::string::npos);
        }
        if (l.source.find("mask[") != std::string::npos) {
          ++masked;
          EXPECT_NE(l.source.find("#define COLSUM 1"), std::string::npos);
        }
        if (l.source.find("#define ROWSUM 1") != std::string::npos) {
          ++rowSums;
          EXPECT_LE(l.m, 16); // 10 classes (16 where the tests pad)
          EXPECT_NE(l.source.find("S = 1;"), std::string::npos);
        }
      }
    if (std::string(precision) == "bf16") {
      // The tests pad at bf16 (--pad-all): the head's 10 classes become 16
      // and a slice, which is not a classifier region; its GEMMs are small
      // ones: 3 forward, dX3, dX2 and the three dW.
      EXPECT_EQ(own, 8);
      EXPECT_EQ(masked, 2);
      EXPECT_EQ(rowSums, 1);
      EXPECT_EQ(heads, 0);
    } else {
      EXPECT_EQ(own, 5); // 2 forward, dX2 and two dW
      EXPECT_EQ(masked, 1);
      EXPECT_EQ(rowSums, 0); // the head's bias gradient is the head's
      EXPECT_EQ(heads, 1);
    }
    EXPECT_EQ(cublas, 0);
    // The dW GEMM of the second layer (1024 x 1024, K = 64) runs on the
    // second stream, beside the dX GEMM below the head (both read the
    // head's gradient); without padding nothing else does.
    int side = 0, dW2 = 0;
    for (const rt::StreamGroup &g : rt::scheduleStreams(
             *plan, program, rt::kPlanningMultiprocessors)) {
      side += g.stream;
      const rt::CudaLaunch &l = program.kernels[g.planKernel][0];
      if (l.m == 1024 && l.n == 1024 && l.k == 64) {
        ++dW2;
        EXPECT_EQ(g.stream, 1);
      }
    }
    EXPECT_EQ(dW2, 1);
    if (std::string(precision) != "bf16") {
      EXPECT_EQ(side, 1);
    }
  }
}

TEST(CudaEmitterTest, CharGpt) {
  Stats stats;
  std::map<std::string, std::string> seen;
  checkSource(readExample("char_gpt.gt"), 2, false, stats, seen);
}

TEST(CudaEmitterTest, Gpt2) {
  Stats stats;
  std::map<std::string, std::string> seen;
  checkSource(readExample("gpt2.gt"), 1, false, stats, seen);
  // The twelve blocks share their kernels.
  EXPECT_LT(stats.compiled, stats.launches / 4);
}

/// A model that uses every op of the CPU runtime (accuracy: in eval).
const char *kEveryOp = R"(model every {
  input x: f32[B, 3, 8]
  input t: i32[B, 5]
  label y: i32[B, 5]
  param a: f32[3, 8] = normal(1.0)
  param c: f32[8] = normal(1.0)
  param e: f32[1, 8] = normal(1.0)
  param u: f32[8, 3] = normal(1.0)
  param p: f32[2, 8, 3] = normal(1.0)
  param q: f32[2, 8, 5] = normal(1.0)
  param b1: f32[8] = normal(1.0)
  param b2: f32[8] = normal(1.0)
  h = a * x + c
  g = (h - e) / (c * c + 2) - x / (e * e + 1)
  f = relu(h) + tanh(g) + sigmoid(h - g) + exp(a * 0.5) + log(a * a + 1)
  f = f + sqrt(c * c + 0.5) + gelu(h) + gelu(-g, approximate: true) + silu(g)
  s = softmax(f) + softmax(h, axis: 1)
  m1 = matmul(s, u)
  m2 = matmul(u, x, transpose_a: true, transpose_b: true)
  m3 = matmul(p, q, transpose_a: true)
  n = layernorm(f, eps: 1e-3)
  n = n + rmsnorm(f + n, eps: 1e-3)
  k = sum(n, axis: -1) + mean(n, axis: (-1,))
  r = mean(h, axis: (0, 2), keepdim: true)
  w = transpose(h) * transpose(x)
  z = reshape(h, (-1, 4)) * reshape(x, (-1, 4))
  o = embedding(cast(sigmoid(x), i32), 2, dim: 4)
  v = embedding(t, 7, dim: 8) + embedding(positions(5), 5, dim: 8)
  v = attention(v, heads: 2) + attention(v, heads: 4, causal: false)
  v = v + reshape(rope(reshape(v, (-1, 5, 2, 4)), interleaved: true), (-1, 5, 8))
  v = concat((slice(v, 4, 8), slice(v, 0, 4)), axis: -1) + dropout(v, 0.25)
  gl = gelu(linear(v, 6, bias: false), approximate: true) * linear(v, 6, bias: false)
  gl2 = linear(v, 8, bias: false) * silu(linear(v, 8, bias: false))
  logits = linear(v, 7) + linear(layernorm(v), 7, bias: false)
  loss = cross_entropy(logits, y) + mean(m1 * m1) + mean(m2) + sum(m3 * m3)
  loss = loss + mean(k * k) + sum(r * r) + mean(w) + sum(z) + mean(o)
  loss = loss + mean(-s * s) + mean(cast(t, f32)) + mean(x * (b1 + b2))
  loss = loss + mean(gl) + mean(gl2)
})";

TEST(CudaEmitterTest, EveryOp) {
  Stats stats;
  std::map<std::string, std::string> seen;
  // Each op alone, and fused.
  checkSource(kEveryOp, 2, false, stats, seen, "", /*fuse=*/false);
  checkSource(kEveryOp, 2, true, stats, seen, "", /*fuse=*/false);
  checkSource(kEveryOp, 2, false, stats, seen);
  checkSource(kEveryOp, 2, true, stats, seen);
  // bf16: gt-pad-dims pads the 7-class linears (pad, slice).
  checkSource(kEveryOp, 2, false, stats, seen, "bf16");
  // accuracy: an eval plan whose loss is a cross-entropy (300 classes: a
  // row of several warps).
  const char *accuracyModel = R"(model acc {
    input x: f32[B, 3, 5]
    label y: i32[B, 3]
    loss = cross_entropy(linear(x, 300), y)
  })";
  checkSource(accuracyModel, 2, true, stats, seen);
  // bf16: the cross-entropy reads the bf16 logits in a loss region without
  // a gradient, and the accuracy reads them too.
  checkSource(accuracyModel, 2, true, stats, seen, "bf16");
  // Generation (gt-decode): a Llama-style model's rope at positions, KV
  // cache updates and attention over the caches, a window of the whole
  // sequence and of one position, f32 and bf16.
  for (const char *precision : {"fp32", "bf16"})
    for (int64_t window : {0, 1}) {
      std::string errors;
      std::optional<rt::Plan> plan =
          test::compileDecodePlan(kDecodeModel, 2, window, errors, precision);
      ASSERT_TRUE(plan.has_value()) << errors;
      EXPECT_EQ(plan->kind, "decode");
      checkPlan(*plan, stats, seen);
    }
  // Every kind of Ops.def: the CPU executor runs it and a plan above used
  // it (so the CUDA emitter generated, and NVRTC compiled, its kernels).
  for (int i = 0; i < rt::kOpKinds; ++i) {
    auto kind = static_cast<rt::OpKind>(i);
    EXPECT_TRUE(rt::cpuRuns(kind)) << "no CPU kernel for " << rt::opName(kind);
    if (kind == rt::OpKind::AllReduce)
      continue; // a collective: AllReduceIsOneCollectivePerBucket
    EXPECT_TRUE(stats.ops.count(rt::opName(kind)))
        << "no plan of the test uses " << rt::opName(kind)
        << ": add it to kEveryOp so its CUDA kernels are generated";
  }
}

/// gt-bucket's all-reduce is a collective: one AllReduce launch per bucket
/// that names its inputs, then its outputs (the gradients, reduced in place
/// in the gradient region), which the executor issues as one NCCL group.
TEST(CudaEmitterTest, AllReduceIsOneCollectivePerBucket) {
  std::string errors;
  std::optional<rt::Plan> plan =
      test::compilePlan(readExample("mlp.gt"), 4, errors, false, "t.gt", "",
                        true, /*bucketBytes=*/1 << 20);
  ASSERT_TRUE(plan.has_value()) << errors;
  int reduces = 0;
  for (const rt::Kernel &k : plan->kernels)
    reduces += k.op == rt::OpKind::AllReduce;
  // In the order the backward computes them: {fc2's bias (the column sums
  // in the epilogue of the small GEMM of dX), fc3's weight and bias, fc1's
  // bias}, fc2's weight, fc1's weight (each weight larger than 1 MiB is a
  // bucket alone).
  EXPECT_EQ(reduces, 3);
  rt::CudaProgram program;
  std::string error;
  ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
  int collectives = 0, gradients = 0;
  for (size_t k = 0; k < plan->kernels.size(); ++k) {
    const rt::Kernel &kernel = plan->kernels[k];
    if (kernel.op != rt::OpKind::AllReduce)
      continue;
    ASSERT_EQ(program.kernels[k].size(), 1u);
    const rt::CudaLaunch &l = program.kernels[k][0];
    EXPECT_EQ(l.kind, rt::CudaLaunch::Kind::AllReduce);
    std::vector<int> expected = kernel.inputs;
    expected.insert(expected.end(), kernel.outputs.begin(),
                    kernel.outputs.end());
    EXPECT_EQ(l.buffers, expected);
    for (size_t i = 0; i < kernel.inputs.size(); ++i) {
      const rt::Buffer &in = plan->buffers[kernel.inputs[i]],
                       &out = plan->buffers[kernel.outputs[i]];
      EXPECT_EQ(out.region, rt::Region::Grad);
      EXPECT_EQ(in.region, out.region) << "reduced in place";
      EXPECT_EQ(in.offset, out.offset) << "reduced in place";
    }
    ++collectives;
    gradients += static_cast<int>(kernel.inputs.size());
  }
  EXPECT_EQ(collectives, 3);
  EXPECT_EQ(gradients, 6); // fc1, fc2, fc3: a weight and a bias each
}

/// Autocast plans: 16-bit GEMMs, attention, elementwise ops, reductions and
/// casts; every kernel compiles for both 16-bit types.
TEST(CudaEmitterTest, EveryOpAutocast) {
  for (const char *precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    Stats stats;
    std::map<std::string, std::string> seen;
    std::string errors;
    std::optional<rt::Plan> plan =
        test::compilePlan(kEveryOp, 2, errors, false, "t.gt", precision);
    ASSERT_TRUE(plan.has_value()) << errors;
    std::set<std::string> lowOps;
    for (const rt::Kernel &kernel : plan->kernels) {
      std::vector<const rt::Kernel *> ops{&kernel};
      for (const rt::Kernel &sub : kernel.body)
        ops.push_back(&sub);
      for (const rt::Kernel *k : ops)
        if (rt::dtypeBytes(plan->buffers[k->outputs[0]].dtype) == 2)
          lowOps.insert(rt::opName(k->op));
    }
    for (const char *op : {"matmul", "linear", "attention", "attention_grad",
                           "cast", "add", "sum_to"})
      EXPECT_TRUE(lowOps.count(op)) << "no 16-bit " << op;
    checkPlan(*plan, stats, seen);
    checkSource(readExample("mlp.gt"), 4, false, stats, seen, precision);
    // Padding the input of the first GEMM reorders the memory plan (this
    // exposed a relu-fusion hazard).
    for (const test::OpModel &m : test::opModels())
      if (m.name == "WholeMlp" || m.name == "TensorCoreAttention" ||
          m.name == "TensorCoreGroupedQueryAttention")
        checkSource(m.source, m.batch, false, stats, seen, precision);
  }
}

/// The plan of `source` at batch 2 in `precision`, and its CUDA program.
void planAndEmit(const std::string &source, const char *precision,
                 std::optional<rt::Plan> &plan, rt::CudaProgram &program) {
  std::string errors, error;
  plan = test::compilePlan(source, 2, errors, false, "t.gt", precision);
  ASSERT_TRUE(plan.has_value()) << errors;
  ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
}

/// At --precision tf32, f32 attention takes the tensor-core kernels on
/// mma.sync m16n8k8 tf32 (flash_mma_tf32.cuh; no Hopper variant), heads of
/// 64 and 128, grouped-query too; at fp32 it stays on the CUDA cores.
TEST(CudaEmitterTest, Tf32Attention) {
  for (const char *name :
       {"TensorCoreAttentionTiles", "TensorCoreGroupedQueryAttention"}) {
    for (const char *precision : {"tf32", "fp32"}) {
      SCOPED_TRACE(std::string(name) + " " + precision);
      const test::OpModel *model = test::findOpModel(name);
      ASSERT_NE(model, nullptr);
      Stats stats;
      std::map<std::string, std::string> seen;
      checkSource(model->source, 2, false, stats, seen, precision);
      std::optional<rt::Plan> plan;
      rt::CudaProgram program;
      ASSERT_NO_FATAL_FAILURE(
          planAndEmit(model->source, precision, plan, program));
      std::set<std::string> flash;
      for (size_t k = 0; k < plan->kernels.size(); ++k) {
        rt::OpKind op = plan->kernels[k].op;
        if (op != rt::OpKind::Attention && op != rt::OpKind::AttentionGrad)
          continue;
        for (const rt::CudaLaunch &l : program.kernels[k]) {
          bool tf32 = l.source.find("mma.sync.aligned.m16n8k8.row.col.f32."
                                    "tf32.tf32.f32") != std::string::npos;
          EXPECT_EQ(tf32, std::string(precision) == "tf32") << l.name;
          EXPECT_EQ(l.tensorCores, tf32) << l.name;
          EXPECT_TRUE(l.variants.empty()) << l.name;
          EXPECT_LE(l.shared, 227 * 1024) << l.name;
          if (tf32)
            flash.insert(l.name.substr(l.name.rfind('_') + 1));
        }
      }
      std::set<std::string> expected;
      if (std::string(precision) == "tf32")
        expected = {"attention", "dq", "dkdv"};
      EXPECT_EQ(flash, expected);
    }
  }
}

/// Attention over rope(q) and rope(k) in 16-bit: gt-fuse makes each
/// gradient with the inverse ropes of its dq and dk (q, k and v apart) or
/// the inverse rope of its dqkv (packed heads) one "attention_grad" region,
/// whose dq and dkdv launches (and their Hopper variants) store dq and dk
/// turned back, with the ropes' theta and pairs; only the forward's three
/// ropes (q and k apart, and the packed heads') remain kernels of their own.
/// In f32 the ropes stay apart.
TEST(CudaEmitterTest, RopeGradientInTheAttentionKernels) {
  const test::OpModel *model = test::findOpModel("TensorCoreRopeAttention");
  ASSERT_NE(model, nullptr);
  for (const char *precision : {"bf16", "fp16", "fp32"}) {
    SCOPED_TRACE(precision);
    bool low = std::string(precision) != "fp32";
    std::optional<rt::Plan> plan;
    rt::CudaProgram program;
    ASSERT_NO_FATAL_FAILURE(
        planAndEmit(model->source, precision, plan, program));
    int regions = 0, ropes = 0;
    std::vector<std::string> turned;
    for (size_t k = 0; k < plan->kernels.size(); ++k) {
      const rt::Kernel &kernel = plan->kernels[k];
      ropes += kernel.op == rt::OpKind::Rope;
      if (kernel.strAttr("kind", "") != "attention_grad")
        continue;
      ++regions;
      ASSERT_EQ(program.kernels[k].size(), 2u);
      for (const rt::CudaLaunch &l : program.kernels[k]) {
        EXPECT_NE(l.source.find("constexpr bool ROPE = true"),
                  std::string::npos)
            << l.name;
        ASSERT_EQ(l.variants.size(), 1u) << l.name;
        EXPECT_NE(l.variants[0].source.find("constexpr bool ROPE = true"),
                  std::string::npos)
            << l.name;
        bool interleaved =
            l.source.find("ROPE_INTERLEAVED = true") != std::string::npos;
        bool theta500 = l.source.find("ROPE_THETA = 500") != std::string::npos;
        EXPECT_EQ(interleaved, theta500) << l.name;
        turned.push_back(l.name.substr(l.name.find('_') + 1) +
                         (interleaved ? " interleaved" : ""));
      }
    }
    EXPECT_EQ(regions, low ? 2 : 0);
    EXPECT_EQ(ropes, low ? 3 : 6); // the forward's, and their gradients
    if (low) {
      EXPECT_EQ(turned, (std::vector<std::string>{
                            "attention_grad_dq interleaved",
                            "attention_grad_dkdv interleaved",
                            "attention_grad_dq", "attention_grad_dkdv"}));
    }
    Stats stats;
    std::map<std::string, std::string> seen;
    checkSource(model->source, 2, false, stats, seen, precision);
  }
}

/// attention(x)'s q, k and v projection (one packed [B, T, 3 D], with a
/// bias) in 16-bit: gt-fuse puts the projection's bias gradient, the
/// column sums of dqkv, into the gradient's "attention_grad" region, whose
/// dq and dkdv launches (and their Hopper variants) sum the columns they
/// store by 64-row chunks into the workspace after the deltas, and a third
/// launch adds the chunks in order; the projection's weight-gradient GEMM
/// then has no BGRADB epilogue. In f32 (tf32's kernels too) the GEMM keeps
/// it.
TEST(CudaEmitterTest, AttentionBiasGradientInTheAttentionKernels) {
  const test::OpModel *model = test::findOpModel("TensorCoreAttentionTiles");
  ASSERT_NE(model, nullptr);
  std::map<std::string, int> biasGrads;
  for (const char *precision : {"bf16", "fp32"}) {
    SCOPED_TRACE(precision);
    bool low = std::string(precision) != "fp32";
    std::optional<rt::Plan> plan;
    rt::CudaProgram program;
    ASSERT_NO_FATAL_FAILURE(
        planAndEmit(model->source, precision, plan, program));
    int regions = 0;
    for (size_t k = 0; k < plan->kernels.size(); ++k) {
      const rt::Kernel &kernel = plan->kernels[k];
      for (const rt::CudaLaunch &l : program.kernels[k])
        biasGrads[precision] += l.kind == rt::CudaLaunch::Kind::Gemm &&
                                l.biasGrad >= 0;
      if (kernel.strAttr("kind", "") != "attention_grad")
        continue;
      ++regions;
      // [2, 200, 3 H HD] of H 2 and HD 64 (the first), H 1 and HD 128: 4
      // chunks of 64 rows a sequence, 384 columns, after 2 x H x 200
      // floats of deltas.
      const std::vector<rt::CudaLaunch> &ls = program.kernels[k];
      ASSERT_EQ(ls.size(), 3u);
      int64_t h = ls[0].source.find(", H = 2, ") != std::string::npos ? 2 : 1;
      std::string at = "sums_ws + " + std::to_string(2 * h * 200 * 4 / 8);
      for (int i = 0; i < 2; ++i) {
        SCOPED_TRACE(ls[i].name);
        EXPECT_NE(ls[i].source.find("constexpr bool COLSUM = true"),
                  std::string::npos);
        EXPECT_NE(ls[i].source.find("constexpr i64 NC = 4, COLS = 384"),
                  std::string::npos);
        EXPECT_NE(ls[i].source.find(at), std::string::npos) << at;
        ASSERT_EQ(ls[i].variants.size(), 1u);
        EXPECT_NE(ls[i].variants[0].source.find("constexpr bool COLSUM = true"),
                  std::string::npos);
      }
      EXPECT_NE(ls[2].name.find("final"), std::string::npos) << ls[2].name;
      EXPECT_NE(ls[2].source.find("CHUNKS = 8"), std::string::npos);
      EXPECT_NE(ls[2].source.find("part += " + std::to_string(2 * h * 200 * 4 / 8)),
                std::string::npos);
      EXPECT_EQ(plan->buffers[kernel.outputs[1]].shape,
                std::vector<int64_t>{384});
    }
    EXPECT_EQ(regions, low ? 2 : 0);
    Stats stats;
    std::map<std::string, std::string> seen;
    checkSource(model->source, 2, false, stats, seen, precision);
  }
  EXPECT_EQ(biasGrads["bf16"], biasGrads["fp32"] - 2);
}

/// gt-pack-projections: attention's q, k and v projections (4 query heads
/// over 2 K/V heads of 64) are one GEMM of N = (4 + 2 * 2) * 64 = 512, and
/// attention reads packed heads [B, T, 8, 64]: k's heads from column 256 of
/// a row of 512 and v's from 384, where the gradient's kernels also write
/// dk and dv (dq and dk turned back by the inverse rope, dv not). Without
/// fusion the three projections and attention stay apart.
TEST(CudaEmitterTest, PackedProjections) {
  const char *model = R"(model m {
    input x: f32[B, 64, 64]
    q = reshape(linear(x, 256, bias: false), (-1, 64, 4, 64))
    k = reshape(linear(x, 128, bias: false), (-1, 64, 2, 64))
    v = reshape(linear(x, 128, bias: false), (-1, 64, 2, 64))
    y = attention(rope(q), rope(k), v)
    loss = sum(y * y)
  })";
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "not fused");
    std::string errors, error;
    std::optional<rt::Plan> plan =
        test::compilePlan(model, 2, errors, false, "t.gt", "bf16", fuse);
    ASSERT_TRUE(plan.has_value()) << errors;
    rt::CudaProgram program;
    ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
    std::vector<std::vector<int64_t>> operands;
    bool dkdvPacked = false;
    for (size_t k = 0; k < plan->kernels.size(); ++k) {
      const rt::Kernel &kernel = plan->kernels[k];
      if (kernel.op == rt::OpKind::Attention) {
        for (int in : kernel.inputs)
          operands.push_back(plan->buffers[in].shape);
        for (const rt::CudaLaunch &l : program.kernels[k])
          EXPECT_EQ(l.source.find("kp = qkv + 256, *const vp = qkv + 384") !=
                        std::string::npos,
                    fuse)
              << l.name;
      }
      if (kernel.strAttr("kind", "") == "attention_grad")
        for (const rt::CudaLaunch &l : program.kernels[k])
          if (l.name.find("dkdv") != std::string::npos)
            dkdvPacked = l.source.find("dkp = dqkv + 256, *const dvp = dqkv "
                                       "+ 384") != std::string::npos &&
                         l.source.find("constexpr bool ROPE = true") !=
                             std::string::npos;
    }
    if (fuse)
      EXPECT_EQ(operands, (std::vector<std::vector<int64_t>>{{2, 64, 8, 64}}));
    else
      EXPECT_EQ(operands, (std::vector<std::vector<int64_t>>{
                              {2, 64, 4, 64}, {2, 64, 2, 64}, {2, 64, 2, 64}}));
    EXPECT_EQ(dkdvPacked, fuse);
  }
}

/// A GELU's gradient after the GEMM of dy W: cuBLASLt's DGELU epilogue in
/// bf16 and fp32; at tf32 the plain GEMM, then dy * gelu'(x) in place.
/// The norm gradients' row kernels take only the column sums their op has
/// (rmsnorm: dw; layernorm: dw and db) and, holding at most 48 values a
/// thread (rmsnorm over 768 columns: x, dy and dw's sums, 12 columns each),
/// ask for 3 blocks an SM on a grid of that; layernorm's (with the
/// residual's gradient, 60 values) keeps its grid of 4 an SM. The rmsnorm
/// of a model input stores no input gradient, only its column sums.
TEST(CudaEmitterTest, NormGradientsTakeTheSumsTheyNeed) {
  const char *model = R"(model m {
    input x: f32[B, 8192, 768]
    h = x + linear(rmsnorm(x, name: "r"), 768, bias: false)
    h = h + linear(layernorm(h), 768)
    loss = mean(h * h)
  })";
  std::optional<rt::Plan> plan;
  rt::CudaProgram program;
  ASSERT_NO_FATAL_FAILURE(planAndEmit(model, "bf16", plan, program));
  std::map<std::string, std::pair<std::string, int64_t>> rows;
  for (const auto &launches : program.kernels)
    for (const rt::CudaLaunch &l : launches)
      if (l.name.find("norm_grad_dx") != std::string::npos) {
        auto at = l.source.find("constexpr int NS = ");
        ASSERT_NE(at, std::string::npos) << l.name;
        std::string bounds = l.source.find("__launch_bounds__(256, 3)") !=
                                     std::string::npos
                                 ? ", 3 an SM"
                                 : "";
        rows[l.name.substr(l.name.find('_') + 1)] = {
            l.source.substr(at + 19, 1) + bounds, l.grid};
      }
  using Row = std::pair<std::string, int64_t>;
  EXPECT_EQ(rows, (std::map<std::string, Row>{
                      {"rmsnorm_grad_dx", {"1, 3 an SM", 396}},
                      {"layernorm_grad_dx", {"2", 528}}}));
  Stats stats;
  std::map<std::string, std::string> seen;
  checkSource(model, 2, false, stats, seen, "bf16");
}

/// Over 1280 columns the layer norm gradient takes as many threads a row as
/// keep at most 48 values a thread, 3 blocks an SM: at D 1600 with the
/// residual's gradient (5 values a column) 256 threads of 8 columns; at
/// 1280, 128 threads of 12 columns (60 values), as before.
TEST(CudaEmitterTest, WideLayerNormGradientFitsThreeBlocksAnSM) {
  for (int64_t d : {1600, 1280}) {
    SCOPED_TRACE(d);
    const std::string n = std::to_string(d);
    const std::string model =
        "model m {\n  input x: f32[B, 2048, " + n +
        "]\n  h = x + linear(rmsnorm(x, name: \"r\"), " + n +
        ", bias: false)\n  h = h + linear(layernorm(h), " + n +
        ")\n  loss = mean(h * h)\n}\n";
    std::optional<rt::Plan> plan;
    rt::CudaProgram program;
    ASSERT_NO_FATAL_FAILURE(planAndEmit(model, "bf16", plan, program));
    int found = 0;
    for (const auto &launches : program.kernels)
      for (const rt::CudaLaunch &l : launches)
        if (l.name.find("layernorm_grad_dx") != std::string::npos) {
          ++found;
          const bool wide = d > 1280;
          EXPECT_NE(l.comment.find(std::string(wide ? "256" : "128") +
                                   " threads per row (4096 rows of " + n +
                                   "); plus the residual gradient"),
                    std::string::npos)
              << l.comment;
          EXPECT_EQ(l.source.find("__launch_bounds__(256, 3)") !=
                        std::string::npos,
                    wide);
          EXPECT_EQ(l.grid, wide ? 396 : 1056);
        }
    EXPECT_EQ(found, 1);
    Stats stats;
    std::map<std::string, std::string> seen;
    checkSource(model, 2, false, stats, seen, "bf16");
  }
}

TEST(CudaEmitterTest, Tf32GeluGradientAfterTheGemm) {
  const char *model = R"(model m {
    input x: f32[B, 64]
    h = linear(gelu(linear(x, 256), approximate: true), 64)
    loss = sum(h * h)
  })";
  for (const char *precision : {"tf32", "fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    Stats stats;
    std::map<std::string, std::string> seen;
    checkSource(model, 128, false, stats, seen, precision);
    std::string errors;
    std::optional<rt::Plan> plan =
        test::compilePlan(model, 128, errors, false, "t.gt", precision);
    ASSERT_TRUE(plan.has_value()) << errors;
    rt::CudaProgram program;
    std::string error;
    ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
    int dgelu = 0, inPlace = 0;
    for (const auto &launches : program.kernels)
      for (size_t i = 0; i < launches.size(); ++i) {
        const rt::CudaLaunch &l = launches[i];
        dgelu += l.kind == rt::CudaLaunch::Kind::Gemm && l.dgelu;
        // The GEMM's product, read and written by the kernel after it.
        if (i > 0 && l.kind == rt::CudaLaunch::Kind::Kernel &&
            launches[i - 1].kind == rt::CudaLaunch::Kind::Gemm &&
            std::count(l.buffers.begin(), l.buffers.end(), launches[i - 1].c) ==
                2)
          ++inPlace;
      }
    bool tf32 = std::string(precision) == "tf32";
    EXPECT_EQ(dgelu, tf32 ? 0 : 1);
    EXPECT_EQ(inPlace, tf32 ? 1 : 0);
  }
}

/// The tensor-core attention kernels carry a Hopper variant each
/// (CudaLaunch::Variant): warpgroup MMA compiled for sm_90a, in blocks of
/// whole warpgroups, the grid covering every tile, its shared memory within
/// the 227 KiB a block may take. The portable kernels stay on mma.sync.
TEST(CudaEmitterTest, HopperAttentionVariants) {
  const test::OpModel *model =
      test::findOpModel("TensorCoreGroupedQueryAttention");
  ASSERT_NE(model, nullptr);
  std::optional<rt::Plan> plan;
  rt::CudaProgram program;
  ASSERT_NO_FATAL_FAILURE(planAndEmit(model->source, "bf16", plan, program));
  int variants = 0;
  std::set<std::string> kinds;
  for (const auto &launches : program.kernels)
    for (const rt::CudaLaunch &l : launches) {
      if (l.variants.empty())
        continue;
      SCOPED_TRACE(l.name);
      ASSERT_EQ(l.variants.size(), 1u);
      const rt::CudaLaunch::Variant &v = l.variants[0];
      ++variants;
      EXPECT_EQ(l.source.find("wgmma"), std::string::npos);
      EXPECT_NE(l.source.find("mma.sync"), std::string::npos);
      EXPECT_EQ(v.major, 9);
      EXPECT_EQ(v.minor, 0);
      EXPECT_EQ(v.arch, "sm_90a");
      EXPECT_NE(v.source.find("wgmma.mma_async.sync.aligned"),
                std::string::npos);
      EXPECT_NE(v.source.find("fence.proxy.async.shared::cta"),
                std::string::npos);
      EXPECT_EQ(v.block % 128, 0);
      EXPECT_LE(v.shared, 227 * 1024);
      // 200 positions in tiles of 64 rows a warpgroup.
      int64_t rows = 64 * (v.block / 128), tiles = (200 + rows - 1) / rows;
      std::string kind = l.name.substr(l.name.rfind('_') + 1);
      kinds.insert(kind);
      // A block a tile of each (batch of 2, head): 3 or 2 query heads, one
      // key head (dkdv).
      EXPECT_EQ(v.grid % tiles, 0);
      int64_t heads = v.grid / tiles;
      EXPECT_TRUE(kind == "dkdv" ? heads == 2 : heads == 6 || heads == 4)
          << heads;
      EXPECT_NE(v.what.find("warpgroup MMA"), std::string::npos);
    }
  // Forward, dq and dkdv of each of the two attentions.
  EXPECT_EQ(variants, 6);
  EXPECT_EQ(kinds, (std::set<std::string>{"attention", "dq", "dkdv"}));
}

/// A bf16 linear with a bias and a tanh GELU that saves its input, in whole
/// 128 x 128 tiles over a K of at most 2048 in steps of 64, carries gtc's
/// Hopper GEMM as an sm_90a variant of its cuBLASLt GEMM: A and B by TMA
/// tensor maps (CudaLaunch::maps) and the output, the saved input and the
/// bias by pointer. So does its gradient (DGELU, dy W with W [K, N]) with
/// the column sums of its result (the linear's bias gradient, in the gemm
/// region where rt::dgeluSumsFit): the variant writes each 128-row tile's
/// sums to the workspace in place of the column-sum kernel after
/// cuBLASLt's GEMM, whose variant drops it (with gtc's GEMMs only), and the
/// last launch adds the tiles' sums in order either way. Other rows, a
/// longer K (the forward's), other precisions and the GEMMs without those
/// epilogues stay on cuBLASLt. Where B is over 12 MiB (the forward's weight
/// [4096, 1600]) the tiles go by groups of 8 tile rows.
TEST(CudaEmitterTest, HopperGemmForTheGeluEpilogues) {
  // K = the input's width, N = the hidden width.
  auto model = [](int64_t width, int64_t hidden) {
    return "model m {\n  input x: f32[B, " + std::to_string(width) +
           "]\n  h = linear(gelu(linear(x, " + std::to_string(hidden) +
           "), approximate: true), 64)\n  loss = sum(h * h)\n}\n";
  };
  struct Case {
    const char *precision;
    int64_t batch;
    int64_t width;
    int gelu, dgelu; // variants
    int64_t hidden = 256;
  };
  for (Case c : {Case{"bf16", 384, 64, 1, 1}, Case{"bf16", 200, 64, 0, 0},
                 Case{"fp16", 384, 64, 0, 0}, Case{"tf32", 384, 64, 0, 0},
                 Case{"bf16", 384, 1600, 1, 1, 4096},
                 Case{"bf16", 384, 2112, 0, 1}}) {
    SCOPED_TRACE(std::string(c.precision) + " B " + std::to_string(c.batch) +
                 " K " + std::to_string(c.width) + " N " +
                 std::to_string(c.hidden));
    const bool grouped = c.hidden * c.width * 2 > (12 << 20);
    std::string errors;
    std::optional<rt::Plan> plan = test::compilePlan(
        model(c.width, c.hidden), c.batch, errors, false, "t.gt",
        c.precision);
    ASSERT_TRUE(plan.has_value()) << errors;
    rt::CudaProgram program;
    std::string error;
    ASSERT_TRUE(codegen::emitCuda(*plan, program, error)) << error;
    int gelu = 0, dgelu = 0, dropped = 0, plainDgelu = 0;
    for (const auto &launches : program.kernels)
      for (size_t i = 0; i < launches.size(); ++i) {
        const rt::CudaLaunch &l = launches[i];
        plainDgelu += l.dgelu && l.variants.empty();
        if (l.variants.empty())
          continue;
        ASSERT_EQ(l.variants.size(), 1u);
        const rt::CudaLaunch::Variant &v = l.variants[0];
        EXPECT_EQ(v.arch, "sm_90a");
        if (l.kind == rt::CudaLaunch::Kind::Kernel) {
          // The column sums of the gradient, not launched there.
          ++dropped;
          EXPECT_EQ(v.source, "");
          EXPECT_TRUE(v.withOwnGemm);
          ASSERT_GE(i, 1u);
          EXPECT_TRUE(launches[i - 1].dgelu);
          EXPECT_NE(l.source.find("constexpr i64 CHUNKS = " +
                                  std::to_string(c.batch / 128)),
                    std::string::npos);
          continue;
        }
        ASSERT_EQ(l.kind, rt::CudaLaunch::Kind::Gemm);
        EXPECT_FALSE(v.withOwnGemm); // a GEMM's variant: that rule anyway
        EXPECT_TRUE(v.persistent);
        EXPECT_EQ(v.grid, c.batch / 128 * (c.hidden / 128)); // every tile
        EXPECT_EQ(v.block, 384);
        EXPECT_LE(v.shared, 227 * 1024);
        EXPECT_EQ(v.maps[0].rows, c.batch); // A in 128 x 64 boxes
        EXPECT_EQ(v.maps[0].boxRows, 128);
        EXPECT_EQ(v.maps[0].boxCols, 64);
        EXPECT_NE(v.source.find("cp.async.bulk.tensor.2d"), std::string::npos);
        EXPECT_NE(v.source.find("wgmma.mma_async.sync.aligned.m64n128k16.f32."
                                "bf16.bf16"),
                  std::string::npos);
        if (l.dgelu) {
          ++dgelu;
          // dy [B, 64] W [64, N], the saved input and the result [B, N]
          // by tensor maps, the tiles' sums to the workspace; then
          // the column-sum kernel and the tiles' sums added.
          EXPECT_EQ(v.buffers, (std::vector<int>{l.a, l.b, l.aux, l.c,
                                                 rt::CudaLaunch::kWorkspace}));
          ASSERT_EQ(v.maps.size(), 5u);
          EXPECT_EQ(v.maps[0].cols, 64);
          EXPECT_EQ(v.maps[1].rows, 64); // B: [K, N], in 64 x 64 boxes
          EXPECT_EQ(v.maps[1].cols, c.hidden);
          EXPECT_EQ(v.maps[1].boxRows, 64);
          for (int m : {2, 3}) {
            EXPECT_EQ(v.maps[m].rows, c.batch) << m;
            EXPECT_EQ(v.maps[m].cols, c.hidden) << m;
            EXPECT_EQ(v.maps[m].boxRows, 128) << m;
          }
          EXPECT_EQ(v.maps[4].rows, 0);
          EXPECT_NE(v.source.find("gemm_dgelu_sums(&ta, &tb, &taux, &tc"),
                    std::string::npos);
          EXPECT_NE(v.source.find("constexpr bool BMN = true"),
                    std::string::npos);
          EXPECT_NE(v.source.find("stmatrix"), std::string::npos);
          ASSERT_EQ(launches.size(), i + 3);
          EXPECT_NE(launches[i + 2].comment.find("chunks in order"),
                    std::string::npos);
          EXPECT_NE(v.source.find("GROUP = 0;"), std::string::npos); // small B
          EXPECT_GE(program.workspaceBytes, 8 * (c.batch / 128) * c.hidden);
        } else {
          ++gelu;
          EXPECT_EQ(l.act, rt::CudaLaunch::Activation::Gelu);
          EXPECT_EQ(v.buffers,
                    (std::vector<int>{l.a, l.b, l.c, l.aux, l.bias}));
          ASSERT_EQ(v.maps.size(), 5u);
          EXPECT_EQ(v.maps[0].cols, c.width);
          EXPECT_EQ(v.maps[1].rows, c.hidden); // B: the weight [N, K]
          EXPECT_EQ(v.maps[1].cols, c.width);
          EXPECT_NE(v.source.find(grouped ? "GROUP = 8;" : "GROUP = 0;"),
                    std::string::npos);
          for (int m = 2; m < 5; ++m)
            EXPECT_EQ(v.maps[m].rows, 0) << m;
          EXPECT_NE(
              v.source.find("const __grid_constant__ gtc_tensor_map ta"),
              std::string::npos);
        }
        std::string log = nvrtcCompile(v.source, l.name, v.arch);
        EXPECT_EQ(log, "") << v.source;
      }
    EXPECT_EQ(gelu, c.gelu);
    EXPECT_EQ(dgelu, c.dgelu);
    EXPECT_EQ(dropped, c.dgelu);
    // Every GELU gradient on cuBLASLt where it has no variant (tf32: none).
    EXPECT_EQ(plainDgelu, std::string(c.precision) == "tf32" ? 0 : 1 - c.dgelu);
  }
}

} // namespace
