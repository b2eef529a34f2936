//===- MergeRows.h - The log-sum-exp merge of split partials ----*- C++ -*-===//
//
// Private to the FDToGPU lowering: fd.merge in two steps, written once for
// the merge kernel (MergeKernel.cpp) and the partial kernel's fused merge
// (FusedMerge.cpp). A warp turns an output row's split lses into normalized
// weights in workgroup memory (and writes the row's lse); then each thread
// sums a slice of the row's partials with them. Every partial a thread loads
// in an iteration is independent of the others and of the lses, so the loads
// are in flight together: one memory latency per iteration.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_MERGEROWS_H
#define FD_LIB_CONVERSION_FDTOGPU_MERGEROWS_H

#include "KernelBuilder.h"
#include "fd/Planning/KernelPlan.h"

namespace mlir::fd::detail {

/// What a merge reads and writes (global pointers; `lse` and `sinks` may be
/// null) and its shapes: `numSplits` partials of `headDim` f32 per output
/// row, split-major within a row, as fd.merge's operands are laid out.
/// `weights` is a 1-D f32 workgroup buffer of getWeightsPerRow() weights
/// per row the block merges.
struct MergeBuffers {
  Value partialOutput, partialLse, output, lse, sinks, weights;
  int64_t numSplits, headDim;
  Type outputElement;
  /// Where set (i1), whether this block writes the rows' lse: the merge
  /// kernel's blocks of a row's slices weigh it alike, the first writes it.
  Value writesLse = nullptr;

  /// A row's weights in `weights` (fd/Planning/KernelPlan.h): LLVM reads
  /// consecutive weights 16 bytes at a time, and the tail of a row's last
  /// vector, read but never used, is written.
  static int64_t getWeightsPerRow(int64_t numSplits) {
    return ::flashdecode::getMergeWeightsPerRow(numSplits);
  }
};

/// By the 32 lanes of one warp (`lane` each's): the weights of output row
/// `row` (`(b * Lq + t) * Hq + h`, whose sink is `head`'s) into row
/// `weightRow` of `weights`: exp(lse_s - lse) for split s, lse the row's
/// log-sum-exp over its splits and its sink; 0 for a row that sees no key
/// (every lse -inf) and for a padding token's row (`isQuery` false; null:
/// always a query), whose lses are not read. Writes the row's lse (-inf without
/// keys) when `buffers.lse` is set. A NaN lse makes every weight NaN.
/// With `writes` (i1) set, only the lanes where it holds store: the other
/// warps weigh too, so the lses' loads are not behind a branch to one warp
/// (LLVM sinks loads into the one block that uses them).
/// `lses`: what loadMergeLses returned for the same row and lane, when the
/// caller issued those loads earlier; empty, they are loaded here.
void emitMergeWeights(KernelEmitter &e, const MergeBuffers &buffers, Value row,
                      Value head, Value isQuery, Value lane, Value weightRow,
                      Value writes = nullptr, ArrayRef<Value> lses = {});

/// The lses emitMergeWeights reads for `lane` (in base 2, -inf past the
/// splits and for a padding token's row), for a caller that issues their
/// loads before other work.
SmallVector<Value> loadMergeLses(KernelEmitter &e, const MergeBuffers &buffers,
                                 Value row, Value isQuery, Value lane);

/// By one thread: `width` consecutive elements from `firstDim` of output
/// row `row`, the sum of its splits' partials times their weights (row
/// `weightRow` of `buffers.weights`, a barrier after emitMergeWeights),
/// written in the output's element type; zeros for a padding token's row
/// (`isQuery` false; null: always a query), whose partials are not read.
/// `splitsPerIteration` partials are loaded per iteration before any is
/// used. The first element's alignment must be a multiple of width * 4
/// bytes (width 1, 2 or 4). With `shareFirst` set, the sum of splits
/// [shareFirst, shareFirst + shareSplits) only, those past the row's
/// splits counting 0 (unread): a share of the splits, which the caller
/// adds to the other shares' (sum, then store).
class WeightedSum {
public:
  WeightedSum(KernelEmitter &e, const MergeBuffers &buffers, Value row,
              Value firstDim, int64_t width, Value isQuery,
              int64_t splitsPerIteration, Value shareFirst = nullptr,
              int64_t shareSplits = 0);

  /// Loads the first iteration's partials now, before the weights exist:
  /// they do not depend on them, so their memory latency overlaps the
  /// weights' (emitMergeWeights and its barrier, emitted in between).
  void preloadFirstIteration();
  /// The sum with the weights of row `weightRow`, and its store.
  void emit(Value weightRow) { store(sum(weightRow)); }
  /// The sum's `width` elements (f32), with the weights of row `weightRow`.
  SmallVector<Value> sum(Value weightRow);
  /// Writes `width` f32 elements in the output's element type.
  void store(ArrayRef<Value> elements);

private:
  Type getSliceType() const;
  /// Split `first + i` of the share (its index in the row), the same
  /// clamped into the row's splits where the share may overrun them, and
  /// whether it is one of the row's.
  Value getShareSplit(Value first, int64_t i);
  Value getSplit(Value first, int64_t i);
  Value isSplit(Value first, int64_t i);
  /// The partials of splits [first, first + count) of the share.
  SmallVector<Value> loadPartials(Value first, int64_t count);
  /// Adds `partials` (of the splits from `first`) times their weights to
  /// the chains.
  SmallVector<Value> accumulate(Value weightBase, Value first,
                                ArrayRef<Value> partials, ValueRange chains);

  KernelEmitter &e;
  const MergeBuffers &buffers;
  Value row, firstDim;
  int64_t width;
  Value isQuery;
  int64_t splitsPerIteration;
  /// The share's first split (0 without shares), its splits, and whether
  /// some lie past the row's.
  Value shareFirst;
  int64_t shareSplits;
  bool mayOverrun;
  SmallVector<Value> preloaded;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_MERGEROWS_H
