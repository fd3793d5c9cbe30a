//===- Benchmark.cpp - gtc run --bench and --profile ---------------------===//
//
// Times the training step of a plan (on a GPU: CUDA-graph steps launched back
// to back, their mean, as training runs them and PyTorch's references time
// theirs, and a step alone, its median; the trainer's own CPU step otherwise)
// and, with --profile, each kernel.
//===----------------------------------------------------------------------===//

#include "Train/Backends.h"
#include "gtc/Runtime/Messages.h"
#include "gtc/Runtime/Profile.h"
#include "gtc/Runtime/Trainer.h"
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <ostream>

using namespace gtc::rt;
using namespace gtc::rt::backends;

/// The range [0, n) that `--bench` draws the i32 feed `buffer` from: what
/// it indexes (indexRange), else 10. Tokens spread over the whole
/// vocabulary, as PyTorch's benchmark draws them, and not on ten rows of
/// the embedding (whose gradient then adds thousands of rows into the same
/// ten).
static int64_t benchRange(const Plan &plan, int buffer) {
  const int64_t range = indexRange(plan, buffer);
  return range > 0 ? range : 10;
}

/// The steps --profile records.
constexpr int kProfileSteps = 3;

/// --profile on the CPU: kProfileSteps steps of `backend`, each kernel's
/// span and then the update's, as profile records.
static void profileCpu(const Plan &plan, CpuBackend &backend, int64_t firstStep,
                       double stepMs, Profile &profile) {
  const int64_t n = backend.exec.regionElements(Region::Param);
  profile.device = "CPU (" + std::to_string(threads()) + " threads)";
  profile.steps = kProfileSteps;
  profile.stepMs = stepMs;
  std::vector<KernelContext> contexts = kernelContexts(plan);
  std::vector<double> spans;
  double origin = -1;
  for (int s = 0; s < kProfileSteps; ++s) {
    spans.clear();
    backend.spans = &spans;
    backend.run(1e-4, firstStep + s, /*wantLoss=*/false, 0, 1);
    backend.spans = nullptr;
    if (origin < 0)
      origin = spans.front();
    for (size_t i = 0; i + 1 < spans.size(); i += 2) {
      ProfileRecord r;
      size_t k = i / 2;
      r.step = s;
      r.startUs = spans[i] - origin;
      r.durationUs = spans[i + 1] - spans[i];
      if (k < plan.kernels.size()) {
        const Kernel &kernel = plan.kernels[k];
        r.name = "k" + std::to_string(k) + "_" + opName(kernel.op);
        r.kind = "kernel";
        r.op = opName(kernel.op);
        r.planKernel = static_cast<int>(k);
        r.phase = contexts[k].phase;
        r.layer = contexts[k].layer;
        r.bytes = kernelBytes(plan, kernel);
        r.flops = kernelFlops(plan, kernel);
      } else {
        r.name = std::string("optimizer (") + name(plan.config.optimizer) + ")";
        r.kind = r.phase = "optimizer";
        r.bytes = updateBytes(plan.config, n);
      }
      profile.records.push_back(std::move(r));
    }
  }
}

/// `gtc run --bench N`: times the training step on random inputs (i32 ones
/// uniform over what they index, benchRange), after --bench-warmup steps: on
/// a GPU CUDA events over graph replays, the mean of N launched back to back
/// and the median of N each alone; on the CPU a steady clock, the median.
static int benchmarkImpl(const Plan &plan, const RunOptions &run, int64_t iters,
                         std::ostream &rankOut, std::ostream &err);

int gtc::rt::benchmark(const Plan &plan, const RunOptions &run, int64_t iters,
                       std::ostream &out, std::ostream &err) {
  int status = benchmarkImpl(plan, run, iters, out, err);
  if (status != 0 && run.comm)
    run.comm->abort(); // as train() does
  return status;
}

