//===- CPUQueryLensTest.cpp - Per-sequence query lengths on the CPU -------===//
//
// The CPU path with per-sequence query lengths (sequence b's last
// n = clamp(query_lens[b], 0, Lq) tokens are its queries, token t at
// position len - n + t; the rows of tokens t >= n are padding: zeros, lse
// -inf) against the float64 reference on fresh random inputs
// (FD_TEST_SEED=N repeats a run): every n in [0, Lq] for Lq = 1 to 8 and
// out-of-range entries (clamped); lengths 0, 1, below n, odd and full;
// unsplit and 1 to more-than-tokens splits, automatic splits and
// chunk-length mode; every dtype, layout and head ratio; paged caches; with
// a window, sinks (not in padding rows), ALiBi and a soft-cap. Independent
// of the reference: the rows of a sequence with n queries are bit for bit
// those of a kernel compiled for Lq = n, and a NaN key reaches exactly the
// tokens whose position is at or past it.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPUQueryLens : public testing::Test, public Seeded {};

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

/// GQA with per-sequence query lengths and an lse.
KernelConfig queryLensConfig(ElementType type, int64_t queryLength) {
  KernelConfig config = gqaConfig(type, queryLength);
  config.withQueryLens = true;
  return config;
}

/// Lengths and query lengths of every pair of: each of `queryLens`, and a
/// length of 0 to 2 (below most n), an odd one and `maxLength`.
Problem everyPair(const KernelConfig &config,
                  const std::vector<int32_t> &queryLens, int32_t maxLength,
                  std::mt19937 &random) {
  std::vector<int32_t> lengths, pairs;
  for (size_t i = 0; i < queryLens.size(); ++i)
    for (int32_t length : {int32_t(i % 3), int32_t(37 + 2 * i), maxLength}) {
      lengths.push_back(length);
      pairs.push_back(queryLens[i]);
    }
  Problem problem(config, lengths, maxLength, random);
  problem.queryLens = pairs;
  return problem;
}

/// The problem's sequences with `queries` query tokens each and no
/// per-sequence query lengths: the queries of their first `queries` tokens,
/// the same caches, lengths, sinks and slopes.
Problem firstTokens(const Problem &problem, int64_t queries,
                    std::mt19937 &random) {
  KernelConfig config = problem.config;
  config.queryLength = queries;
  config.withQueryLens = false;
  Problem first(config, problem.lengths, problem.maxLength, random);
  first.keys = problem.keys;
  first.values = problem.values;
  first.sinks = problem.sinks;
  first.alibiSlopes = problem.alibiSlopes;
  const size_t token = config.numQueryHeads * config.headDim;
  const size_t element = first.query.getElementSize();
  for (int64_t b = 0; b < problem.batch; ++b) {
    size_t from = b * problem.config.queryLength * token;
    size_t to = b * queries * token;
    std::memcpy(&first.query.bytes[to * element],
                &problem.query.bytes[from * element],
                queries * token * element);
    std::copy_n(&problem.query.values[from], queries * token,
                &first.query.values[to]);
  }
  return first;
}

/// Runs the problem and, for each n in [1, Lq], the kernel compiled for
/// Lq = n without query lengths on firstTokens(n): a sequence's rows t < n
/// are bit for bit those of the kernel for n. The rows of n = 0 are left
/// to the reference.
void expectRowsOfAKernelForEachQueryLength(const Problem &problem,
                                           std::mt19937 &random) {
  const KernelConfig &config = problem.config;
  Result actual = run(config, problem);
  expectMatchesReference(problem, actual, LseTolerance::OfLargest);
  const int64_t heads = config.numQueryHeads;
  const size_t rowBytes = config.headDim * actual.output.getElementSize();
  for (int64_t n = 1; n <= config.queryLength; ++n) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Problem first = firstTokens(problem, n, random);
    Result expected = run(first.config, first);
    for (int64_t b = 0; b < problem.batch; ++b) {
      if (problem.queriesOf(b) != n)
        continue;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t row = (b * config.queryLength + t) * heads + h;
          int64_t firstRow = (b * n + t) * heads + h;
          EXPECT_EQ(std::memcmp(&actual.output.bytes[row * rowBytes],
                                &expected.output.bytes[firstRow * rowBytes],
                                rowBytes),
                    0)
              << "sequence " << b << " token " << t << " head " << h;
          EXPECT_EQ(std::memcmp(&actual.lse[row], &expected.lse[firstRow],
                                sizeof(float)),
                    0)
              << "sequence " << b << " token " << t << " head " << h << ": "
              << actual.lse[row] << " vs " << expected.lse[firstRow];
        }
    }
  }
}

