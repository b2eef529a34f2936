//===- ConvertFDToGPUPass.cpp - The convert-fd-to-gpu pass ----------------===//

#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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
    RewritePatternSet patterns(&getContext());
    populateFDToGPUConversionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left could not be lowered: say which op and why.
    WalkResult result = getOperation().walk([](Operation *op) {
      if (isa<AttentionOp>(op)) {
        op->emitOpError("convert-fd-to-gpu: split it first with fd-split-kv "
                        "(num-splits=1 for the unsplit kernel)");
        return WalkResult::interrupt();
      }
      if (isa<PartialAttentionOp, MergeOp>(op)) {
        op->emitOpError("convert-fd-to-gpu: operands must be contiguous "
                        "memrefs (identity layout)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
