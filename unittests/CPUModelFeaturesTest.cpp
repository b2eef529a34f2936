//===- CPUModelFeaturesTest.cpp - Sliding window and soft-cap on the CPU --===//
//
// The CPU path with a sliding window and logit soft-capping against the
// float64 reference on fresh random inputs (FD_TEST_SEED=N repeats a run):
// windows shorter than, equal to, longer than the lengths and aligned with
// no chunk or page, every split count, Lq > 1, scores far beyond the cap,
// every dtype and head ratio, paged and HND caches, chunk-length mode, and
// keys outside every window never read.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPUModelFeatures : public testing::Test, public Seeded {};

/// Scores far beyond a soft-cap grow the lse's f32 rounding with their
/// terms: its error is relative to the largest lse.
void expectMatches(const Problem &problem, const Result &result) {
  expectMatchesReference(problem, result, LseTolerance::OfLargest);
}

/// Runs `config` unsplit and with each of `splits` on the problem.
void expectEachSplitMatchesReference(const Problem &problem,
                                     std::initializer_list<int64_t> splits) {
  KernelConfig config = problem.config;
  config.splitKV = false;
  expectMatches(problem, run(config, problem));
  for (int64_t count : splits) {
    SCOPED_TRACE(testing::Message() << "num_splits " << count);
    config.splitKV = true;
    config.numSplits = count;
    expectMatches(problem, run(config, problem));
  }
}

TEST_F(CPUModelFeatures, WindowsShorterEqualAndLongerThanTheLengths) {
  // Lengths around W = 5 and W = 37, odd ones and the full cache; split
  // counts 1, 3, 7 and 16 (more than W = 5 windowed tokens).
  for (int64_t window : {1, 5, 37, 299, 300, 301, 5000}) {
    SCOPED_TRACE(testing::Message() << "W=" << window << " " << seedNote());
    KernelConfig config = gqaConfig(ElementType::F32);
    config.windowLeft = window;
    Problem problem(config, {0, 1, 4, 5, 6, 36, 37, 38, 129, 300}, 300, random);
    expectEachSplitMatchesReference(problem, {1, 3, 7, 16});
  }
}

TEST_F(CPUModelFeatures, WindowsOverQueryTokens) {
  // W below, at and above Lq; short lengths leave the first tokens
  // without keys.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (int64_t queryLength : {2, 4, 8})
      for (int64_t window : std::set<int64_t>{1, queryLength - 1, queryLength,
                                              queryLength + 3, 50, 1000}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " Lq=" << queryLength
                     << " W=" << window << " " << seedNote());
        KernelConfig config = gqaConfig(type, queryLength);
        config.windowLeft = window;
        Problem problem(config, {0, 1, 2, 3, 7, 8, 9, 61, 200}, 200, random);
        expectEachSplitMatchesReference(problem, {3, 16});
      }
}

TEST_F(CPUModelFeatures, WindowOverEveryDtypeLayoutAndHeadRatio) {
  // MHA, GQA and MQA, D = 128, NHD and HND, a window of 37 (aligned with
  // nothing), Lq = 1 and 4.
  const std::pair<int64_t, int64_t> ratios[] = {{4, 4}, {8, 2}, {4, 1}};
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (auto [queryHeads, kvHeads] : ratios)
        for (int64_t queryLength : {1, 4}) {
          SCOPED_TRACE(testing::Message()
                       << getElementTypeName(type) << " "
                       << getCacheLayoutName(layout) << " Hq=" << queryHeads
                       << " Hkv=" << kvHeads << " Lq=" << queryLength << " "
                       << seedNote());
          KernelConfig config = gqaConfig(type, queryLength);
          config.cacheLayout = layout;
          config.numQueryHeads = queryHeads;
          config.numKVHeads = kvHeads;
          config.headDim = 128;
          config.windowLeft = 37;
          Problem problem(config, {0, 1, 36, 40, 157, 250}, 250, random);
          expectEachSplitMatchesReference(problem, {5});
        }
}

TEST_F(CPUModelFeatures, SoftCapOnScoresFarBeyondTheCap) {
  // Queries 20x larger (scores of deviation ~40, beyond the caps 50, 5 and
  // 0.5) and an explicit large scale: uncapped they would be one-hot.
  for (ElementType type :
       {ElementType::F32, ElementType::F16, ElementType::BF16})
    for (float cap : {50.0f, 5.0f, 0.5f})
      for (int64_t queryLength : {1, 3}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " cap=" << cap
                     << " Lq=" << queryLength << " " << seedNote());
        KernelConfig config = gqaConfig(type, queryLength);
        config.logitsSoftCap = cap;
        Problem problem(config, {0, 1, 2, 33, 300}, 300, random, 40.0);
        expectEachSplitMatchesReference(problem, {1, 4, 64});
        config.scale = 3.0f;
        Problem scaled(config, {1, 100}, 100, random);
        expectEachSplitMatchesReference(scaled, {7});
      }
}

