//===- Trainer.cpp - The training loop ------------------------------------===//

#include "gtc/Runtime/Trainer.h"
#include "gtc/Runtime/Checkpoint.h"
#include "gtc/Runtime/CpuExecutor.h"
#include "gtc/Runtime/Data.h"
#include "gtc/Runtime/Optimizer.h"
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <unistd.h>

using namespace gtc::rt;

namespace {

std::atomic<bool> interrupted{false};
extern "C" void onSignal(int) { interrupted = true; }

/// Installs SIGINT/SIGTERM handlers for the duration of training.
struct SignalGuard {
  struct sigaction oldInt {}, oldTerm {};
  SignalGuard() {
    interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
  }
};

std::unique_ptr<Dataset> openSource(const TrainConfig::Source &s,
                                    std::string &error) {
  if (s.kind == "idx")
    return openIdx(s.images, s.labels, static_cast<float>(s.scale), error);
  if (s.kind == "tokens")
    return openTokens(s.path, s.seq, error);
  if (s.kind == "text")
    return openText(s.path, s.seq, error);
  error = "unknown data kind '" + s.kind + "'";
  return nullptr;
}

std::string shapeText(DType d, const std::vector<int64_t> &shape) {
  std::string s = d == DType::F32 ? "f32[" : "i32[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The input and label feeds of a plan, checked against the data.
struct Feeds {
  int input = -1, label = -1;
};

bool matchFeeds(const Plan &plan, const Dataset &data, const char *what,
                Feeds &feeds, std::string &error) {
  for (const Feed &f : plan.feeds) {
    int &slot = f.label ? feeds.label : feeds.input;
    if (slot >= 0) {
      error = "the model has more than one " +
              std::string(f.label ? "label" : "input") +
              "; the data sources give one input and one label";
      return false;
    }
    slot = f.buffer;
  }
  if (feeds.input < 0 || feeds.label < 0) {
    error = "the model needs one 'input' and one 'label' to train on " +
            std::string(what) + " data";
    return false;
  }
  for (auto [id, spec, kind] :
       {std::tuple{feeds.input, data.inputSpec(), "input"},
        std::tuple{feeds.label, data.labelSpec(), "label"}}) {
    const Buffer &b = plan.buffers[id];
    std::vector<int64_t> perExample(b.shape.begin() + (b.shape.empty() ? 0 : 1),
                                    b.shape.end());
    if (b.dtype != spec.dtype || perExample != spec.shape) {
      error = std::string("the ") + what + " data gives " + kind +
              " examples of " + shapeText(spec.dtype, spec.shape) +
              ", but the model's " + kind + " '" + b.name + "' is " +
              shapeText(b.dtype, b.shape) +
              " (batch first); change the model's declaration or the data";
      return false;
    }
  }
  return true;
}

std::string formatDuration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60),
                  (long long)(s % 60));
  return buf;
}

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

/// The tensors of a checkpoint: parameters by name, optimizer state as
/// "optimizer.<state>.<name>", and metadata describing the run.
std::vector<StoredTensor> checkpointTensors(const Plan &plan,
                                            const CpuExecutor<float> &exec,
                                            const OptimizerState<float> &opt) {
  std::vector<StoredTensor> tensors;
  auto add = [&](const std::string &name, const std::vector<int64_t> &shape,
                 const float *data, int64_t n) {
    StoredTensor t;
    t.name = name;
    t.dtype = "F32";
    t.shape = shape;
    t.bytes.resize(n * sizeof(float));
    std::memcpy(t.bytes.data(), data, t.bytes.size());
    tensors.push_back(std::move(t));
  };
  const float *base = exec.region(Region::Param);
  for (const Param &p : plan.params) {
    const Buffer &b = plan.buffers[p.buffer];
    add(p.name, b.shape, exec.floats(p.buffer), b.elements());
    int64_t off = exec.floats(p.buffer) - base;
    const char *first =
        plan.config.optimizer == "sgd" ? "momentum_buffer" : "exp_avg";
    if (!opt.first.empty())
      add(std::string("optimizer.") + first + "." + p.name, b.shape,
          opt.first.data() + off, b.elements());
    if (!opt.second.empty())
      add("optimizer.exp_avg_sq." + p.name, b.shape, opt.second.data() + off,
          b.elements());
  }
  return tensors;
}

} // namespace

