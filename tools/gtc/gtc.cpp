//===- gtc.cpp - The gtc command line -------------------------------------===//
//
//   gtc check FILE.gt [--emit=ast|mlir] [-o OUT]   parse and check
//   gtc FILE.gt [--emit=...]                       same as `gtc check`
//   gtc run FILE.gt ...                            train now
//   gtc compile FILE.gt -o EXE                     write a training executable
//===----------------------------------------------------------------------===//

#include "Tokenizer.h"
#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Frontend/Driver.h"
#include "gtc/Plan/PlanBuilder.h"
#include "gtc/Plan/Settings.h"
#include "gtc/Runtime/Bundle.h"
#include "gtc/Runtime/Cache.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Files.h"
#include "gtc/Runtime/Optimizer.h"
#include "gtc/Runtime/Profile.h"
#include "gtc/Runtime/RunArgs.h"
#include "gtc/Runtime/Sample.h"
#include "gtc/Runtime/Startup.h"
#include "gtc/Runtime/Streams.h"
#include "gtc/Runtime/Trainer.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/Unicode.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cmath>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

using llvm::StringRef;

namespace {

constexpr const char *kVersion = "gtc 0.1.0 (MLIR " "22" ")";

constexpr const char *kUsage =
    R"(gtc: a compiler and JIT for neural-network training

usage: gtc <command> FILE.gt [options]
       gtc FILE.gt [options]          (same as 'gtc check')

commands:
  check     parse and check FILE.gt: names, arguments, shapes, dtypes, settings
  run       compile FILE.gt and train it now
  compile   write a standalone training executable (-o EXE): the runtime,
            the compiled plans and the GPU kernels; EXE --help lists its
            options
  sample    generate text from FILE.gt's model (usually with --init
            WEIGHTS): the prompt in one pass, then a token at a time against
            a KV cache (sample options below)

options:
  --emit=ast     print the syntax tree
  --emit=mlir    print the gt dialect IR (feed it to gtc-opt); under run,
                 then train
  --emit=step    (run) print the training step IR after gt-autodiff,
                 gt-checkpoint and gt-fuse, and stop
  --emit=plan    (run) print the compiled plan of the training step, and stop
  --emit=cuda    (run) print the generated CUDA kernels of the training step,
                 and stop
  -o FILE        write the --emit output to FILE instead of stdout
  -h, --help     show this help
  --version      show the version

run options (override the train block; compiled executables take them too):
)";

constexpr const char *kUsageTail = R"(
sample options (gtc sample FILE.gt --init WEIGHTS [options]; also --device,
--batch N (sequences at once from one prompt), --seed, --precision):
  --prompt TEXT  the prompt, as bytes for a model trained on text(...) data
                 (default: a newline); given several times, one sequence
                 each, generated at once
  --prompt-tokens 1,2,3  the prompt as token ids (token models); likewise
  --tokens N     new tokens a sequence (default 64)
  --temperature T  0: greedy; else the logits are divided by T (default 1)
  --top-k K      draw among the K most likely tokens (default: all)
  --top-p P      then among the fewest whose probabilities reach P (default 1)
  --no-cache     recompute the whole sequence for every token (no KV cache)
  --tokenizer F  a Hugging Face byte-level BPE tokenizer.json (GPT-2's) or
                 a SentencePiece tokenizer.model (Llama-2's; the prompt
                 starts with its <s>): --prompt is encoded with it and the
                 output decoded

compile options (gtc compile FILE.gt -o EXE [--batch N] [--precision P] [--checkpoint C]):
  --arch LIST    GPU architectures to ship cubins for (default sm_80,sm_90),
                 plus PTX of the newest for later GPUs

A file named '-' is read from standard input. Exit status: 0 on success,
1 when the file or the run has an error, 2 on a command-line mistake, 130
when a run was interrupted (Ctrl-C or SIGTERM, after saving).
)";

enum class Emit { None, AST, MLIR, Step, Plan, Cuda };

struct Options {
  std::string command = "check";
  std::string input;
  std::string output = "-";
  Emit emit = Emit::None;
  gtc::rt::RunArgs args; ///< run options (shared with compiled executables)
  std::string arch = "sm_80,sm_90"; ///< compile: cubin architectures
  /// sample: the prompt (text or token ids), new tokens, the draws.
  std::vector<std::string> prompts, promptTokens;
  std::optional<std::string> tokenizer;
  int64_t tokens = 64;
  gtc::rt::SamplingOptions sampling;
  std::vector<std::string> samplingGiven; ///< sample's own options, given
  bool noCache = false;
  char **argv = nullptr; ///< as given (data-parallel workers rerun it)
};

int usageError(const llvm::Twine &message) {
  llvm::errs() << "gtc: error: " << message
               << "\nRun 'gtc --help' for usage.\n";
  return 2;
}

/// Parses argv; returns an exit code when the program should stop.
std::optional<int> parseArgs(int argc, char **argv, Options &opts) {
  std::vector<StringRef> args(argv + 1, argv + argc);
  const std::vector<std::string> strs(argv + 1, argv + argc);
  size_t i = 0;
  bool archGiven = false;
  if (!args.empty() && (args[0] == "check" || args[0] == "run" ||
                        args[0] == "compile" || args[0] == "sample"))
    opts.command = args[i++].str();
  for (; i < args.size(); ++i) {
    StringRef a = args[i];
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage << gtc::rt::runOptionsHelp()
                   << "\ntrain block settings (LANGUAGE.md, section 7):\n"
                   << gtc::rt::trainSettingsHelp() << kUsageTail;
      return 0;
    }
    if (a == "--version") {
      llvm::outs() << kVersion << "\n";
      return 0;
    }
    if (a.consume_front("--emit=")) {
      if (a == "ast")
        opts.emit = Emit::AST;
      else if (a == "mlir")
        opts.emit = Emit::MLIR;
      else if (a == "step")
        opts.emit = Emit::Step;
      else if (a == "plan")
        opts.emit = Emit::Plan;
      else if (a == "cuda")
        opts.emit = Emit::Cuda;
      else
        return usageError("unknown --emit kind '" + a +
                          "'; expected --emit=ast, mlir, step, plan or cuda");
      continue;
    }
    if (a == "--arch" || a.starts_with("--arch=")) {
      archGiven = true;
      if (a.contains('='))
        opts.arch = a.split('=').second.str();
      else if (i + 1 < args.size())
        opts.arch = args[++i].str();
      else
        return usageError("--arch needs a value, e.g. sm_80,sm_90");
      continue;
    }
    if (opts.command == "sample") {
      // Its own options: "--name VALUE" or "--name=VALUE".
      auto value = [&](StringRef name) -> std::optional<std::string> {
        if (a == name) {
          if (i + 1 == args.size())
            return std::nullopt;
          return args[++i].str();
        }
        if (a.starts_with(name) && a.size() > name.size() &&
            a[name.size()] == '=')
          return a.drop_front(name.size() + 1).str();
        return std::nullopt;
      };
      auto number = [&](StringRef name, const std::string &text, double lo,
                        double hi, double &out, bool whole = false) -> bool {
        char *end = nullptr;
        out = std::strtod(text.c_str(), &end);
        if (text.empty() || *end || !(out >= lo && out <= hi) ||
            (whole && out != std::floor(out))) {
          char range[64];
          std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
          usageError(name + " takes a " + (whole ? "whole " : "") +
                     "number in " + range + ", got '" + text + "'");
          return false;
        }
        return true;
      };
      StringRef name = a.split('=').first;
      bool known = name == "--prompt" || name == "--prompt-tokens" ||
                   name == "--tokens" || name == "--temperature" ||
                   name == "--top-k" || name == "--top-p" ||
                   name == "--tokenizer";
      if (known) {
        std::optional<std::string> v = value(name);
        if (!v)
          return usageError(name + " needs a value");
        opts.samplingGiven.push_back(name.str());
        double x = 0;
        if (name == "--prompt") {
          opts.prompts.push_back(*v);
        } else if (name == "--tokenizer") {
          opts.tokenizer = *v;
        } else if (name == "--prompt-tokens") {
          opts.promptTokens.push_back(*v);
        } else if (name == "--tokens") {
          if (!number(name, *v, 1, 1e9, x, /*whole=*/true))
            return 2;
          opts.tokens = static_cast<int64_t>(x);
        } else if (name == "--temperature") {
          if (!number(name, *v, 0, 1e6, x))
            return 2;
          opts.sampling.temperature = x;
        } else if (name == "--top-k") {
          if (!number(name, *v, 0, 1e9, x, /*whole=*/true))
            return 2;
          opts.sampling.topK = static_cast<int64_t>(x);
        } else {
          if (!number(name, *v, 1e-9, 1, x))
            return 2;
          opts.sampling.topP = x;
        }
        continue;
      }
      if (a == "--no-cache") {
        opts.noCache = true;
        continue;
      }
    }
    std::string error;
    gtc::rt::ArgResult r = gtc::rt::parseRunArg(strs, i, opts.args, error);
    if (r == gtc::rt::ArgResult::Error)
      return usageError(error);
    if (r == gtc::rt::ArgResult::Ok)
      continue;
    if (a == "-o") {
      if (i + 1 == args.size())
        return usageError("-o needs a file name");
      if (args[i + 1].starts_with("--"))
        return usageError("-o needs a file name; it is followed by the "
                          "option '" +
                          args[i + 1] + "'");
      opts.output = args[++i].str();
      continue;
    }
    if (a == "--emit")
      return usageError("--emit takes its kind after '=': --emit=ast, mlir, "
                        "step, plan or cuda");
    if (a.starts_with("-") && a != "-")
      return usageError("unknown option '" + a + "'");
    if (a == "check" || a == "run" || a == "compile" || a == "sample")
      return usageError("the command goes first: gtc " + a.str() +
                        " FILE.gt [options]");
    if (!opts.input.empty())
      return usageError("more than one input file ('" + opts.input +
                        "' and '" + a + "')");
    opts.input = a.str();
  }
  if (opts.input.empty())
    return usageError("no input file; usage: gtc <command> FILE.gt");
  if (opts.command == "check" &&
      (!opts.args.names.empty() || opts.emit == Emit::Step ||
       opts.emit == Emit::Plan || opts.emit == Emit::Cuda))
    return usageError("run options and --emit=step/plan/cuda need 'gtc run'");
  std::string error;
  if (!gtc::rt::checkRunArgs(opts.args, error))
    return usageError(error);
  if (opts.args.dryRun && opts.command != "run")
    return usageError("--dry-run goes with 'gtc run'");
  if (archGiven && opts.command != "compile")
    return usageError("--arch goes with 'gtc compile'");
  if (opts.command == "sample") {
    const gtc::rt::RunArgs &r = opts.args;
    const char *trainOnly = r.bench                      ? "--bench"
                            : r.dryRun                   ? "--dry-run"
                            : r.explain                  ? "--explain"
                            : !r.data.empty()            ? "--data"
                            : !r.eval.empty()            ? "--eval"
                            : r.run.steps                ? "--steps"
                            : r.run.epochs               ? "--epochs"
                            : !r.run.savePath.empty()    ? "--save"
                            : !r.run.resumePath.empty()  ? "--resume"
                            : !r.run.logPath.empty()     ? "--log"
                            : !r.run.profilePath.empty() ? "--profile"
                            : !r.devices.empty()         ? "--devices"
                            : r.batchAuto                ? "--batch auto"
                            : r.checkpointEvery || r.checkpointBudget
                                ? "--checkpoint"
                            : r.microBatch            ? "--micro-batch"
                            : !r.shard.empty()        ? "--shard"
                            : r.bucketBytes           ? "--bucket-size"
                            : !r.rendezvous.empty()   ? "--rendezvous"
                            : r.padAll                ? "--pad-all"
                            : r.noPad                 ? "--no-pad"
                            : r.run.checkNumerics     ? "--check-numerics"
                            : r.run.logEvery          ? "--log-every"
                            : r.run.sampleEvery       ? "--sample-every"
                                                      : nullptr;
    if (trainOnly)
      return usageError(llvm::Twine(trainOnly) +
                        " goes with 'gtc run', not 'gtc sample'");
    if (!opts.prompts.empty() && !opts.promptTokens.empty())
      return usageError("give --prompt or --prompt-tokens, not both");
    size_t prompts = std::max(opts.prompts.size(), opts.promptTokens.size());
    if (prompts > 1 && opts.args.batch &&
        *opts.args.batch != static_cast<int64_t>(prompts))
      return usageError("--batch " + std::to_string(*opts.args.batch) +
                        " with " + std::to_string(prompts) +
                        " prompts: several prompts generate one sequence "
                        "each; leave --batch out");
    if (opts.emit != Emit::None && opts.emit != Emit::MLIR &&
        opts.emit != Emit::Plan)
      return usageError("gtc sample takes --emit=mlir or --emit=plan");
    // --emit prints and stops: what only sampling reads is refused, and
    // with --emit=mlir (the module as written) every option.
    if (opts.emit != Emit::None) {
      std::string unread = opts.samplingGiven.empty()
                               ? std::string()
                               : opts.samplingGiven.front();
      for (const std::string &name : r.names)
        if (unread.empty() &&
            (opts.emit == Emit::MLIR || !gtc::rt::isCompilingOption(name)))
          unread = name;
      if (unread.empty() && opts.noCache && opts.emit == Emit::MLIR)
        unread = "--no-cache";
      if (!unread.empty())
        return usageError(
            unread + " goes with sampling, and --emit prints and stops: drop " +
            unread + " or --emit" +
            (opts.emit == Emit::Plan && unread.rfind("--prompt", 0) == 0
                 ? " (--batch N sets the plan's batch)"
                 : ""));
    }
    // Given at all, even at its default value (--top-k 0, --top-p 1).
    auto given = [&](StringRef name) {
      return llvm::is_contained(opts.samplingGiven, name);
    };
    const char *unused = given("--top-k")   ? "--top-k"
                         : given("--top-p") ? "--top-p"
                         : r.run.seed       ? "--seed"
                                            : nullptr;
    if (opts.sampling.temperature == 0 && unused)
      return usageError(llvm::Twine("--temperature 0 takes the most likely "
                                    "token, so ") +
                        unused +
                        " would have no effect; drop it, or sample at a "
                        "temperature above 0");
  }
  // -o names the --emit output (compile: the executable).
  if (opts.output != "-" && opts.emit == Emit::None &&
      opts.command != "compile")
    return usageError("-o names the file of an --emit output; give --emit=... "
                      "too, or drop -o");
  if (opts.output.empty())
    return usageError("-o needs a file name; it was given an empty one");
  if (opts.output != "-" && (gtc::rt::sameFile(opts.output, opts.input) ||
                             gtc::rt::sameFile(opts.output,
                                               gtc::rt::runningProgram())))
    return usageError("-o '" + opts.output + "' is " +
                      (gtc::rt::sameFile(opts.output, opts.input)
                           ? "the model's file"
                           : "the program that is running") +
                      ", which the output would replace; give -o another "
                      "path");
  // gtc run --emit=ast|step|plan|cuda prints and stops (--emit=mlir prints
  // and trains).
  if (opts.command == "run" && opts.emit != Emit::None &&
      opts.emit != Emit::MLIR) {
    const char *flag = opts.emit == Emit::AST    ? "--emit=ast"
                       : opts.emit == Emit::Step ? "--emit=step"
                       : opts.emit == Emit::Plan ? "--emit=plan"
                                                 : "--emit=cuda";
    if (!gtc::rt::checkRunArgs(opts.args, error, flag))
      return usageError(error);
  }
  return std::nullopt;
}