TEST_F(CPUModelFeatures, WindowAndSoftCapTogether) {
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (int64_t queryLength : {1, 4}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " Lq="
                                      << queryLength << " " << seedNote());
      KernelConfig config = gqaConfig(type, queryLength);
      config.numKVHeads = 1; // MQA
      config.windowLeft = 21;
      config.logitsSoftCap = 30.0f;
      Problem problem(config, {0, 1, 3, 21, 22, 300}, 300, random, 20.0);
      expectEachSplitMatchesReference(problem, {1, 3, 16, 64});
    }
}

TEST_F(CPUModelFeatures, PagedCachesWithWindows) {
  // Pages of 16 with windows that end and start mid-page; the paged kernel
  // reads the same keys in the same order as the dense one: bit-identical.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (int64_t window : {5, 21, 40}) {
        SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " "
                                        << getCacheLayoutName(layout) << " W="
                                        << window << " " << seedNote());
        KernelConfig config = gqaConfig(type, window == 5 ? 4 : 1);
        config.cacheLayout = layout;
        config.windowLeft = window;
        if (window == 21)
          config.logitsSoftCap = 10.0f;
        config.numSplits = 3;
        Problem problem(config, {0, 1, 17, 40, 157, 300}, 304, random, 6.0);
        PagedCaches paged(problem, 16, /*sparePages=*/3, random);
        expectPagedMatchesDense(config, problem, paged, 16,
                                LseTolerance::OfLargest);
      }
}

TEST_F(CPUModelFeatures, ChunkLengthModeCutsOnlyTheWindow) {
  // Chunks of 16 over the W + Lq - 1 = 37 keys a query sees: 3 splits.
  SCOPED_TRACE(seedNote());
  for (int64_t queryLength : {1, 3}) {
    KernelConfig config = gqaConfig(ElementType::F16, queryLength);
    config.windowLeft = 38 - queryLength;
    PlanningHints planned;
    config.chunkLength = 16;
    planned.maxLength = 512;
    auto kernel = compile({config, planned});
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->getNumSplits(), 3) << "Lq=" << queryLength;
    Problem problem(config, {512, 100, 0, 1, 36, 37, 38, 250}, 512, random);
    expectMatches(problem, run(*kernel, problem));
  }
}

TEST_F(CPUModelFeatures, AutomaticSplitsAndGrowingLengthsWithAWindow) {
  // The planner chooses the split count for the window; one kernel serves
  // lengths growing past the window.
  SCOPED_TRACE(seedNote());
  KernelConfig config = gqaConfig(ElementType::F32, 2);
  config.windowLeft = 100;
  PlanningHints hints;
  hints.batch = 2;
  hints.maxLength = 4096;
  Problem problem(config, {4096, 99}, 4096, random);
  expectMatches(problem, run({config, hints}, problem));
  config.numSplits = 6;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  for (int32_t step = 0; step < 300; step += 37) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    problem.lengths = {step, 1 + 3 * step};
    expectMatches(problem, run(*kernel, problem));
  }
}

TEST_F(CPUModelFeatures, KeysOutsideEveryWindowAreNeverRead) {
  // With W = 10 and Lq = 2, sequence 0 (length 200) attends to keys
  // [189, 200): a NaN in key 195 poisons its KV head 0's rows; NaNs in key
  // 188 (just before the first attended key) and key 0 are never read.
  // Sequence 1's NaN at 188 is inside its window (length 197: [186, 197));
  // sequence 2's NaN keys and values at 188 are outside.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (bool split : {false, true}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " split="
                                      << split << " " << seedNote());
      KernelConfig config = gqaConfig(type, 2);
      config.windowLeft = 10;
      config.splitKV = split;
      config.numSplits = 3;
      Problem problem(config, {200, 197, 200}, 200, random);
      problem.keys.set(problem.at(0, 195, 0, 3), std::nan(""));
      problem.keys.set(problem.at(0, 188, 1, 0), std::nan(""));
      problem.keys.set(problem.at(0, 0, 1, 1), std::nan(""));
      problem.keys.set(problem.at(1, 188, 1, 5), std::nan(""));
      for (int64_t h = 0; h < 2; ++h) {
        problem.keys.set(problem.at(2, 188, h, 0), std::nan(""));
        problem.values.set(problem.at(2, 188, h, 7), std::nan(""));
      }
      const int64_t heads = config.numQueryHeads;
      expectNaNsIn(problem, run(config, problem), [&](int64_t row) {
        int64_t b = row / (2 * heads), kvHead = row % heads / 4;
        return (b == 0 && kvHead == 0) || (b == 1 && kvHead == 1);
      });
    }
}

} // namespace
