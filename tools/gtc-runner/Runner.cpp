//===- Runner.cpp - A compiled training executable ------------------------===//
//
// `gtc compile model.gt -o model` copies this program and appends the
// model's payload: the step and evaluation plans and the GPU kernels
// (runtime/include/gtc/Runtime/Bundle.h). At start it reads the payload from
// its own file (checked by its checksum), then trains exactly as `gtc run`
// does, with the same options. It links the runtime and the CUDA emitter
// only: no MLIR, no LLVM; the NVIDIA driver and cuBLASLt are loaded at run
// time (NVRTC only when a kernel is missing for the GPU at hand).
//===----------------------------------------------------------------------===//

#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Files.h"
#include "gtc/Runtime/Messages.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Runtime/Bundle.h"
#include "gtc/Runtime/RunArgs.h"
#include <csignal>
#include <iostream>
#include <map>
#include <memory>

using namespace gtc;

namespace {

int usage(const std::string &self, const rt::Plan &step,
          const rt::Bundle &bundle) {
  std::cout << self << ": trains model '" << step.model
            << "', compiled by gtc: "
            << rt::describeBatch(step, bundle.processes) << ", precision "
            << rt::name(step.config.precision) << ", GPU kernels for";
  for (const std::string &a : bundle.archs)
    std::cout << " " << a;
  if (bundle.archs.empty())
    std::cout << " none (NVRTC compiles them on the GPU)";
  std::cout << "\n\nusage: " << self
            << " [options]\n\noptions (override the compiled train "
               "block):\n"
            << rt::runOptionsHelp(/*compiled=*/true)
            << "\nExit status: 0 on success, "
               "1 on an error, 2 on a command-line mistake, 130 when "
               "interrupted (after saving).\n";
  return 0;
}

int usageError(const std::string &self, const std::string &message) {
  std::cerr << self << ": error: " << message << "\nRun '" << self
            << " --help' for usage.\n";
  return 2;
}

/// What an executable cannot change, as it was compiled: the batch, the
/// precision, and the options of compiling. Empty when `opts` asks for none
/// of them, else why.
std::string compiledSettings(const rt::RunArgs &opts, const rt::Plan &step,
                             int processes) {
  // The global batch: the plan's rows, times its micro-batches and the
  // processes that each run it.
  const int64_t batch = step.batch * step.microBatches * processes;
  if (opts.batch && *opts.batch != batch)
    return ("this executable was compiled for batch " + std::to_string(batch) +
            "; for batch " + std::to_string(*opts.batch) +
            " run gtc compile --batch " + std::to_string(*opts.batch));
  if (!opts.precision.empty() &&
      opts.precision != rt::name(step.config.precision))
    return (std::string("this executable was compiled for "
                        "precision ") +
            rt::name(step.config.precision) + "; for " + opts.precision +
            " run gtc compile --precision " + opts.precision);
  if (opts.run.sampleEvery)
    return "--sample-every is gtc run's: an executable has no generation "
           "plans; sample from its --save file with gtc sample";
  if (opts.explain || opts.dryRun)
    return std::string(opts.explain ? "--explain" : "--dry-run") +
           " needs the compiler: gtc run MODEL.gt --dry-run with the options "
           "this executable was compiled with prints its plan";
  bool checkpoint = opts.checkpointEvery != 0 || opts.checkpointBudget != 0;
  if (opts.noPad || opts.padAll || opts.noFuse || checkpoint ||
      opts.batchAuto || opts.microBatch != 0)
    return (std::string(opts.noPad             ? "--no-pad"
                        : opts.padAll          ? "--pad-all"
                        : opts.noFuse          ? "--no-fuse"
                        : checkpoint           ? "--checkpoint"
                        : opts.batchAuto       ? "--batch auto"
                                               : "--micro-batch") +
            " applies when compiling: gtc run/compile");
  if (opts.bucketBytes != 0 || !opts.shard.empty())
    return (std::string(opts.bucketBytes ? "--bucket-size" : "--shard") +
            " applies when compiling: gtc compile "
            "--devices N " +
            (opts.bucketBytes ? "--bucket-size SIZE" : "--shard optimizer"));
  return "";
}

} // namespace

