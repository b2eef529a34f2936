//===- Passes.h - Flash-Decoding transformation passes ----------*- C++ -*-===//

#ifndef FD_DIALECT_FD_TRANSFORMS_PASSES_H
#define FD_DIALECT_FD_TRANSFORMS_PASSES_H

#include "fd/Dialect/FD/IR/FD.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd {

#define GEN_PASS_DECL
#include "fd/Dialect/FD/Transforms/Passes.h.inc"

/// How `fd-split-kv` chooses S for one `fd.attention`.
struct SplitKVOptions {
  /// 0 = automatic.
  int64_t numSplits = 0;
  int64_t smCount = 132;
  int64_t blocksPerSM = 4;
  int64_t minChunkLength = 128;
  int64_t maxSplits = 128;
  /// 0 = chunks follow each sequence's length.
  int64_t chunkLength = 0;
  /// Used when the batch / cache length of the op is dynamic (0 = unknown).
  int64_t batchHint = 0;
  int64_t maxLengthHint = 0;
  /// Take the workspace from the enclosing function's argument marked
  /// `fd.workspace` (the pass adds it) instead of allocating it.
  bool workspaceArgument = false;
};

/// The argument attribute marking a function's workspace argument.
constexpr const char *kWorkspaceArgumentAttrName = "fd.workspace";

/// Whether `fd-split-kv` rewrites this op: decode-shaped (Lq <= 8).
bool isDecodeShaped(AttentionOp op);

/// The split count `options` give `op`, or a failure explaining what is
/// missing (reported on `op` when `emitErrors`).
FailureOr<int64_t> resolveNumSplits(AttentionOp op,
                                    const SplitKVOptions &options,
                                    bool emitErrors);

/// Patterns rewriting decode-shaped fd.attention into fd.partial_attention +
/// fd.merge over an explicit workspace. The ops must have valid options
/// (check with resolveNumSplits first).
void populateSplitKVPatterns(RewritePatternSet &patterns,
                             const SplitKVOptions &options);

#define GEN_PASS_REGISTRATION
#include "fd/Dialect/FD/Transforms/Passes.h.inc"

} // namespace mlir::fd

#endif // FD_DIALECT_FD_TRANSFORMS_PASSES_H
