//===- WorkspaceLayout.h - Where split kernels keep partials ----*- C++ -*-===//
//-*-===//
//
// The split-KV workspace of one compiled kernel, stated once in standard
// C++: fd-split-kv's views into it, fd-split-kv's report, the manifest the
// JIT writes and the runtime that allocates it all read this layout.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_WORKSPACELAYOUT_H
#define FD_PLANNING_WORKSPACELAYOUT_H

#include <cstdint>

namespace flashdecode {

/// One workspace: the f32 partial outputs [B, Lq, Hq, S, D_v] at offset 0,
/// then the f32 partial log-sum-exps [B, Lq, Hq, S] (both batch-major, so
/// the log-sum-exps start after every sequence's outputs). With a fused
/// merge, a buffer of its own: one int32 arrival counter per (sequence, KV
/// head), zeroed once (docs/KernelABI.md). Sizes are per sequence.
struct WorkspaceLayout {
  int64_t partialOutputBytesPerSequence = 0;
  int64_t partialLseBytesPerSequence = 0;
  int64_t mergeCounterBytesPerSequence = 0;

  /// The layout of a kernel with `numSplits` splits of `queryLength` query
  /// tokens of `numQueryHeads` heads over `numKVHeads` KV heads, whose
  /// values have `valueHeadDim` elements.
  static WorkspaceLayout get(int64_t queryLength, int64_t numQueryHeads,
                             int64_t numKVHeads, int64_t numSplits,
                             int64_t valueHeadDim, bool fusedMerge);

  int64_t getBytesPerSequence() const {
    return partialOutputBytesPerSequence + partialLseBytesPerSequence;
  }
  /// Bytes of the workspace of `batch` sequences.
  int64_t getBytes(int64_t batch) const {
    return batch * getBytesPerSequence();
  }
  /// Where the partial log-sum-exps start in that workspace.
  int64_t getPartialLseOffset(int64_t batch) const {
    return batch * partialOutputBytesPerSequence;
  }
  /// Bytes of the merge counters of `batch` sequences (0 without a fused
  /// merge).
  int64_t getMergeCounterBytes(int64_t batch) const {
    return batch * mergeCounterBytesPerSequence;
  }
};

} // namespace flashdecode

#endif // FD_PLANNING_WORKSPACELAYOUT_H
