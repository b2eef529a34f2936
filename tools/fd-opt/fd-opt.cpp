//===- fd-opt.cpp - flashdecode optimizer driver --------------------------===//
//
// mlir-opt for the fd dialect: parses IR, runs fd and upstream passes and
// pipelines (fd-split-kv, convert-fd-to-loops, fd-lower-to-cpu, ...), prints
// the result. Malformed input is reported as a diagnostic with exit code 1.
//
//===----------------------------------------------------------------------===//

#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::fd::registerFDPassesAndPipelines();

  mlir::DialectRegistry registry;
  mlir::fd::registerFDDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "flashdecode optimizer driver\n", registry));
}
