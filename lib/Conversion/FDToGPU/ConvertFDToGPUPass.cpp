//===- ConvertFDToGPUPass.cpp - The convert-fd-to-gpu pass ----------------===//

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/Chip.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fd {
#define GEN_PASS_DEF_CONVERTFDTOGPU
#include "fd/Conversion/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct ConvertFDToGPUPass
    : mlir::fd::impl::ConvertFDToGPUBase<ConvertFDToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    const ::flashdecode::Chip *gpu = ::flashdecode::findChip(chip);
    if (!gpu) {
      getOperation().emitError() << "convert-fd-to-gpu: chip '" << chip
                                 << "' is not supported: expected "
                                 << ::flashdecode::getChipNameList();
      return signalPassFailure();
    }
    // The patterns' preconditions first, each failure reported on its op,
    // so that nothing is rewritten when something cannot be.
    bool lowerable = true;
    getOperation().walk([&](Operation *op) {
      if (!isa<FDDialect>(op->getDialect()))
        return;
      std::string reason = getReasonNotLowerableToGPU(op);
      if (reason.empty())
        reason = getReasonNotLowerableOnChip(op, *gpu);
      if (reason.empty() && fuseMerge)
        reason = getReasonMergeNotFusable(op);
      if (!reason.empty()) {
        op->emitOpError(reason);
        lowerable = false;
      }
    });
    if (!lowerable)
      return signalPassFailure();
    // Every fd op becomes kernels and their launches; nothing else changes.
    ConversionTarget target(getContext());
    target.addIllegalDialect<FDDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFDToGPUConversionPatterns(patterns, *gpu, fuseMerge);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // The kernels are written with plain builders: fold their constants
    // (one per value, at the top of each region) and drop what is unused, so
    // that the IR reads as it reaches the NVVM lowering.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
    if (gpu->hasGridDependencyControl)
      getOperation().walk(addGridDependencyControl);
  }

  /// Makes `kernel` (one this pass built) safe to launch while the kernel
  /// before it runs, and lets the kernel after it launch early: a grid
  /// launched with programmatic stream serialization may start before its
  /// predecessor ends, so it waits for it before anything else (every
  /// buffer it reads may be that kernel's output), then releases its own
  /// dependent. Without the launch attribute both are no-ops.
  static void addGridDependencyControl(gpu::GPUFuncOp kernel) {
    if (!kernel->hasAttr(kKernelParamsAttrName) ||
        kernel->hasAttr(kProgrammaticLaunchAttrName))
      return;
    auto b = OpBuilder::atBlockBegin(&kernel.getBody().front());
    NVVM::GriddepcontrolOp::create(b, kernel.getLoc(),
                                   NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(b, kernel.getLoc(),
                                   NVVM::GridDepActionKind::launch_dependents);
    kernel->setAttr(kProgrammaticLaunchAttrName, b.getUnitAttr());
  }
};

} // namespace
