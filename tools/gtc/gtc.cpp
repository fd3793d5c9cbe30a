//===- gtc.cpp - The gtc command line -------------------------------------===//
//
//   gtc check FILE.gt [--emit=ast|mlir] [-o OUT]   parse and check
//   gtc FILE.gt [--emit=...]                       same as `gtc check`
//   gtc run FILE.gt ...                            train now
//   gtc compile FILE.gt -o EXE                     write a training executable
//===----------------------------------------------------------------------===//

#include "gtc/Dialect/GT/GTOps.h"
#include "gtc/Frontend/Driver.h"
#include "gtc/CodeGen/CudaEmitter.h"
#include "gtc/Plan/Pipeline.h"
#include "gtc/Runtime/Cuda.h"
#include "gtc/Runtime/Trainer.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>
#include <vector>

using llvm::StringRef;

namespace {

constexpr const char *kVersion = "gtc 0.1.0 (MLIR " "22" ")";

constexpr const char *kUsage = R"(gtc: a compiler and JIT for neural-network training

usage: gtc <command> FILE.gt [options]
       gtc FILE.gt [options]          (same as 'gtc check')

commands:
  check     parse and check FILE.gt: names, arguments, shapes, dtypes, settings
  run       compile FILE.gt and train it now
  compile   write a standalone training executable    (not implemented yet)

options:
  --emit=ast     print the syntax tree
  --emit=mlir    print the gt dialect IR (feed it to gtc-opt)
  --emit=step    (run) print the training step IR after gt-autodiff
  --emit=plan    (run) print the compiled plan of the training step
  --emit=cuda    (run) print the generated CUDA kernels of the training step
  --explain      (run) print the memory plan (weights, gradients, optimizer
                 state, activations, workspace), each op's precision and
                 the padded GEMMs before training
  -o FILE        write the --emit output to FILE instead of stdout
  -h, --help     show this help
  --version      show the version

run options (override the train block):
  --device D     cpu, cuda, or auto (the GPU if there is one; the default)
  --steps N      train N steps in all (counting resumed ones)
  --epochs N     train N epochs
  --batch N      batch size
  --seed S       seed for initialization, shuffling and sampling
  --threads N    CPU threads (default: all cores)
  --log FILE     append metrics as JSON lines
  --log-every N  log (and print) every N steps
  --bench N      time N training steps on random data and print ms/step
  --precision P  fp32, tf32 (cuBLASLt's TF32 GEMMs on a GPU), bf16 or fp16
                 (gt-autocast; fp16 with dynamic loss scaling)
  --no-pad       keep GEMM dimensions as written (no gt-pad-dims)
  --save FILE    write a safetensors checkpoint at the end (and on Ctrl-C)
  --resume FILE  continue from a checkpoint written by --save

A file named '-' is read from standard input. Exit status: 0 on success,
1 when the file has an error, 2 on a command-line mistake.
)";

enum class Emit { None, AST, MLIR, Step, Plan, Cuda };

struct Options {
  std::string command = "check";
  std::string input;
  std::string output = "-";
  Emit emit = Emit::None;
  std::string device = "auto";
  std::optional<int64_t> batch;
  gtc::rt::RunOptions run;
  bool runOptionGiven = false;
  bool explain = false;
  bool noPad = false; ///< --no-pad
  int64_t bench = 0; ///< --bench N: time N steps instead of training
  std::string precision; ///< --precision: overrides the train block
};

/// Parses a positive integer option value.
bool parseCount(StringRef name, StringRef value, int64_t &out,
                int64_t min = 1) {
  long long v;
  if (value.getAsInteger(10, v) || v < min) {
    llvm::errs() << "gtc: error: " << name << " needs an integer >= " << min
                 << ", got '" << value << "'\nRun 'gtc --help' for usage.\n";
    return false;
  }
  out = v;
  return true;
}

int usageError(const llvm::Twine &message) {
  llvm::errs() << "gtc: error: " << message
               << "\nRun 'gtc --help' for usage.\n";
  return 2;
}

/// Parses argv; returns an exit code when the program should stop.
std::optional<int> parseArgs(int argc, char **argv, Options &opts) {
  std::vector<StringRef> args(argv + 1, argv + argc);
  size_t i = 0;
  if (!args.empty() &&
      (args[0] == "check" || args[0] == "run" || args[0] == "compile"))
    opts.command = args[i++].str();
  for (; i < args.size(); ++i) {
    StringRef a = args[i];
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage;
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
    if (a == "--explain") {
      opts.explain = true;
      opts.runOptionGiven = true;
      continue;
    }
    if (a == "--no-pad") {
      opts.noPad = true;
      opts.runOptionGiven = true;
      continue;
    }
    // Run options: --name VALUE or --name=VALUE.
    static const char *valued[] = {"--device", "--steps",  "--epochs",
                                   "--batch",  "--seed",   "--threads",
                                   "--log",    "--save",   "--resume",
                                   "--log-every", "--bench", "--precision"};
    StringRef name = a.split('=').first;
    if (llvm::is_contained(valued, name)) {
      StringRef value;
      if (a.contains('='))
        value = a.split('=').second;
      else if (i + 1 < args.size())
        value = args[++i];
      else
        return usageError(name + " needs a value");
      opts.runOptionGiven = true;
      int64_t n;
      if (name == "--device") {
        if (value != "cpu" && value != "cuda" && value != "auto")
          return usageError("unknown device '" + value +
                            "'; expected cpu, cuda or auto");
        opts.device = value.str();
      } else if (name == "--steps") {
        if (!parseCount(name, value, n))
          return 2;
        opts.run.steps = n;
      } else if (name == "--epochs") {
        if (!parseCount(name, value, n))
          return 2;
        opts.run.epochs = n;
      } else if (name == "--batch") {
        if (!parseCount(name, value, n))
          return 2;
        opts.batch = n;
      } else if (name == "--seed") {
        if (!parseCount(name, value, n, 0))
          return 2;
        opts.run.seed = static_cast<uint64_t>(n);
      } else if (name == "--threads") {
        if (!parseCount(name, value, n))
          return 2;
        opts.run.threads = static_cast<int>(n);
      } else if (name == "--log-every") {
        if (!parseCount(name, value, n))
          return 2;
        opts.run.logEvery = n;
      } else if (name == "--precision") {
        if (value != "fp32" && value != "tf32" && value != "bf16" &&
            value != "fp16")
          return usageError("unknown precision '" + value +
                            "'; expected fp32, tf32, bf16 or fp16");
        opts.precision = value.str();
      } else if (name == "--bench") {
        if (!parseCount(name, value, n))
          return 2;
        opts.bench = n;
      } else if (name == "--log") {
        opts.run.logPath = value.str();
      } else if (name == "--save") {
        opts.run.savePath = value.str();
      } else {
        opts.run.resumePath = value.str();
      }
      continue;
    }
    if (a == "-o") {
      if (i + 1 == args.size())
        return usageError("-o needs a file name");
      opts.output = args[++i].str();
      continue;
    }
    if (a.starts_with("-") && a != "-")
      return usageError("unknown option '" + a + "'");
    if (!opts.input.empty())
      return usageError("more than one input file ('" + opts.input +
                        "' and '" + a + "')");
    opts.input = a.str();
  }
  if (opts.input.empty())
    return usageError("no input file; usage: gtc <command> FILE.gt");
  if (opts.command == "check" &&
      (opts.runOptionGiven || opts.emit == Emit::Step ||
       opts.emit == Emit::Plan || opts.emit == Emit::Cuda))
    return usageError("run options and --emit=step/plan/cuda need 'gtc run'");
  if (opts.run.steps && opts.run.epochs)
    return usageError("give --steps or --epochs, not both");
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
  auto shape = [](const Buffer &b) {
    std::string s = "[";
    for (size_t i = 0; i < b.shape.size(); ++i)
      s += (i ? "," : "") + std::to_string(b.shape[i]);
    return s + "]";
  };
  for (const gtc::rt::Kernel &k : plan.kernels) {
    const Buffer &out = plan.buffers[k.outputs[0]];
    ++kinds[k.op][gtc::rt::dtypeName(out.dtype)];
    if (k.op == "pad" || k.op == "slice") {
      const Buffer &in = plan.buffers[k.inputs[0]];
      pads.push_back(k.op + " " + gtc::rt::dtypeName(in.dtype) + shape(in) +
                     " -> " + shape(out) + " (" + in.name + ")");
    }
  }
  os << "precision " << plan.config.precision
     << ": kernels per op and element type of their results\n";
  for (const auto &[op, types] : kinds) {
    std::string line;
    for (const auto &[type, n] : types)
      line += " " + type + " x" + std::to_string(n);
    os << llvm::format("  %-20s%s\n", op.c_str(), line.c_str());
  }
  if (pads.empty()) {
    os << "padding: none (every GEMM dimension is aligned, or --no-pad)\n";
  } else {
    os << "padding (gt-pad-dims; results sliced back):\n";
    for (const std::string &p : pads)
      os << "  " << p << "\n";
  }
  if (fp32) {
    auto temp = [](const gtc::rt::Plan &p) {
      auto it = p.regionSize.find(gtc::rt::Region::Temp);
      return it == p.regionSize.end() ? 0.0 : it->second * 4 / 1048576.0;
    };
    // 16-bit activations save memory; the 16-bit weight copies cost some
    // (small batches can come out behind).
    double d = temp(*fp32) - temp(plan);
    os << llvm::format("activations and temporaries: %.2f MiB at %s, %.2f "
                       "MiB at fp32 (%.2f MiB %s)\n",
                       temp(plan), plan.config.precision.c_str(), temp(*fp32),
                       std::fabs(d), d >= 0 ? "saved" : "more");
  }
}

/// Prints the predicted memory of a training step, by kind.
void explainPlan(const gtc::rt::Plan &plan, llvm::raw_ostream &os) {
  auto bytes = [&](gtc::rt::Region r) {
    auto it = plan.regionSize.find(r);
    return it == plan.regionSize.end() ? int64_t(0) : it->second * 4;
  };
  int64_t params = bytes(gtc::rt::Region::Param);
  int64_t state = plan.config.optimizer == "sgd"
                      ? (plan.config.momentum != 0 ? params : 0)
                      : 2 * params;
  struct Row {
    const char *what;
    int64_t bytes;
  } rows[] = {{"weights", params},
              {"gradients", bytes(gtc::rt::Region::Grad)},
              {"optimizer state", state},
              {"activations and temporaries (memory plan)",
               bytes(gtc::rt::Region::Temp)},
              {"inputs (two slots on a GPU)", 2 * bytes(gtc::rt::Region::Input)},
              {"constants", bytes(gtc::rt::Region::Const)},
              {"GEMM workspace (GPU)", 32 << 20}};
  int64_t total = 0, naive = 0;
  for (const gtc::rt::Buffer &b : plan.buffers)
    if (b.region == gtc::rt::Region::Temp)
      naive += b.slots() * 4;
  os << "memory plan of " << plan.model << " at batch " << plan.batch << ":\n";
  for (const Row &r : rows) {
    os << llvm::format("  %-44s %10.2f MiB\n", r.what, r.bytes / 1048576.0);
    total += r.bytes;
  }
  os << llvm::format("  %-44s %10.2f MiB\n", "predicted peak", total / 1048576.0);
  os << llvm::format("  (temporaries without reuse would need %.2f MiB)\n",
                     naive / 1048576.0);
  os << "  " << plan.kernels.size() << " kernels per step, "
     << plan.parameterCount() << " parameters\n";
}

/// `gtc run`: compiles the step (and evaluation) plans and trains.
int runModel(const Options &opts, mlir::ModuleOp module,
             llvm::ToolOutputFile *output) {
  gtc::rt::RunOptions run = opts.run;
  run.device = "cpu";
  if (opts.device != "cpu" && opts.emit == Emit::None) {
    gtc::rt::CudaDeviceInfo info;
    std::string error;
    if (gtc::rt::cudaAvailable(info, error)) {
      run.device = "cuda";
      run.deviceName = info.name + " (sm_" + std::to_string(info.major) +
                       std::to_string(info.minor) + ")";
    } else if (opts.device == "cuda") {
      llvm::errs() << "gtc: error: " << error << "\n";
      return 1;
    }
  }
  mlir::gt::TrainOp trainOp;
  for (auto t : module.getOps<mlir::gt::TrainOp>())
    trainOp = t;
  gtc::CompileOptions compile;
  compile.batch = opts.batch.value_or(32);
  if (!opts.batch && trainOp)
    if (auto b = trainOp->getAttrOfType<mlir::IntegerAttr>("batch"))
      compile.batch = b.getInt();
  compile.precision = opts.precision;
  compile.pad = !opts.noPad;

  if (opts.emit == Emit::Step) {
    auto step = gtc::lowerToStep(module, compile);
    if (mlir::failed(step))
      return 1;
    (*step)->print(output->os());
    output->keep();
    return 0;
  }
  mlir::FailureOr<gtc::rt::Plan> step = gtc::compileStep(module, compile);
  if (mlir::failed(step))
    return 1;
  if (opts.emit == Emit::Plan) {
    output->os() << gtc::rt::serialize(*step);
    output->keep();
    return 0;
  }
  std::map<const gtc::rt::Plan *, std::unique_ptr<gtc::rt::CudaProgram>>
      programs;
  run.programFor = [&](const gtc::rt::Plan &plan)
      -> const gtc::rt::CudaProgram * {
    auto &slot = programs[&plan];
    if (!slot) {
      auto program = std::make_unique<gtc::rt::CudaProgram>();
      std::string error;
      if (!gtc::codegen::emitCuda(plan, *program, error)) {
        llvm::errs() << "gtc: error: CUDA code generation: " << error << "\n";
        return nullptr;
      }
      slot = std::move(program);
    }
    return slot.get();
  };
  if (opts.emit == Emit::Cuda) {
    const gtc::rt::CudaProgram *program = run.programFor(*step);
    if (!program)
      return 1;
    for (size_t k = 0; k < program->kernels.size(); ++k)
      for (const gtc::rt::CudaLaunch &l : program->kernels[k]) {
        if (l.kind == gtc::rt::CudaLaunch::Kind::Kernel)
          output->os() << "// launch " << l.name << ": grid " << l.grid
                       << ", block " << l.block << "\n"
                       << l.source << "\n";
        else if (l.kind == gtc::rt::CudaLaunch::Kind::Gemm)
          output->os() << "// cuBLASLt GEMM for kernel " << k << " ("
                       << step->kernels[k].op << "): " << l.m << "x" << l.n
                       << "x" << l.k << (l.transA ? " A^T" : "")
                       << (l.transB ? " B^T" : "") << ", batch " << l.batch
                       << (l.bias >= 0 ? ", bias epilogue" : "")
                       << (l.relu ? ", ReLU epilogue" : "") << "\n\n";
        else
          output->os() << "// memset of buffer " << l.c << "\n\n";
      }
    output->keep();
    return 0;
  }
  if (opts.explain) {
    explainPlan(*step, llvm::outs());
    std::optional<gtc::rt::Plan> fp32;
    const std::string &p = step->config.precision;
    if (p == "bf16" || p == "fp16") {
      gtc::CompileOptions f = compile;
      f.precision = "fp32";
      if (auto plan = gtc::compileStep(module, f); mlir::succeeded(plan))
        fp32 = std::move(*plan);
    }
    explainPrecision(*step, fp32 ? &*fp32 : nullptr, llvm::outs());
    llvm::outs().flush();
  }
  if (opts.bench)
    return gtc::rt::benchmark(*step, run, opts.bench, std::cout, std::cerr);
  if (!trainOp) {
    llvm::errs() << "gtc: error: the file has no train block; add one with "
                    "at least 'data = ...' (see frontend/LANGUAGE.md)\n";
    return 1;
  }
  std::map<int64_t, std::unique_ptr<gtc::rt::Plan>> evalPlans;
  gtc::rt::EvalPlanFn evalPlan = [&](int64_t n) -> const gtc::rt::Plan * {
    auto &slot = evalPlans[n];
    if (!slot) {
      gtc::CompileOptions evalOptions = compile;
      evalOptions.batch = n;
      mlir::FailureOr<gtc::rt::Plan> plan =
          gtc::compileEval(module, evalOptions);
      if (mlir::failed(plan))
        return nullptr;
      slot = std::make_unique<gtc::rt::Plan>(std::move(*plan));
    }
    return slot.get();
  };
  std::cout.flush();
  return gtc::rt::train(*step, evalPlan, run, std::cout, std::cerr);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
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

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::MLIRContext context;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  std::string error;
  auto output = mlir::openOutputFile(opts.output, &error);
  if (!output) {
    llvm::errs() << "gtc: error: " << error << "\n";
    return 1;
  }

  if (opts.emit == Emit::AST) {
    std::optional<gtc::File> file =
        gtc::parseSource(context, sourceMgr, path);
    if (!file)
      return 1;
    gtc::dump(*file, output->os());
    output->keep();
    return 0;
  }

  mlir::OwningOpRef<mlir::ModuleOp> module =
      gtc::compileSource(context, sourceMgr, path);
  if (!module)
    return 1;
  if (opts.emit == Emit::MLIR) {
    module->print(output->os());
    output->keep();
  }
  if (opts.command == "check")
    return 0;
  if (opts.command == "compile") {
    llvm::errs() << "gtc compile: " << path
                 << " checks out, but 'compile' is not implemented yet; use "
                    "'gtc run' to train now\n";
    return 1;
  }
  return runModel(opts, *module, output.get());
}
