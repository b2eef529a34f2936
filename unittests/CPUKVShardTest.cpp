//===- CPUKVShardTest.cpp - Sharded caches on the CPU ---------------------===//
//
// The CPU path over one rank's share of a cache sharded by token (global
// token j on rank (j / interleave) % world; the lengths global) against the
// float64 reference attending that rank's keys of the whole cache, on fresh
// random inputs (FD_TEST_SEED=N repeats a run): every rank of 1 to 4 ranks
// of 1 to 16 tokens; lengths 0, 1, shorter than a rank's first token, not a
// multiple of a round, and the most the shards hold; unsplit, split and
// more splits than a rank has tokens; every dtype, layout and head ratio;
// causal query tokens, a window across the shards' boundaries, ALiBi at
// global distances, per-sequence query lengths and a soft-cap; paged
// shards bit for bit their dense twins; MLA's latent cache. Global lengths
// beyond the shards are clamped to what they hold, and a rank outside the
// shard is refused.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPUKVShard : public testing::Test, public Seeded {};

/// Rank `rank`'s share of `whole`'s caches (16- or 32-bit): its global
/// tokens (j / interleave) % world == rank in order, in dense caches of
/// `localLength` positions (the rest of them NaN, never read), beside the
/// same queries, global lengths and feature buffers.
Problem shardOf(const Problem &whole, int32_t rank, int64_t localLength) {
  const KernelConfig &config = whole.config;
  const KVShard shard = config.getKVShard();
  Problem local = whole;
  local.shardRank = rank;
  local.maxLength = localLength;
  local.keys = HostTensor(whole.keys.storage, local.cacheSize());
  local.values = HostTensor(whole.values.storage,
                            config.sharedKV ? 0 : local.valueCacheSize());
  for (size_t i = 0; i < local.keys.values.size(); ++i)
    local.keys.set(i, std::nan(""));
  for (size_t i = 0; i < local.values.values.size(); ++i)
    local.values.set(i, std::nan(""));
  const int64_t valueHeadDim = config.getValueHeadDim();
  for (int64_t b = 0; b < whole.batch; ++b)
    for (int64_t i = 0; i < localLength; ++i) {
      int64_t j =
          ((i / shard.interleave) * shard.world + rank) * shard.interleave +
          i % shard.interleave;
      if (j >= whole.maxLength)
        continue;
      for (int64_t h = 0; h < config.numKVHeads; ++h) {
        for (int64_t k = 0; k < config.headDim; ++k)
          local.keys.set(local.at(b, i, h, k),
                         whole.keys.get(whole.at(b, j, h, k)));
        if (config.sharedKV)
          continue;
        // Value rows are D_v wide: indexed as `at` does with D_v for D.
        size_t from = whole.at(b, j, h, 0) / config.headDim * valueHeadDim;
        size_t to = local.at(b, i, h, 0) / config.headDim * valueHeadDim;
        for (int64_t k = 0; k < valueHeadDim; ++k)
          local.values.set(to + k, whole.values.get(from + k));
      }
    }
  return local;
}

/// `config` sharded over `world` ranks of `interleave` tokens.
KernelConfig sharded(KernelConfig config, int64_t world, int64_t interleave) {
  config.kvShardWorld = world;
  config.kvShardInterleave = interleave;
  return config;
}

/// The positions a rank's dense cache needs for global lengths up to
/// `maxLength`: whole rounds' worth of its tokens.
int64_t shardLength(int64_t maxLength, const KVShard &shard) {
  return (maxLength + shard.round() - 1) / shard.round() * shard.interleave;
}