/// Prints each op kind's element types, the padded GEMM operands, and with
/// 16-bit precision the activation memory saved against `fp32` (the same
/// model compiled at fp32).
void explainPrecision(const gtc::rt::Plan &plan, const gtc::rt::Plan *fp32,
                      llvm::raw_ostream &os) {
  using gtc::rt::Buffer;
  std::map<std::string, std::map<std::string, int>> kinds;
  std::vector<std::string> pads;
  for (const gtc::rt::Kernel &k : plan.kernels) {
    const Buffer &out = plan.buffers[k.outputs[0]];
    ++kinds[gtc::rt::opName(k.op)][gtc::rt::dtypeName(out.dtype)];
    if (k.op == gtc::rt::OpKind::Pad || k.op == gtc::rt::OpKind::Slice) {
      const Buffer &in = plan.buffers[k.inputs[0]];
      pads.push_back(std::string(gtc::rt::opName(k.op)) + " " + gtc::rt::typeText(in.dtype, in.shape) +
                     " -> " + gtc::rt::typeText(out.dtype, out.shape) + " (" +
                     in.name + ")");
    }
  }
  os << "precision " << gtc::rt::name(plan.config.precision)
     << ": kernels per op and element type of their results\n";
  for (const auto &[op, types] : kinds) {
    std::string line;
    for (const auto &[type, n] : types)
      line += " " + type + " x" + std::to_string(n);
    os << llvm::format("  %-20s%s\n", op.c_str(), line.c_str());
  }
  if (pads.empty()) {
    os << "padding: none (every GEMM dimension is aligned or its GEMM small, or --no-pad)\n";
  } else {
    os << "pad and slice kernels (gt-pad-dims' padding, the model's slice and "
          "concat):\n";
    for (const std::string &p : pads)
      os << "  " << p << "\n";
  }
  if (fp32) {
    auto temp = [](const gtc::rt::Plan &p) {
      return p.memory().temporaries / 1048576.0;
    };
    // 16-bit activations save memory; the 16-bit weight copies cost some
    // (small batches can come out behind).
    double d = temp(*fp32) - temp(plan);
    os << llvm::format("activations and temporaries: %.2f MiB at %s, %.2f "
                       "MiB at fp32 (%.2f MiB %s)\n",
                       temp(plan), gtc::rt::name(plan.config.precision), temp(*fp32),
                       std::fabs(d), d >= 0 ? "saved" : "more");
  }
}

/// The rows of a chunk of the classifier region (PlanBuilder's
/// addClassifierChunk); 0 when the plan has none.
int64_t classifierChunkRows(const gtc::rt::Plan &plan) {
  for (const gtc::rt::Buffer &b : plan.buffers)
    if (b.name == "classifier chunk" && !b.shape.empty())
      return b.shape[0];
  return 0;
}

/// With gradient checkpointing (gt-checkpoint), what it saves and costs
/// against the same step without it: the predicted peak, the activations,
/// the FLOPs recomputed, and the classifier's chunks where a budget made
/// them smaller.
void explainCheckpoint(const gtc::rt::Plan &plan, const gtc::rt::Plan &none,
                       llvm::raw_ostream &os) {
  auto flops = [](const gtc::rt::Plan &p) {
    double f = 0;
    for (const gtc::rt::Kernel &k : p.kernels)
      f += gtc::rt::kernelFlops(p, k);
    return f;
  };
  double base = flops(none), extra = flops(plan) - base;
  gtc::rt::Plan::Memory m = plan.memory(), n = none.memory();
  os << llvm::format("gradient checkpointing: predicted peak %.2f MiB (%.2f "
                     "without), activations and temporaries %.2f MiB (%.2f "
                     "without); recomputation %.2f GFLOP a step (+%.1f%% of "
                     "the counted FLOPs) in %d more kernels\n",
                     m.peak() / 1048576.0, n.peak() / 1048576.0,
                     m.temporaries / 1048576.0, n.temporaries / 1048576.0,
                     extra / 1e9, base > 0 ? 100.0 * extra / base : 0.0,
                     static_cast<int>(plan.kernels.size()) -
                         static_cast<int>(none.kernels.size()));
  if (int64_t rows = classifierChunkRows(plan), without = classifierChunkRows(none);
      rows != without)
    os << "  the classifier in chunks of " << rows << " rows (" << without
       << " without)\n";
}

/// Prints the predicted memory of a training step, by kind.
void explainPlan(const gtc::rt::Plan &plan, llvm::raw_ostream &os) {
  gtc::rt::Plan::Memory m = plan.memory();
  struct Row {
    const char *what;
    int64_t bytes;
    bool always = true; ///< printed even when 0
  } rows[] = {
      {"weights", m.weights},
      {"gradients", m.gradients, plan.gradsInTemp < 0},
      {"optimizer state", m.optimizerState},
      {m.gradients == 0 && plan.gradsInTemp >= 0
           ? "activations, temps, gradients (memory plan)"
           : "activations and temporaries (memory plan)",
       m.temporaries},
      {"inputs (two slots on a GPU)", m.inputs},
      {"constants", m.constants},
      {"GEMM workspace (GPU)", m.gemmWorkspace},
      {"gradient accumulator", m.accumulator, false},
      {"16-bit weight copies (kept between steps)", m.weightCopies, false}};
  int64_t naive = 0;
  for (const gtc::rt::Buffer &b : plan.buffers)
    if (b.region == gtc::rt::Region::Temp && b.viewOf < 0)
      naive += b.slots() * 4;
  os << "memory plan of " << plan.model << " at batch " << plan.batch;
  if (plan.microBatches > 1)
    os << " (a micro-batch: a step runs " << plan.microBatches
       << " and sums their gradients)";
  os << ":\n";
  for (const Row &r : rows) {
    if (r.bytes > 0 || r.always)
      os << llvm::format("  %-44s %10.2f MiB\n", r.what, r.bytes / 1048576.0);
    // Inside the memory plan (Plan::gradsInTemp): each from its first
    // write in the backward pass, where the activations have died.
    if (&r == &rows[0] && m.gradients == 0 && plan.gradsInTemp >= 0)
      os << llvm::format(
          "  %-44s %10.2f MiB\n", "gradients (inside the memory plan below)",
          plan.regionSize.at(gtc::rt::Region::Grad) * 4 / 1048576.0);
  }
  os << llvm::format("  %-44s %10.2f MiB\n", "predicted peak", m.peak() / 1048576.0);
  os << llvm::format("  (temporaries without reuse would need %.2f MiB)\n",
                     naive / 1048576.0);
  os << "  " << plan.kernels.size() << " kernels per step, "
     << plan.parameterCount() << " parameters\n";
}