TEST_F(CPUQueryLens, EveryQueryCountAndOutOfRangeEntries) {
  // Every n in [0, Lq] and -3, Lq + 5 and INT32_MAX (clamped to 0 and Lq),
  // each with lengths 0 to 2, odd and full; unsplit, 1, 3, 16 splits and
  // 64 (more than most sequences have tokens).
  for (int64_t queryLength : {1, 2, 4, 8}) {
    SCOPED_TRACE(testing::Message()
                 << "Lq=" << queryLength << " " << seedNote());
    std::vector<int32_t> queryLens = {-3, int32_t(queryLength + 5), kInt32Max};
    for (int32_t n = 0; n <= queryLength; ++n)
      queryLens.push_back(n);
    Problem problem = everyPair(queryLensConfig(ElementType::F32, queryLength),
                                queryLens, 300, random);
    expectEverySplitMatches(problem, {1, 3, 16, 64});
  }
}

TEST_F(CPUQueryLens, EveryDtypeLayoutAndHeadRatio) {
  // MHA, GQA and MQA, NHD and HND, D = 64 and 128 (each with every dtype,
  // layout and ratio), Lq = 4.
  const std::pair<int64_t, int64_t> ratios[] = {{4, 4}, {8, 2}, {4, 1}};
  int index = 0;
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (auto [queryHeads, kvHeads] : ratios) {
        int64_t headDim = index++ % 2 ? 128 : 64;
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " "
                     << getCacheLayoutName(layout) << " Hq=" << queryHeads
                     << " Hkv=" << kvHeads << " D=" << headDim << " "
                     << seedNote());
        KernelConfig config = queryLensConfig(type, 4);
        config.cacheLayout = layout;
        config.numQueryHeads = queryHeads;
        config.numKVHeads = kvHeads;
        config.headDim = headDim;
        Problem problem(config, {0, 1, 2, 3, 37, 250, 250, 9}, 250, random);
        expectEverySplitMatches(problem, {5});
      }
}

TEST_F(CPUQueryLens, RowsAreThoseOfAKernelForTheirQueryLength) {
  // Independent of the reference: every dtype, unsplit, split, and split
  // with a window (below Lq), a soft-cap, ALiBi and sinks.
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (int features = 0; features < 3; ++features) {
      SCOPED_TRACE(testing::Message()
                   << getElementTypeName(type) << " features " << features
                   << " " << seedNote());
      KernelConfig config = queryLensConfig(type, 4);
      config.splitKV = features != 0;
      config.numSplits = 3;
      if (features == 2) {
        config.windowLeft = 3;
        config.logitsSoftCap = 20.0f;
        config.withAlibi = true;
        config.withSinks = true;
      }
      Problem problem(config, {0, 1, 2, 3, 4, 5, 61, 200, 200, 130}, 200,
                      random);
      expectRowsOfAKernelForEachQueryLength(problem, random);
    }
}

TEST_F(CPUQueryLens, PagedEqualsDense) {
  // Pages of 16 (3 spare, shuffled): bit-identical to the dense kernel,
  // with a window, sinks and ALiBi in one of each pair.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (bool features : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " "
                     << getCacheLayoutName(layout) << " features=" << features
                     << " " << seedNote());
        KernelConfig config = queryLensConfig(type, 4);
        config.cacheLayout = layout;
        config.numSplits = 3;
        if (features) {
          config.windowLeft = 21;
          config.withSinks = true;
          config.withAlibi = true;
        }
        Problem problem(config, {0, 1, 17, 40, 157, 300, 3, 300}, 304, random);
        PagedCaches paged(problem, 16, /*sparePages=*/3, random);
        expectPagedMatchesDense(config, problem, paged, 16);
      }
}

TEST_F(CPUQueryLens, Windows) {
  // W of 1 and 3 (below Lq: tokens see different first keys), 21 (aligned
  // with no chunk), and equal to, above and far above some lengths; the
  // chunks start at the first query's first key, len - n + 1 - W.
  for (int64_t queryLength : {4, 8})
    for (int64_t window : {1, 3, 21, 37, 301, 5000}) {
      ElementType type =
          queryLength == 4 ? ElementType::F32 : ElementType::BF16;
      SCOPED_TRACE(testing::Message()
                   << getElementTypeName(type) << " Lq=" << queryLength
                   << " W=" << window << " " << seedNote());
      KernelConfig config = queryLensConfig(type, queryLength);
      config.windowLeft = window;
      Problem problem(config, {0, 1, 2, 3, 7, 21, 37, 38, 300, 300}, 300,
                      random);
      expectEverySplitMatches(problem, {3, 16});
    }
}

