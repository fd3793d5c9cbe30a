//===- Bundle.h - The payload of a compiled training executable -*- C++ -*-===//
//
// `gtc compile` writes a training executable as the prebuilt runner
// (tools/gtc-runner, the runtime without MLIR) followed by a payload: the
// plans of the training step and of evaluation, and the generated CUDA
// kernels compiled ahead of time (cubins per architecture and PTX). The
// payload ends in a trailer with its size and checksum, so a truncated or
// modified executable is detected before anything runs.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_BUNDLE_H
#define GTC_RUNTIME_BUNDLE_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gtc::rt {

struct Bundle {
  std::string step;                     ///< serialize() of the step plan
  std::map<int64_t, std::string> evals; ///< eval plans by batch size
  /// Kernel binaries by kernelKey(source, arch): cubins ("sm_90") and PTX
  /// ("ptx", for newer GPUs).
  std::map<std::string, std::string> kernels;
  std::vector<std::string> archs; ///< what `kernels` was built for
  /// Data parallelism: the processes the executable trains with (the step
  /// plan is one process's share of the batch), and whether they shard the
  /// optimizer state (ZeRO-1).
  int processes = 1;
  bool shardOptimizer = false;
  /// devices = cpu: one CPU process (--device auto takes the CPU).
  bool cpu = false;
};

/// The key of a kernel binary: a hash of its CUDA source and the arch.
std::string kernelKey(const std::string &source, const std::string &arch);

/// The payload (records, then the trailer) to append to the runner.
std::string packBundle(const Bundle &bundle);

/// `records` (encoded records) followed by the trailer that seals them: their
/// length, checksum and the magic. packBundle's last step; the payload
/// fuzzer seals arbitrary records with it.
std::string sealPayload(const std::string &records);

/// Reads the payload at the end of the file `path` (a compiled executable);
/// on failure returns false with a message (no payload, truncated, checksum
/// mismatch) that says to rebuild the executable.
bool readBundle(const std::string &path, Bundle &bundle, std::string &error);

/// Kernel binaries compileCuda() takes before compiling (null: none).
void setPrebuiltKernels(const std::map<std::string, std::string> *kernels);
const std::map<std::string, std::string> *prebuiltKernels();

} // namespace gtc::rt

#endif // GTC_RUNTIME_BUNDLE_H
