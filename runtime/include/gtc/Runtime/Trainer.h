//===- Trainer.h - The training loop ----------------------------*- C++ -*-===//
//
// Runs a compiled training step over a dataset: batches from the loader, the
// step's kernels, gradient clipping, the optimizer and its schedule, periodic
// evaluation, a progress line, a JSONL log and safetensors checkpoints. Used
// by `gtc run` and by compiled training executables.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_TRAINER_H
#define GTC_RUNTIME_TRAINER_H

#include "gtc/Runtime/Plan.h"
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

namespace gtc::rt {

/// Command-line choices that override the train block.
struct RunOptions {
  std::optional<int64_t> steps, epochs;
  std::optional<uint64_t> seed;
  std::string logPath;    ///< --log: JSONL metrics
  std::string savePath;   ///< --save: checkpoint at the end (and on SIGINT)
  std::string resumePath; ///< --resume: continue from a checkpoint
  int threads = 0;        ///< 0: all cores
  bool progress = true;   ///< live progress line on a terminal
};

/// Returns the evaluation plan for a batch of `batch` examples (the last
/// batch of an eval set may be smaller), or null if it cannot be built.
using EvalPlanFn = std::function<const Plan *(int64_t batch)>;

/// Trains `step` as configured; prints progress and summaries to `out`.
/// Returns the process exit status: 0 on success, 1 on an error (reported
/// on `err` with what to do), 130 when interrupted (after saving).
int train(const Plan &step, const EvalPlanFn &evalPlan,
          const RunOptions &options, std::ostream &out, std::ostream &err);

} // namespace gtc::rt

#endif // GTC_RUNTIME_TRAINER_H
