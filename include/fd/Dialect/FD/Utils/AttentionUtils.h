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

#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::fd {

/// A range [begin, end) of key positions (index values).
struct KeyRange {
  Value begin, end;
};

/// A sequence's length (index) clamped to [0, maxLength], so that a bad
/// length in device memory reads nothing outside the cache.
Value buildClampedLength(OpBuilder &b, Location loc, Value length,
                         Value maxLength);

/// A block-table entry (index) clamped to the pool's pages [0, numPages),
/// so that a bad entry reads no memory outside the pool.
Value buildClampedPage(OpBuilder &b, Location loc, Value entry, Value numPages);

/// A sequence as the rules see it: the keys its cache holds (`length`) and
/// its number of query tokens n (index values). Its queries are its last n
/// tokens: token t < n is at position P - n + t, P its length in positions
/// (`globalLength` where set, else `length`); tokens t >= n are padding,
/// whose rows are not computed. Without a KV shard key j is at position j:
/// P is `length`, or for a query sequence continuing a shared prefix
/// (buildSharedPrefixExtent) the prefix's length plus its suffix. With a
/// shard (`shard`), the cache holds this rank's (`shardRank`, an index)
/// share of the sequence: P is `globalLength`, `length` the share, and key
/// i is at the position of the global token its slot holds (fd.attention,
/// "Sharded caches").
struct SequenceExtent {
  Value length, queryLength;
  Value globalLength, shardRank;
  std::optional<KVShard> shard;
};

/// The extent of a sequence whose length (as read, an index value) is
/// `length` in a cache of `maxLength` keys: the length clamped to [0,
/// maxLength], so that a bad length in device memory reads nothing outside
/// the cache. With a KV shard (`rules.kvShard`; `shardRank` the rank as
/// read, an index, clamped to [0, world)) the length is global: clamped to
/// what `maxLength` keys on every rank hold, then this rank's share of it.
/// The caller sets its queryLength (buildQueryLength).
SequenceExtent buildSequenceExtent(OpBuilder &b, Location loc, Value length,
                                   Value maxLength, const AttentionRules &rules,
                                   Value shardRank);

/// The extent of a query sequence that continues a shared prefix whose
/// extent is `prefix` (its queryLength set) by `suffixLength` tokens (an
/// index as read, clamped to [0, 2^30]): the prefix's keys, its queries at
/// positions P + suffix - n + t.
SequenceExtent buildSharedPrefixExtent(OpBuilder &b, Location loc,
                                       const SequenceExtent &prefix,
                                       Value suffixLength);

/// A sequence's number of query tokens: the constant Lq (`queryLength`)
/// when `queryLen` is null, else its entry of the per-sequence query
/// lengths (i32, read by the caller) clamped to [0, Lq], so that a bad
/// entry computes no row beyond the queries.
Value buildQueryLength(OpBuilder &b, Location loc, Value queryLen,
                       int64_t queryLength);

/// Whether query token `token` (an index) of the sequence is a real query,
/// not padding: token < n.
Value buildIsQueryToken(OpBuilder &b, Location loc,
                        const SequenceExtent &sequence, Value token);

/// The keys [first, end) some query token sees, which the splits divide:
/// first is 0, or with a window of W keys max(0, length - n + 1 - W) (the
/// first token's window); end is the length, or `first` for a sequence
/// without query tokens (n = 0). Keys outside are read by no split. For a
/// shared prefix, pass the prefix's extent: its keys some query of some
/// sequence continuing it may see (one with no suffix sees the earliest),
/// so every sequence's rows split the prefix alike.
KeyRange buildAttendedKeys(OpBuilder &b, Location loc,
                           const SequenceExtent &sequence,
                           const AttentionRules &rules);

/// The keys [begin, end) split `split` of `numSplits` covers for a sequence
/// whose attended keys are [first, length) (buildAttendedKeys): chunks of
/// max(chunkLength, ceil((length - first) / S)) keys from `first`, clipped
/// to `length` (so late splits of a short sequence are empty).
struct ChunkRange {
  Value begin, end;
};
ChunkRange buildChunkRange(OpBuilder &b, Location loc, Value first,
                           Value length, Value split, int64_t numSplits,
                           std::optional<int64_t> chunkLength);

