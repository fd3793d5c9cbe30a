//===- Sample.cpp - Text generation from a trained model ------------------===//

#include "gtc/Runtime/Sample.h"
#include "Backends.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Messages.h"
#include "gtc/Runtime/Numerics.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <ostream>

using namespace gtc::rt;

std::string gtc::rt::generationMemoryShortfall(const Plan &window,
                                               const Plan *step,
                                               const RunOptions &run) {
  // On the CPU both plans are held at once: checked together.
  if (run.device == "cuda")
    return "";
  return hostMemoryShortfall(window, 1, /*sampling=*/true,
                             step ? step->memory().peak() : 0);
}

int32_t gtc::rt::sampleToken(const float *logits, int64_t v,
                             const SamplingOptions &o, Rng &rng) {
  if (o.temperature <= 0)
    return static_cast<int32_t>(std::max_element(logits, logits + v) - logits);
  // The candidates by falling logit, ties by rising id.
  std::vector<int32_t> ids(static_cast<size_t>(v));
  std::iota(ids.begin(), ids.end(), 0);
  int64_t keep = o.topK > 0 ? std::min(o.topK, v) : v;
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (keep < v) {
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
    ids.resize(static_cast<size_t>(keep));
  } else {
    std::sort(ids.begin(), ids.end(), before);
  }
  std::vector<double> p(ids.size());
  const double top = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    sum += (p[i] = std::exp((double(logits[ids[i]]) - top) / o.temperature));
  // Top-p: the shortest prefix whose mass reaches p (at least one token).
  size_t n = ids.size();
  if (o.topP < 1) {
    double mass = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      mass += p[i] / sum;
      if (mass >= o.topP) {
        n = i + 1;
        break;
      }
    }
  }
  double total = std::accumulate(p.begin(), p.begin() + n, 0.0);
  double u = rng.uniform() * total;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (u < p[i])
      return ids[i];
    u -= p[i];
  }
  return ids[n - 1];
}

namespace {

/// A generation plan on a device: its token and position inputs, its
/// logits, its KV caches.
class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void *feed(int id) = 0;
  virtual void setParam(int id, const float *values) = 0;
  virtual void run() = 0;
  /// Of the f32 logits [B, S, V], row r's at position at[r], for each row
  /// r: [B, V] in `out` (one row a sequence, not the window's B S V).
  void logitsAt(int64_t positions, const std::vector<int64_t> &at,
                std::vector<float> &out) {
    const Plan &p = plan();
    const int64_t v = p.buffers[p.loss].shape.back();
    out.resize(at.size() * v);
    for (size_t r = 0; r < at.size(); ++r)
      copyLogits((r * positions + at[r]) * v, v, out.data() + r * v);
  }
  virtual const Plan &plan() = 0;
  /// Elements [first, first + count) of the logits.
  virtual void copyLogits(int64_t first, int64_t count, float *out) = 0;
  virtual void copyCachesFrom(Decoder &other) = 0;
};

class CpuDecoder : public Decoder {
public:
  explicit CpuDecoder(const Plan &p) : exec(p) {}
  void *feed(int id) override { return exec.data(id); }
  void setParam(int id, const float *values) override {
    std::memcpy(exec.floats(id), values,
                exec.plan().buffers[id].elements() * sizeof(float));
  }
  void run() override { exec.run(); }
  const Plan &plan() override { return exec.plan(); }
  void copyLogits(int64_t first, int64_t count, float *out) override {
    std::memcpy(out, exec.floats(exec.plan().loss) + first,
                count * sizeof(float));
  }
  void copyCachesFrom(Decoder &other) override {
    exec.copyRegionFrom(static_cast<CpuDecoder &>(other).exec, Region::State);
  }
  CpuExecutor<float> exec;
};

