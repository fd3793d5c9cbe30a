//===- Startup.cpp - Where the time before the first step goes ------------===//

#include "gtc/Runtime/Startup.h"
#include <cstdio>

using namespace gtc::rt;

Startup &Startup::get() {
  static Startup clock;
  return clock;
}

void Startup::add(const std::string &name, double seconds,
                  const std::string &detail) {
  if (closed)
    return;
  for (Phase &p : phases)
    if (p.name == name) {
      p.seconds += seconds;
      if (!detail.empty())
        p.detail = detail;
      return;
    }
  phases.push_back({name, detail, seconds});
}

double Startup::sinceStart() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

std::string Startup::report() const {
  auto secs = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
    return std::string(buf);
  };
  double total = sinceStart(), known = 0;
  std::string s = secs(total) + " from start:";
  for (const Phase &p : phases) {
    s += (&p == &phases.front() ? " " : ", ") + p.name + " " + secs(p.seconds);
    if (!p.detail.empty())
      s += " (" + p.detail + ")";
    known += p.seconds;
  }
  if (total - known >= 0.005)
    s += ", other " + secs(total - known);
  return s;
}