/// Lists every kernel of a step: its ops (a fusion region's in order), the
/// bytes it reads and writes, its FLOPs, and on a GPU its launches; then
/// the kernels per step by kind.
void explainKernels(const gtc::rt::Plan &plan,
                    const gtc::rt::CudaProgram *program,
                    llvm::raw_ostream &os) {
  std::map<std::string, int> kinds;
  double bytes = 0, flops = 0;
  int launches = 0;
  os << "kernels of one step" << (program ? " (GPU launches)" : "") << ":\n";
  // On a GPU, kernels independent of the ones before them run on a second
  // stream, beside those.
  std::set<int> side;
  if (program)
    for (const gtc::rt::StreamGroup &g : gtc::rt::scheduleStreams(
             plan, *program, gtc::rt::kPlanningMultiprocessors))
      if (g.stream == 1)
        side.insert(g.planKernel);
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const gtc::rt::Kernel &k = plan.kernels[i];
    std::string ops = gtc::rt::opName(k.op);
    if (!k.body.empty()) { // "multi_tensor(cast x97)"
      ops = k.strAttr("kind", "") + "(";
      for (size_t j = 0; j < k.body.size();) {
        size_t run = j;
        while (run < k.body.size() && k.body[run].op == k.body[j].op)
          ++run;
        ops += (j ? " " : "") + std::string(gtc::rt::opName(k.body[j].op)) +
               (run - j > 1 ? " x" + std::to_string(run - j) : "");
        j = run;
      }
      ops += ")";
    }
    double b = gtc::rt::kernelBytes(plan, k), f = gtc::rt::kernelFlops(plan, k);
    // On a GPU the parameters' 16-bit copies are kept between steps and
    // written by the optimizer's update: no launch in a step.
    const bool kept = program && static_cast<int>(i) == plan.paramCopies;
    if (!kept) {
      bytes += b;
      flops += f;
    }
    std::string where;
    if (kept) {
      where = "  (not in the step: the optimizer writes these copies)";
    } else if (program) {
      int gemms = 0, others = 0, own = 0;
      for (const gtc::rt::CudaLaunch &l : program->kernels[i]) {
        (l.kind == gtc::rt::CudaLaunch::Kind::Gemm ? gemms : others) += 1;
        own += l.kind == gtc::rt::CudaLaunch::Kind::Kernel &&
               l.gemmFlops() > 0;
      }
      launches += gemms + others;
      if (gemms + others == 0)
        where = "  (done by an earlier launch)";
      else if (program->kernels[i][0].kind ==
               gtc::rt::CudaLaunch::Kind::AllReduce)
        where = "  (one NCCL group on the communication stream)";
      else if (own == 1 && gemms + others == 1)
        where = "  (gtc's small GEMM)";
      else if (gemms)
        where = "  (" + std::to_string(gemms) + " cuBLASLt GEMM" +
                (others ? " + " + std::to_string(others) + " kernels" : "") +
                ")";
      else if (others > 1)
        where = "  (" + std::to_string(others) + " launches)";
      if (gemms + others == 0)
        continue;
    }
    if (!kept)
      ++kinds[k.body.empty() ? std::string(gtc::rt::opName(k.op))
                            : std::string(gtc::rt::opName(k.op)) + " " +
                                  k.strAttr("kind", "")];
    os << llvm::format("  %4zu %-48s %10.2f MB", i, ops.c_str(), b / 1e6);
    if (f > 0)
      os << llvm::format(" %10.2f GFLOP", f / 1e9);
    os << where;
    if (side.count(static_cast<int>(i)))
      os << "  [second stream]";
    os << "\n";
  }
  bool update = plan.kind == "step" && plan.parameterCount() > 0;
  int optimizer = !update ? 0 : gtc::rt::updateNeedsNorm(plan) ? 3 : 1;
  os << "  " << (program ? launches + optimizer : plan.kernels.size() + update)
     << " kernels per step (" << optimizer << " for the optimizer): ";
  bool first = true;
  for (const auto &[kind, n] : kinds) {
    os << (first ? "" : ", ") << kind << " " << n;
    first = false;
  }
  if (!side.empty())
    os << "\n  " << side.size()
       << " kernels on a second stream, beside the kernels before them that "
          "they do not depend on (GTC_ONE_STREAM=1 runs one stream)";
  os << llvm::format("\n  %.2f GB moved, %.2f TFLOP counted (GEMMs, "
                     "attention)\n",
                     bytes / 1e9, flops / 1e12);
}

/// Whether `batch` splits over `processes`; else reports the error, at
/// `devicesFrom` (the devices option or setting) when it is given.
bool batchSplits(int64_t batch, int processes, mlir::LocationAttr devicesFrom) {
  if (batch % processes == 0)
    return true;
  std::string message =
      llvm::formatv("the batch of {0} does not split over {1} processes; give "
                    "a batch divisible by {1} (each process takes batch / {1} "
                    "rows)",
                    batch, processes);
  if (devicesFrom)
    mlir::emitError(devicesFrom) << message;
  else
    llvm::errs() << "gtc: error: " << message << "\n";
  return false;
}

/// The compile options of one of `processes` processes, for gtc run's
/// workers and gtc compile's executables alike: batch / N rows (--batch auto
/// has chosen a process's batch already), the gradients all-reduced in
/// buckets (gt-bucket). --bucket-size, --shard and --rendezvous need
/// several processes;
/// the train block's `shard` (a model file may train on one device or
/// several) only draws a warning in one. False after printing the error.
bool perProcess(const Options &opts, const gtc::Settings &settings,
                int processes, gtc::CompileOptions &compile) {
  if (processes == 1) {
    const std::string &shard = settings.shard;
    if (!settings.shardGiven && shard != "none")
      llvm::errs() << "gtc: warning: shard = " << shard
                   << " has no effect in one process: it splits the "
                   << (shard == "gradients" ? "gradients and the " : "")
                   << "optimizer state over data-parallel processes "
                      "(--devices N, devices = N, or a launcher's)\n";
    if (opts.args.bucketBytes == 0 && !settings.shardGiven &&
        opts.args.rendezvous.empty())
      return true;
    llvm::errs() << "gtc: error: "
                 << (opts.args.bucketBytes ? "--bucket-size"
                     : settings.shardGiven ? "--shard"
                                           : "--rendezvous")
                 << " applies to data parallelism (--devices N, devices = N, "
                    "or a launcher's processes), and this trains in one "
                    "process\n";
    return false;
  }
  if (!settings.batchAuto) {
    if (!batchSplits(compile.batch, processes, settings.devicesFrom))
      return false;
    compile.batch /= processes;
  }
  compile.bucketBytes = opts.args.bucketBytes > 0 ? opts.args.bucketBytes
                                                  : gtc::kDefaultBucketBytes;
  if (settings.shard == "gradients")
    compile.shardGradients = processes;
  compile.gradientsApart = settings.shard == "optimizer";
  return true;
}

/// Keeps an --emit output once it is written, or says why it could not be
/// written (a full disk, /dev/full) and removes a partial regular file.
/// False after printing the error.
bool keepOutput(llvm::ToolOutputFile &output, const std::string &path) {
  output.os().flush();
  if (!output.os().has_error()) {
    output.keep();
    return true;
  }
  llvm::errs() << "gtc: error: cannot write "
               << (path == "-" ? std::string("the standard output")
                               : "'" + path + "'")
               << ": " << output.os().error().message() << "\n";
  output.os().clear_error();
  if (!llvm::sys::fs::is_regular_file(path))
    output.keep(); // never remove a device or a pipe
  return false;
}

/// The train block's settings as a run reads them, --data and --eval
/// applied. False with `error` when those do not apply; false with no error
/// when the file has no train block.
bool dataConfig(const Options &opts, mlir::ModuleOp module,
                gtc::rt::TrainConfig &config, std::string &error) {
  for (auto train : module.getOps<mlir::gt::TrainOp>()) {
    mlir::FailureOr<gtc::rt::TrainConfig> c = gtc::trainConfig(train);
    if (mlir::failed(c))
      return false;
    config = *c;
    return gtc::rt::applyDataPaths(opts.args, config, error);
  }
  return false;
}

/// A process's share of the training data's examples (the train block's
/// data, or --data's), which bounds --batch auto: an epoch needs a step.
/// 0 when the data does not open here (the run says why when it opens it).
/// (The trainer opens the data again: only --batch auto reads it twice.)
int64_t examplesAProcess(const Options &opts, mlir::ModuleOp module,
                         int processes) {
  std::string error;
  gtc::rt::TrainConfig config;
  if (!dataConfig(opts, module, config, error) || config.data.kind.empty())
    return 0;
  std::unique_ptr<gtc::rt::Dataset> data =
      gtc::rt::openSource(config.data, error);
  return data ? data->size() / processes : 0;
}

/// For a model whose inputs have no symbolic dimension (it takes their rows
/// in each process), whether no batch or micro-batch is given that would do
/// nothing; else reports it.
bool fixedRowsFit(const gtc::Settings &settings, int processes,
                  mlir::ModuleOp module) {
  if (!settings.fixedRows)
    return true;
  const int64_t rows = *settings.fixedRows, batch = rows * processes;
  const gtc::CompileOptions &compile = settings.compile;
  if (settings.batchFrom && (settings.batchAuto || compile.batch != batch)) {
    mlir::emitError(settings.batchFrom)
        << "the model's inputs take a fixed " << rows << " rows"
        << (processes > 1 ? " a process, " + std::to_string(batch) + " over " +
                                std::to_string(processes) + " processes"
                          : std::string())
        << " (no dimension of theirs is a name such as B), so "
        << (settings.batchAuto ? "batch auto"
                               : "batch = " + std::to_string(compile.batch))
        << " cannot apply; give " << batch
        << " or no batch, or write the inputs' first dimension as B";
    return false;
  }
  if (compile.microBatch != 0) {
    mlir::emitError(compile.microBatchFrom
                        ? mlir::Location(compile.microBatchFrom)
                        : module.getLoc())
        << "the model's inputs take a fixed " << rows
        << " rows (no dimension of theirs is a name such as B), so "
           "micro_batch cannot split them; drop micro_batch, or write the "
           "inputs' first dimension as B";
    return false;
  }
  return true;
}