TEST_F(CPUQueryLens, SinksLeavePaddingRowsEmpty) {
  // A real token before the first key gets lse = its sink; a padding token
  // gets zeros and lse -inf, whatever its sink, split or not.
  for (ElementType type : {ElementType::F32, ElementType::BF16}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    KernelConfig config = queryLensConfig(type, 4);
    config.withSinks = true;
    Problem problem(config, {0, 1, 2, 50, 300, 300}, 300, random);
    problem.queryLens = {4, 3, 0, 2, 1, 4};
    problem.sinks[0] = 0.5f;
    problem.sinks[1] = 12.0f;
    problem.sinks[2] = -30.0f;
    problem.sinks[3] = -std::numeric_limits<float>::infinity();
    expectEverySplitMatches(problem, {1, 3, 64});
    for (bool split : {false, true}) {
      config.splitKV = split;
      Result result = run(config, problem);
      const int64_t heads = config.numQueryHeads;
      // Sequence 1 (length 1, n = 3): token 0 sits at -2, token 2 at 0
      // and sees key 0, which keeps a share of the weight beside the
      // sinks 0.5 and -30 of heads 0 and 2.
      for (int64_t h : {0, 2}) {
        EXPECT_EQ(result.lse[(1 * 4 + 0) * heads + h], problem.sinks[h]);
        EXPECT_NE(result.lse[(1 * 4 + 2) * heads + h], problem.sinks[h]);
        EXPECT_EQ(result.lse[(1 * 4 + 3) * heads + h],
                  -std::numeric_limits<float>::infinity());
      }
    }
  }
}

TEST_F(CPUQueryLens, AlibiAndASoftCap) {
  // ALiBi's distance j - p uses the token's position len - n + t; MQA, a
  // cap of 30 over scores far beyond it, with and without a window and
  // sinks.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (int64_t queryLength : {2, 8})
      for (bool window : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " Lq=" << queryLength
                     << " window=" << window << " " << seedNote());
        KernelConfig config = queryLensConfig(type, queryLength);
        config.withAlibi = true;
        config.numKVHeads = 1;
        config.logitsSoftCap = 30.0f;
        if (window) {
          config.windowLeft = 21;
          config.withSinks = true;
        }
        Problem problem(config, {0, 1, 3, 21, 22, 300, 300, 299, 100}, 300,
                        random, 20.0);
        expectEverySplitMatches(problem, {3, 64}, LseTolerance::OfLargest);
      }
}

TEST_F(CPUQueryLens, LargeSlopesKeepEachTokensOwnKey) {
  // ALiBi slopes of 200: a token's weight is all on the key at its own
  // position len - n + t, so its output is that value.
  SCOPED_TRACE(seedNote());
  KernelConfig config = queryLensConfig(ElementType::F32, 4);
  config.withAlibi = true;
  config.numSplits = 6;
  Problem problem(config, {0, 2, 5, 64, 200, 199, 3}, 200, random);
  problem.queryLens = {4, 3, 2, 1, 4, 0, 3};
  std::fill(problem.alibiSlopes.begin(), problem.alibiSlopes.end(), 200.0f);
  Result result = run(config, problem);
  expectMatchesReference(problem, result);
  const int64_t heads = config.numQueryHeads, d = config.headDim;
  const int64_t group = heads / config.numKVHeads;
  for (int64_t row = 0; row < problem.rows(); ++row) {
    int64_t b = row / (4 * heads), t = row / heads % 4, h = row % heads;
    int64_t p = problem.lengths[b] - problem.queriesOf(b) + t;
    if (t >= problem.queriesOf(b) || p < 0)
      continue;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_NEAR(result.output.get(row * d + k),
                  problem.values.values[problem.at(b, p, h / group, k)], 1e-5)
          << "row " << row << " dim " << k;
  }
}

TEST_F(CPUQueryLens, NaNKeysReachExactlyTheTokensAtOrPastThem) {
  // Lq = 4 with n = 2 over 100 keys: token 0 at 98, token 1 at 99. A NaN
  // in KV head 0's key 99 poisons token 1 only; padding tokens 2 and 3 stay
  // zeros. With W = 2, a NaN in KV head 1's key 97 poisons token 0 alone.
  for (bool split : {false, true}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " " << seedNote());
    KernelConfig config = queryLensConfig(ElementType::F32, 4);
    config.windowLeft = 2;
    config.splitKV = split;
    config.numSplits = 3;
    Problem problem(config, {100}, 100, random);
    problem.queryLens = {2};
    problem.keys.set(problem.at(0, 99, 0, 5), std::nan(""));
    problem.keys.set(problem.at(0, 97, 1, 0), std::nan(""));
    Result result = run(config, problem);
    const int64_t heads = config.numQueryHeads;
    expectNaNsIn(problem, result, [&](int64_t row) {
      int64_t t = row / heads, kvHead = row % heads / 4;
      return (t == 1 && kvHead == 0) || (t == 0 && kvHead == 1);
    });
  }
}