namespace {
int trainImpl(const Plan &step, const EvalPlanFn &evalPlan,
              const RunOptions &options, std::ostream &out, std::ostream &err) {
  const TrainConfig &c = step.config;
  setThreads(options.threads);
  std::string error;
  if (c.data.kind.empty()) {
    err << "gtc: error: the train block has no 'data' source; add e.g. "
           "data = idx(\"images.gz\", \"labels.gz\")\n";
    return 1;
  }
  std::unique_ptr<Dataset> data = openSource(c.data, error);
  if (!data) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<Dataset> evalData;
  if (!c.eval.kind.empty() && !(evalData = openSource(c.eval, error))) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }
  Feeds feeds;
  if (!matchFeeds(step, *data, "training", feeds, error)) {
    err << "gtc: error: " << error << "\n";
    return 1;
  }

  const int64_t batch = step.batch;
  uint64_t seed = options.seed.value_or(c.seed);
  const int64_t perEpoch = data->size() / batch;
  if (perEpoch == 0) {
    err << "gtc: error: the training data has " << data->size()
        << " examples, fewer than one batch of " << batch
        << "; lower the batch size (--batch)\n";
    return 1;
  }
  int64_t total;
  if (options.steps)
    total = *options.steps;
  else if (options.epochs)
    total = *options.epochs * perEpoch;
  else if (c.steps > 0)
    total = c.steps;
  else
    total = std::max<int64_t>(1, c.epochs) * perEpoch;

  CpuExecutor<float> exec(step);
  OptimizerState<float> opt;
  float *params = exec.region(Region::Param);
  float *grads = exec.region(Region::Grad);
  const int64_t paramElements = exec.regionElements(Region::Param);
  int64_t start = 0;

  if (!options.resumePath.empty()) {
    std::vector<StoredTensor> tensors;
    std::map<std::string, std::string> meta;
    if (!readSafetensors(options.resumePath, tensors, meta, error)) {
      err << "gtc: error: cannot resume: " << error << "\n";
      return 1;
    }
    if (meta["format"] != "gtc-checkpoint-1" || meta["model"] != step.model) {
      err << "gtc: error: cannot resume: " << options.resumePath
          << " is not a checkpoint of model '" << step.model << "'\n";
      return 1;
    }
    std::map<std::string, const StoredTensor *> byName;
    for (const StoredTensor &t : tensors)
      byName[t.name] = &t;
    bool hasState = meta["optimizer"] == c.optimizer;
    if (hasState && c.optimizer != "sgd") {
      opt.first.assign(paramElements, 0.0f);
      opt.second.assign(paramElements, 0.0f);
    } else if (hasState && c.momentum != 0) {
      opt.first.assign(paramElements, 0.0f);
    }
    auto load = [&](const std::string &name, const Buffer &b,
                    float *dst) -> bool {
      auto it = byName.find(name);
      if (it == byName.end() || it->second->dtype != "F32" ||
          it->second->shape != b.shape) {
        err << "gtc: error: cannot resume: " << options.resumePath
            << (it == byName.end() ? " lacks '" : " has a different '")
            << name << "' (the model expects "
            << shapeText(DType::F32, b.shape) << ")\n";
        return false;
      }
      std::memcpy(dst, it->second->bytes.data(), it->second->bytes.size());
      return true;
    };
    for (const Param &p : step.params) {
      const Buffer &b = step.buffers[p.buffer];
      int64_t off = exec.floats(p.buffer) - params;
      if (!load(p.name, b, exec.floats(p.buffer)))
        return 1;
      const char *first = c.optimizer == "sgd" ? "momentum_buffer" : "exp_avg";
      if (!opt.first.empty() &&
          !load(std::string("optimizer.") + first + "." + p.name, b,
                opt.first.data() + off))
        return 1;
      if (!opt.second.empty() &&
          !load("optimizer.exp_avg_sq." + p.name, b, opt.second.data() + off))
        return 1;
    }
    start = std::strtoll(meta["step"].c_str(), nullptr, 10);
    opt.step = hasState ? start : 0;
    // Continue the same sequence of batches unless a seed is given again,
    // and the same schedule unless a length is given again.
    if (!options.seed && !meta["seed"].empty())
      seed = std::strtoull(meta["seed"].c_str(), nullptr, 10);
    if (!options.steps && !options.epochs && !meta["total_steps"].empty())
      total = std::strtoll(meta["total_steps"].c_str(), nullptr, 10);
    out << "resumed " << options.resumePath << " at step " << start << "\n";
  } else {
    exec.initParams(seed);
  }