/// The compile options of gtc run and gtc compile: the resolved settings,
/// with `deviceMemory`, what the step may use (0: unknown). With --batch
/// auto, the largest batch of at most a process's share of the training
/// examples whose predicted peak fits the checkpoint budget (every repeat
/// iteration recomputed; compileStep's search then recomputes as few as
/// fit), else 95% of deviceMemory. False after printing the error.
bool compileOptions(const Options &opts, const gtc::Settings &settings,
                    mlir::ModuleOp module, int64_t deviceMemory,
                    int processes, gtc::CompileOptions &compile) {
  compile = settings.compile;
  compile.deviceMemory = deviceMemory;
  // A model whose inputs have no symbolic dimension takes its own rows in
  // each process.
  if (std::optional<int64_t> rows = settings.fixedRows) {
    if (!fixedRowsFit(settings, processes, module))
      return false;
    compile.batch = *rows * processes;
    return true;
  }
  if (!settings.batchAuto)
    return true;
  // Micro-batches of M rows peak alike at any batch: the memory does not
  // bound it.
  if (compile.microBatch > 0) {
    llvm::errs() << "gtc: error: --batch auto finds the largest batch that "
                    "fits the memory, and with micro-batches of "
                 << compile.microBatch
                 << " rows every batch needs the same memory: give --batch N "
                    "(a multiple of "
                 << compile.microBatch
                 << "), or --micro-batch auto to split an automatic batch\n";
    return false;
  }
  int64_t budget = gtc::checkpointBudget(compile);
  const bool fromCheckpoint = budget > 0;
  bool checkpointing = fromCheckpoint;
  if (!checkpointing && (budget = gtc::memoryBudget(compile)) <= 0) {
    llvm::errs() << "gtc: error: --batch auto needs a checkpoint budget here "
                    "(--checkpoint 'auto(budget: SIZE)' or checkpoint = "
                    "auto(budget: SIZE)): the free memory of the device is "
                    "not known (a dry run for a GPU, or gtc compile, whose "
                    "executable runs elsewhere)\n";
    return false;
  }
  const int64_t examples = examplesAProcess(opts, module, processes);
  mlir::FailureOr<int64_t> batch =
      gtc::largestBatch(module, compile, budget, checkpointing, examples);
  if (mlir::failed(batch))
    return false;
  compile.batch = *batch;
  // On stderr: stdout may be an --emit output.
  llvm::errs() << "batch auto: " << *batch;
  if (*batch == examples)
    llvm::errs() << (processes > 1 ? ", a process's share of the"
                                   : ", all of the")
                 << " training examples (one step an epoch), within ";
  else
    llvm::errs() << ", the largest whose predicted peak fits ";
  llvm::errs() << llvm::format("%.2f MiB", budget / 1048576.0) << " ("
               << (checkpointing    ? "the checkpoint budget, every repeat "
                                          "iteration recomputed"
                   : fromCheckpoint ? "the checkpoint budget; no repeat loop "
                                      "to recompute"
                                    : "95% of the free memory")
               << ")\n";
  return true;
}

/// ZeRO-1's optimizer state a process: the parts of gtc's CpuBackend and
/// CUDA executor, N equal ones (the last shorter).
int64_t optimizerPart(const gtc::rt::Plan::Memory &m, int processes) {
  return (m.optimizerState + processes - 1) / processes;
}

/// A process's predicted peak: the plan's, with ZeRO-1's part of the
/// optimizer state (ZeRO-2's plan has the shards in its peak already; a
/// ZeRO-1 plan keeps its gradients apart, CompileOptions::gradientsApart).
int64_t processPeak(const gtc::rt::Plan &step, int processes,
                    bool shardOptimizer) {
  const gtc::rt::Plan::Memory m = step.memory();
  return shardOptimizer && step.shardRanks <= 1
             ? m.peak() - m.optimizerState + optimizerPart(m, processes)
             : m.peak();
}

/// --explain and --dry-run of one of `processes` data-parallel processes:
/// the global batch, what each step reduces, and what each process keeps
/// of the gradients and optimizer state (ZeRO).
void explainDataParallel(const gtc::rt::Plan &step, int processes, bool cuda,
                         bool shardOptimizer, llvm::raw_ostream &os) {
  os << "data parallel: " << processes << " processes of batch "
     << step.batch * step.microBatches << " (global batch "
     << step.batch * step.microBatches * processes
     << "); the plan above is one process's\n";
  // What each step all-reduces: gt-bucket's buckets (with
  // accumulation, those of the last micro-batch).
  int buckets = 0;
  double bytes = 0;
  for (const gtc::rt::Kernel &k : step.kernels)
    if (k.op == gtc::rt::OpKind::AllReduce) {
      ++buckets;
      for (int id : k.outputs)
        bytes += gtc::rt::bufferBytes(step, id);
    }
  // (ZeRO-2 reduces every micro-batch's buckets to their owners)
  const bool everyMicroBatch = step.shardRanks > 1 && step.microBatches > 1;
  if (everyMicroBatch)
    bytes *= static_cast<double>(step.microBatches);
  os << "gradients averaged in " << buckets << " bucket"
     << (buckets == 1 ? "" : "s") << " during "
     << (everyMicroBatch           ? "each micro-batch's "
         : step.microBatches > 1 ? "the last micro-batch's "
                                 : "the ")
     << "backward, " << llvm::format("%.2f MiB", bytes / 1048576.0)
     << " a step ("
     << (cuda ? "NCCL" : "Gloo")
     << (step.shardRanks > 1 ? ", each reduced to the processes that own its "
                               "parts)\n"
                             : ", one collective each)\n");
  const gtc::rt::Plan::Memory m = step.memory();
  const int64_t part = optimizerPart(m, processes);
  auto mib = [](int64_t b) {
    return llvm::format("%.2f MiB", static_cast<double>(b) / 1048576.0);
  };
  if (step.shardRanks > 1)
    os << "shard = gradients (ZeRO-2): gradients " << mib(m.gradients)
       << " and optimizer state " << mib(m.optimizerState)
       << " a process instead of " << mib(m.weights) << " and "
       << mib(step.stateFloats() * m.weights)
       << " (each bucket's gradients a temporary until the "
          "step's end); predicted peak "
       << mib(m.peak()) << " a process\n";
  else if (shardOptimizer)
    os << "shard = optimizer (ZeRO-1): optimizer state " << mib(part)
       << " a process instead of " << mib(m.optimizerState)
       << "; predicted peak "
       << mib(processPeak(step, processes, /*shardOptimizer=*/true))
       << " a process instead of " << mib(m.peak()) << "\n";
  else
    os << "shard = none: every process keeps the whole "
          "optimizer state ("
       << mib(m.optimizerState) << "); shard = optimizer would keep "
       << mib(part) << " a process\n";
}

/// --explain and --dry-run on a GPU: the memory a GPU will have in use,
/// the plan's peak (a process's, with ZeRO-1's part of the optimizer state)
/// and what the last run of as many processes on this GPU measured outside
/// it (the context, NCCL's buffers, the libraries').
void explainGpuMemory(const gtc::rt::Plan &step, int processes,
                      bool shardOptimizer, const std::string &gpu,
                      llvm::raw_ostream &os) {
  const int64_t peak = processPeak(step, processes, shardOptimizer);
  auto mib = [](int64_t b) {
    return llvm::format("%.1f MiB", static_cast<double>(b) / 1048576.0);
  };
  const std::string runs = std::to_string(processes) + " process" +
                           (processes == 1 ? "" : "es") + " on " +
                           (gpu.empty() ? "this GPU" : gpu);
  std::optional<gtc::rt::OutsideMemory> outside =
      gpu.empty() ? std::nullopt
                  : gtc::rt::recordedOutsideMemory(gpu, processes);
  if (!outside) {
    os << "not in the plan: the CUDA context"
       << (processes > 1 ? ", NCCL's buffers" : "")
       << " and the libraries' memory, not yet measured for " << runs
       << " (a run records them after its first step; --explain counts "
          "them from then on)\n";
    return;
  }
  os << "GPU memory in use, predicted a GPU: "
     << mib(peak + outside->context + outside->rest) << " = " << mib(peak)
     << " the plan's peak + " << mib(outside->context) << " the CUDA context + "
     << mib(outside->rest)
     << (processes > 1 ? " NCCL's buffers and the libraries'"
                       : " the libraries'")
     << " (measured by the last run of " << runs << ")\n";
}

/// --emit=cuda: every launch of the program, kernels with their source.
void emitCuda(const gtc::rt::Plan &step, const gtc::rt::CudaProgram *program,
              llvm::raw_ostream &os) {
  for (size_t k = 0; k < program->kernels.size(); ++k)
    for (const gtc::rt::CudaLaunch &l : program->kernels[k]) {
      if (l.kind == gtc::rt::CudaLaunch::Kind::Kernel) {
        os << "// launch " << l.name << ": grid " << l.grid << ", block "
           << l.block << "\n"
           << l.comment << l.source << "\n";
        // What a device of exactly that compute capability runs instead
        // (or that it runs none).
        for (const gtc::rt::CudaLaunch::Variant &v : l.variants)
          if (v.source.empty())
            os << "// launch " << l.name << " on compute capability "
               << v.major << "." << v.minor << " (" << v.arch << ")"
               << (v.withOwnGemm ? " unless GTC_HOPPER_GEMM=0" : "") << ": "
               << v.what.substr(3) << "\n\n";
          else
            os << "// launch " << l.name << " on compute capability "
               << v.major << "." << v.minor << " (" << v.arch << "): grid "
               << v.grid << ", block " << v.block << ", " << v.shared
               << " bytes of shared memory\n"
               << v.what << "\n"
               << v.source << "\n";
      } else if (l.kind == gtc::rt::CudaLaunch::Kind::Gemm) {
        os << "// cuBLASLt GEMM for kernel " << k << " ("
           << gtc::rt::opName(step.kernels[k].op) << "): " << l.m << "x" << l.n
           << "x" << l.k << (l.transA ? " A^T" : "") << (l.transB ? " B^T" : "")
           << ", batch " << l.batch
           << (l.epilogueName().empty() ? std::string()
                                        : ", epilogue" + l.epilogueName())
           << "\n\n";
        // gtc's own GEMM, which a device of that capability runs instead
        // (unless GTC_HOPPER_GEMM=0).
        for (const gtc::rt::CudaLaunch::Variant &v : l.variants)
          os << "// launch " << l.name << " on compute capability " << v.major
             << "." << v.minor << " (" << v.arch
             << ") instead (GTC_HOPPER_GEMM=0: cuBLASLt's): at most "
             << v.grid << " blocks (one an SM), block " << v.block << ", "
             << v.shared << " bytes of shared memory\n"
             << v.what << "\n"
             << v.source << "\n";
      } else
        os << "// memset of buffer " << l.c << "\n\n";
    }
}

