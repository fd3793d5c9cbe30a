//===- gpu_check.cpp - Every op's GPU kernels against the CPU oracle ------===//
//
//   gtc-gpu-check GTC [--precision fp32|tf32|bf16|fp16] [--pad-all] [--only
//   MODEL] gtc-gpu-check GTC --init-draws FILE.gt
//
// For every model of test/unit/OpModels.h: compiles its training step with
// `GTC run - --emit=plan --precision P` (with --pad-all, the models' small
// 16-bit GEMMs padded, so pad and slice kernels run too), runs the step on the
// CPU (float32; 16-bit buffers emulated by rounding) and on the GPU from the
// same parameters and inputs, and compares the loss and every parameter's
// gradient by ||gpu - cpu|| / ||cpu|| (fp16's gradients loss-scaled on both
// sides, as in training), and the initial parameters the GPU
// draws (CudaExecutor::initParams) with the CPU's, bit for bit. Prints one line
// per model and exits non-zero if any exceeds the tolerance: 1e-4 for fp32,
// 5e-3 for tf32 GEMMs; for bf16/fp16, where a different f32 summation order can
// round a value to the neighbouring 16-bit number (2^-8 / 2^-11 apart), 3e-2
// and 5e-3. Links only the runtime and the CUDA emitter: no MLIR.
//===----------------------------------------------------------------------===//

#include "../unit/OpModels.h"
#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Rng.h"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

using namespace gtc;

namespace {

/// Runs `gtc run - --emit=plan --batch N` on `source`.
bool compilePlan(const std::string &gtc, const test::OpModel &m,
                 const std::string &precision, bool padAll, rt::Plan &plan,
                 std::string &error) {
  char path[] = "/tmp/gtc-gpu-check-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    error = "mkstemp failed";
    return false;
  }
  FILE *f = fdopen(fd, "w");
  std::fputs(m.source.c_str(), f);
  std::fclose(f);
  std::string cmd = gtc + " run " + path + " --emit=plan --batch " +
                    std::to_string(m.batch) + " --precision " + precision +
                    (padAll ? " --pad-all" : "") + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p))
    text.append(buf, n);
  int status = pclose(p);
  std::remove(path);
  if (status != 0) {
    error = text;
    return false;
  }
  return rt::deserialize(text, plan, error);
}

double relError(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(a[i]) - b[i];
    num += d * d;
    den += double(b[i]) * b[i];
  }
  if (!std::isfinite(num))
    return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace

/// How many of the parameters the GPU drew (CudaExecutor::initParams)
/// differ in any bit from `cpu` (initParameters' values); the first few
/// are printed.
int64_t differingDraws(const rt::Plan &plan, rt::CudaExecutor &gpu,
                       const std::vector<float> &cpu) {
  std::vector<float> drawn(cpu.size());
  gpu.downloadRegion(rt::Region::Param, drawn.data());
  int64_t differ = 0;
  for (const rt::Param &p : plan.params) {
    const rt::Buffer &b = plan.buffers[p.buffer];
    for (int64_t i = b.offset; i < b.offset + b.elements(); ++i)
      if (std::memcmp(&drawn[i], &cpu[i], 4) != 0 && differ++ < 3)
        std::printf("  %s[%lld]: GPU %.9g, CPU %.9g\n", p.name.c_str(),
                    static_cast<long long>(i - b.offset), drawn[i], cpu[i]);
  }
  return differ;
}