int main(int argc, char **argv) {
  // A file-size limit (or a quota) makes a write fail with EFBIG, which the
  // checkpoint writer reports, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  gtc::rt::Startup::get(); // the clock of "first step: ... from start"
  std::string self = argv[0];
  if (size_t slash = self.rfind('/'); slash != std::string::npos)
    self = self.substr(slash + 1);
  rt::setProgramName(self);
  rt::Bundle bundle;
  std::string error;
  const std::string exe = rt::runningProgram();
  if (!rt::readBundle(exe, bundle, error)) {
    if (size_t at = error.find(exe); at != std::string::npos)
      error.replace(at, exe.size(), argv[0]); // name the file as invoked
    std::cerr << self << ": error: " << error << "\n";
    return 1;
  }
  rt::Plan step;
  if (!rt::deserialize(bundle.step, step, error)) {
    std::cerr << self << ": error: the embedded plan is invalid (" << error
              << "); rebuild the executable with gtc compile\n";
    return 1;
  }

  std::vector<std::string> args(argv + 1, argv + argc);
  rt::RunArgs opts;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help")
      return usage(self, step, bundle);
    rt::ArgResult r = rt::parseRunArg(args, i, opts, error);
    if (r == rt::ArgResult::Error)
      return usageError(self, error);
    if (r == rt::ArgResult::NotMine)
      return usageError(self, "unknown option '" + args[i] + "'");
  }
  if (!rt::checkRunArgs(opts, error))
    return usageError(self, error);
  if (std::string why = compiledSettings(opts, step, bundle.processes);
      !why.empty())
    return usageError(self, why);
  // Data parallelism: an executable compiled with devices = N trains with N
  // processes, each with its plan of batch / N rows: it starts them itself,
  // or joins a launcher's N (torchrun, srun, mpirun).
  rt::World world;
  if (!rt::worldFromEnvironment(world, opts.rendezvous, error))
    return usageError(self, error);
  const int processes = rt::dataParallelProcesses(
      opts.devices, world, /*gpus=*/0, bundle.processes, error);
  if (processes == 0)
    return usageError(self, error);
  if (processes == 1 && !opts.rendezvous.empty())
    return usageError(self, "--rendezvous applies to data parallelism, and "
                            "this executable trains in one process (compile "
                            "with devices = N, or launch it under torchrun, "
                            "srun or mpirun)");
  // Compiled with devices = cpu, or --devices cpu: one CPU process.
  if (!rt::deviceForDevices(opts.devices.empty() && bundle.cpu ? "cpu"
                                                               : opts.devices,
                            opts.device, error))
    return usageError(self, error);
  if (!rt::applyDataPaths(opts, step.config, error))
    return usageError(self, error);

  rt::RunOptions run = opts.run;
  run.compiled = true;
  const bool timesSteps = opts.bench || !run.profilePath.empty();
  if (processes > 1 && timesSteps && opts.device == "cpu")
    return usageError(self, rt::kCpuBenchError);
  // A launcher refuses --threads with GPUs before its workers start.
  if (processes > 1 && world.size == 1 && rt::threadsOnGpus(run, opts.device))
    return usageError(self, rt::kThreadsOnGpuError);
  // The launcher itself opens no GPU; a process of a launch uses the GPU of
  // its local rank.
  if (processes > 1 && world.size == 1)
    return rt::spawnWorkers(processes, argv);
  if (world.size > 1)
    rt::selectCudaDevice(world.localRank);
  if (!rt::chooseDevice(opts.device, run, error)) {
    std::cerr << self << ": error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<rt::Communicator> comm;
  if (world.size > 1) {
    if (!(comm = rt::connect(world, run.device, error))) {
      std::cerr << self << ": error: " << error << "\n";
      return 1;
    }
    run.comm = comm.get();
    run.shardOptimizer = bundle.shardOptimizer;
  }
  run.programFor = codegen::programCache(self);
  rt::setPrebuiltKernels(&bundle.kernels);
  if (opts.bench || !run.profilePath.empty())
    return rt::benchmark(step, run, opts.bench ? opts.bench : 20, std::cout,
                         std::cerr);

  std::map<int64_t, std::unique_ptr<rt::Plan>> evals;
  rt::EvalPlanFn evalPlan = [&](int64_t n) -> const rt::Plan * {
    auto &slot = evals[n];
    if (!slot) {
      auto it = bundle.evals.find(n);
      if (it == bundle.evals.end()) {
        // The last, smaller batch of eval data other than gtc compile saw:
        // the trainer skips it with a note.
        if (n != step.batch)
          return nullptr;
        std::cerr << self << ": error: this executable has no evaluation "
                  << "plan (its train block had no eval data)\n";
        return nullptr;
      }
      auto plan = std::make_unique<rt::Plan>();
      if (!rt::deserialize(it->second, *plan, error)) {
        std::cerr << self << ": error: an embedded evaluation plan is "
                  << "invalid (" << error << "); rebuild the executable\n";
        return nullptr;
      }
      slot = std::move(plan);
    }
    return slot.get();
  };
  return rt::train(step, evalPlan, run, std::cout, std::cerr);
}
