//===- CheckNVVMTargetPass.cpp - The fd-check-nvvm-target pass ------------===//

#include "fd/Conversion/Passes.h"
#include "fd/Planning/Chip.h"

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
    const ::flashdecode::Chip *target = ::flashdecode::findChip(chip);
    if (!target) {
      emitError(loc) << "fd-lower-to-ptx: chip '" << chip
                     << "' is not supported: expected "
                     << ::flashdecode::getChipNameList();
      return signalPassFailure();
    }
    int version = ptxVersion;
    if (version < target->minimumPTXVersion) {
      emitError(loc) << "fd-lower-to-ptx: ptx-version " << version
                     << " is too old for " << chip << ": expected at least "
                     << target->minimumPTXVersion;
      return signalPassFailure();
    }
  }
};

} // namespace
