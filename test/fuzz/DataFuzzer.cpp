//===- DataFuzzer.cpp - Fuzzes the IDX, token and text readers ------------===//
//
// One source compiled three times (GTC_FUZZ_IDX, GTC_FUZZ_TOKENS,
// GTC_FUZZ_TEXT). Input layout:
//   idx     u32 n, then n bytes of the images file, the rest the labels file
//   tokens  u8 window length - 1, then the token file
//   text    u8 window length - 1, then the text file
// A reader must open the file or say why; an opened dataset must read its
// first and last examples, with and without a generator (sampled windows).
//===----------------------------------------------------------------------===//

#include "FuzzHelpers.h"
#include "gtc/Runtime/Data.h"
#include "gtc/Runtime/Rng.h"
#include <algorithm>
#include <memory>
#include <vector>

using namespace gtc::rt;

namespace {

/// Bytes of one example of `spec` (0 when implausibly large to allocate).
size_t exampleBytes(const ExampleSpec &spec) {
  int64_t n = spec.elements();
  if (n < 0 || n > (int64_t(1) << 24))
    return 0;
  return static_cast<size_t>(n) * dtypeBytes(spec.dtype);
}

void readSome(const Dataset &d) {
  size_t in = exampleBytes(d.inputSpec()), out = exampleBytes(d.labelSpec());
  if (d.size() <= 0 || !in || !out)
    return;
  std::vector<char> input(in), label(out);
  Rng random(1234);
  for (int64_t i : {int64_t(0), d.size() - 1}) {
    d.read(i, nullptr, input.data(), label.data());
    d.read(i, &random, input.data(), label.data());
  }
  (void)d.describe();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::unique_ptr<Dataset> d;
#if defined(GTC_FUZZ_IDX)
  if (size < 4)
    return 0;
  size_t n = std::min<size_t>(gtc::fuzz::readU32(data), size - 4);
  std::string images = gtc::fuzz::writeScratch("images.idx", data + 4, n);
  std::string labels =
      gtc::fuzz::writeScratch("labels.idx", data + 4 + n, size - 4 - n);
  d = openIdx(images, labels, 1.0f / 255, error);
#else
  if (size < 1)
    return 0;
  int64_t seq = 1 + data[0];
  std::string path = gtc::fuzz::writeScratch("data.bin", data + 1, size - 1);
#if defined(GTC_FUZZ_TOKENS)
  d = openTokens(path, seq, error);
#else
  d = openText(path, seq, error);
#endif
#endif
  if (!d) {
    if (error.empty())
      __builtin_trap(); // a failure must say why
    return 0;
  }
  readSome(*d);
  return 0;
}