  Loader loader(*data, batch, seed, /*shuffle=*/true, /*dropLast=*/true);

  std::ofstream log;
  if (!options.logPath.empty()) {
    log.open(options.logPath, start > 0 ? std::ios::app : std::ios::trunc);
    if (!log) {
      err << "gtc: error: cannot write the log '" << options.logPath << "': "
          << std::strerror(errno) << "\n";
      return 1;
    }
  }

  auto save = [&](int64_t stepsDone) -> bool {
    if (options.savePath.empty())
      return true;
    std::map<std::string, std::string> meta = {
        {"format", "gtc-checkpoint-1"},
        {"model", step.model},
        {"step", std::to_string(stepsDone)},
        {"total_steps", std::to_string(total)},
        {"seed", std::to_string(seed)},
        {"optimizer", c.optimizer},
        {"batch", std::to_string(batch)},
        {"rng", "stateless: batches and windows derive from (seed, epoch, "
                "index)"}};
    if (!writeSafetensors(options.savePath,
                          checkpointTensors(step, exec, opt), meta, error)) {
      err << "gtc: error: " << error << "\n";
      return false;
    }
    return true;
  };

  // Evaluation over the whole eval set, in batches (a smaller last one).
  std::map<int64_t, std::unique_ptr<CpuExecutor<float>>> evalExecs;
  auto evaluate = [&](int64_t atStep, double &loss, double &acc) -> bool {
    Loader evalLoader(*evalData, batch, seed, /*shuffle=*/false,
                      /*dropLast=*/false);
    double lossSum = 0, accSum = 0;
    int64_t seen = 0;
    for (int64_t b = 0; b < evalLoader.batchesPerEpoch(); ++b) {
      int64_t n = evalLoader.batchSize(b);
      auto &ex = evalExecs[n];
      if (!ex) {
        const Plan *plan = evalPlan ? evalPlan(n) : nullptr;
        if (!plan) {
          err << "gtc: error: cannot build the evaluation for a batch of "
              << n << "\n";
          return false;
        }
        Feeds ef;
        if (!matchFeeds(*plan, *evalData, "eval", ef, error)) {
          err << "gtc: error: " << error << "\n";
          return false;
        }
        ex = std::make_unique<CpuExecutor<float>>(*plan);
      }
      const Plan &ep = ex->plan();
      std::map<std::string, int> evalParams;
      for (const Param &p : ep.params)
        evalParams[p.name] = p.buffer;
      for (const Param &p : step.params) {
        auto it = evalParams.find(p.name);
        if (it != evalParams.end())
          std::memcpy(ex->floats(it->second), exec.floats(p.buffer),
                      step.buffers[p.buffer].elements() * sizeof(float));
      }
      Feeds ef;
      matchFeeds(ep, *evalData, "eval", ef, error);
      evalLoader.fill(0, b, ex->data(ef.input), ex->data(ef.label));
      ex->run();
      lossSum += double(ex->floats(ep.loss)[0]) * n;
      if (ep.accuracy >= 0)
        accSum += double(ex->floats(ep.accuracy)[0]) * n;
      seen += n;
    }
    loss = lossSum / std::max<int64_t>(1, seen);
    acc = accSum / std::max<int64_t>(1, seen);
    out << "eval  step " << atStep << " | loss " << std::fixed
        << std::setprecision(4) << loss;
    if (!evalExecs.empty() && evalExecs.begin()->second->plan().accuracy >= 0)
      out << " | accuracy " << std::setprecision(2) << acc * 100 << "%";
    out << " | " << seen << " examples\n" << std::defaultfloat << std::flush;
    if (log)
      log << "{\"eval\": true, \"step\": " << atStep
          << ", \"loss\": " << num(loss) << ", \"accuracy\": " << num(acc)
          << "}\n";
    return true;
  };

  out << "training " << step.model << " on " << data->describe() << "\n"
      << "  " << step.parameterCount() << " parameters, batch " << batch
      << ", " << perEpoch << " steps per epoch, " << total << " steps, "
      << c.optimizer << " lr " << c.lr << ", " << threads()
      << " threads, seed " << seed << "\n";
  if (c.precision != "fp32")
    out << "  note: precision " << c.precision
        << " applies on GPUs; the CPU computes in fp32\n";
  out.flush();

