//===- ScheduleKernels.cpp - The fd-schedule-kernels pass -----------------===//

#include "fd/Dialect/FD/Transforms/Passes.h"
#include "fd/Planning/Chip.h"

namespace mlir::fd {
#define GEN_PASS_DEF_FDSCHEDULEKERNELS
#include "fd/Dialect/FD/Transforms/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct FDScheduleKernelsPass
    : mlir::fd::impl::FDScheduleKernelsBase<FDScheduleKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    const ::flashdecode::Chip *target = ::flashdecode::findChip(chip);
    if (!target) {
      getOperation().emitError() << "fd-schedule-kernels: chip '" << chip
                                 << "' is not supported: expected "
                                 << ::flashdecode::getChipNameList();
      return signalPassFailure();
    }
    getOperation().walk([&](PartialAttentionOp op) {
      if (!op.getScheduleAttr())
        op.setScheduleAttr(ScheduleAttr::get(
            op.getContext(), getOrPlanKernelSchedule(op, *target).getChoice()));
    });
  }
};

} // namespace