class CudaDecoder : public Decoder {
public:
  CudaDecoder(const Plan &p, const CudaProgram &program)
      : exec(p, program, p.config.precision == Precision::Tf32) {}
  void *feed(int id) override {
    exec.waitSlot(0);
    return exec.stagedInput(0, id);
  }
  void setParam(int id, const float *values) override {
    exec.upload(id, values);
  }
  void run() override {
    // The plan is captured as a CUDA graph once and replayed.
    exec.step(0, /*update=*/false, /*wantLoss=*/false);
  }
  const Plan &plan() override { return exec.plan(); }
  void copyLogits(int64_t first, int64_t count, float *out) override {
    exec.download(exec.plan().loss, first, count, out);
  }
  void copyCachesFrom(Decoder &other) override {
    exec.copyRegionFrom(static_cast<CudaDecoder &>(other).exec, Region::State);
  }
  CudaExecutor exec;
};

int fail(std::ostream &err, const std::string &message) {
  err << errorPrefix() << message << "\n";
  return 1;
}

const Feed *feedNamed(const Plan &p, const std::string &name) {
  for (const Feed &f : p.feeds)
    if (f.name == name)
      return &f;
  return nullptr;
}

} // namespace

int gtc::rt::generate(const Plan &window, const Plan *step,
                      const GenerateOptions &o, const RunOptions &run,
                      std::vector<std::vector<int32_t>> &generated,
                      std::ostream &err) {
  using Clock = std::chrono::steady_clock;
  const Buffer &lw = window.buffers[window.loss];
  const int64_t rows = lw.shape[0], t = lw.shape[1], v = lw.shape[2];
  if (static_cast<int64_t>(o.prompts.size()) != rows)
    return fail(err, "the plan generates " + std::to_string(rows) +
                         " sequences at once, and " +
                         std::to_string(o.prompts.size()) +
                         " prompts were given");
  for (const auto &prompt : o.prompts) {
    if (prompt.empty())
      return fail(err, "a prompt needs at least one token");
    if (static_cast<int64_t>(prompt.size()) >= t)
      return fail(err, "a prompt of " + std::to_string(prompt.size()) +
                           " tokens leaves no room in the model's " +
                           std::to_string(t) +
                           " positions; give a prompt of at most " +
                           std::to_string(t - 1) + " tokens");
    if (static_cast<int64_t>(prompt.size()) + o.tokens > t)
      return fail(err, "a prompt of " + std::to_string(prompt.size()) +
                           " tokens and " + std::to_string(o.tokens) +
                           " new ones exceed the model's " + std::to_string(t) +
                           " positions; give --tokens " +
                           std::to_string(t - int64_t(prompt.size())) +
                           " or less, or a shorter prompt");
    for (int32_t id : prompt)
      if (id < 0 || id >= v)
        return fail(err, "prompt token " + std::to_string(id) +
                             " is outside the model's vocabulary of " +
                             std::to_string(v) + "; give ids below " +
                             std::to_string(v));
  }
  const Feed *tokensIn = nullptr;
  for (const Feed &f : window.feeds)
    if (f.name != "positions")
      tokensIn = &f;
  if (!tokensIn)
    return fail(err, "the generation plan has no token input");
  try {
    if (run.device == "cpu")
      setThreads(run.threads);
    // The parameters: the caller's, a file's, or drawn as training draws
    // them.
    std::vector<float> own;
    const std::vector<float> *params = o.params ? o.params : &own;
    const Plan *layout = o.params ? o.paramsPlan : &window;
    if (!o.params) {
      own.resize(static_cast<size_t>(window.regionSize.count(Region::Param)
                                         ? window.regionSize.at(Region::Param)
                                         : 0));
      if (!run.initPath.empty()) {
        if (!loadInitialWeights(window, run.initPath, own, err, err))
          return 1;
      } else {
        initParameters(window, o.seed, own.data());
        err << "note: no --init: the parameters are drawn from seed " << o.seed
            << " (an untrained model)\n";
      }
    }
    if (std::string shortfall = generationMemoryShortfall(window, step, run);
        !shortfall.empty())
      return fail(err, shortfall);
    if (run.device != "cuda" && window.config.precision == Precision::Tf32)
      err << backends::kTf32OnCpuNote << "\n";
    auto make = [&](const Plan &p) -> std::unique_ptr<Decoder> {
      if (run.device != "cuda")
        return std::make_unique<CpuDecoder>(p);
      const CudaProgram *program = run.programFor(p);
      if (!program)
        return nullptr;
      return std::make_unique<CudaDecoder>(p, *program);
    };
    std::unique_ptr<Decoder> whole = make(window), one;
    if (!whole || (step && !(one = make(*step))))
      return 1;
    backends::copyParamsByName(
        *layout, *params, window,
        [&](int id, const float *src) { whole->setParam(id, src); });
    if (one)
      backends::copyParamsByName(
          *layout, *params, *step,
          [&](int id, const float *src) { one->setParam(id, src); });

    Rng rng(mixSeed(o.seed, "sample"));
    std::vector<std::vector<int32_t>> seqs = o.prompts;
    generated.assign(static_cast<size_t>(rows), {});
    std::vector<float> logits;
    auto draw = [&](Decoder &d, int64_t positions,
                    const std::vector<int64_t> &at) {
      d.logitsAt(positions, at, logits);
      for (int64_t r = 0; r < rows; ++r) {
        // NaN logits cannot be ranked (std::sort's order breaks): a
        // message, not a draw.
        if (std::string bad = NumericsCheck::count(logits.data() + r * v, v);
            !bad.empty())
          throw RuntimeError(
              "sequence " + std::to_string(r) + "'s logits after " +
              std::to_string(generated[r].size()) + " new tokens hold " +
              bad + "; check the weights (--init), or use --precision fp32");
        int32_t id = sampleToken(logits.data() + r * v, v, o.sampling, rng);
        seqs[r].push_back(id);
        generated[r].push_back(id);
      }
    };
    // A window of all T positions: each row's sequence, padded with token 0
    // (causal attention keeps the padding out of the positions before it).
    auto runWindow = [&] {
      auto *ids = static_cast<int32_t *>(whole->feed(tokensIn->buffer));
      std::fill_n(ids, rows * t, 0);
      for (int64_t r = 0; r < rows; ++r)
        std::copy(seqs[r].begin(), seqs[r].end(), ids + r * t);
      if (const Feed *pos = feedNamed(window, "positions")) {
        auto *p = static_cast<int32_t *>(whole->feed(pos->buffer));
        for (int64_t i = 0; i < rows * t; ++i)
          p[i] = static_cast<int32_t>(i % t);
      }
      whole->run();
      std::vector<int64_t> last(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        last[r] = static_cast<int64_t>(seqs[r].size()) - 1;
      draw(*whole, t, last);
    };
    const auto start = Clock::now();
    runWindow();
    const double prompt =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (one && o.tokens > 1)
      one->copyCachesFrom(*whole);
    const Feed *oneTokens = nullptr, *onePos = nullptr;
    if (one) {
      onePos = feedNamed(*step, "positions");
      for (const Feed &f : step->feeds)
        if (f.name == tokensIn->name)
          oneTokens = &f;
      if (!onePos || !oneTokens)
        return fail(err, "the one-token plan has no token or position input");
    }
    const std::vector<int64_t> first(static_cast<size_t>(rows), 0);
    for (int64_t n = 1; n < o.tokens; ++n) {
      if (!one) {
        runWindow();
        continue;
      }
      // Each row's last token at its own position, against the caches.
      auto *ids = static_cast<int32_t *>(one->feed(oneTokens->buffer));
      auto *pos = static_cast<int32_t *>(one->feed(onePos->buffer));
      for (int64_t r = 0; r < rows; ++r) {
        ids[r] = seqs[r].back();
        pos[r] = static_cast<int32_t>(seqs[r].size() - 1);
      }
      one->run();
      draw(*one, 1, first);
    }
    const double total =
        std::chrono::duration<double>(Clock::now() - start).count();
    char line[200];
    std::snprintf(line, sizeof line,
                  "generated %lld x %lld tokens in %.3f s (prompt %.3f s): "
                  "%.1f tokens/s%s\n",
                  static_cast<long long>(rows),
                  static_cast<long long>(o.tokens), total, prompt,
                  rows * o.tokens / std::max(total, 1e-9),
                  one ? ", KV cache" : ", recomputed");
    if (o.report)
      err << line;
  } catch (const RuntimeError &e) {
    return fail(err, e.what());
  } catch (const std::bad_alloc &) {
    return fail(err, "out of memory for " + std::to_string(rows) +
                         " sequences at once; give a smaller --batch");
  }
  return 0;
}