static int benchmarkImpl(const Plan &plan, const RunOptions &run,
                         int64_t iters, std::ostream &rankOut,
                         std::ostream &err) {
  // Data parallelism (GPUs): every process times its step with the
  // collectives; rank 0 prints and writes the trace.
  const int rank = run.comm ? run.comm->rank() : 0;
  std::ostream nowhere(nullptr);
  std::ostream &out = rank == 0 ? rankOut : nowhere;
  if (run.comm && run.device != "cuda") {
    err << errorPrefix() << kCpuBenchError << "\n";
    return 1;
  }
  Rng rng(1);
  auto fill = [&](auto dataFor) {
    for (const Feed &f : plan.feeds) {
      const Buffer &b = plan.buffers[f.buffer];
      void *d = dataFor(f.buffer);
      const int64_t range = benchRange(plan, f.buffer);
      for (int64_t i = 0; i < b.elements(); ++i) {
        if (b.dtype == DType::F32)
          static_cast<float *>(d)[i] = static_cast<float>(rng.normal());
        else
          static_cast<int32_t *>(d)[i] =
              static_cast<int32_t>(rng.below(range));
      }
    }
  };
  double ms = 0, aloneMs = 0, deviceMiB = 0;
  PowerReading power;
  const bool profiling = !run.profilePath.empty();
  if (profiling && plan.microBatches > 1) {
    err << errorPrefix() << "--profile records the kernels of one step of the "
           "compiled batch; with gradient accumulation ("
        << plan.microBatches << " micro-batches of " << plan.batch
        << ") profile --micro-batch " << plan.batch << " as --batch "
        << plan.batch << " instead\n";
    return 1;
  }
  Profile profile;
  std::ofstream trace;
  if (profiling && rank == 0) {
    if (std::string file =
            fileTheRunReads(run.profilePath, plan.config, run.sourcePath);
        !file.empty()) {
      err << errorPrefix() << "--profile '" << run.profilePath << "' is "
          << file
          << ", which the trace would replace; give --profile another path\n";
      return 1;
    }
    trace.open(run.profilePath);
    if (!trace) {
      err << errorPrefix() << "cannot write the profile to '" << run.profilePath
          << "'; check that its directory exists and is writable\n";
      return 1;
    }
  }
  try {
    if (run.device == "cuda") {
      const CudaProgram *program = run.programFor(plan);
      if (!program)
        return 1;
      CudaExecutor exec(plan, *program,
                        plan.config.precision == Precision::Tf32, run.comm,
                        run.shardOptimizer);
      exec.initParams(0);
      for (int slot = 0; slot < 2; ++slot)
        fill([&](int id) { return exec.stagedInput(slot, id); });
      CudaExecutor::StepTimes t = exec.timeStep(
          static_cast<int>(run.benchWarmup ? run.benchWarmup : kGpuBenchWarmup),
          static_cast<int>(iters));
      ms = t.backToBack;
      aloneMs = t.alone;
      power = t.power;
      if (profiling)
        exec.profile(5, kProfileSteps, profile);
      for (auto [what, bytes] : exec.memoryBreakdown())
        if (what == "measured (cuMemGetInfo)")
          deviceMiB = bytes / 1048576.0;
      out << "kernels: " << compileStats().compiled << " compiled, "
          << compileStats().cacheHits << " from the cache\n";
    } else {
      setThreads(run.threads);
      if (std::string shortfall = hostMemoryShortfall(plan);
          !shortfall.empty()) {
        err << errorPrefix() << shortfall << "\n";
        return 1;
      }
      // The trainer's own step (accumulation, unscaling, clipping, the
      // update), one process.
      CpuBackend backend(plan, /*comm=*/nullptr, /*shard=*/false);
      std::vector<float> params(plan.regionSize.at(Region::Param));
      initParameters(plan, 0, params.data());
      backend.setParams(params);
      fill([&](int id) { return backend.feed(id); });
      const int parts = static_cast<int>(plan.microBatches);
      std::vector<double> times;
      const int64_t warmup = run.benchWarmup ? run.benchWarmup : kCpuBenchWarmup;
      for (int64_t i = 0; i < iters + warmup; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        for (int part = 0; part < parts; ++part)
          backend.run(1e-4, i + 1, /*wantLoss=*/false, part, parts);
        times.push_back(std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - t0)
                            .count());
      }
      times.erase(times.begin(), times.begin() + warmup);
      std::sort(times.begin(), times.end());
      ms = times[times.size() / 2];
      if (profiling)
        profileCpu(plan, backend, iters + warmup + 1, ms, profile);
    }
  } catch (const std::bad_alloc &) {
    err << errorPrefix() << "out of memory; " << lowerBatch(run) << "\n";
    return 1;
  } catch (const std::exception &e) {
    err << errorPrefix() << e.what() << "\n";
    return 1;
  }
  char line[256];
  std::snprintf(line, sizeof line, "bench %s batch %lld %s %s: %.4f ms/step",
                plan.model.c_str(),
                (long long)(plan.batch * plan.microBatches),
                run.device.c_str(), name(plan.config.precision), ms);
  out << line;
  if (run.comm)
    out << " (each of " << run.comm->size() << " GPUs, gradients averaged)";
  if (plan.microBatches > 1)
    out << " (" << plan.microBatches << " micro-batches of " << plan.batch
        << ")";
  if (deviceMiB > 0)
    out << ", device memory " << std::fixed << std::setprecision(1)
        << deviceMiB << " MiB" << std::defaultfloat;
  if (aloneMs > 0)
    out << "; a step alone " << std::fixed << std::setprecision(4) << aloneMs
        << " ms (median)" << std::defaultfloat;
  if (power.valid) // the GPU's (rank 0's), over the steps back to back
    out << "; " << describePower(power);
  out << "\n";
  if (!profiling || rank != 0)
    return 0;
  writeChromeTrace(profile, trace);
  trace.flush();
  if (!trace) {
    err << errorPrefix() << "cannot write the profile to '" << run.profilePath
        << "'; check that its directory exists and is writable\n";
    return 1;
  }
  printProfileTable(profile, out);
  out << "trace: " << run.profilePath
      << " (open in chrome://tracing or https://ui.perfetto.dev)\n";
  return 0;
}
