//===- CheckNVVMTargetPass.cpp - The fd-check-nvvm-target pass ------------===//

#include "fd/Conversion/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

namespace mlir::fd {
#define GEN_PASS_DEF_FDCHECKNVVMTARGET
#include "fd/Conversion/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct FDCheckNVVMTargetPass
    : mlir::fd::impl::FDCheckNVVMTargetBase<FDCheckNVVMTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    // Reported at the module's location, without printing the module.
    Location loc = getOperation().getLoc();
    std::string target = chip;
    int version = ptxVersion;
    int minimum = getMinimumPTXVersion(target);
    if (minimum == 0) {
      emitError(loc)
          << "fd-lower-to-ptx: chip '" << target
          << "' is not supported: expected sm_80, sm_86, sm_89, sm_90 or "
             "sm_90a";
      return signalPassFailure();
    }
    if (version < minimum) {
      emitError(loc) << "fd-lower-to-ptx: ptx-version " << version
                     << " is too old for " << target << ": expected at least "
                     << minimum;
      return signalPassFailure();
    }
  }
};

} // namespace
