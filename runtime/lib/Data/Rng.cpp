//===- Rng.cpp - Deterministic random numbers for gtc's runtime -----------===//
//
// SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
// generators", 2014) with transforms of our own: next(), uniform() and below()
// use only integer arithmetic and exact conversions, and normal() the
// transform of ScalarOps.h (single IEEE operations, no library log or cos),
// so they are the same everywhere, the GPU's initialization included.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Rng.h"
#include "gtc/Runtime/ScalarOps.h"

#include <cmath>

namespace gtc::rt {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kFnvOffset = 0xCBF29CE484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001B3ull;

/// The SplitMix64 output function.
uint64_t finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const unsigned char *bytes, size_t n) {
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < n; ++i) {
    h ^= bytes[i];
    h *= kFnvPrime;
  }
  return h;
}

/// One SplitMix64 step from state `seed ^ hash`: the golden-ratio increment
/// (so that a zero input does not map to zero) then the finalizer.
uint64_t combine(uint64_t seed, uint64_t hash) {
  return finalize((seed ^ hash) + kGolden);
}

} // namespace

uint64_t mixSeed(uint64_t seed, std::string_view tag) {
  return combine(
      seed,
      fnv1a(reinterpret_cast<const unsigned char *>(tag.data()), tag.size()));
}

uint64_t mixSeed(uint64_t seed, uint64_t value) {
  // Hash the value's bytes in little-endian order, independent of the host.
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  return combine(seed, fnv1a(bytes, 8));
}

uint64_t Rng::next() {
  state += kGolden;
  return finalize(state);
}

void Rng::skip(uint64_t n) { state += n * kGolden; }

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  if (n <= 1)
    return 0; // n == 1 has one answer; n == 0 violates the precondition.
  // 2^64 mod n: the values [0, threshold) are rejected so that the accepted
  // range [threshold, 2^64) holds a whole number of copies of [0, n).
  uint64_t threshold = (0 - n) % n;
  while (true) {
    uint64_t r = next();
    if (r >= threshold)
      return r % n;
  }
}

double Rng::normal() {
  uint64_t b1 = next(); // 1 - uniform in (0, 1]: the logarithm stays finite
  uint64_t b2 = next();
  return gtc_scalar::rng_normal(b1, b2);
}

uint64_t fnv1a(std::string_view bytes) {
  return fnv1a(reinterpret_cast<const unsigned char *>(bytes.data()),
               bytes.size());
}

} // namespace gtc::rt
