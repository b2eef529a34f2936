//===- CPUAlibiTest.cpp - ALiBi on the CPU --------------------------------===//
//
// The CPU path with ALiBi (an f32 slope per query head: the score of key j
// for the query at position p gains slope * (j - p) after the scale and the
// soft-cap) against the float64 reference on fresh random inputs
// (FD_TEST_SEED=N repeats a run): BLOOM's geometric slopes 2^(-8 (h+1) / H),
// a slope of 0 and a large one (1: far keys vanish); lengths 0 (zeros, lse
// -inf), 1, odd and full; unsplit and 1 to more-than-tokens splits (every
// split count agrees: the bias depends on the key's absolute position, not
// on its place in a split), automatic splits and chunk-length mode; Lq of
// 2, 4 and 8 (each token at its own position); every dtype, layout and head
// ratio; paged caches; with a window, a soft-cap and sinks; the lse.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPUAlibi : public testing::Test, public Seeded {};

/// GQA with ALiBi and an lse.
KernelConfig alibiConfig(ElementType type, int64_t queryLength = 1) {
  KernelConfig config = gqaConfig(type, queryLength);
  config.withAlibi = true;
  return config;
}

/// Heads 1 and 2 (of at least 4) get the special slopes 0 (no bias) and 1
/// (a key 20 positions back keeps e^-20 of its weight); the others keep
/// BLOOM's geometric ones.
void setSpecialSlopes(Problem &problem) {
  ASSERT_GE(problem.alibiSlopes.size(), 4u);
  problem.alibiSlopes[1] = 0.0f;
  problem.alibiSlopes[2] = 1.0f;
}

TEST_F(CPUAlibi, LengthsAndSplitCounts) {
  // Lengths 0, 1, 2, odd and the full cache; 1, 3 and 16 splits and 64
  // (more than most sequences have tokens); every dtype.
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    Problem problem(alibiConfig(type), {0, 1, 2, 37, 129, 300}, 300, random);
    setSpecialSlopes(problem);
    expectEverySplitMatches(problem, {1, 3, 16, 64});
  }
}

TEST_F(CPUAlibi, QueryTokensAndWindows) {
  // Lq = 2, 4 and 8: each token at its own position (lengths below Lq:
  // tokens without keys); with W = 3 and 50 as well.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (int64_t queryLength : {2, 4, 8})
      for (int64_t window : {0, 3, 50}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " Lq=" << queryLength
                     << " W=" << window << " " << seedNote());
        KernelConfig config = alibiConfig(type, queryLength);
        config.windowLeft = window;
        Problem problem(config, {0, 1, 2, 3, 7, 61, 200}, 200, random);
        setSpecialSlopes(problem);
        expectEverySplitMatches(problem, {3, 16});
      }
}

TEST_F(CPUAlibi, EveryDtypeLayoutAndHeadRatio) {
  // MHA, GQA and MQA, D = 128, NHD and HND, Lq = 1 and 3.
  const std::pair<int64_t, int64_t> ratios[] = {{4, 4}, {8, 2}, {4, 1}};
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (auto [queryHeads, kvHeads] : ratios)
        for (int64_t queryLength : {1, 3}) {
          SCOPED_TRACE(testing::Message()
                       << getElementTypeName(type) << " "
                       << getCacheLayoutName(layout) << " Hq=" << queryHeads
                       << " Hkv=" << kvHeads << " Lq=" << queryLength << " "
                       << seedNote());
          KernelConfig config = alibiConfig(type, queryLength);
          config.cacheLayout = layout;
          config.numQueryHeads = queryHeads;
          config.numKVHeads = kvHeads;
          config.headDim = 128;
          Problem problem(config, {0, 1, 2, 37, 250}, 250, random);
          setSpecialSlopes(problem);
          expectEverySplitMatches(problem, {5});
        }
}

TEST_F(CPUAlibi, WithAWindowASoftCapAndSinks) {
  // MQA, W = 21, a cap of 30 over scores far beyond it (deviation ~20): the
  // bias comes after the cap, so it moves capped scores too; with sinks
  // (counted once, in the merge, unbiased) and without.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (int64_t queryLength : {1, 4})
      for (bool sinks : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " Lq=" << queryLength
                     << " sinks=" << sinks << " " << seedNote());
        KernelConfig config = alibiConfig(type, queryLength);
        config.numKVHeads = 1;
        config.windowLeft = 21;
        config.logitsSoftCap = 30.0f;
        config.withSinks = sinks;
        Problem problem(config, {0, 1, 3, 21, 22, 300}, 300, random, 20.0);
        setSpecialSlopes(problem);
        expectEverySplitMatches(problem, {1, 3, 16, 64},
                                LseTolerance::OfLargest);
      }
}

TEST_F(CPUAlibi, PagedEqualsDense) {
  // Pages of 16 (3 spare, shuffled): bit-identical to the dense kernel.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (int64_t window : {0, 21}) {
        SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " "
                                        << getCacheLayoutName(layout) << " W="
                                        << window << " " << seedNote());
        KernelConfig config = alibiConfig(type, window ? 1 : 2);
        config.cacheLayout = layout;
        config.windowLeft = window;
        config.withSinks = window != 0;
        config.numSplits = 3;
        Problem problem(config, {0, 1, 17, 40, 157, 300}, 304, random);
        setSpecialSlopes(problem);
        PagedCaches paged(problem, 16, /*sparePages=*/3, random);
        expectPagedMatchesDense(config, problem, paged, 16);
      }
}

