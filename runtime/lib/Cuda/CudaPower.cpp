//===- CudaPower.cpp - The GPU's energy and clocks from NVML --------------===//
//
// The few NVML entry points gtc reads, declared here (the CUDA toolkit ships
// no nvml.h; their C ABI is stable): an opaque device handle, return 0 for
// success.
//===----------------------------------------------------------------------===//

#include "CudaPower.h"
#include "CudaLibs.h"
#include <dlfcn.h>
#include <mutex>
#include <type_traits>

using namespace gtc::rt;
using namespace gtc::rt::cu;

namespace {

struct Nvml {
  using Device = void *;
  int (*init)() = nullptr;
  int (*byPciBusId)(const char *, Device *) = nullptr;
  int (*energy)(Device, unsigned long long *) = nullptr; // mJ
  int (*clock)(Device, int, unsigned *) = nullptr;       // MHz
  int (*reasons)(Device, unsigned long long *) = nullptr;
  int (*limit)(Device, unsigned *) = nullptr; // mW
  bool ok = false;
};

constexpr int kClockSm = 1; // NVML_CLOCK_SM

const Nvml &nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
      return;
    auto get = [&](auto &f, const char *name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(
          dlsym(h, name));
      return f != nullptr;
    };
    bool found = get(n.init, "nvmlInit_v2") &&
                 get(n.byPciBusId, "nvmlDeviceGetHandleByPciBusId_v2") &&
                 get(n.energy, "nvmlDeviceGetTotalEnergyConsumption") &&
                 get(n.clock, "nvmlDeviceGetClockInfo") &&
                 get(n.limit, "nvmlDeviceGetEnforcedPowerLimit");
    // The reasons' name before NVML 12.4 ("throttle").
    if (!get(n.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
      get(n.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n.ok = found && n.reasons && n.init() == 0;
  });
  return n;
}

} // namespace

PowerMeter::PowerMeter() {
  const Nvml &n = nvml();
  Libs &l = libs();
  char bus[32] = {};
  if (!n.ok || !l.context ||
      l.cuDeviceGetPCIBusId(bus, sizeof bus, l.device) != CUDA_SUCCESS ||
      n.byPciBusId(bus, &device) != 0)
    device = nullptr;
}

PowerMeter::~PowerMeter() { stopPolling(); }

void PowerMeter::begin() {
  stopPolling();
  reading = PowerReading();
  window = EnergyWindow();
  clockSum = 0;
  start = std::chrono::steady_clock::now();
  if (!device)
    return;
  unsigned milliWatts = 0;
  if (nvml().limit(device, &milliWatts) == 0)
    reading.powerLimitW = milliWatts / 1000.0;
  poll(); // the value before the steps
  stop = false;
  poller = std::thread([this] {
    for (int n = 1; !stop && device; ++n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      poll();
      if (n % 5 == 0)
        sample();
    }
  });
}

void PowerMeter::stopPolling() {
  stop = true;
  if (poller.joinable())
    poller.join();
}

void PowerMeter::poll() {
  unsigned long long milliJoules = 0;
  if (!device)
    return;
  auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  double began = since();
  if (nvml().energy(device, &milliJoules) != 0) {
    device = nullptr;
    return;
  }
  window.read(began, since(), milliJoules);
}

void PowerMeter::sample() {
  if (!device)
    return;
  unsigned mhz = 0;
  unsigned long long why = 0;
  if (nvml().clock(device, kClockSm, &mhz) != 0 ||
      nvml().reasons(device, &why) != 0)
    return;
  ++reading.samples;
  clockSum += mhz;
  reading.powerCapped += clockPowerCapped(why);
  reading.thermal += clockThermalLimited(why);
}

PowerReading PowerMeter::end(int steps, double msPerStep) {
  stopPolling();
  if (!device || steps <= 0 || !window.valid())
    return PowerReading();
  reading.valid = true;
  reading.watts = window.watts();
  reading.windowSeconds = window.seconds();
  reading.joulesPerStep = reading.watts * msPerStep / 1000;
  reading.smMHz = reading.samples ? clockSum / reading.samples : 0;
  return reading;
}