  SignalGuard signals;
  const bool tty = options.progress && isatty(STDERR_FILENO);
  const int64_t logEvery =
      c.logEvery > 0 ? c.logEvery : std::max<int64_t>(1, perEpoch / 10);
  auto t0 = std::chrono::steady_clock::now();
  auto lastPrint = t0;
  double lossEma = 0, lastLoss = 0;
  int64_t sinceStart = 0;
  for (int64_t s = start; s < total; ++s) {
    if (interrupted) {
      err << "\ninterrupted at step " << s << "\n";
      if (!save(s))
        return 1;
      if (!options.savePath.empty())
        err << "saved " << options.savePath << " (resume with --resume "
            << options.savePath << ")\n";
      return 130;
    }
    int64_t epoch = s / perEpoch, b = s % perEpoch;
    loader.fill(epoch, b, exec.data(feeds.input), exec.data(feeds.label));
    try {
      exec.run();
    } catch (const RuntimeError &e) {
      err << "\ngtc: error: at step " << s << ": " << e.what() << "\n";
      return 1;
    }
    double loss = exec.floats(step.loss)[0];
    if (!std::isfinite(loss)) {
      err << "\ngtc: error: the loss is " << loss << " at step " << s
          << "; lower the learning rate or add grad_clip\n";
      return 1;
    }
    double norm = c.gradClip > 0
                      ? clipGradNorm(grads, paramElements, c.gradClip)
                      : 0.0;
    double lr = scheduledLr(c, s, total);
    optimizerStep(c, lr, params, grads, paramElements, opt);
    ++sinceStart;
    lastLoss = loss;
    lossEma = sinceStart == 1 ? loss : 0.9 * lossEma + 0.1 * loss;

    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - t0).count();
    double rate = sinceStart * batch / std::max(elapsed, 1e-9);
    double eta = (total - s - 1) * batch / std::max(rate, 1e-9);
    bool lastStep = s + 1 == total;
    if (log && ((s + 1) % logEvery == 0 || lastStep))
      log << "{\"step\": " << s + 1 << ", \"epoch\": " << epoch + 1
          << ", \"loss\": " << num(loss) << ", \"lr\": " << num(lr)
          << (c.gradClip > 0 ? ", \"grad_norm\": " + num(norm) : "")
          << ", \"samples_per_s\": " << num(rate)
          << ", \"elapsed_s\": " << num(elapsed) << "}\n";
    bool printLine = tty ? std::chrono::duration<double>(now - lastPrint)
                                   .count() > 0.25 || lastStep
                         : ((s + 1) % logEvery == 0 || lastStep);
    if (printLine) {
      lastPrint = now;
      std::ostringstream line;
      line << "step " << s + 1 << "/" << total << " | epoch " << epoch + 1
           << " | loss " << std::fixed << std::setprecision(4) << lossEma
           << " | " << std::setprecision(0) << rate << " samples/s | "
           << formatDuration(elapsed) << " elapsed | ETA "
           << formatDuration(eta);
      if (tty)
        err << "\r" << line.str() << "\033[K" << std::flush;
      else
        out << line.str() << "\n" << std::flush;
    }
    bool epochEnd = (s + 1) % perEpoch == 0;
    bool evalNow = evalData &&
                   (c.evalEvery > 0 ? (s + 1) % c.evalEvery == 0 : epochEnd);
    if (evalNow || (evalData && lastStep && !evalNow)) {
      if (tty)
        err << "\n";
      double el, ea;
      if (!evaluate(s + 1, el, ea))
        return 1;
    }
  }
  if (tty)
    err << "\n";
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  out << "done: " << total << " steps, final loss " << std::fixed
      << std::setprecision(4) << lastLoss << ", " << std::setprecision(1)
      << elapsed << " s\n"
      << std::defaultfloat;
  if (!save(total))
    return 1;
  if (!options.savePath.empty())
    out << "saved " << options.savePath << "\n";
  return 0;
}
} // namespace

int gtc::rt::train(const Plan &step, const EvalPlanFn &evalPlan,
                   const RunOptions &options, std::ostream &out,
                   std::ostream &err) {
  try {
    return trainImpl(step, evalPlan, options, out, err);
  } catch (const RuntimeError &e) {
    err << "\ngtc: error: " << e.what() << "\n";
  } catch (const std::bad_alloc &) {
    err << "\ngtc: error: out of memory; lower the batch size (--batch)\n";
  } catch (const std::exception &e) {
    err << "\ngtc: error: " << e.what() << "\n";
  }
  return 1;
}