/// The first key some query token may not see: the key of position P - n +
/// 1, the end of token 0's keys (buildVisibleKeys); every key before it and
/// at or after the last token's window start is visible to every token.
Value buildFirstMaskedKey(OpBuilder &b, Location loc,
                          const SequenceExtent &sequence);

/// The keys [begin, end) query token `token` (0-based, an index, < n) sees,
/// unclipped: the n query tokens are the sequence's last, so token t is at
/// position p = P - n + t and sees the keys at positions j <= p (causal)
/// and, with a window of W keys, p - W < j. `begin` is null without a
/// window (every key from 0). Callers clip the range to their chunk.
/// Without a KV shard end - begin is W and end grows by one a token; with
/// one neither holds.
KeyRange buildVisibleKeys(OpBuilder &b, Location loc,
                          const SequenceExtent &sequence, Value token,
                          const AttentionRules &rules);

/// The position of query token `token` (an index, < n): P - n + token.
Value buildQueryPosition(OpBuilder &b, Location loc,
                         const SequenceExtent &sequence, Value token);

/// The position of key `key` (an index or i32; the result likewise): `key`
/// itself, or with a KV shard its global token's.
Value buildKeyPosition(OpBuilder &b, Location loc,
                       const SequenceExtent &sequence, Value key);

/// The number of keys a sequence in a cache of `maxLength` attends to at
/// most (what the split count is planned for): the cache length, or with a
/// window min(maxLength, the keys W + Lq - 1 positions hold).
int64_t getAttendedLength(int64_t maxLength, const AttentionRules &rules);

/// Logit soft-capping: cap * tanh(score / cap), with `score` and `cap` in
/// the same unit (natural or base-2 logits) and tanh(y) = 1 - 2 / (e^2y + 1),
/// which is +-1 at +-inf, keeps NaN and loses a few ulp of `cap` near 0
/// (the division may be approximate). `exp2` emits 2^x on the target (the
/// SFU's ex2 on the GPU).
Value buildSoftCap(OpBuilder &b, Location loc, Value score, float cap,
                   function_ref<Value(Value)> exp2);

/// ALiBi: `score` + slope * (key - position), the distance between a key's
/// and the query's positions (buildKeyPosition, buildQueryPosition;
/// integers of one type: index or i32) converted to f32 exactly; `slope`
/// in the score's unit (natural or base-2 logits). Applied after the
/// soft-cap.
Value buildAlibiBias(OpBuilder &b, Location loc, Value score, Value slope,
                     Value key, Value position);

/// The f32 value of an fp8 cache element (`element`: f8E4M3FN or f8E5M2),
/// exactly, with integer and f16 operations every target has: E5M2 is the
/// high byte of an f16; E4M3FN's magnitude bits, moved into an f16's, are
/// its value times 2^-8 (normal or subnormal alike), except its NaN
/// (S.1111.111), which has no f16 twin. An fp8 cache's value is this times
/// its scale.
Value buildFloat8ToF32(OpBuilder &b, Location loc, Value element);

/// Whether a row whose running max is `max` saw a key: the max left -inf.
/// Decided by the max, never by the sum being positive, so that a NaN score
/// (a poisoned cache) propagates to the output and the lse instead of
/// reading as an empty row. An empty row's output is 0 and its lse -inf.
Value buildSawKeys(OpBuilder &b, Location loc, Value max);

/// The merge's shift for partial lses whose max is `max`: the max, or 0 when
/// every chunk was empty (max = -inf), so that every weight exp(lse - shift)
/// is then 0 instead of NaN. An attention sink is one more partial whose lse
/// is the sink and whose output is zero: it is in `max`, and the sum of the
/// weights starts at exp(sink - shift) (in the unsplit softmax: the state
/// before any key is max = sink, sum = that weight).
Value buildMergeShift(OpBuilder &b, Location loc, Value max);

} // namespace mlir::fd

#endif // FD_DIALECT_FD_UTILS_ATTENTIONUTILS_H
