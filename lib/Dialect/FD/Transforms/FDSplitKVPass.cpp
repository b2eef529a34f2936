//===- FDSplitKVPass.cpp - The fd-split-kv pass ---------------------------===//

#include "fd/Dialect/FD/Transforms/Passes.h"
#include "fd/Planning/SplitPlanner.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fd {
#define GEN_PASS_DEF_FDSPLITKV
#include "fd/Dialect/FD/Transforms/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct FDSplitKVPass : mlir::fd::impl::FDSplitKVBase<FDSplitKVPass> {
  using Base::Base;

  void runOnOperation() override {
    SplitKVOptions options;
    options.numSplits = numSplits;
    options.smCount = smCount;
    options.minChunkLength = minChunkLength;
    options.maxSplits = maxSplits;
    options.chunkLength = chunkLength;
    options.batchHint = batchHint;
    options.maxLengthHint = maxLengthHint;

    // Every decode-shaped op must get a split count before anything is
    // rewritten, so a bad option fails the pass with a message on the op.
    WalkResult result = getOperation().walk([&](AttentionOp op) {
      if (!isDecodeShaped(op)) {
        if (report)
          op.emitRemark() << "fd-split-kv: left alone, prefill-shaped (Lq = "
                          << op.getGeometry().queryLength << " > "
                          << kMaxDecodeQueryLength << ")";
        return WalkResult::advance();
      }
      FailureOr<int64_t> splits =
          resolveNumSplits(op, options, /*emitErrors=*/true);
      if (failed(splits))
        return WalkResult::interrupt();
      if (report)
        reportChoice(op, options, *splits);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    populateSplitKVPatterns(patterns, options);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }

  /// A remark saying what the split count does on the machine and where it
  /// came from.
  void reportChoice(AttentionOp op, const SplitKVOptions &options,
                    int64_t splits) {
    AttentionGeometry geometry = op.getGeometry();
    int64_t batch = ShapedType::isDynamic(geometry.batch) ? options.batchHint
                                                          : geometry.batch;
    int64_t maxLength = ShapedType::isDynamic(geometry.maxLength)
                            ? options.maxLengthHint
                            : geometry.maxLength;
    ::fd::SplitPlannerOptions plannerOptions;
    plannerOptions.smCount = options.smCount;
    StringRef source = options.numSplits > 0     ? "num-splits option"
                       : options.chunkLength > 0 ? "chunk-length option"
                                                 : "auto";
    InFlightDiagnostic remark = op.emitRemark()
                                << "fd-split-kv: " << source << ": B=";
    if (batch > 0)
      remark << batch;
    else
      remark << "?";
    remark << " Hkv=" << geometry.numKVHeads << " Lmax=";
    if (maxLength > 0)
      remark << maxLength;
    else
      remark << "?";
    if (batch > 0 && maxLength > 0) {
      ::fd::SplitPlan plan = ::fd::evaluateSplits(
          batch, geometry.numKVHeads, maxLength, splits, plannerOptions);
      remark << " -> " << ::fd::describeSplitPlan(plan) << " workspace="
             << ::fd::getWorkspaceBytes(batch, geometry.queryLength,
                                        geometry.numQueryHeads, splits,
                                        geometry.headDim)
             << "B";
    } else {
      remark << " -> splits=" << splits << " workspace="
             << ::fd::getWorkspaceBytes(1, geometry.queryLength,
                                        geometry.numQueryHeads, splits,
                                        geometry.headDim)
             << "B per sequence";
    }
  }
};

} // namespace
