//===- Startup.h - Where the time before the first step goes ----*- C++ -*-===//
//
// `gtc run` prints, after the first training step, how long it took from the
// start of the process and where that time went: parsing and passes,
// planning, kernel generation, NVRTC, module loading, cuBLASLt heuristics,
// device memory, data, parameters and the step itself. Each phase adds its
// wall time here (from the main thread; NVRTC's parallel work is one
// phase).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_STARTUP_H
#define GTC_RUNTIME_STARTUP_H

#include <chrono>
#include <string>
#include <vector>

namespace gtc::rt {

class Startup {
public:
  /// The process's clock; starts at the first call (main calls it first).
  static Startup &get();

  /// Adds `seconds` to phase `name` (phases keep their first-seen order);
  /// `detail` (e.g. "20 kernels on 16 threads") replaces the earlier one.
  void add(const std::string &name, double seconds,
           const std::string &detail = "");
  double sinceStart() const;
  /// "2.41 s from start: parse and passes 0.05 s, ..., the rest 0.01 s".
  std::string report() const;
  /// Stops recording: what runs after the first step (evaluation's plan
  /// and executor) is not part of it.
  void close() { closed = true; }
  bool isClosed() const { return closed; }

private:
  struct Phase {
    std::string name, detail;
    double seconds = 0;
  };
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  std::vector<Phase> phases;
  bool closed = false;
};

/// Times the enclosing scope into a phase of Startup::get().
class StartupPhase {
public:
  explicit StartupPhase(std::string name) : name(std::move(name)) {}
  ~StartupPhase() {
    Startup::get().add(name, std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - t0)
                                 .count(),
                       detail);
  }
  std::string detail;

private:
  std::string name;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_STARTUP_H
