//===- FDSplitKVPass.cpp - The fd-split-kv pass ---------------------------===//

#include "fd/Dialect/FD/Transforms/Passes.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"
#include "fd/Planning/SplitPlanner.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

namespace mlir::fd {
#define GEN_PASS_DEF_FDSPLITKV
#include "fd/Dialect/FD/Transforms/Passes.h.inc"
} // namespace mlir::fd

using namespace mlir;
using namespace mlir::fd;

namespace {

struct FDSplitKVPass : mlir::fd::impl::FDSplitKVBase<FDSplitKVPass> {
  using Base::Base;
  // The generated options are protected members.
  template <typename OptionHolder>
  friend FDSplitKVOptions mlir::fd::readSplitKVOptions(const OptionHolder &);

  void runOnOperation() override {
    FDSplitKVOptions options = readSplitKVOptions(*this);
    options.report = report;
    options.workspaceArgument = workspaceArgument;

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
      FailureOr<::flashdecode::SplitPlan> plan =
          resolveSplitPlan(op, options, /*emitErrors=*/true);
      if (failed(plan))
        return WalkResult::interrupt();
      if (report)
        reportChoice(op, options, *plan);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    if (workspaceArgument && failed(addWorkspaceArguments()))
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    populateSplitKVPatterns(patterns, options);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }

  /// Appends a `memref<?xi8> {fd.workspace}` argument to every function
  /// with decode-shaped attention; fails on a function that is called (its
  /// callers would not match the new signature) or an op outside one.
  LogicalResult addWorkspaceArguments() {
    ModuleOp module = getOperation();
    SetVector<FunctionOpInterface> functions;
    WalkResult result = module.walk([&](AttentionOp op) {
      if (!isDecodeShaped(op))
        return WalkResult::advance();
      auto function = op->getParentOfType<FunctionOpInterface>();
      if (!function) {
        op.emitOpError("fd-split-kv: workspace-argument needs the op inside "
                       "a function");
        return WalkResult::interrupt();
      }
      functions.insert(function);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
    Builder builder(&getContext());
    for (FunctionOpInterface function : functions) {
      if (!SymbolTable::symbolKnownUseEmpty(function, module))
        return function.emitError()
               << "fd-split-kv: workspace-argument adds an argument to @"
               << function.getName() << ", which is called in this module";
      NamedAttribute marker(builder.getStringAttr(kWorkspaceArgumentAttrName),
                            builder.getUnitAttr());
      if (failed(function.insertArgument(
              function.getNumArguments(),
              MemRefType::get({ShapedType::kDynamic}, builder.getI8Type()),
              builder.getDictionaryAttr(marker), function.getLoc())))
        return function.emitError("fd-split-kv: cannot add the workspace "
                                  "argument");
    }
    return success();
  }

  /// A remark saying what the split count does on the machine and where it
  /// came from.
  void reportChoice(AttentionOp op, const FDSplitKVOptions &options,
                    const ::flashdecode::SplitPlan &chosen) {
    int64_t splits = chosen.numSplits;
    AttentionGeometry geometry = op.getGeometry();
    int64_t batch = ShapedType::isDynamic(geometry.batch) ? options.batchHint
                                                          : geometry.batch;
    int64_t maxLength = ShapedType::isDynamic(geometry.maxLength)
                            ? options.maxLengthHint
                            : geometry.maxLength;
    ::flashdecode::SplitPlannerOptions plannerOptions =
        getSplitPlannerOptions(options);
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
    // With a window the plan is for the keys a sequence attends to.
    AttentionRules rules = op.getRules();
    if (rules.windowLeft) {
      maxLength = getAttendedLength(
          maxLength > 0 ? maxLength : std::numeric_limits<int64_t>::max(),
          rules);
      remark << " window=" << *rules.windowLeft << " attended=" << maxLength;
    }
    // Its serial tail is in the plan's cost.
    if (options.fusedMerge)
      remark << " fused-merge";
    ::flashdecode::WorkspaceLayout workspace =
        getWorkspaceLayout(geometry, splits, options.fusedMerge);
    if (batch > 0 && maxLength > 0) {
      // Blocks along the batch: a shared prefix's take groups of sequences.
      ::flashdecode::SplitWorkload workload = getSplitWorkload(op, options);
      workload.clusterCtas = chosen.clusterCtas;
      ::flashdecode::SplitPlan plan = ::flashdecode::evaluateSplits(
          getKernelProblem(op).getBlockBatch(batch), geometry.numKVHeads,
          maxLength, splits, plannerOptions, workload);
      remark << " -> " << ::flashdecode::describeSplitPlan(plan)
             << " workspace=" << workspace.getBytes(batch) << "B";
    } else {
      remark << " -> splits=" << splits
             << " workspace=" << workspace.getBytesPerSequence()
             << "B per sequence";
    }
  }
};

} // namespace
