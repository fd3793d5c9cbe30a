//===- Sample.h - Text generation from a trained model ----------*- C++ -*-===//
//
// `gtc sample`: autoregressive generation with the plans gt-decode makes. A
// window plan runs the prompts (all T positions of each row at once); with
// a KV cache a one-position plan then runs each new token against the
// caches the window filled, its step replayed as a CUDA graph on a GPU.
// Without one the window plan recomputes each whole sequence for every
// token (the reference the cache must equal). The next token is drawn on
// the host from the logits.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_SAMPLE_H
#define GTC_RUNTIME_SAMPLE_H

#include "gtc/Runtime/Plan.h"
#include "gtc/Runtime/Rng.h"
#include "gtc/Runtime/Trainer.h"
#include <cstdint>
#include <iosfwd>
#include <vector>

namespace gtc::rt {

/// How the next token is drawn.
struct SamplingOptions {
  /// 0: greedy (the first largest logit); else the logits are divided by it.
  double temperature = 1.0;
  /// Keep the k most likely tokens (0: all).
  int64_t topK = 0;
  /// Then keep the fewest most likely tokens whose probabilities sum to at
  /// least p (nucleus sampling; 1: all).
  double topP = 1.0;
};

/// Draws a token from `v` logits: greedy at temperature 0, else from
/// softmax(logits / temperature) truncated by top-k and then top-p and
/// renormalized, with one uniform draw of `rng` (ties keep the lower id
/// first, so a draw depends only on the logits and the generator).
int32_t sampleToken(const float *logits, int64_t v, const SamplingOptions &o,
                    Rng &rng);

struct GenerateOptions {
  SamplingOptions sampling;
  /// One prompt a row of the plans' batch (each at least one token).
  std::vector<std::vector<int32_t>> prompts;
  int64_t tokens = 64; ///< new tokens a row
  uint64_t seed = 0;   ///< the draws' generator (and an untrained model's)
  /// The parameters, laid out as `paramsPlan`'s (a training step's), or
  /// null: from run.initPath or the seed.
  const Plan *paramsPlan = nullptr;
  const std::vector<float> *params = nullptr;
  /// Print the timing line.
  bool report = true;
};

/// Why generating with `window` and `step` does not fit the host's memory
/// on a CPU run (empty when it does, or on a GPU): checked by generate()
/// before it allocates, and by gtc sample before it builds a prompt a row.
std::string generationMemoryShortfall(const Plan &window, const Plan *step,
                                      const RunOptions &run);

/// Generates `options.tokens` tokens after each prompt with `window` (a
/// "decode" plan of the model's T positions) and, for a KV cache, `step`
/// (its one-position plan; null: recompute). The parameters are
/// options.params, or come from run.initPath, or else are drawn from the
/// seed as training would draw them. Fills `generated` with each row's new
/// tokens; prints notes and the timing on `log`. Returns 0, or 1 after a
/// message on `log`.
int generate(const Plan &window, const Plan *step,
             const GenerateOptions &options, const RunOptions &run,
             std::vector<std::vector<int32_t>> &generated, std::ostream &log);

} // namespace gtc::rt

#endif // GTC_RUNTIME_SAMPLE_H
