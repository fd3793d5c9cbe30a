//===- Rng.h - Deterministic random numbers for gtc's runtime ---*- C++ -*-===//
//
// A small counter-based generator (SplitMix64) with its own uniform and normal
// transforms, so that a seed gives the same numbers on every machine, compiler
// and standard library (std::normal_distribution does not promise that).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_RNG_H
#define GTC_RUNTIME_RNG_H

#include <cstdint>
#include <string_view>

namespace gtc::rt {

/// Mixes a seed with a tag (a parameter name, "shuffle", ...) into a new seed.
uint64_t mixSeed(uint64_t seed, std::string_view tag);
/// Mixes a seed with a number (an epoch, an index).
uint64_t mixSeed(uint64_t seed, uint64_t value);
/// The 64-bit FNV-1a hash of `bytes` (cache keys, checksums).
uint64_t fnv1a(std::string_view bytes);

/// SplitMix64 with uniform and normal draws. Copyable; the whole state is
/// `state`, so it can be saved in a checkpoint and restored.
struct Rng {
  uint64_t state;

  explicit Rng(uint64_t seed) : state(seed) {}
  /// The next 64 random bits.
  uint64_t next();
  /// Jumps over `n` calls of next() (the state is a counter), so that work
  /// split over threads draws what one thread would.
  void skip(uint64_t n);
  /// A double in [0, 1) with 53 random bits.
  double uniform();
  /// An integer in [0, n), n > 0, without modulo bias.
  uint64_t below(uint64_t n);
  /// A standard normal draw (Box-Muller; uses two uniforms per draw).
  double normal();
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_RNG_H
