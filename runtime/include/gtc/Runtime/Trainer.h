//===- Trainer.h - The training loop ----------------------------*- C++ -*-===//
//
// Runs a compiled training step over a dataset: batches from the loader, the
// step's kernels, gradient clipping, the optimizer and its schedule, periodic
// evaluation, a progress line, a JSONL log and safetensors checkpoints. Used
// by `gtc run` and by compiled training executables.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_TRAINER_H
#define GTC_RUNTIME_TRAINER_H

#include "gtc/Runtime/Comm.h"
#include "gtc/Runtime/CudaProgram.h"
#include "gtc/Runtime/Plan.h"
#include <functional>
#include <memory>
#include <iosfwd>
#include <optional>
#include <string>

namespace gtc::rt {

/// Returns the GPU launches of a plan (emitted by the compiler), or null
/// after reporting why not.
using CudaProgramFn = std::function<const CudaProgram *(const Plan &)>;

/// Command-line choices that override the train block.
struct RunOptions {
  std::string device = "cpu"; ///< "cpu" or "cuda"
  std::string deviceName;     ///< for the log line, e.g. "NVIDIA H100"
  /// Bytes of free memory on the GPU chosen (0 on the CPU, or unknown).
  int64_t deviceFreeMemory = 0;
  CudaProgramFn programFor;   ///< needed with device "cuda"
  std::optional<int64_t> steps, epochs;
  std::optional<uint64_t> seed;
  std::string logPath;    ///< --log: JSONL metrics
  std::string savePath;   ///< --save: checkpoint at the end (and on SIGINT)
  std::string resumePath; ///< --resume: continue from a checkpoint
  std::string initPath;   ///< --init: start from a file's weights
  /// The model's file (gtc run), which --save must not replace, like the
  /// data files; empty in a compiled executable.
  std::string sourcePath;
  /// A compiled executable: its batch is fixed (the fix for a batch is
  /// gtc compile --batch) and it has no train block to edit.
  bool compiled = false;
  int threads = 0;        ///< 0: all cores
  int64_t logEvery = 0;   ///< 0: the train block's log_every
  /// --sample-every (0: the train block's sample_every): every N steps rank
  /// 0 prints a sample from `sampleWindow` (a "decode" plan of the model at
  /// batch 1) and `sampleStep` (its one-position plan), timed apart.
  int64_t sampleEvery = 0;
  const Plan *sampleWindow = nullptr, *sampleStep = nullptr;
  bool progress = true;   ///< live progress line on a terminal
  std::string profilePath; ///< --profile: Chrome trace of a few steps
  /// --bench-warmup N: steps run before --bench times (0: not given,
  /// kGpuBenchWarmup or kCpuBenchWarmup).
  int64_t benchWarmup = 0;
  /// --check-numerics: stop at the first op whose output is not finite.
  bool checkNumerics = false;
  /// Data parallelism: the processes this one trains with (null: alone).
  /// Each takes its share of every batch; gradients, the loss and
  /// evaluation are averaged over them; rank 0 alone logs and saves.
  Communicator *comm = nullptr;
  /// ZeRO-1 (shard = optimizer) with `comm`: each process keeps the
  /// optimizer state of, and updates, a contiguous 1/N of the parameters,
  /// then the parameters are all-gathered.
  bool shardOptimizer = false;
};

/// Returns the evaluation plan for a batch of `batch` examples (the last
/// batch of an eval set may be smaller), or null if it cannot be built.
using EvalPlanFn = std::function<const Plan *(int64_t batch)>;

/// The fix for a batch too large for the data or the memory: --batch, or
/// for a compiled executable, gtc compile's.
std::string lowerBatch(const RunOptions &options);

/// What `path` is among the files a run reads, which nothing it writes may
/// replace (a checkpoint, a log, a compiled executable): "the training data
/// ('FILE')", "the evaluation data (...)", "the model's file (...)" for
/// `source`, or "the program that is running"; empty when it is none.
std::string fileTheRunReads(const std::string &path, const TrainConfig &c,
                            const std::string &source);

/// Opens a train-block data source (idx, tokens or text); null with a
/// message if it cannot.
std::unique_ptr<Dataset> openSource(const TrainConfig::Source &source,
                                    std::string &error);

/// `--init FILE`: the plan's parameters from a safetensors file into
/// `params` (the plan's parameter region, sized), matched by name and shape
/// (f32, f64, bf16 or f16 elements, converted to f32). Every parameter must
/// be there; other tensors are listed in a note on `out` and left alone.
/// False with a message on `err`.
bool loadInitialWeights(const Plan &plan, const std::string &path,
                        std::vector<float> &params, std::ostream &out,
                        std::ostream &err);

/// Trains `step` as configured; prints progress and summaries to `out`.
/// Returns the process exit status: 0 on success, 1 on an error (reported
/// on `err` with what to do), 130 when interrupted (after saving).
int train(const Plan &step, const EvalPlanFn &evalPlan,
          const RunOptions &options, std::ostream &out, std::ostream &err);

/// Why N CPU processes are not timed together: their step has no
/// collectives to time.
/// --threads with a GPU (chooseDevice; a launcher before its workers).
inline constexpr const char *kThreadsOnGpuError =
    "--threads sets the CPU's threads, and this runs on the GPU, which does "
    "not use them: drop --threads, or give --device cpu";

inline constexpr const char *kCpuBenchError =
    "--bench and --profile time one CPU process; give --devices 1 (each of "
    "N processes runs the step at batch / N), or time N GPUs with --device "
    "cuda";

/// Why shard = gradients does not run on CPU processes.
inline constexpr const char *kCpuShardGradientsError =
    "shard = gradients (ZeRO-2) runs on GPUs (NCCL): give --device cuda, or "
    "shard = optimizer (ZeRO-1) for CPU processes";

/// --bench's warm-up steps when --bench-warmup is not given.
inline constexpr int64_t kGpuBenchWarmup = 20, kCpuBenchWarmup = 3;

/// `gtc run --bench N`: times the training step on random inputs (i32 ones
/// uniform over what they index) after options.benchWarmup steps: on a GPU
/// CUDA events over graph replays (the mean of N back to back, then the
/// median of N each alone), on the CPU a steady clock (the median). With
/// options.profilePath, then profiles a few steps (Profile.h): writes the
/// trace there and prints the kernel table.
int benchmark(const Plan &plan, const RunOptions &options, int64_t iters,
              std::ostream &out, std::ostream &err);

} // namespace gtc::rt

#endif // GTC_RUNTIME_TRAINER_H
