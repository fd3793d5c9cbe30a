//===- FuzzHelpers.h - Shared pieces of the libFuzzer targets ---*- C++ -*-===//
//
// The readers under test open files by path, so a target writes its input to
// a file in a directory of its own (on /dev/shm when there is one) and hands
// the reader that path.
//===----------------------------------------------------------------------===//

#ifndef GTC_TEST_FUZZ_FUZZHELPERS_H
#define GTC_TEST_FUZZ_FUZZHELPERS_H

#include "gtc/Runtime/Plan.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace gtc::fuzz {

/// `bytes` written to `name` in this process's scratch directory; returns
/// the path.
inline std::string writeScratch(const std::string &name, const void *bytes,
                                size_t size) {
  static const std::string dir = [] {
    struct stat st;
    std::string base = ::stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
    std::string d = base + "/gtc-fuzz-" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  std::string path = dir + "/" + name;
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort(); // the scratch directory itself is broken
  if (size)
    std::fwrite(bytes, 1, size, f);
  std::fclose(f);
  return path;
}

/// Reads a little-endian u32 at `data` (4 bytes must be there).
inline uint32_t readU32(const uint8_t *data) {
  return uint32_t(data[0]) | uint32_t(data[1]) << 8 | uint32_t(data[2]) << 16 |
         uint32_t(data[3]) << 24;
}

/// A plan's text as the runner reads it: deserialize must accept it or say
/// which line is wrong, and a plan it accepts must serialize and read back
/// unchanged. Traps otherwise.
inline void checkPlanText(const std::string &text) {
  gtc::rt::Plan plan;
  std::string error;
  if (!gtc::rt::deserialize(text, plan, error)) {
    if (error.empty())
      __builtin_trap(); // a failure must say why
    return;
  }
  std::string again = gtc::rt::serialize(plan);
  gtc::rt::Plan reread;
  if (!gtc::rt::deserialize(again, reread, error) ||
      gtc::rt::serialize(reread) != again)
    __builtin_trap(); // serialize's output must read back unchanged
}

} // namespace gtc::fuzz

#endif // GTC_TEST_FUZZ_FUZZHELPERS_H
