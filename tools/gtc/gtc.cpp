//===- gtc.cpp - The gtc command line -------------------------------------===//
//
//   gtc check FILE.gt [--emit=ast|mlir] [-o OUT]   parse and check
//   gtc FILE.gt [--emit=...]                       same as `gtc check`
//   gtc run FILE.gt ...                            train now
//   gtc compile FILE.gt -o EXE                     write a training executable
//===----------------------------------------------------------------------===//

#include "gtc/Frontend/Driver.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
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
  run       compile FILE.gt and train it now          (not implemented yet)
  compile   write a standalone training executable    (not implemented yet)

options:
  --emit=ast     print the syntax tree
  --emit=mlir    print the gt dialect IR (feed it to gtc-opt)
  -o FILE        write the --emit output to FILE instead of stdout
  -h, --help     show this help
  --version      show the version

A file named '-' is read from standard input. Exit status: 0 on success,
1 when the file has an error, 2 on a command-line mistake.
)";

enum class Emit { None, AST, MLIR };

struct Options {
  std::string command = "check";
  std::string input;
  std::string output = "-";
  Emit emit = Emit::None;
};

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
      else
        return usageError("unknown --emit kind '" + a +
                          "'; expected --emit=ast or --emit=mlir");
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
  return std::nullopt;
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
  if (opts.command != "check") {
    llvm::errs() << "gtc " << opts.command << ": " << path
                 << " checks out, but '" << opts.command
                 << "' is not implemented yet (training lands with the CPU "
                    "runtime); use 'gtc check' or --emit=mlir for now\n";
    return 1;
  }
  return 0;
}
