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
#include <chrono>

namespace gtc::rt::cu {

/// Polls the energy counter of the GPU gtc opened (matched by PCI bus id)
/// from begin() to end() into an EnergyWindow, and samples its SM clock and
/// clock-limiting reasons. Without NVML, or when the counter did not move
/// twice meanwhile, the reading is not valid and nothing is printed.
class PowerMeter {
public:
  PowerMeter();
  void begin();
  /// Reads the energy counter (poll often: the window's ends are as exact
  /// as the polls' spacing).
  void poll();
  /// Reads the SM clock and its limiting reasons.
  void sample();
  /// The reading over `steps` steps that took `msPerStep` each.
  PowerReading end(int steps, double msPerStep);

private:
  void *device = nullptr; ///< nvmlDevice_t
  std::chrono::steady_clock::time_point start;
  EnergyWindow window;
  PowerReading reading;
  double clockSum = 0;
};

} // namespace gtc::rt::cu

#endif // GTC_RUNTIME_LIB_CUDAPOWER_H
