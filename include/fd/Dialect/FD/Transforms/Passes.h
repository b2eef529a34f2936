//===- Passes.h - Flash-Decoding transformation passes ----------*- C++ -*-===//

#ifndef FD_DIALECT_FD_TRANSFORMS_PASSES_H
#define FD_DIALECT_FD_TRANSFORMS_PASSES_H

#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/SplitPlanner.h"
#include "fd/Planning/WorkspaceLayout.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd {

#define GEN_PASS_DECL
#include "fd/Dialect/FD/Transforms/Passes.h.inc"

/// fd-split-kv's planning options as `holder` declares them, under the
/// pass's own member names: the pass and fd-lower-to-ptx's options both
/// read theirs through this one mapping (a holder without one of them does
/// not compile). `report` and `workspaceArgument` stay the pass's own.
template <typename OptionHolder>
FDSplitKVOptions readSplitKVOptions(const OptionHolder &holder) {
  FDSplitKVOptions options;
  options.numSplits = holder.numSplits;
  options.smCount = holder.smCount;
  options.blocksPerSM = holder.blocksPerSM;
  options.minChunkLength = holder.minChunkLength;
  options.maxSplits = holder.maxSplits;
  options.chunkLength = holder.chunkLength;
  options.batchHint = holder.batchHint;
  options.maxLengthHint = holder.maxLengthHint;
  options.chip = holder.chip;
  options.fusedMerge = holder.fusedMerge;
  return options;
}

/// What the split planner is asked with `options`: the one mapping from
/// the pass's options to the planner's.
::flashdecode::SplitPlannerOptions
getSplitPlannerOptions(const FDSplitKVOptions &options);

/// The workspace of an op of `geometry` split `numSplits` ways (with the
/// merge fused into the partial kernel when `fusedMerge`).
::flashdecode::WorkspaceLayout
getWorkspaceLayout(const AttentionGeometry &geometry, int64_t numSplits,
                   bool fusedMerge);

/// The workload of `op`'s partial kernel as it is built for `options.chip`
/// (::flashdecode::getSplitWorkload; an unknown chip, which resolveNumSplits
/// refuses, plans for the default), and whether `options` plan for a fused
/// merge.
::flashdecode::SplitWorkload getSplitWorkload(AttentionOp op,
                                              const FDSplitKVOptions &options);

/// The argument attribute marking a function's workspace argument.
constexpr const char *kWorkspaceArgumentAttrName = "fd.workspace";

/// Whether `fd-split-kv` rewrites this op: decode-shaped (Lq <= 8).
bool isDecodeShaped(AttentionOp op);

/// The split count `options` give `op` and the blocks of each chunk's
/// cluster (the planner's, for an automatic count with the planner's
/// schedule; else the schedule's), or a failure explaining what is missing
/// (reported on `op` when `emitErrors`). Only numSplits and clusterCtas of
/// the plan are set for a fixed or chunked count.
FailureOr<::flashdecode::SplitPlan>
resolveSplitPlan(AttentionOp op, const FDSplitKVOptions &options,
                 bool emitErrors);
/// resolveSplitPlan's split count.
FailureOr<int64_t> resolveNumSplits(AttentionOp op,
                                    const FDSplitKVOptions &options,
                                    bool emitErrors);

/// Patterns rewriting decode-shaped fd.attention into fd.partial_attention +
/// fd.merge over an explicit workspace, with the pass's own options. The ops
/// must have valid options (check with resolveNumSplits first).
void populateSplitKVPatterns(RewritePatternSet &patterns,
                             const FDSplitKVOptions &options);

#define GEN_PASS_REGISTRATION
#include "fd/Dialect/FD/Transforms/Passes.h.inc"

} // namespace mlir::fd

#endif // FD_DIALECT_FD_TRANSFORMS_PASSES_H