/// Runs `request` on every rank's share of `whole` (through pages of
/// `pageSize` too, when not 0: bit for bit the dense run) and checks each
/// against the reference over that rank's keys of the whole cache.
void expectEveryRankMatches(KernelRequest request, Problem whole,
                            std::mt19937 &random, int64_t pageSize = 0) {
  const KVShard shard = whole.config.getKVShard();
  const int64_t localLength = shardLength(whole.maxLength, shard);
  for (int32_t rank = 0; rank < shard.world; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank << " of " << shard.world
                                    << " x " << shard.interleave);
    Problem local = shardOf(whole, rank, localLength);
    whole.shardRank = rank;
    Result dense = run(request, local);
    expectMatchesReference(whole, dense, LseTolerance::OfLargest);
    if (!pageSize)
      continue;
    PagedCaches paged(local, pageSize, /*sparePages=*/2, random);
    KernelRequest pagedRequest = request;
    pagedRequest.config.pageSize = pageSize;
    Result pagedResult = run(pagedRequest, local, &paged);
    EXPECT_EQ(pagedResult.output.bytes, dense.output.bytes);
    EXPECT_EQ(pagedResult.lse, dense.lse);
  }
}

TEST_F(CPUKVShard, EveryRankOfEveryShard) {
  // Lengths 0, 1, 5 (short of most ranks' first token), odd, a round and
  // one past it, and the longest; unsplit, 1, 3 and 64 splits (more than a
  // rank's keys).
  const std::pair<int64_t, int64_t> shards[] = {
      {1, 1}, {2, 1}, {3, 4}, {4, 16}};
  for (auto [world, interleave] : shards)
    for (int64_t splits : {0, 1, 3, 64}) {
      SCOPED_TRACE(testing::Message()
                   << "splits " << splits << " " << seedNote());
      KernelConfig config =
          sharded(gqaConfig(ElementType::F32), world, interleave);
      config.splitKV = splits != 0;
      config.numSplits = splits;
      const int32_t round = world * interleave;
      Problem whole(config, {0, 1, 5, 97, round, round + 1, 150}, 150, random);
      expectEveryRankMatches(config, whole, random);
    }
}

TEST_F(CPUKVShard, EveryDtypeLayoutAndHeadRatio) {
  const std::pair<int64_t, int64_t> ratios[] = {{4, 4}, {8, 2}, {4, 1}};
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (auto [queryHeads, kvHeads] : ratios) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " "
                     << getCacheLayoutName(layout) << " Hq=" << queryHeads
                     << " Hkv=" << kvHeads << " " << seedNote());
        KernelConfig config = sharded(gqaConfig(type), 3, 5);
        config.cacheLayout = layout;
        config.numQueryHeads = queryHeads;
        config.numKVHeads = kvHeads;
        config.numSplits = 4;
        Problem whole(config, {0, 2, 33, 120, 77}, 120, random);
        expectEveryRankMatches(config, whole, random);
      }
}

TEST_F(CPUKVShard, GlobalPositionsForEveryRule) {
  // Lq = 4 causal (its tokens' keys fall on different ranks), a window of
  // 23 across the shards' boundaries, ALiBi at global distances, query
  // lengths 0 to 4 and a soft-cap; f32 and f16, split and not.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (int64_t splits : {0, 3})
      for (auto [world, interleave] :
           {std::pair<int64_t, int64_t>{2, 1}, {4, 3}}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " splits " << splits << " "
                     << seedNote());
        KernelConfig config =
            sharded(gqaConfig(type, /*queryLength=*/4), world, interleave);
        config.splitKV = splits != 0;
        config.numSplits = splits;
        config.windowLeft = 23;
        config.withAlibi = true;
        config.withQueryLens = true;
        config.logitsSoftCap = 30.0f;
        Problem whole(config, {0, 1, 3, 130, 64, 29, 130, 7, 100, 52}, 130,
                      random);
        expectEveryRankMatches(config, whole, random);
      }
}

TEST_F(CPUKVShard, PagedSharesAreTheirDenseTwins) {
  for (int64_t pageSize : {1, 16, 64}) {
    SCOPED_TRACE(testing::Message()
                 << "pages of " << pageSize << " " << seedNote());
    KernelConfig config =
        sharded(gqaConfig(ElementType::F16, /*queryLength=*/2), 2, 16);
    config.numSplits = 3;
    config.windowLeft = 40;
    Problem whole(config, {0, 17, 200, 131}, 200, random);
    expectEveryRankMatches(config, whole, random, pageSize);
  }
}

