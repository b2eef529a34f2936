//===- KVShardTest.cpp - A KV cache sharded by token, on the host ---------===//
//
// fd/Planning/KVShard.h against the rule counted token by token (global
// token j on rank (j / interleave) % world): each rank's share of every
// length, the most keys a rank holds of any run of tokens, and the
// messages that name what a shard cannot be.
//
//===----------------------------------------------------------------------===//

#include "fd/Planning/KVShard.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace flashdecode;

namespace {

bool holds(int64_t token, int64_t rank, const KVShard &shard) {
  return (token / shard.interleave) % shard.world == rank;
}

const KVShard kShards[] = {{1, 1}, {1, 7}, {2, 1}, {2, 16},
                           {3, 4}, {4, 1}, {5, 3}, {8, 64}};

TEST(KVShard, EachRanksShareOfEveryLength) {
  for (const KVShard &shard : kShards) {
    const int64_t longest = 3 * shard.round() + 5;
    for (int64_t rank = 0; rank < shard.world; ++rank) {
      int64_t counted = 0;
      for (int64_t length = 0; length <= longest; ++length) {
        ASSERT_EQ(getShardLength(length, rank, shard), counted)
            << "world " << shard.world << " interleave " << shard.interleave
            << " rank " << rank << " length " << length;
        counted += holds(length, rank, shard);
      }
      EXPECT_EQ(getShardLength(-3, rank, shard), 0);
    }
  }
}

TEST(KVShard, SharesAddUpToTheLength) {
  for (const KVShard &shard : kShards)
    for (int64_t length : {0, 1, 17, 1000, 32769}) {
      int64_t total = 0;
      for (int64_t rank = 0; rank < shard.world; ++rank)
        total += getShardLength(length, rank, shard);
      EXPECT_EQ(total, length) << shard.world << " x " << shard.interleave;
    }
}

TEST(KVShard, MostKeysOfARunOnOneRank) {
  for (const KVShard &shard : kShards)
    for (int64_t span = 0; span <= 3 * shard.round() + 2; ++span) {
      int64_t most = 0;
      for (int64_t start = 0; start < shard.round(); ++start)
        for (int64_t rank = 0; rank < shard.world; ++rank)
          most = std::max(most, getShardLength(start + span, rank, shard) -
                                    getShardLength(start, rank, shard));
      ASSERT_EQ(getMaxShardSpan(span, shard), most)
          << shard.world << " x " << shard.interleave << " span " << span;
    }
}

TEST(KVShard, MessagesNameTheField) {
  EXPECT_EQ(getReasonKVShardInvalid(4, 16), "");
  EXPECT_EQ(getReasonKVShardInvalid(0, 1),
            "kv_shard_world must be >= 1 (the ranks the cache is sharded "
            "over), got 0");
  EXPECT_EQ(getReasonKVShardInvalid(2, 0, '-'),
            "kv-shard-interleave must be >= 1 (consecutive tokens on one "
            "rank), got 0");
  EXPECT_EQ(getReasonKVShardInvalid(1 << 16, 1 << 15),
            "kv_shard_world x kv_shard_interleave must be at most "
            "1073741824, got 65536 x 32768");
  EXPECT_EQ(getReasonKVShardInvalid(1 << 15, 1 << 15), "");
  // A config's fields: world 0 is no shard, whose interleave stays 1.
  EXPECT_EQ(getReasonKVShardFieldsInvalid(0, 1), "");
  EXPECT_EQ(getReasonKVShardFieldsInvalid(0, 16),
            "kv_shard_interleave 16 needs kv_shard_world (the cache is not "
            "sharded)");
  EXPECT_EQ(getReasonKVShardFieldsInvalid(-1, 1, '-'),
            "kv-shard-world must be >= 1 (the ranks the cache is sharded "
            "over), got -1");
}

} // namespace
