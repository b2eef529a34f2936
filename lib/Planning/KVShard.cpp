//===- KVShard.cpp - A KV cache sharded by token over ranks ---------------===//

#include "fd/Planning/KVShard.h"

#include <algorithm>

namespace flashdecode {

std::string getReasonKVShardInvalid(int64_t world, int64_t interleave,
                                    char separator) {
  std::string prefix = std::string("kv") + separator + "shard" + separator;
  if (world < 1)
    return prefix +
           "world must be >= 1 (the ranks the cache is sharded "
           "over), got " +
           std::to_string(world);
  if (interleave < 1)
    return prefix +
           "interleave must be >= 1 (consecutive tokens on one "
           "rank), got " +
           std::to_string(interleave);
  if (world > kMaxKVShardRound / interleave)
    return prefix + "world x " + prefix + "interleave must be at most " +
           std::to_string(kMaxKVShardRound) + ", got " + std::to_string(world) +
           " x " + std::to_string(interleave);
  return "";
}

std::string getReasonKVShardFieldsInvalid(int64_t world, int64_t interleave,
                                          char separator) {
  if (world != 0)
    return getReasonKVShardInvalid(world, interleave, separator);
  if (interleave != 1) {
    std::string prefix = std::string("kv") + separator + "shard" + separator;
    return prefix + "interleave " + std::to_string(interleave) + " needs " +
           prefix + "world (the cache is not sharded)";
  }
  return "";
}

int64_t getShardLength(int64_t globalLength, int64_t rank,
                       const KVShard &shard) {
  if (globalLength <= 0)
    return 0;
  int64_t rounds = globalLength / shard.round();
  int64_t rest = globalLength % shard.round() - rank * shard.interleave;
  return rounds * shard.interleave +
         std::clamp<int64_t>(rest, 0, shard.interleave);
}

int64_t getMaxShardSpan(int64_t span, const KVShard &shard) {
  if (span <= 0)
    return 0;
  // A run that starts with one of the rank's blocks holds the most of them:
  // a whole block per whole round, then up to a block of what is left.
  return span / shard.round() * shard.interleave +
         std::min(span % shard.round(), shard.interleave);
}

} // namespace flashdecode
