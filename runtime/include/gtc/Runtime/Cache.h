//===- Cache.h - gtc's cache: kernels, GPU memory measured -------*- C++ -*-===//
//
// gtc keeps what it learns on a machine in one directory: NVRTC's compiled
// kernels (Cuda.h's compileCuda) and the GPU memory runs measured outside
// their plans.
//
// A plan predicts the memory gtc allocates; what the CUDA context, NCCL's
// buffers, cuBLASLt, loaded kernels and captured graphs take is not in it
// and depends on the GPU and on the number of processes. A GPU run measures
// it after its first step (cuMemGetInfo) and records it in gtc's cache
// directory, per GPU name and number of processes, so that --explain and
// --dry-run on that machine count it in the memory a GPU will have in use.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_CACHE_H
#define GTC_RUNTIME_CACHE_H

#include <cstdint>
#include <optional>
#include <string>

namespace gtc::rt {

/// gtc's cache directory: $GTC_CACHE_DIR, else $XDG_CACHE_HOME/gtc, else
/// ~/.cache/gtc (the kernel cache and the memory records).
std::string cacheDirectory();

/// A GPU's memory in use that no plan counts, in bytes.
struct OutsideMemory {
  int64_t context = 0; ///< in use once the context was open, before gtc's
  int64_t rest = 0;    ///< NCCL's buffers, cuBLASLt, kernels, graphs
};

/// Records `m` for runs of `processes` processes on GPUs named `gpu`,
/// replacing an earlier record of the same two. Best effort: a cache that
/// cannot be written loses the record, nothing else.
void recordOutsideMemory(const std::string &gpu, int processes,
                         const OutsideMemory &m);

/// The last record for `gpu` and `processes`, if any.
std::optional<OutsideMemory> recordedOutsideMemory(const std::string &gpu,
                                                   int processes);

} // namespace gtc::rt

#endif // GTC_RUNTIME_CACHE_H