/// --explain and --dry-run: the plan, its precision (against fp32's), data
/// parallelism, checkpointing and the kernels. False after an error.
bool explainRun(mlir::ModuleOp module, const gtc::CompileOptions &compile,
                const gtc::rt::Plan &step, const gtc::rt::RunOptions &run,
                int processes) {
  explainPlan(step, llvm::outs());
  std::optional<gtc::rt::Plan> fp32;
  gtc::rt::Precision p = step.config.precision;
  if (p == gtc::rt::Precision::Bf16 || p == gtc::rt::Precision::Fp16) {
    // Best effort: an fp32 plan that does not compile (a checkpoint
    // budget it cannot meet) only leaves the comparison out.
    mlir::ScopedDiagnosticHandler quiet(
        module.getContext(),
        [](mlir::Diagnostic &) { return mlir::success(); });
    gtc::CompileOptions f = compile;
    f.precision = "fp32";
    f.pad = true; // nothing to pad at fp32
    f.padAll = false;
    if (auto plan = gtc::compileStep(module, f); mlir::succeeded(plan))
      fp32 = std::move(*plan);
  }
  explainPrecision(step, fp32 ? &*fp32 : nullptr, llvm::outs());
  if (processes > 1)
    explainDataParallel(step, processes, run.device == "cuda",
                        run.shardOptimizer, llvm::outs());
  if (run.device == "cuda")
    explainGpuMemory(step, processes, run.shardOptimizer, run.deviceName,
                     llvm::outs());
  if (gtc::checkpointRequested(compile)) {
    gtc::CompileOptions n = compile;
    n.checkpointEvery = -1;
    n.checkpointBudget = 0;
    if (auto none = gtc::compileStep(module, n); mlir::succeeded(none))
      explainCheckpoint(step, *none, llvm::outs());
  }
  const gtc::rt::CudaProgram *program = nullptr;
  if (run.device == "cuda" && !(program = run.programFor(step)))
    return false;
  explainKernels(step, program, llvm::outs());
  llvm::outs().flush();
  return true;
}

/// The processes an executable (or gtc check's plan) trains with: devices
/// = N; one for all (an executable trains on one device), cpu or none.
int compiledProcesses(const std::string &devices) {
  return !devices.empty() && devices != "cpu" && devices != "all"
             ? std::stoi(devices)
             : 1;
}

/// sample_every's generation plans, at batch 1: the whole window, then one
/// position (a model gt-decode cannot sample from is refused here, with its
/// reason). False after printing the error.
bool samplePlans(mlir::ModuleOp module, const gtc::CompileOptions &compile,
                 mlir::FailureOr<gtc::rt::Plan> &window,
                 mlir::FailureOr<gtc::rt::Plan> &step) {
  gtc::CompileOptions one = compile;
  one.batch = 1;
  one.checkpointEvery = one.checkpointBudget = one.microBatch = 0;
  one.bucketBytes = 0;
  one.shardGradients = 1;
  if (mlir::succeeded(window = gtc::compileDecode(module, one, 0, true)) &&
      mlir::succeeded(step = gtc::compileDecode(module, one, 1, true)))
    return true;
  llvm::errs() << "gtc: error: sample_every needs a language model that "
                  "gtc sample can generate from (above); drop "
                  "sample_every\n";
  return false;
}

/// gtc check, past the front end: the training step as gtc run would plan
/// it for the CPU with the file's settings (its batch over its devices, in
/// its micro-batches, with its checkpointing), and sample_every's plans,
/// so that what only a plan shows is found without data or a device.
/// False after printing the error.
bool checkPlans(const Options &opts, mlir::ModuleOp module) {
  const gtc::Settings settings = gtc::resolveSettings(module, opts.args);
  const int processes = compiledProcesses(settings.devices);
  gtc::CompileOptions compile;
  if (!compileOptions(opts, settings, module, /*deviceMemory=*/0, processes,
                      compile) ||
      !perProcess(opts, settings, processes, compile))
    return false;
  mlir::FailureOr<gtc::rt::Plan> step = gtc::compileStep(module, compile);
  if (mlir::failed(step))
    return false;
  mlir::FailureOr<gtc::rt::Plan> window = mlir::failure(),
                                 one = mlir::failure();
  return step->config.sampleEvery <= 0 ||
         samplePlans(module, compile, window, one);
}

/// Trains `step`, compiling an evaluation plan for each batch size the
/// trainer asks for (the eval set's full batches and its remainder).
int trainModel(mlir::ModuleOp module, const gtc::CompileOptions &compile,
               const gtc::rt::Plan &step, gtc::rt::RunOptions run) {
  // sample_every: the generation plans, made before training.
  mlir::FailureOr<gtc::rt::Plan> sampleWindow = mlir::failure(),
                                 sampleStep = mlir::failure();
  if ((run.sampleEvery > 0 ? run.sampleEvery : step.config.sampleEvery) > 0) {
    if (!samplePlans(module, compile, sampleWindow, sampleStep))
      return 1;
    run.sampleWindow = &*sampleWindow;
    run.sampleStep = &*sampleStep;
  }
  std::map<int64_t, std::unique_ptr<gtc::rt::Plan>> evalPlans;
  gtc::rt::EvalPlanFn evalPlan = [&](int64_t n) -> const gtc::rt::Plan * {
    // Compiled once a batch size, a batch without a plan too (null).
    auto [it, first] = evalPlans.try_emplace(n);
    std::unique_ptr<gtc::rt::Plan> &slot = it->second;
    if (first) {
      gtc::CompileOptions evalOptions = compile;
      evalOptions.batch = n;
      mlir::FailureOr<gtc::rt::Plan> plan =
          gtc::compileEval(module, evalOptions);
      // A model of fixed rows has no plan for another batch (the
      // remainder's: the trainer skips it, with a note).
      if (mlir::failed(plan) || plan->batch != n)
        return nullptr;
      slot = std::make_unique<gtc::rt::Plan>(std::move(*plan));
    }
    return slot.get();
  };
  std::cout.flush();
  return gtc::rt::train(step, evalPlan, run, std::cout, std::cerr);
}

/// `gtc run`: compiles the step (and evaluation) plans and trains.
int runModel(const Options &opts, mlir::ModuleOp module,
             llvm::ToolOutputFile *output) {
  gtc::rt::RunOptions run = opts.args.run;
  run.sourcePath = opts.input; // "-": standard input, no file
  std::string error;
  mlir::gt::TrainOp trainOp;
  for (auto t : module.getOps<mlir::gt::TrainOp>())
    trainOp = t;
  const gtc::Settings settings = gtc::resolveSettings(module, opts.args);

  // Data parallelism: join the processes of a launcher (torchrun, srun,
  // mpirun, or gtc's own workers), or start `devices` of them. A process of
  // a launch uses the GPU of its local rank.
  gtc::rt::World world;
  if (!gtc::rt::worldFromEnvironment(world, opts.args.rendezvous, error)) {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }
  if (world.size > 1)
    gtc::rt::selectCudaDevice(world.localRank);
  const std::string &devices = settings.devices;
  // `all` is every GPU of this host (a dry run without one plans for one),
  // or under a launcher its processes; the CPU is one device.
  // --emit=mlir prints the module (main) and trains; the other --emit
  // forms print and stop.
  const bool printsOnly = opts.emit != Emit::None && opts.emit != Emit::MLIR;
  std::string asked = opts.args.device;
  if (!gtc::rt::deviceForDevices(devices, asked, error)) {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }
  const bool mayUseGpu = asked != "cpu" && !printsOnly;
  const int gpus = devices == "all" && world.size == 1 && mayUseGpu
                       ? gtc::rt::cudaDeviceCount()
                       : 1;
  int processes = gtc::rt::dataParallelProcesses(devices, world, gpus,
                                                 /*compiled=*/0, error);
  if (processes == 0) {
    // Every process of a launch finds this: one write each, so that their
    // messages do not interleave on a shared stderr.
    llvm::errs() << ("gtc: error: " + error + "\n");
    return 1;
  }
  // (--explain prints the plan first, in rank 0 alone, then trains.)
  const bool trains = !printsOnly && !opts.args.dryRun && opts.args.bench == 0;
  // What N processes run together: training, or on GPUs the step timed
  // (--bench, --profile) with its collectives.
  const bool timesSteps = !printsOnly && !opts.args.dryRun &&
                          (opts.args.bench > 0 || !run.profilePath.empty());
  // --emit=mlir: the module, printed once, before one process trains.
  if (opts.emit == Emit::MLIR) {
    if (processes > 1 && (trains || timesSteps)) {
      llvm::errs() << ("gtc: error: --emit=mlir prints the module and then "
                       "trains in one process, and this run has " +
                       std::to_string(processes) +
                       " (devices, or a launcher's); print it with gtc check " +
                       opts.input + " --emit=mlir, and train without --emit\n");
      return 1;
    }
    module.print(output->os());
    if (!keepOutput(*output, opts.output))
      return 1;
  }
  // A launcher refuses --threads with GPUs before its workers start.
  if (processes > 1 && world.size == 1 && gtc::rt::threadsOnGpus(run, asked)) {
    llvm::errs() << "gtc: error: " << gtc::rt::kThreadsOnGpuError << "\n";
    return 1;
  }
  // N CPU processes are not timed together: refused before any starts
  // (benchmark() refuses too, once `auto` has chosen the CPU).
  if (processes > 1 && timesSteps && asked == "cpu") {
    llvm::errs() << "gtc: error: " << gtc::rt::kCpuBenchError << "\n";
    return 1;
  }
  if (processes > 1 && asked == "cpu" && settings.shard == "gradients") {
    llvm::errs() << "gtc: error: " << gtc::rt::kCpuShardGradientsError << "\n";
    return 1;
  }
  // `batch` is the global batch: each process takes batch / N rows. The
  // launcher itself opens no GPU.
  if (processes > 1 && world.size == 1 && (trains || timesSteps)) {
    if (settings.fixedRows ? !fixedRowsFit(settings, processes, module)
                           : !settings.batchAuto &&
                                 !batchSplits(settings.compile.batch,
                                              processes, settings.devicesFrom))
      return 1;
    // What the workers would each find, found once, before they start.
    const int64_t share = settings.compile.batch / processes;
    const int64_t micro = settings.compile.microBatch;
    if (!settings.batchAuto && !settings.fixedRows && micro > 0 &&
        share % micro != 0) {
      llvm::errs() << "gtc: error: micro_batch = " << micro
                   << " does not divide a process's share of the batch, "
                   << share << " (" << settings.compile.batch << " over "
                   << processes << " processes); give a divisor of " << share
                   << " (or auto)\n";
      return 1;
    }
    if (gtc::rt::TrainConfig config;
        !dataConfig(opts, module, config, error) && !error.empty())
      return usageError(error);
    return gtc::rt::spawnWorkers(processes, opts.argv);
  }

  // A dry run (and --emit=step/plan/cuda) plans for --device cuda without
  // a GPU; auto takes the GPU if there is one, as a run would; what only
  // prints plans for the CPU unless --device cuda says otherwise.
  std::string device = printsOnly && asked != "cuda" ? "cpu" : asked;
  if ((opts.args.dryRun || printsOnly) && device == "cuda") {
    // (a GPU here gives its name, for the memory runs on it measured)
    if (!gtc::rt::chooseDevice(device, run, error))
      run.device = "cuda";
  } else if (!gtc::rt::chooseDevice(device, run, error)) {
    // (one write: the workers of a launch may all find this)
    llvm::errs() << ("gtc: error: " + error + "\n");
    return 1;
  }

  gtc::CompileOptions compile;
  if (!compileOptions(opts, settings, module,
                      run.device == "cpu" ? gtc::rt::availableMemory()
                                          : run.deviceFreeMemory,
                      processes, compile))
    return 1;
  if (!perProcess(opts, settings, processes, compile))
    return 1;
  run.shardOptimizer = processes > 1 && settings.shard != "none";
  std::unique_ptr<gtc::rt::Communicator> comm;
  if (world.size > 1 && (trains || timesSteps)) {
    if (!(comm = gtc::rt::connect(world, run.device, error))) {
      llvm::errs() << "gtc: error: " << error << "\n";
      return 1;
    }
    run.comm = comm.get();
  }

  if (opts.emit == Emit::Step) {
    auto step = gtc::lowerToStep(module, compile);
    if (mlir::failed(step))
      return 1;
    (*step)->print(output->os());
    return keepOutput(*output, opts.output) ? 0 : 1;
  }
  mlir::FailureOr<gtc::rt::Plan> step = gtc::compileStep(module, compile);
  if (mlir::failed(step))
    return 1;
  if (!gtc::rt::applyDataPaths(opts.args, step->config, error))
    return usageError(error);
  if (opts.emit == Emit::Plan) {
    output->os() << gtc::rt::serialize(*step);
    return keepOutput(*output, opts.output) ? 0 : 1;
  }
  run.programFor = gtc::codegen::programCache("gtc");
  if (opts.emit == Emit::Cuda) {
    const gtc::rt::CudaProgram *program = run.programFor(*step);
    if (!program)
      return 1;
    emitCuda(*step, program, output->os());
    return keepOutput(*output, opts.output) ? 0 : 1;
  }
  if ((opts.args.dryRun || (opts.args.explain && world.rank == 0)) &&
      !explainRun(module, compile, *step, run, processes))
    return 1;
  if (opts.args.dryRun) {
    llvm::outs() << "dry run: planned " << step->model << " at batch "
                 << step->batch << " for "
                 << (run.device == "cuda" ? "the GPU" : "the CPU")
                 << "; nothing was trained\n";
    return 0;
  }
  if (opts.args.bench || !run.profilePath.empty())
    return gtc::rt::benchmark(*step, run, opts.args.bench ? opts.args.bench : 20,
                              std::cout, std::cerr);
  if (!trainOp) {
    llvm::errs() << "gtc: error: " << opts.input
                 << " has no train block; add one after the model, with at "
                    "least 'data = ...' (see frontend/LANGUAGE.md)\n";
    return 1;
  }
  return trainModel(module, compile, *step, run);
}

