//===- AttentionUtils.h - The attention rules, once -------------*- C++ -*-===//
//
// The rules of fd.attention / fd.partial_attention / fd.merge that both
// lowerings (loops for the CPU, kernels for the GPU) must apply identically,
// as builders that emit them at any insertion point: the clamped length, a
// split's chunk, which keys the query tokens see, when a row is empty, and
// the merge's shift. A new masking rule is added here once. The float64
// reference (include/fd/Reference) is written independently: it is the
// check.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_UTILS_ATTENTIONUTILS_H
#define FD_DIALECT_FD_UTILS_ATTENTIONUTILS_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::fd {

/// A sequence's length (index) clamped to [0, maxLength], so that a bad
/// length in device memory reads nothing outside the cache.
Value buildClampedLength(OpBuilder &b, Location loc, Value length,
                         Value maxLength);

/// A block-table entry (index) clamped to the pool's pages [0, numPages),
/// so that a bad entry reads no memory outside the pool.
Value buildClampedPage(OpBuilder &b, Location loc, Value entry, Value numPages);

/// The keys [begin, end) split `split` of `numSplits` covers for a sequence
/// of `length` keys: chunks of max(chunkLength, ceil(length / S)) keys from
/// the start, clipped to the length (so late splits of a short sequence are
/// empty).
struct ChunkRange {
  Value begin, end;
};
ChunkRange buildChunkRange(OpBuilder &b, Location loc, Value length,
                           Value split, int64_t numSplits,
                           std::optional<int64_t> chunkLength);

/// The first key some query token may not see: length - Lq + 1. The Lq
/// query tokens are the sequence's last, so token t (0-based) sees the keys
/// j < buildFirstMaskedKey(length) + t; every key before it is visible to
/// every token.
Value buildFirstMaskedKey(OpBuilder &b, Location loc, Value length,
                          int64_t queryLength);

/// Whether a row whose running max is `max` saw a key: the max left -inf.
/// Decided by the max, never by the sum being positive, so that a NaN score
/// (a poisoned cache) propagates to the output and the lse instead of
/// reading as an empty row. An empty row's output is 0 and its lse -inf.
Value buildSawKeys(OpBuilder &b, Location loc, Value max);

/// The merge's shift for partial lses whose max is `max`: the max, or 0 when
/// every chunk was empty (max = -inf), so that every weight exp(lse - shift)
/// is then 0 instead of NaN.
Value buildMergeShift(OpBuilder &b, Location loc, Value max);

} // namespace mlir::fd

#endif // FD_DIALECT_FD_UTILS_ATTENTIONUTILS_H
