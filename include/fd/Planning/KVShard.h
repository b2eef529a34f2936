//===- KVShard.h - A KV cache sharded by token over ranks -------*- C++ -*-===//
//
// Decode context parallelism: every sequence's tokens are dealt to `world`
// ranks, `interleave` at a time, so each rank's cache holds a share of
// every sequence. The kernels receive the global lengths and derive their
// share (mlir::fd::buildShardLength emits the same rule in the IR); this
// is the rule on the host, for validation and planning.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_KVSHARD_H
#define FD_PLANNING_KVSHARD_H

#include <cstdint>
#include <string>

namespace flashdecode {

/// Global token j lives on rank (j / interleave) % world; local slot i of
/// rank r holds global token ((i / interleave) * world + r) * interleave +
/// i % interleave.
struct KVShard {
  int64_t world = 1;
  int64_t interleave = 1;

  bool operator==(const KVShard &other) const {
    return world == other.world && interleave == other.interleave;
  }
  /// Tokens in one round over the ranks.
  int64_t round() const { return world * interleave; }
};

/// The most tokens in one round (world x interleave): positions stay i32
/// wherever a round is multiplied out.
inline constexpr int64_t kMaxKVShardRound = int64_t(1) << 30;

/// Why `world` ranks of `interleave` tokens are not a shard the kernels
/// take: a sentence naming kv_shard_world or kv_shard_interleave and what
/// they accept (`separator` joins the words of a name: '_' for the
/// manifest's and Python's, '-' for fd-compile's flags); "" when they are.
std::string getReasonKVShardInvalid(int64_t world, int64_t interleave,
                                    char separator = '_');

/// The same for a config's fields, where a world of 0 says the cache is not
/// sharded (and the interleave must then be left at 1).
std::string getReasonKVShardFieldsInvalid(int64_t world, int64_t interleave,
                                          char separator = '_');

/// How many of a sequence's first `globalLength` tokens rank `rank` holds.
int64_t getShardLength(int64_t globalLength, int64_t rank,
                       const KVShard &shard);

/// The most tokens any rank holds of `span` consecutive global tokens (how
/// many keys a window attends to on one rank, for planning).
int64_t getMaxShardSpan(int64_t span, const KVShard &shard);

} // namespace flashdecode

#endif // FD_PLANNING_KVSHARD_H