/// The runner `gtc compile` builds on: $GTC_RUNNER, else gtc-runner next to
/// this gtc.
std::string findRunner(const char *argv0) {
  if (const char *env = std::getenv("GTC_RUNNER"))
    return env;
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&findRunner));
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(dir, "gtc-runner");
  return std::string(dir);
}

/// Cubins of every plan's kernels (and the runtime's own, the optimizer
/// update) for each of the bundle's archs, and PTX for `ptxArch` (later
/// GPUs), into the bundle, with the variants of kernels and GEMMs (gtc's
/// Hopper GEMM in place of cuBLASLt's) for the bundle's archs; without
/// NVRTC, or on a compile error, none (the executable compiles them on the
/// GPU machine), with a warning. Returns the number of variants' cubins.
std::optional<size_t>
precompileKernels(const std::vector<gtc::rt::Plan> &plans,
                  const std::string &ptxArch, gtc::rt::Bundle &bundle) {
  std::string nvrtcProblem;
  // The plans' kernels and the runtime's own (the optimizer update).
  std::vector<std::string> sources = gtc::rt::runtimeKernelSources();
  std::vector<std::pair<std::string, std::string>> variantSources;
  for (const gtc::rt::Plan &plan : plans) {
    gtc::rt::CudaProgram program;
    std::string error;
    if (!gtc::codegen::emitCuda(plan, program, error)) {
      llvm::errs() << "gtc: warning: no GPU kernels (" << error
                   << "); the executable trains on the CPU only\n";
      sources.clear();
      variantSources.clear();
      break;
    }
    for (const auto &launches : program.kernels)
      for (const gtc::rt::CudaLaunch &l : launches) {
        if (l.kind == gtc::rt::CudaLaunch::Kind::Kernel)
          sources.push_back(l.source);
        // A variant for one of the bundle's archs (of a kernel, or of a
        // cuBLASLt GEMM), compiled for its own.
        for (const gtc::rt::CudaLaunch::Variant &v : l.variants)
          if (!v.source.empty() &&
              llvm::is_contained(bundle.archs, "sm_" +
                                                   std::to_string(v.major) +
                                                   std::to_string(v.minor)))
            variantSources.push_back({v.source, v.arch});
      }
  }
  // Cubins for each arch, and PTX of the newest for later GPUs: one NVRTC
  // job per (distinct source, target), on every core.
  std::vector<gtc::rt::CompileJob> jobs;
  std::vector<std::string> jobKeys;
  std::set<std::string> keys;
  for (const std::string &source : sources) {
    std::vector<std::string> targets = bundle.archs;
    targets.push_back(ptxArch);
    for (const std::string &a : targets) {
      std::string key = gtc::rt::kernelKey(source, a == ptxArch ? "ptx" : a);
      if (keys.insert(key).second) {
        jobs.push_back({&source, a, {}, false, ""});
        jobKeys.push_back(key);
      }
    }
  }
  size_t variants = 0;
  for (const auto &[source, arch] : variantSources) {
    std::string key = gtc::rt::kernelKey(source, arch);
    if (keys.insert(key).second) {
      jobs.push_back({&source, arch, {}, false, ""});
      jobKeys.push_back(key);
      ++variants;
    }
  }
  unsigned threads = 0;
  gtc::rt::compileCudaJobs(jobs, threads);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].error.empty()) {
      nvrtcProblem = jobs[j].error;
      break;
    }
    bundle.kernels[jobKeys[j]].assign(jobs[j].binary.begin(),
                                      jobs[j].binary.end());
  }
  if (!nvrtcProblem.empty()) {
    // The header line and the log's first line.
    StringRef header, log;
    std::tie(header, log) = StringRef(nvrtcProblem).split('\n');
    std::string why = (header + " " + log.split('\n').first.trim()).str();
    if (log.contains("gpu-architecture")) {
      llvm::errs() << "gtc: error: --arch: " << why
                   << "; give architectures this NVRTC knows, e.g. "
                      "sm_80,sm_90\n";
      return std::nullopt;
    }
    llvm::errs() << "gtc: warning: GPU kernels not precompiled (" << why
                 << "); the executable compiles them with NVRTC on the GPU "
                    "machine\n";
    bundle.kernels.clear();
    bundle.archs.clear();
    return 0;
  }
  return variants;
}

