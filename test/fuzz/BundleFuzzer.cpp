//===- BundleFuzzer.cpp - Fuzzes a compiled executable's payload reader ---===//
//
// Input: u8 mode, then bytes. Mode even: the bytes are the payload's records,
// sealed here with a valid trailer (so the fuzzer gets past the checksum to
// the record parser); odd: the bytes are the whole file. A payload that
// reads is then parsed as the runner does: the step plan and every eval plan
// (checkPlanText).
//===----------------------------------------------------------------------===//

#include "FuzzHelpers.h"
#include "gtc/Runtime/Bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  std::string bytes(reinterpret_cast<const char *>(data + 1), size - 1);
  if (data[0] % 2 == 0)
    bytes = gtc::rt::sealPayload(bytes);
  std::string path =
      gtc::fuzz::writeScratch("executable", bytes.data(), bytes.size());
  gtc::rt::Bundle bundle;
  std::string error;
  if (!gtc::rt::readBundle(path, bundle, error)) {
    if (error.empty())
      __builtin_trap(); // a failure must say why
    return 0;
  }
  gtc::fuzz::checkPlanText(bundle.step);
  for (const auto &[batch, text] : bundle.evals)
    gtc::fuzz::checkPlanText(text);
  return 0;
}