TEST_F(CPUAlibi, AutomaticSplitsAndChunkLengthMode) {
  SCOPED_TRACE(seedNote());
  // The planner's split count for a batch of 2 over 4096 positions.
  KernelConfig config = alibiConfig(ElementType::F32, 2);
  PlanningHints hints;
  hints.batch = 2;
  hints.maxLength = 4096;
  Problem problem(config, {4096, 0}, 4096, random);
  setSpecialSlopes(problem);
  auto automatic = compile({config, hints});
  ASSERT_TRUE(automatic);
  EXPECT_GT(automatic->getNumSplits(), 1);
  expectMatchesReference(problem, run(*automatic, problem));
  // Chunks of 16 over 512 positions: 32 splits, most of them empty for the
  // short sequences.
  config = alibiConfig(ElementType::F16);
  PlanningHints planned;
  config.chunkLength = 16;
  planned.maxLength = 512;
  auto chunked = compile({config, planned});
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->getNumSplits(), 32);
  Problem chunkedProblem(config, {512, 100, 0, 1, 15, 16, 17}, 512, random);
  setSpecialSlopes(chunkedProblem);
  expectMatchesReference(chunkedProblem, run(*chunked, chunkedProblem));
}

TEST_F(CPUAlibi, OneKernelReadsNewSlopesAtEveryRun) {
  // The slopes are a buffer, never a constant: new values (and lengths)
  // each run, negative ones too (near keys fade instead).
  SCOPED_TRACE(seedNote());
  KernelConfig config = alibiConfig(ElementType::F32, 3);
  config.numSplits = 7;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  Problem problem(config, {0, 1, 50, 300}, 300, random);
  std::uniform_real_distribution<float> slopes(-0.05f, 0.5f);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    for (float &slope : problem.alibiSlopes)
      slope = slopes(random);
    problem.lengths = {step, 1 + step, 50 * step, 300 - step};
    expectMatchesReference(problem, run(*kernel, problem));
  }
}

TEST_F(CPUAlibi, ZeroSlopesAreNoAlibi) {
  // Slopes of 0: bit for bit the kernel without ALiBi, split or not, with
  // Lq = 3 and a window (rows without keys keep lse -inf).
  for (bool split : {false, true}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " " << seedNote());
    KernelConfig config = alibiConfig(ElementType::F16, 3);
    config.splitKV = split;
    config.numSplits = 5;
    config.windowLeft = 40;
    Problem problem(config, {0, 1, 2, 77, 300}, 300, random);
    std::fill(problem.alibiSlopes.begin(), problem.alibiSlopes.end(), 0.0f);
    Result alibi = run(config, problem);
    expectMatchesReference(problem, alibi);
    config.withAlibi = false;
    Result plain = run(config, problem);
    EXPECT_EQ(alibi.output.bytes, plain.output.bytes);
    EXPECT_EQ(alibi.lse, plain.lse);
    EXPECT_TRUE(std::isinf(alibi.lse[0]) && alibi.lse[0] < 0);
  }
}

TEST_F(CPUAlibi, LargeSlopesKeepEachTokensOwnKey) {
  // Slopes of 200: each token's weight all on the key at its own position
  // (the next one back keeps e^-200 of it), output = that value, lse = that
  // score, whatever the split holding it.
  SCOPED_TRACE(seedNote());
  KernelConfig config = alibiConfig(ElementType::F32, 4);
  config.numSplits = 6;
  Problem problem(config, {0, 2, 5, 64, 200}, 200, random);
  std::fill(problem.alibiSlopes.begin(), problem.alibiSlopes.end(), 200.0f);
  Result result = run(config, problem);
  expectMatchesReference(problem, result);
  const int64_t heads = config.numQueryHeads, d = config.headDim;
  const int64_t group = heads / config.numKVHeads;
  for (int64_t row = 0; row < problem.rows(); ++row) {
    int64_t b = row / (4 * heads), t = row / heads % 4, h = row % heads;
    int64_t p = problem.lengths[b] - 4 + t;
    if (p < 0)
      continue;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_NEAR(result.output.get(row * d + k),
                  problem.values.values[problem.at(b, p, h / group, k)], 1e-5)
          << "row " << row << " dim " << k;
  }
}

TEST_F(CPUAlibi, RunRequiresTheSlopesBuffer) {
  KernelConfig config = alibiConfig(ElementType::F32);
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  std::vector<uint8_t> query(8 * 64 * 4), cache(8 * 2 * 64 * 4),
      output(query.size());
  std::vector<int32_t> lengths = {8};
  std::vector<float> lse(8);
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
  EXPECT_NE(message.find("alibiSlopes"), std::string::npos) << message;
  std::vector<float> slopes(8, 0.5f);
  buffers.alibiSlopes = slopes.data();
  EXPECT_FALSE(static_cast<bool>(kernel->run(buffers)));
}

} // namespace