/// --init-draws FILE: every parameter of FILE's training step (GPT-2's
/// 124M for the suite) drawn on the GPU against the CPU, bit for bit.
int initDraws(const std::string &gtc, const std::string &file) {
  std::string cmd = gtc + " run " + file + " --emit=plan 2>&1", text, error;
  FILE *p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p))
    text.append(buf, n);
  rt::Plan plan;
  rt::CudaProgram program;
  if (pclose(p) != 0 || !rt::deserialize(text, plan, error) ||
      !codegen::emitCuda(plan, program, error)) {
    std::cerr << "gtc-gpu-check: cannot compile " << file << ": " << error
              << text.substr(0, 2000) << "\n";
    return 1;
  }
  std::vector<float> cpu(plan.regionSize.at(rt::Region::Param));
  rt::initParameters(plan, 1337, cpu.data());
  rt::CudaExecutor gpu(plan, program, false);
  gpu.initParams(1337);
  int64_t differ = differingDraws(plan, gpu, cpu);
  std::printf("init draws of %s: %zu parameters, %zu elements, %lld differ "
              "between the GPU and the CPU\n",
              file.c_str(), plan.params.size(), cpu.size(),
              static_cast<long long>(differ));
  return differ == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: gtc-gpu-check GTC [--precision P] [--pad-all] "
                 "[--only MODEL] | --init-draws FILE.gt\n";
    return 2;
  }
  std::string gtc = argv[1], only, precision = "fp32", initFile;
  bool padAll = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--precision") == 0 && i + 1 < argc)
      precision = argv[++i];
    else if (std::strcmp(argv[i], "--pad-all") == 0)
      padAll = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (std::strcmp(argv[i], "--init-draws") == 0 && i + 1 < argc)
      initFile = argv[++i];
  }
  const bool tf32 = precision == "tf32";
  double tolerance = precision == "fp32"   ? 1e-4
                     : precision == "bf16" ? 3e-2
                                           : 5e-3;
  rt::CudaDeviceInfo info;
  std::string error;
  if (!rt::cudaAvailable(info, error)) {
    std::cerr << "gtc-gpu-check: " << error << "\n";
    return 1;
  }
  if (!initFile.empty())
    return initDraws(gtc, initFile);
  int failures = 0;
  std::printf("%-30s %12s %12s %s\n",
              ("model (" + precision + " vs CPU)").c_str(), "loss err",
              "max grad err", "");
  for (const test::OpModel &m : test::opModels()) {
    if (!only.empty() && m.name != only)
      continue;
    rt::Plan plan;
    if (!compilePlan(gtc, m, precision, padAll, plan, error)) {
      std::printf("%-30s compile failed: %s\n", m.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    rt::CudaProgram program;
    if (!codegen::emitCuda(plan, program, error)) {
      std::printf("%-30s emit failed: %s\n", m.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    try {
      rt::CpuExecutor<float> cpu(plan);
      rt::CudaExecutor gpu(plan, program, tf32);
      cpu.initParams(7);
      std::vector<float> params(cpu.region(rt::Region::Param),
                                cpu.region(rt::Region::Param) +
                                    cpu.regionElements(rt::Region::Param));
      // The GPU draws the same initial parameters, bit for bit.
      gpu.initParams(7);
      const int64_t drawn = differingDraws(plan, gpu, params);
      gpu.uploadRegion(rt::Region::Param, params.data());
      rt::Rng rng(11);
      for (const rt::Feed &f : plan.feeds) {
        const rt::Buffer &b = plan.buffers[f.buffer];
        for (int64_t i = 0; i < b.elements(); ++i) {
          if (b.dtype == rt::DType::F32)
            cpu.floats(f.buffer)[i] = static_cast<float>(rng.normal());
          else
            cpu.ints(f.buffer)[i] =
                static_cast<int32_t>(rng.below(m.intRange));
        }
        std::memcpy(gpu.stagedInput(0, f.buffer), cpu.data(f.buffer),
                    b.elements() * 4);
      }
      // The seed of the backward pass, the same on both sides: 1, or for
      // fp16 plans a loss scale as in training, where at 1 the mean over
      // HopperGemmGeluGrouped's 1.8M outputs puts its gradients among fp16's
      // subnormals (below 2^-14), one rounding apart a large part of a
      // value. As LossScaler does after an overflow, the scale starts at
      // 2^10 and halves while either side's gradients are not finite (the
      // CPU's of the tensor-core attention models at 2^10, where it rounds
      // to fp16 what the GPU's kernel keeps in f32). ||gpu - cpu|| / ||cpu||
      // does not depend on it.
      std::vector<float> grads(cpu.regionElements(rt::Region::Grad));
      auto finite = [&] { // every parameter's gradient, on both sides
        for (const rt::Param &p : plan.params) {
          const int64_t n = plan.buffers[p.grad].elements();
          const float *g = grads.data() + plan.buffers[p.grad].offset;
          const float *c = cpu.floats(p.grad);
          for (int64_t i = 0; i < n; ++i)
            if (!std::isfinite(g[i]) || !std::isfinite(c[i]))
              return false;
        }
        return true;
      };
      for (float seed = plan.scalesLoss() ? 1024.0f : 1.0f;; seed /= 2) {
        if (plan.lossScale >= 0) {
          gpu.upload(plan.lossScale, &seed);
          cpu.floats(plan.lossScale)[0] = seed;
        }
        gpu.step(0, /*update=*/false);
        cpu.run();
        gpu.downloadRegion(rt::Region::Grad, grads.data());
        if (seed <= 1.0f || finite())
          break;
      }
      double cpuLoss = cpu.floats(plan.loss)[0], gpuLoss = gpu.loss();
      double lossErr = std::fabs(gpuLoss - cpuLoss) /
                       std::max(1e-30, std::fabs(cpuLoss));
      double worst = 0;
      std::string worstName;
      for (const rt::Param &p : plan.params) {
        const rt::Buffer &b = plan.buffers[p.grad];
        double e = relError(grads.data() + b.offset, cpu.floats(p.grad),
                            b.elements());
        if (!(e <= worst)) {
          worst = e;
          worstName = p.name;
        }
      }
      const double tol = tf32 && m.tf32Tolerance > 0 ? m.tf32Tolerance
                                                     : tolerance;
      bool ok = lossErr <= tol && worst <= tol;
      if (drawn != 0) {
        ok = false;
        worstName = "(" + std::to_string(drawn) +
                    " initial parameters drawn otherwise on the GPU)";
      }
      // The parameters' 16-bit copies (Plan::paramCopies): the cast kernel
      // wrote those the step reads before it, the update writes every
      // parameter's after one; either way each is its parameter rounded to
      // nearest even.
      if (plan.paramCopies >= 0) {
        auto copiesMatch = [&](bool all) {
          std::vector<float> p(plan.regionSize.at(rt::Region::Param));
          std::vector<uint16_t> c(2 * plan.regionSize.at(rt::Region::Copy));
          gpu.downloadRegion(rt::Region::Param, p.data());
          gpu.downloadRegion(rt::Region::Copy, c.data());
          std::vector<std::pair<int64_t, int64_t>> ranges;
          if (all)
            ranges.push_back({0, static_cast<int64_t>(p.size())});
          for (const rt::Kernel &cast : plan.kernels[plan.paramCopies].body)
            if (!all &&
                plan.buffers[cast.outputs[0]].region == rt::Region::Copy) {
              const rt::Buffer &b = plan.buffers[cast.inputs[0]];
              ranges.push_back({b.offset, b.offset + b.elements()});
            }
          for (auto [lo, hi] : ranges)
            for (int64_t i = lo; i < hi; ++i)
              if (c[i] != rt::toHalfBits(p[i], plan.paramCopyType()))
                return false;
          return true;
        };
        bool before = copiesMatch(false);
        gpu.step(0, /*update=*/true);
        gpu.loss();
        bool after = copiesMatch(true);
        if (!before || !after) {
          ok = false;
          worstName = !before ? "(16-bit copies before the update)"
                              : "(16-bit copies the update wrote)";
        }
      }
      failures += !ok;
      std::printf("%-30s %12.3e %12.3e %s%s\n", m.name.c_str(), lossErr,
                  worst, ok ? "PASS" : "FAIL ", ok ? "" : worstName.c_str());
    } catch (const std::exception &e) {
      std::printf("%-30s error: %s\n", m.name.c_str(), e.what());
      ++failures;
    }
  }
  std::printf("gpu-check: %d failure(s), %s, %s\n", failures,
              info.name.c_str(), precision.c_str());
  return failures ? 1 : 0;
}