/// Writes the executable `output`: the runner, then the bundle's payload;
/// beside the target first, then renamed, so never a half-written one.
/// False after printing the error.
bool writeExecutable(const std::string &output, llvm::StringRef runner,
                     const std::string &payload) {
  // Write beside the target, then rename: never a half-written executable.
  std::string tmp = gtc::rt::tempPathBeside(output);
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(tmp, ec, llvm::sys::fs::OF_None);
    if (ec) {
      llvm::errs() << "gtc: error: cannot write '" << output << "' (through '"
                   << tmp << "' beside it): " << ec.message() << "\n";
      return false;
    }
    out << runner << payload;
    out.close();
    if (out.has_error()) {
      llvm::errs() << "gtc: error: writing " << tmp
                   << " failed: " << out.error().message() << "\n";
      out.clear_error();
      llvm::sys::fs::remove(tmp);
      return false;
    }
  }
  llvm::sys::fs::setPermissions(tmp, llvm::sys::fs::all_read |
                                         llvm::sys::fs::all_exe |
                                         llvm::sys::fs::owner_write);
  if (std::error_code ec = llvm::sys::fs::rename(tmp, output)) {
    llvm::errs() << "gtc: error: cannot create " << output << ": "
                 << ec.message() << "\n";
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

/// `gtc compile`: the runner plus the plans (step; evaluation at the batch
/// size and at the last, smaller batch of the eval data) and every kernel
/// compiled by NVRTC for each --arch, plus PTX for the newest.
int compileModel(const Options &opts, mlir::ModuleOp module,
                 const char *argv0) {
  auto t0 = std::chrono::steady_clock::now();
  if (opts.output == "-")
    return usageError("gtc compile needs -o EXE (the executable to write; "
                      "not standard output)");
  if (llvm::sys::fs::is_directory(opts.output) ||
      StringRef(opts.output).ends_with("/"))
    return usageError("-o '" + opts.output +
                      "' names a directory; give the executable's file name, "
                      "e.g. -o " +
                      (StringRef(opts.output).ends_with("/")
                           ? opts.output
                           : opts.output + "/") +
                      "model");
  // The executable is written beside -o and renamed over it, which would
  // put a file where a device or a pipe was (/dev/null, /dev/full).
  if (llvm::sys::fs::exists(opts.output) &&
      !llvm::sys::fs::is_regular_file(opts.output))
    return usageError("-o '" + opts.output +
                      "' is not a regular file (a pipe or a device), which "
                      "the executable would replace; give the executable's "
                      "file name");
  // The GPU architectures, checked before anything is compiled.
  llvm::SmallVector<StringRef> archs;
  StringRef(opts.arch).split(archs, ',', -1, /*KeepEmpty=*/true);
  std::string newest;
  for (StringRef a : archs) {
    StringRef number = a.starts_with("sm_") ? a.drop_front(3) : "";
    number.consume_back("a"); // sm_90a: Hopper's arch-specific features
    if (number.size() < 2 || number.size() > 3 ||
        number.find_first_not_of("0123456789") != StringRef::npos)
      return usageError("--arch takes sm_XY names (e.g. sm_80,sm_90), got '" +
                        a + "'");
    if (newest.empty() || a.substr(3).compare_numeric(newest.substr(3)) > 0)
      newest = a.str();
  }
  // gtc compile takes the options that choose what is compiled, and
  // --devices (the executable's processes); the executable takes the rest.
  for (const std::string &name : opts.args.names) {
    if (name == "--explain")
      return usageError("--explain goes with gtc run; to see what gtc compile "
                        "plans, give gtc run " + opts.input +
                        " --dry-run the same options");
    if (name != "--devices" && !gtc::rt::isCompilingOption(name))
      return usageError(name + " applies when the executable runs: give it to "
                               "the compiled executable, not to gtc compile");
  }
  mlir::gt::TrainOp trainOp;
  for (auto t : module.getOps<mlir::gt::TrainOp>())
    trainOp = t;
  if (!trainOp) {
    llvm::errs() << "gtc: error: " << opts.input
                 << " has no train block; a compiled executable trains what "
                    "it says: add one after the model (see "
                    "frontend/LANGUAGE.md)\n";
    return 1;
  }
  // devices = N: the executable trains with N processes (it starts them,
  // or joins a launcher's N), each with the plan of batch / N rows, its
  // gradients all-reduced in buckets. devices = all: one device.
  const gtc::Settings settings = gtc::resolveSettings(module, opts.args);
  const std::string &devices = settings.devices;
  const int processes = compiledProcesses(devices);
  if (devices == "all")
    llvm::errs() << "gtc: warning: devices = all: a compiled executable "
                    "trains on one device (the first GPU, or the CPU); train "
                    "on every GPU with gtc run, or compile with devices = N\n";
  // The executable runs elsewhere: no device memory to plan for.
  gtc::CompileOptions compile;
  if (!compileOptions(opts, settings, module, /*deviceMemory=*/0, processes,
                      compile))
    return 1;
  if (!perProcess(opts, settings, processes, compile))
    return 1;
  mlir::FailureOr<gtc::rt::Plan> step = gtc::compileStep(module, compile);
  if (mlir::failed(step))
    return 1;
  if (step->config.sampleEvery > 0) {
    llvm::errs() << "gtc: error: sample_every prints samples under gtc run; "
                    "a compiled executable has no generation plans: drop "
                    "sample_every, and sample from its --save file with gtc "
                    "sample\n";
    return 1;
  }
  // Before anything more is compiled: -o must not name a file the run reads.
  std::string runnerPath = findRunner(argv0);
  std::string replaced = gtc::rt::sameFile(opts.output, runnerPath)
                             ? "the runner it is built from"
                             : gtc::rt::fileTheRunReads(
                                   opts.output, step->config, opts.input);
  if (!replaced.empty()) {
    llvm::errs() << "gtc: error: -o '" << opts.output << "' is " << replaced
                 << ", which the executable would replace; give -o another "
                    "path\n";
    return 1;
  }
  std::vector<gtc::rt::Plan> plans{*step};
  gtc::rt::Bundle bundle;
  bundle.step = gtc::rt::serialize(*step);
  bundle.processes = processes;
  bundle.shardOptimizer = processes > 1 && settings.shard != "none";
  bundle.cpu = devices == "cpu";
  // Evaluation plans: full batches (micro-batches, with gradient
  // accumulation), and the remainder of the eval data as it is now (an
  // executable given other eval data says so).
  std::vector<int64_t> evalBatches;
  if (!step->config.eval.kind.empty()) {
    evalBatches.push_back(step->batch);
    std::string error;
    if (auto data = gtc::rt::openSource(step->config.eval, error)) {
      if (data->size() % step->batch)
        evalBatches.push_back(data->size() % step->batch);
    } else {
      llvm::errs() << "gtc: warning: " << error
                   << "; the executable evaluates full batches only\n";
    }
  }
  for (int64_t n : evalBatches) {
    gtc::CompileOptions e = compile;
    e.batch = n;
    mlir::FailureOr<gtc::rt::Plan> plan = gtc::compileEval(module, e);
    if (mlir::failed(plan))
      return 1;
    bundle.evals[n] = gtc::rt::serialize(*plan);
    plans.push_back(std::move(*plan));
  }
  // Kernels: cubins for each arch and PTX of the newest (same sources as
  // the runner's emitter makes; they are looked up by source hash).
  for (StringRef a : archs)
    bundle.archs.push_back(a.str());
  std::string ptxArch = "compute_" + newest.substr(3);
  std::optional<size_t> variants = precompileKernels(plans, ptxArch, bundle);
  if (!variants)
    return 1;

  auto runner = llvm::MemoryBuffer::getFile(runnerPath, /*IsText=*/false);
  if (!runner) {
    llvm::errs() << "gtc: error: cannot read the runner " << runnerPath << ": "
                 << runner.getError().message()
                 << "; build the gtc-runner target (or set GTC_RUNNER)\n";
    return 1;
  }
  std::string payload = gtc::rt::packBundle(bundle);
  if (!writeExecutable(opts.output, (*runner)->getBuffer(), payload))
    return 1;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  // Variants: the kernels a device of one compute capability runs instead
  // (sm_90a: the Hopper attention kernels and gtc's own GEMM).
  std::string variantNote =
      *variants ? ", " + std::to_string(*variants) +
                      " of them variants for one compute capability"
                : "";
  size_t kernelBytes = 0;
  for (const auto &[key, bin] : bundle.kernels)
    kernelBytes += bin.size();
  llvm::outs() << llvm::format(
      "wrote %s: %.1f MiB (runner %.1f MiB, plans %.1f KiB, %zu GPU kernel "
      "binaries %.1f MiB for %s%s%s) in %.1f s\n",
      opts.output.c_str(), (runner.get()->getBufferSize() + payload.size()) /
                               1048576.0,
      runner.get()->getBufferSize() / 1048576.0,
      (bundle.step.size() +
       [&] {
         size_t n = 0;
         for (const auto &[b, p] : bundle.evals)
           n += p.size();
         return n;
       }()) / 1024.0,
      bundle.kernels.size(), kernelBytes / 1048576.0,
      opts.arch.c_str(), bundle.kernels.empty() ? " (none)" : " + PTX",
      variantNote.c_str(), seconds);
  llvm::outs() << "model " << step->model << ", "
               << gtc::rt::describeBatch(*step, processes) << ", precision "
               << gtc::rt::name(step->config.precision) << "; run '"
               << opts.output << " --help' for its options\n";
  return 0;
}


/// Diagnostics on a long line (generated code, minified files) show at most
/// 120 characters around their column, not the whole line, and those on a
/// line with non-ASCII characters a caret under the column's character
/// (SourceMgrDiagnosticHandler prints the whole line, and no caret there).
/// print() takes a diagnostic whose place, call sites or notes are on such
/// a line, and leaves the others to SourceMgrDiagnosticHandler.
class SourceExcerpts {
public:
  SourceExcerpts(const llvm::SourceMgr &sourceMgr, StringRef path,
                 unsigned callStackLimit)
      : text(sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                 ->getBuffer()),
        path(path), callStackLimit(callStackLimit) {}

  mlir::LogicalResult print(mlir::Diagnostic &d, StringRef kind) const {
    if (!fileLoc(d.getLocation()))
      return mlir::failure();
    // As many callers as SourceMgrDiagnosticHandler shows.
    std::vector<mlir::Location> callers;
    for (auto call = llvm::dyn_cast<mlir::CallSiteLoc>(d.getLocation()); call;
         call = llvm::dyn_cast<mlir::CallSiteLoc>(call.getCaller()))
      if (callers.size() < callStackLimit)
        callers.push_back(call.getCaller());
    auto plain = [&](mlir::Location loc) { return isPlain(loc); };
    if (plain(d.getLocation()) && llvm::all_of(callers, plain) &&
        llvm::all_of(d.getNotes(), [&](mlir::Diagnostic &note) {
          return plain(note.getLocation());
        }))
      return mlir::failure();
    excerpt(d.getLocation(), kind, d.str());
    for (mlir::Location caller : callers)
      excerpt(caller, "note", "called from");
    for (mlir::Diagnostic &note : d.getNotes())
      excerpt(note.getLocation(), "note", note.str());
    return mlir::success();
  }

private:
  static constexpr size_t kExcerpt = 120;

  /// The place in the file, as SourceMgrDiagnosticHandler finds it: a call
  /// site's innermost, a name's child, a fused location's first (a train
  /// block's settings).
  static mlir::FileLineColLoc fileLoc(mlir::Location loc) {
    if (auto call = llvm::dyn_cast<mlir::CallSiteLoc>(loc))
      return fileLoc(call.getCallee());
    if (auto name = llvm::dyn_cast<mlir::NameLoc>(loc))
      return fileLoc(name.getChildLoc());
    if (auto fused = llvm::dyn_cast<mlir::FusedLoc>(loc)) {
      for (mlir::Location part : fused.getLocations())
        if (mlir::FileLineColLoc file = fileLoc(part))
          return file;
      return {};
    }
    return llvm::dyn_cast<mlir::FileLineColLoc>(loc);
  }

  std::optional<StringRef> lineAt(mlir::FileLineColLoc loc) const {
    if (!loc || loc.getFilename() != path || loc.getLine() == 0)
      return std::nullopt;
    StringRef rest = text;
    for (unsigned l = 1; l < loc.getLine() && !rest.empty(); ++l)
      rest = rest.split('\n').second;
    return rest.split('\n').first.rtrim('\r');
  }

  bool isPlain(mlir::Location loc) const {
    std::optional<StringRef> line = lineAt(fileLoc(loc));
    return !line || (line->size() <= kExcerpt && llvm::isASCII(*line));
  }

  void excerpt(mlir::Location where, StringRef kind,
               const llvm::Twine &message) const {
    mlir::FileLineColLoc loc = fileLoc(where);
    std::optional<StringRef> line = lineAt(loc);
    if (!line) {
      llvm::errs() << path << ": " << kind << ": " << message << "\n";
      return;
    }
    auto isContinuation = [&](size_t i) {
      return i < line->size() && ((*line)[i] & 0xC0) == 0x80;
    };
    size_t col = std::min<size_t>(loc.getColumn() ? loc.getColumn() - 1 : 0,
                                  line->size());
    size_t from = col > kExcerpt / 2 ? col - kExcerpt / 2 : 0;
    while (from > 0 && isContinuation(from))
      --from;
    size_t to = std::min(line->size(), from + kExcerpt);
    while (isContinuation(to))
      ++to;
    // A tab for a tab (the terminal aligns both alike), else as many spaces
    // as each character is wide (one for a byte that is not UTF-8).
    std::string pad(from ? 3 : 0, ' ');
    for (size_t i = from; i < col;) {
      size_t next = i + 1;
      while (isContinuation(next) && next < col)
        ++next;
      StringRef character = line->slice(i, next);
      int width = llvm::sys::unicode::columnWidthUTF8(character);
      pad.append(character == "\t" ? 1 : std::max(width, 1),
                 character == "\t" ? '\t' : ' ');
      i = next;
    }
    llvm::errs() << path << ":" << loc.getLine() << ":" << loc.getColumn()
                 << ": " << kind << ": " << message << "\n"
                 << (from ? "..." : "") << line->slice(from, to)
                 << (to < line->size() ? "..." : "") << "\n"
                 << pad << "^\n";
  }

  StringRef text, path;
  unsigned callStackLimit;
};

} // namespace

/// Parses "1,2,3" into token ids; false with a message if it is not that.
bool parseTokenIds(const std::string &text, std::vector<int32_t> &ids) {
  StringRef rest = text;
  // An empty item (a trailing or doubled comma) is an error, not skipped.
  for (bool more = !rest.empty(); more;) {
    auto [item, tail] = rest.split(',');
    more = rest.size() > item.size(); // a comma followed
    long long id = 0;
    if (item.trim().empty()) {
      usageError("--prompt-tokens '" + text +
                 "' has an empty id; drop the extra comma");
      return false;
    }
    if (item.trim().getAsInteger(10, id) || id < 0 || id > INT32_MAX) {
      usageError("--prompt-tokens takes token ids like 1,2,3; '" + item.trim() +
                 "' is not one");
      return false;
    }
    ids.push_back(static_cast<int32_t>(id));
    rest = tail;
  }
  if (ids.empty())
    usageError("--prompt-tokens needs at least one token id");
  return !ids.empty();
}

