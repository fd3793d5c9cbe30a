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

/// Reads the energy counter of the GPU gtc opened (matched by PCI bus id)
/// at begin() and end(), and its SM clock and clock-limiting reasons at each
/// sample(). Without NVML, or when it cannot read the counter, the reading
/// is not valid and nothing is printed.
class PowerMeter {
public:
  PowerMeter();
  void begin();
  void sample();
  PowerReading end(int steps);

private:
  void *device = nullptr; ///< nvmlDevice_t
  unsigned long long startMilliJoules = 0;
  std::chrono::steady_clock::time_point start;
  PowerReading reading;
  double clockSum = 0;
};

} // namespace gtc::rt::cu

#endif // GTC_RUNTIME_LIB_CUDAPOWER_H