TEST_F(CPUKVShard, LatentCache) {
  // MLA's absorbed decode (values the latent rows' first 512 columns) over
  // 4 ranks of 64 tokens, Lq = 2, bf16.
  SCOPED_TRACE(seedNote());
  KernelConfig config;
  config.elementType = ElementType::BF16;
  config.headDim = 576;
  config.valueHeadDim = 512;
  config.sharedKV = true;
  config.numQueryHeads = 16;
  config.numKVHeads = 1;
  config.queryLength = 2;
  config.withLse = true;
  config.numSplits = 2;
  config.scale = 0.1f;
  config = sharded(config, 4, 64);
  Problem whole(config, {300, 1, 129}, 300, random, /*queryDeviation=*/1.0);
  expectEveryRankMatches(config, whole, random);
}

TEST_F(CPUKVShard, LengthsBeyondTheShardsAreClamped) {
  // 2 ranks of 4 tokens over 10 positions each hold global lengths up to
  // 2 * 4 * 2 + 2 = 18: longer ones (and negative ones) read as 18 (0).
  SCOPED_TRACE(seedNote());
  KernelConfig config = sharded(gqaConfig(ElementType::F32), 2, 4);
  config.numSplits = 3;
  Problem whole(config, {18, 18, 0}, 18, random);
  for (int32_t rank = 0; rank < 2; ++rank) {
    Problem local = shardOf(whole, rank, 10);
    Result expected = run(config, local);
    local.lengths = {19, 1 << 30, -5};
    Result clamped = run(config, local);
    EXPECT_EQ(clamped.output.bytes, expected.output.bytes) << "rank " << rank;
    EXPECT_EQ(clamped.lse, expected.lse) << "rank " << rank;
  }
}

TEST_F(CPUKVShard, ARankOutsideTheShardIsRefused) {
  KernelConfig config = sharded(gqaConfig(ElementType::F32), 2, 4);
  std::unique_ptr<CPUAttentionKernel> kernel = compile(config);
  ASSERT_TRUE(kernel);
  Problem problem(config, {8}, 8, random);
  AttentionBuffers buffers;
  buffers.query = problem.query.bytes.data();
  buffers.keyCache = problem.keys.bytes.data();
  buffers.valueCache = problem.values.bytes.data();
  buffers.seqLens = problem.lengths.data();
  std::vector<uint8_t> output(problem.rows() * config.headDim * 4);
  std::vector<float> lse(problem.rows());
  buffers.output = output.data();
  buffers.lse = lse.data();
  buffers.batch = 1;
  buffers.maxLength = 8;
  llvm::Error missing = kernel->run(buffers);
  EXPECT_EQ(llvm::toString(std::move(missing)),
            "the kernel reads a sharded cache: kvShardRank buffer (int32 [1], "
            "this rank) required");
  for (int32_t rank : {-1, 2}) {
    buffers.kvShardRank = &rank;
    llvm::Error error = kernel->run(buffers);
    EXPECT_EQ(llvm::toString(std::move(error)),
              "kvShardRank " + std::to_string(rank) +
                  " is not a rank of the shard: expected 0 to 1");
  }
}

TEST(CPUKVShardConfig, InvalidShardsNameTheField) {
  KernelConfig config = gqaConfig(ElementType::F32);
  config.kvShardInterleave = 16;
  EXPECT_EQ(config.validate(), "kv_shard_interleave 16 needs kv_shard_world "
                               "(the cache is not sharded)");
  config.kvShardWorld = -2;
  EXPECT_EQ(config.validate(), "kv_shard_world must be >= 1 (the ranks the "
                               "cache is sharded over), got -2");
  config.kvShardWorld = 2;
  config.withSinks = true;
  EXPECT_EQ(config.validate(),
            "with_sinks with kv_shard_world: each rank would count the sinks "
            "once more; merge the ranks' states, then join the sinks as one "
            "more state");
  config.withSinks = false;
  EXPECT_EQ(config.validate(), "");
}

} // namespace