/// `gtc sample`: compiles the model's generation plans and prints what it
/// writes after the prompt, a block a sequence.
int sampleModel(const Options &opts, mlir::ModuleOp module,
                llvm::ToolOutputFile *output) {
  gtc::rt::RunOptions run = opts.args.run;
  std::string error;
  if (!gtc::rt::chooseDevice(opts.args.device, run, error)) {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }
  const gtc::Settings settings = gtc::resolveSettings(module, opts.args);
  gtc::CompileOptions compile = settings.compile;
  // One sequence a prompt, or --batch sequences of one prompt.
  const size_t given = std::max(opts.prompts.size(), opts.promptTokens.size());
  compile.batch =
      given > 1 ? static_cast<int64_t>(given) : opts.args.batch.value_or(1);
  compile.checkpointEvery = compile.checkpointBudget = compile.microBatch = 0;
  compile.bucketBytes = 0;
  mlir::FailureOr<gtc::rt::Plan> window =
      gtc::compileDecode(module, compile, 0, !opts.noCache);
  if (mlir::failed(window))
    return 1;
  mlir::FailureOr<gtc::rt::Plan> step = mlir::failure();
  if (!opts.noCache &&
      mlir::failed(step = gtc::compileDecode(module, compile, 1, true)))
    return 1;
  if (opts.emit == Emit::Plan) {
    output->os() << gtc::rt::serialize(opts.noCache ? *window : *step);
    return keepOutput(*output, opts.output) ? 0 : 1;
  }
  if (opts.emit == Emit::MLIR)
    return 0;
  if (std::string shortfall = gtc::rt::generationMemoryShortfall(
          *window, opts.noCache ? nullptr : &*step, run);
      !shortfall.empty()) {
    llvm::errs() << "gtc: error: " << shortfall << "\n";
    return 1;
  }

  // The prompt: token ids, or text through the tokenizer, or bytes for a
  // model of text(...) data.
  const bool bytes = window->config.data.kind == "text" && !opts.tokenizer;
  std::unique_ptr<gtc::Tokenizer> tokenizer;
  if (opts.tokenizer &&
      !(tokenizer = gtc::Tokenizer::load(*opts.tokenizer, error))) {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }
  std::vector<std::vector<int32_t>> prompts;
  if (!opts.promptTokens.empty()) {
    for (const std::string &text : opts.promptTokens)
      if (!parseTokenIds(text, prompts.emplace_back()))
        return 2;
  } else if (tokenizer || bytes) {
    std::vector<std::string> texts = opts.prompts;
    if (texts.empty())
      texts.push_back("\n");
    for (const std::string &text : texts) {
      std::vector<int32_t> &prompt = prompts.emplace_back();
      if (tokenizer) {
        if (!tokenizer->encode(text, prompt, error)) {
          llvm::errs() << "gtc: error: --tokenizer " << *opts.tokenizer << ": "
                       << error
                       << "; give the model's own tokenizer, or the prompt "
                          "as ids (--prompt-tokens)\n";
          return 1;
        }
      } else {
        for (unsigned char c : text)
          prompt.push_back(c);
      }
      if (prompt.empty())
        return usageError("--prompt is empty; give at least one character");
      if (tokenizer) {
        std::string ids;
        for (int32_t id : prompt)
          ids += (ids.empty() ? "" : ",") + std::to_string(id);
        llvm::errs() << "prompt: " << prompt.size() << " tokens (" << ids
                     << ")\n";
      }
    }
  } else {
    return usageError(
        "this model reads token ids (its train block's data is " +
        (window->config.data.kind.empty()
             ? std::string("not text(...)")
             : window->config.data.kind + "(...)") +
        "): give --prompt-tokens 1,2,3, or --tokenizer tokenizer.json (or "
        "tokenizer.model) with --prompt");
  }
  if (prompts.size() == 1)
    prompts.assign(static_cast<size_t>(compile.batch), prompts[0]);
  gtc::rt::GenerateOptions g;
  g.sampling = opts.sampling;
  g.tokens = opts.tokens;
  g.seed = run.seed.value_or(window->config.seed);
  g.prompts = prompts;
  if (run.device == "cuda")
    run.programFor = gtc::codegen::programCache("gtc");
  std::vector<std::vector<int32_t>> generated;
  if (int code = gtc::rt::generate(*window, opts.noCache ? nullptr : &*step, g,
                                   run, generated, std::cerr))
    return code;
  llvm::raw_ostream &os = output->os();
  // Ids the tokenizer lacks decode to nothing: say so, with the first few.
  std::vector<int32_t> unknown;
  size_t unknownCount = 0;
  if (tokenizer)
    for (const std::vector<int32_t> &row : generated)
      for (int32_t id : row)
        if (!tokenizer->has(id) && ++unknownCount <= 8)
          unknown.push_back(id);
  if (unknownCount)
    llvm::errs() << "gtc: warning: " << unknownCount
                 << " generated tokens are not in the tokenizer's vocabulary ("
                 << *opts.tokenizer << ") and are left out of the text: ids "
                 << llvm::join(llvm::map_range(unknown,
                                               [](int32_t id) {
                                                 return std::to_string(id);
                                               }),
                               ", ")
                 << (unknownCount > unknown.size() ? ", ..." : "")
                 << " (the model's vocabulary is larger than the "
                    "tokenizer's, or this is another model's tokenizer); "
                    "give the model's own tokenizer, or --prompt-tokens for "
                    "the ids\n";
  for (size_t r = 0; r < generated.size(); ++r) {
    if (r > 0)
      os << "\n---\n";
    if (tokenizer) {
      std::vector<int32_t> all = prompts[r];
      all.insert(all.end(), generated[r].begin(), generated[r].end());
      os << tokenizer->decode(all);
    } else if (bytes) {
      for (int32_t id : prompts[r])
        os << static_cast<char>(id);
      for (int32_t id : generated[r])
        os << static_cast<char>(id);
    } else {
      for (size_t i = 0; i < generated[r].size(); ++i)
        os << (i ? "," : "") << generated[r][i];
    }
  }
  os << "\n";
  return keepOutput(*output, opts.output) ? 0 : 1;
}

int main(int argc, char **argv) {
  // A file-size limit (or a quota) makes a write fail with EFBIG, which the
  // checkpoint writer reports, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  gtc::rt::Startup::get(); // the clock of "first step: ... from start"
  llvm::InitLLVM init(argc, argv);
  // InitLLVM makes a failed allocation abort ("LLVM ERROR: out of memory"
  // and a stack dump); the runtime's training, sampling and benchmarks
  // catch std::bad_alloc and say which batch to lower.
  std::set_new_handler(nullptr);
  Options opts;
  opts.argv = argv;
  if (std::optional<int> code = parseArgs(argc, argv, opts))
    return *code;

  if (opts.input != "-" && llvm::sys::fs::is_directory(opts.input)) {
    llvm::errs() << "gtc: error: '" << opts.input
                 << "' is a directory; expected a .gt file\n";
    return 1;
  }
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(opts.input, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "gtc: error: cannot read '" << opts.input
                 << "': " << ec.message() << "\n";
    return 1;
  }
  std::string path = opts.input == "-" ? "<stdin>" : opts.input;
  // Lines that end in a carriage return alone (old Mac files) are lines:
  // the lexer and the diagnostics' line numbers count '\n'.
  if ((*buffer)->getBuffer().contains('\r')) {
    std::string lines = (*buffer)->getBuffer().str();
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i] == '\r' && (i + 1 == lines.size() || lines[i + 1] != '\n'))
        lines[i] = '\n';
    *buffer = llvm::MemoryBuffer::getMemBufferCopy(
        lines, (*buffer)->getBufferIdentifier());
  }

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::MLIRContext context;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  constexpr unsigned kCallStackLimit = 10;
  diagnostics.setCallStackLimit(kCallStackLimit);
  auto severity = [](const mlir::Diagnostic &d) {
    return d.getSeverity() == mlir::DiagnosticSeverity::Error     ? "error"
           : d.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning"
           : d.getSeverity() == mlir::DiagnosticSeverity::Note    ? "note"
                                                                 : "remark";
  };
  // A setting given on the command line (Settings.cpp names its option,
  // e.g. --micro-batch) has no place in the file: gtc names the option.
  mlir::ScopedDiagnosticHandler commandLine(
      &context, [&](mlir::Diagnostic &d) -> mlir::LogicalResult {
        auto name = llvm::dyn_cast<mlir::NameLoc>(d.getLocation());
        if (!name || !name.getName().strref().starts_with("--"))
          return mlir::failure();
        llvm::errs() << "gtc: " << severity(d) << ": " << d.str()
                     << " (given by " << name.getName().strref() << ")\n";
        for (mlir::Diagnostic &note : d.getNotes())
          llvm::errs() << "gtc: note: " << note.str() << "\n";
        return mlir::success();
      });
  // Registered later, it sees diagnostics first and passes on the others.
  SourceExcerpts excerpts(sourceMgr, path, kCallStackLimit);
  mlir::ScopedDiagnosticHandler longLines(
      &context, [&](mlir::Diagnostic &d) {
        return excerpts.print(d, severity(d));
      });

  std::string error;
  // -o names the executable for compile, the --emit output otherwise.
  std::unique_ptr<llvm::ToolOutputFile> output =
      opts.command == "compile" ? nullptr
                                : mlir::openOutputFile(opts.output, &error);
  if (!output && opts.command != "compile") {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }

  if (opts.command == "compile" && opts.emit != Emit::None)
    return usageError("--emit does not go with compile (-o names the "
                      "executable); use gtc run --emit=...");
  if (opts.emit == Emit::AST) {
    std::optional<gtc::File> file =
        gtc::parseSource(context, sourceMgr, path);
    if (!file)
      return 1;
    gtc::dump(*file, output->os());
    return keepOutput(*output, opts.output) ? 0 : 1;
  }

  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    gtc::rt::StartupPhase phase("parse");
    module = gtc::compileSource(context, sourceMgr, path);
  }
  if (!module)
    return 1;
  // (gtc run prints it in runModel, once it knows it trains in one process)
  if (opts.emit == Emit::MLIR && opts.command != "run") {
    module->print(output->os());
    if (!keepOutput(*output, opts.output))
      return 1;
  }
  // (printing the IR or the syntax tree is the front end's alone)
  if (opts.command == "check")
    return opts.emit != Emit::None || checkPlans(opts, *module) ? 0 : 1;
  if (opts.command == "compile")
    return compileModel(opts, *module, argv[0]);
  if (opts.command == "sample")
    return sampleModel(opts, *module, output.get());
  return runModel(opts, *module, output.get());
}
