//===- gtc-opt.cpp - mlir-opt for the gt dialect and gtc's passes ---------===//

#include "gtc/Dialect/GT/GTDialect.h"
#include "gtc/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses(); // canonicalize, cse, inline, ...
  mlir::gt::registerGTPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::gt::GTDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "gtc-opt: runs gtc's passes on gt dialect IR\n", registry));
}
