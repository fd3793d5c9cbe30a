//===- Env.h - Switches read from the environment ---------------*- C++ -*-===//
//
// The runtime's debugging and comparison switches (GTC_NO_GRAPH,
// GTC_ONE_STREAM, GTC_AUTOTUNE, ...) are environment variables; each is on
// when set to anything but "" or "0", so that GTC_NO_GRAPH=0 means off.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_ENV_H
#define GTC_RUNTIME_ENV_H

#include <cstdlib>
#include <cstring>

namespace gtc::rt {

/// Whether the switch `name` is on: set, and neither empty nor "0".
inline bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace gtc::rt

#endif // GTC_RUNTIME_ENV_H
