//===- PlanFuzzer.cpp - Fuzzes the plan text parser -----------------------===//
//
// Input: a plan's text (what gtc --emit=plan prints and compiled executables
// carry), checked by checkPlanText.
//===----------------------------------------------------------------------===//

#include "FuzzHelpers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gtc::fuzz::checkPlanText(
      std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}
