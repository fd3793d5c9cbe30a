//===- RunArgs.h - Command-line options of a training run -------*- C++ -*-===//
//
// The options `gtc run` and compiled training executables share (--steps,
// --device, --log, --save, --data, ...): one parser, one meaning, one set of
// messages.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_RUNARGS_H
#define GTC_RUNTIME_RUNARGS_H

#include "gtc/Runtime/Trainer.h"
#include <optional>
#include <string>
#include <vector>

namespace gtc::rt {

struct RunArgs {
  std::string device = "auto"; ///< cpu, cuda or auto
  std::optional<int64_t> batch;
  /// --batch auto: the largest batch whose predicted peak fits the memory.
  bool batchAuto = false;
  std::string precision; ///< empty: the train block's
  /// --checkpoint: none (-1), every(N) (N), or 0 for the train block's
  /// setting; auto(budget: SIZE) sets checkpointBudget (bytes) instead, and
  /// auto sets it to -1 (the device's free memory).
  int64_t checkpointEvery = 0, checkpointBudget = 0;
  /// --micro-batch: rows per micro-batch (gradient accumulation), -1 for
  /// auto, 0 for the train block's setting.
  int64_t microBatch = 0;
  /// --devices: "N", "all" or "cpu"; empty for the train block's setting.
  std::string devices;
  /// --rendezvous file:DIR (else TCP at MASTER_ADDR:MASTER_PORT).
  std::string rendezvous;
  /// --shard: "optimizer" or "none"; empty for the train block's setting.
  std::string shard;
  /// --bucket-size: bytes of a gradient bucket of a data-parallel run
  /// (gt-bucket); 0 when not given (gt-bucket's kDefaultBucketBytes, 64 MiB).
  int64_t bucketBytes = 0;
  int64_t bench = 0;     ///< --bench N: time N steps instead of training
  bool explain = false, noPad = false, padAll = false, noFuse = false,
       dryRun = false;
  /// --data / --eval: replace the train block's files ("PATH", or
  /// "IMAGES,LABELS" for idx sources).
  std::string data, eval;
  RunOptions run;
  std::vector<std::string> names; ///< the options given ("--steps"), in order
};

enum class ArgResult { NotMine, Ok, Error };

/// If args[i] is a run option ("--name VALUE", "--name=VALUE" or a flag),
/// consumes it (advancing i past its value) into `out`. Error: `error` says
/// what is wrong with it.
ArgResult parseRunArg(const std::vector<std::string> &args, size_t &i,
                      RunArgs &out, std::string &error);

/// Whether the run option `name` is fixed when an executable is compiled:
/// it chooses what is compiled (the batch, the precision, the passes'
/// options, data parallelism's plan), or it needs the compiler (--explain,
/// --dry-run).
bool isCompilingOption(const std::string &name);

/// Checks the options against each other: --steps and --epochs exclude each
/// other, and --bench, --profile and --dry-run (which train nothing, on
/// random inputs) refuse the options only training reads (--steps, --log,
/// --save, --data, ...) instead of ignoring them. False with a message.
bool checkRunArgs(const RunArgs &args, std::string &error,
                  const char *printsOnly = nullptr);

/// Applies --data / --eval to `config`; false with a message if a path does
/// not fit the source kind.
bool applyDataPaths(const RunArgs &args, TrainConfig &config,
                    std::string &error);

/// Sets run.device (and deviceName) from --device: cpu; cuda (false with
/// the reason when there is no usable GPU); auto (the GPU if there is one).
/// False too when run.threads is set and the GPU was chosen: --threads sets
/// the CPU's threads, which a GPU run does not use.
bool chooseDevice(const std::string &device, RunOptions &run,
                  std::string &error);

/// Whether the workers a launcher is about to start would refuse --threads
/// (chooseDevice): it is set, and they take GPUs (--device cuda, or auto
/// with a GPU here). The launcher refuses it first, once.
bool threadsOnGpus(const RunOptions &run, const std::string &device);

/// `devices = cpu` (or --devices cpu) is one CPU process: turns --device
/// auto into cpu; false with a message for --device cuda. Other `devices`
/// leave `device` as it is.
bool deviceForDevices(const std::string &devices, std::string &device,
                      std::string &error);

/// The help text of the run options (for --help), from the table of
/// options in RunArgs.cpp. `compiled`: a compiled executable's, which lists
/// the options fixed when it was compiled apart, by name.
std::string runOptionsHelp(bool compiled = false);

/// The help text of the train block's settings (TrainSettings.def): each
/// with its default and the run option that overrides it.
std::string trainSettingsHelp();

/// Whether `name` ("--steps") is a run option.
bool isRunOption(const std::string &name);

} // namespace gtc::rt

#endif // GTC_RUNTIME_RUNARGS_H
