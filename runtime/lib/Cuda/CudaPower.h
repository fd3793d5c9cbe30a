//===- CudaPower.h - The GPU's energy and clocks from NVML ------*- C++ -*-===//
//
// NVML (libnvidia-ml.so.1, part of the NVIDIA driver) loaded at run time,
// for --bench's energy a step: on a card at its power limit a faster kernel
// that spends the same energy does not shorten the step (test/bench/NOTES.md,
// forty-ninth session), so the step's joules are the figure to lower.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_CUDAPOWER_H
#define GTC_RUNTIME_LIB_CUDAPOWER_H

#include "gtc/Runtime/Profile.h"
#include <atomic>
#include <chrono>
#include <thread>

namespace gtc::rt::cu {

/// Polls the energy counter of the GPU gtc opened (matched by PCI bus id)
/// every millisecond from begin() to end() into an EnergyWindow, and samples
/// its SM clock and clock-limiting reasons every fifth poll. The polls run
/// on a thread of their own: the caller's thread blocks in launches once
/// the stream's queue is full, for most of a short window. Without NVML,
/// or when the counter did not move twice meanwhile, the reading is not
/// valid and nothing is printed.
class PowerMeter {
public:
  PowerMeter();
  ~PowerMeter();
  PowerMeter(const PowerMeter &) = delete;
  PowerMeter &operator=(const PowerMeter &) = delete;
  void begin();
  /// Stops the polls; the reading over `steps` steps that took `msPerStep`
  /// each.
  PowerReading end(int steps, double msPerStep);

private:
  void poll();
  void sample();
  void stopPolling();

  void *device = nullptr; ///< nvmlDevice_t
  std::chrono::steady_clock::time_point start;
  EnergyWindow window;
  PowerReading reading;
  double clockSum = 0;
  std::thread poller;
  std::atomic<bool> stop{false};
};

} // namespace gtc::rt::cu

#endif // GTC_RUNTIME_LIB_CUDAPOWER_H
