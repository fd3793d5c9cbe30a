//===- PlanFuzzer.cpp - Fuzzes the plan text parser -----------------------===//
//
// Input: a plan's text (what gtc --emit=plan prints and compiled executables
// carry). deserialize must accept it or say which line is wrong; a plan it
// accepts must serialize again and read back the same.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Plan.h"
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  gtc::rt::Plan plan;
  std::string error;
  if (!gtc::rt::deserialize(text, plan, error)) {
    if (error.empty())
      __builtin_trap(); // a failure must say why
    return 0;
  }
  std::string again = gtc::rt::serialize(plan);
  gtc::rt::Plan reread;
  if (!gtc::rt::deserialize(again, reread, error) ||
      gtc::rt::serialize(reread) != again)
    __builtin_trap(); // serialize's output must read back unchanged
  return 0;
}
