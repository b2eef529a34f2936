//===- ConvertFDToLoopsPass.cpp - The convert-fd-to-loops pass ------------===//

#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::fd {
#define GEN_PASS_DEF_CONVERTFDTOLOOPS
#include "fd/Conversion/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct ConvertFDToLoopsPass
    : mlir::fd::impl::ConvertFDToLoopsBase<ConvertFDToLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    ConversionTarget target(getContext());
    target.addIllegalDialect<FDDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateFDToLoopsConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
