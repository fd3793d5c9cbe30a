//===- Profile.h - Kernel profiles of training steps ------------*- C++ -*-===//
//
// `gtc run --profile FILE`: every kernel, GEMM, memset and copy of a few
// steady-state steps, timed on the device (CUDA events around each launch)
// or with host timers on the CPU, written as a Chrome trace (chrome://tracing,
// Perfetto) and summarized like torch.profiler's key_averages(): per kernel
// name the calls, total and mean time, share of the step, and the achieved
// TFLOP/s or GB/s against the device's peak. Each record carries the phase
// (forward, backward, optimizer, copy) and the layer it belongs to, which the
// GPU executor also opens as NVTX ranges so Nsight Systems shows the same
// names.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_PROFILE_H
#define GTC_RUNTIME_PROFILE_H

#include "gtc/Runtime/Plan.h"
#include <iosfwd>
#include <string>
#include <vector>

namespace gtc::rt {

/// Where a plan kernel belongs: its phase and its layer.
struct KernelContext {
  std::string phase; ///< "forward" or "backward"
  /// The layer: the parameter scope it touches or inherits from the kernel
  /// before it ("blocks.3.attn.c_attn"), or "" before the first parameter.
  std::string layer;
};

/// The phase and layer of every kernel of `plan`. Kernels up to the one that
/// computes the loss are the forward; a kernel's layer is the scope of the
/// first parameter (or parameter gradient) it reads or writes, else the
/// previous kernel's.
std::vector<KernelContext> kernelContexts(const Plan &plan);

/// The top level of a layer name for grouping: "blocks.3" for
/// "blocks.3.attn.c_attn", "fc1" for "fc1".
std::string layerGroup(const std::string &layer);

/// One timed operation.
struct ProfileRecord {
  std::string name;  ///< What ran: a kernel's name, "gemm MxNxK", ...
  std::string kind;  ///< kernel, gemm, memset, copy, optimizer
  std::string op;    ///< The plan op ("linear"), "" for runtime work.
  std::string phase; ///< forward, backward, optimizer, copy
  std::string layer;
  int step = 0;         ///< Which profiled step (0-based).
  int planKernel = -1;  ///< Index in Plan::kernels, or -1.
  double startUs = 0;   ///< From the start of the first profiled step.
  double durationUs = 0;
  double flops = 0; ///< Floating-point operations (GEMMs, attention).
  double bytes = 0; ///< Bytes read and written, at least once each.
  bool tensorCore = false; ///< A 16-bit (or tf32) GEMM.
};

/// A profile of `steps` steady-state steps.
struct Profile {
  std::string device; ///< "NVIDIA H200" or "CPU (N threads)"
  int steps = 0;
  /// Median time of an unprofiled step (CUDA graph replay on a GPU), in
  /// milliseconds: the step the kernel shares are measured against.
  double stepMs = 0;
  /// Peaks for the achieved-rate columns (0: unknown): dense 16-bit tensor
  /// core and plain fp32 FLOP/s, and memory bandwidth in bytes/s.
  double peakTensorFlops = 0, peakFp32Flops = 0, peakBytesPerSecond = 0;
  std::vector<ProfileRecord> records;
};

/// Writes `profile` as a Chrome trace (JSON object format): one process,
/// a thread per stream, each record an "X" event with its op, phase,
/// layer, FLOPs and bytes as arguments, and one event per phase and layer
/// around the kernels they span.
void writeChromeTrace(const Profile &profile, std::ostream &os);

/// Prints the table of kernels grouped by name, largest total time first,
/// at most `top` rows (0: all), then the time per phase and the kernel
/// count per step.
void printProfileTable(const Profile &profile, std::ostream &os,
                       size_t top = 25);

/// The GPU's mean power while it ran timed steps, from NVML's total-energy
/// counter polled by the host. The counter moves in steps (about every 100
/// ms on an H100, test/gpu/nvml_interval.py), so two reads at arbitrary
/// moments are off by up to one interval's energy at each end: a fifth of
/// a 20-step window of GPT-2 124M. The window is therefore the span from
/// the first change seen after the steps started to the last one seen
/// before they ended. A change happened after the previous read began and
/// before this one ended; it is dated at the middle of that gap, and only
/// marks an end when the gap is at most kMaxGapSeconds. After a longer gap
/// the counter may have moved anywhere in it (a host blocked in a launch
/// saw a change 0.4 s late and reported 1313 W on a 700 W card, fifty-
/// fourth session). One NVML read takes 3.3 ms (median; up to 33 ms) on the
/// H100s measured, so polls 1 ms apart leave gaps of 7-10 ms.
class EnergyWindow {
public:
  static constexpr double kMaxGapSeconds = 0.02;
  /// One read of the counter (mJ) that began and ended at the host's times
  /// in seconds. The first read is the value before the steps; later reads
  /// count when it moved.
  void read(double began, double ended, unsigned long long milliJoules);
  /// Whether the counter moved at least twice, so a span was measured.
  bool valid() const {
    return changes >= 2 && lastSeconds > firstSeconds &&
           lastMilliJoules > firstMilliJoules;
  }
  double seconds() const { return lastSeconds - firstSeconds; }
  double watts() const;

private:
  int polls = 0, changes = 0;
  unsigned long long previous = 0, firstMilliJoules = 0, lastMilliJoules = 0;
  double previousBegan = 0, firstSeconds = 0, lastSeconds = 0;
};

/// The GPU's energy and clocks over timed steps, read from NVML
/// (libnvidia-ml.so.1, loaded at run time; `valid` false without it, or
/// when the steps ran too briefly for the energy counter to move twice):
/// the mean power over an EnergyWindow times the step's time, and the SM
/// clock and its limiting reasons, sampled by the host while the steps ran.
struct PowerReading {
  bool valid = false;
  double joulesPerStep = 0, watts = 0; ///< energy a step, mean power
  double windowSeconds = 0; ///< the span the power was measured over
  double smMHz = 0;                    ///< mean SM clock over the samples
  int samples = 0;
  int powerCapped = 0;   ///< samples with the software power cap limiting
  int thermal = 0; ///< samples slowed by a thermal or hardware limit
  double powerLimitW = 0; ///< the enforced power limit, 0 if unknown
};

/// The reasons NVML reports for a clock below its maximum
/// (nvmlClocksEventReasons bits): the software power cap, and the thermal
/// and hardware slowdowns.
bool clockPowerCapped(unsigned long long reasons);
bool clockThermalLimited(unsigned long long reasons);

/// `reading` for the --bench line ("E J/step at P W over S s (limit L W), SM
/// clock F MHz, power-limited in N of S samples", and the samples slowed by
/// a thermal or hardware limit if any), or "" if not valid.
std::string describePower(const PowerReading &reading);

/// The bytes buffer `id` holds (its elements at their stored size).
double bufferBytes(const Plan &plan, int id);

/// The bytes a plan kernel reads and writes once each (the size of all its
/// operands), and its floating-point operations where counted (GEMMs,
/// attention, also inside fusion regions).
double kernelBytes(const Plan &plan, const Kernel &kernel);
double kernelFlops(const Plan &plan, const Kernel &kernel);

} // namespace gtc::rt

#endif // GTC_RUNTIME_PROFILE_H