TEST_F(CPUQueryLens, PaddingQueriesAreNeverRead) {
  // NaN queries in every padding row (where a caller's batch may hold
  // garbage): the real rows still match and the padding rows are zeros
  // with lse -inf, over outputs the harness poisoned.
  for (bool split : {false, true}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " " << seedNote());
    KernelConfig config = queryLensConfig(ElementType::F16, 8);
    config.withSinks = true;
    config.splitKV = split;
    config.numSplits = 4;
    Problem problem(config, {0, 5, 9, 300, 300, 120}, 300, random);
    problem.queryLens = {8, 5, 0, 1, 7, 3};
    const int64_t heads = config.numQueryHeads, d = config.headDim;
    for (int64_t row = 0; row < problem.rows(); ++row)
      if (row / heads % 8 >= problem.queriesOf(row / (8 * heads)))
        for (int64_t k = 0; k < d; ++k)
          problem.query.set(row * d + k, std::nan(""));
    expectMatchesReference(problem, run(config, problem));
  }
}

TEST_F(CPUQueryLens, AutomaticSplitsAndChunkLengthMode) {
  SCOPED_TRACE(seedNote());
  // The planner's split count for a batch of 2 over 4096 positions.
  KernelConfig config = queryLensConfig(ElementType::F32, 4);
  PlanningHints hints;
  hints.batch = 2;
  hints.maxLength = 4096;
  Problem problem(config, {4096, 4095}, 4096, random);
  problem.queryLens = {2, 3};
  auto automatic = compile({config, hints});
  ASSERT_TRUE(automatic);
  EXPECT_GT(automatic->getNumSplits(), 1);
  expectMatchesReference(problem, run(*automatic, problem));
  // Chunks of 16 over 512 positions: 32 splits, most of them empty for the
  // short sequences.
  config = queryLensConfig(ElementType::F16, 3);
  PlanningHints planned;
  config.chunkLength = 16;
  planned.maxLength = 512;
  auto chunked = compile({config, planned});
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->getNumSplits(), 32);
  Problem chunkedProblem(config, {512, 100, 0, 1, 15, 16, 17, 512}, 512,
                         random);
  expectMatchesReference(chunkedProblem, run(*chunked, chunkedProblem));
}

TEST_F(CPUQueryLens, OneKernelReadsNewQueryLensAtEveryRun) {
  // The query lengths are a buffer, never a constant: new ones (and
  // lengths) each run.
  SCOPED_TRACE(seedNote());
  KernelConfig config = queryLensConfig(ElementType::F32, 5);
  config.withSinks = true;
  config.numSplits = 7;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  Problem problem(config, {0, 1, 50, 300}, 300, random);
  for (int32_t step = 0; step < 6; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    problem.queryLens = {step, 5 - step, (2 * step) % 6, step - 1};
    problem.lengths = {step, 1 + step, 50 * step, 300 - step};
    expectMatchesReference(problem, run(*kernel, problem));
  }
}

TEST_F(CPUQueryLens, RunRequiresTheQueryLensBuffer) {
  KernelConfig config = queryLensConfig(ElementType::F32, 2);
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  std::vector<uint8_t> query(2 * 8 * 64 * 4), cache(8 * 2 * 64 * 4),
      output(query.size());
  std::vector<int32_t> lengths = {8};
  std::vector<float> lse(2 * 8);
  AttentionBuffers buffers;
  buffers.query = query.data();
  buffers.keyCache = cache.data();
  buffers.valueCache = cache.data();
  buffers.seqLens = lengths.data();
  buffers.output = output.data();
  buffers.lse = lse.data();
  buffers.batch = 1;
  buffers.maxLength = 8;
  llvm::Error error = kernel->run(buffers);
  ASSERT_TRUE(static_cast<bool>(error));
  std::string message = llvm::toString(std::move(error));
  EXPECT_NE(message.find("queryLens"), std::string::npos) << message;
  std::vector<int32_t> queryLens = {1};
  buffers.queryLens = queryLens.data();
  EXPECT_FALSE(static_cast<bool>(kernel->run(buffers)));
}

} // namespace
