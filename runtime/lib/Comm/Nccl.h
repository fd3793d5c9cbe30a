//===- Nccl.h - Collectives on GPU memory -----------------------*- C++ -*-===//
//
// NCCL, loaded at run time (dlopen, as libcuda, NVRTC and cuBLASLt are), so
// gtc builds without NCCL's header and starts on machines without NCCL. The
// CUDA executor enqueues a data-parallel step's collectives on its streams
// through DeviceComm; connectGpu (Comm.h) makes one. Private to the
// runtime.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_NCCL_H
#define GTC_RUNTIME_LIB_NCCL_H

#include <cstddef>
#include <string>

namespace gtc::rt {

/// Collectives among the GPUs of a data-parallel run, each enqueued on a
/// CUDA stream (a CUstream passed as void *), captured into CUDA graphs like
/// any launch. Throws RuntimeError when NCCL fails.
class DeviceComm {
public:
  enum class Type { F32, BF16, F16 };
  virtual ~DeviceComm();
  virtual int deviceRank() const = 0;
  virtual int deviceRanks() const = 0;
  /// Calls between groupStart() and groupEnd() become one launch.
  virtual void groupStart() = 0;
  virtual void groupEnd() = 0;
  /// out = the mean over ranks of in (out == in: in place).
  virtual void allReduceMean(const void *in, void *out, size_t n, Type type,
                             void *stream) = 0;
  /// out = the sum over ranks of in.
  virtual void allReduceSum(const void *in, void *out, size_t n, Type type,
                            void *stream) = 0;
  /// On rank `root`, out = the mean over ranks of in (out unused on the
  /// others): a share of a reduce-scatter of uneven shares, in a group.
  virtual void reduceMean(const void *in, void *out, size_t n, Type type,
                          int root, void *stream) = 0;
  /// out (ranks * perRank elements) = every rank's in, in rank order (in
  /// may be this rank's slice of out).
  virtual void allGather(const void *in, void *out, size_t perRank, Type type,
                         void *stream) = 0;
};

/// Loads NCCL once: GTC_NCCL_LIBRARY if set, else libnccl.so.2 from the
/// library path, CUDA's lib64, and the nvidia-nccl wheels of Python's
/// site-packages (PyTorch's). Checks ncclGetVersion (2.10 or newer). False
/// with a message naming every place it looked; `version` is "2.28.3".
bool loadNccl(std::string &version, std::string &error);

} // namespace gtc::rt

#endif // GTC_RUNTIME_LIB_NCCL_H
