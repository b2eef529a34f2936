//===- CPUSinksTest.cpp - Attention sinks on the CPU ----------------------===//
//
// The CPU path with attention sinks (an f32 logit per query head that joins
// every row's softmax denominator) against the float64 reference on fresh
// random inputs (FD_TEST_SEED=N repeats a run): sinks random, dominating
// (far above every score), very negative and -inf; lengths 0 (zeros, lse =
// the sink), 1, odd and full; unsplit and 1 to more-than-tokens splits (the
// sink counted once, in the merge: every split count agrees), automatic
// splits and chunk-length mode; Lq > 1; every dtype, layout and head ratio;
// paged caches; with a window and a soft-cap; the lse (which includes the
// sink); a NaN sink poisons exactly its head's rows.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPUSinks : public testing::Test, public Seeded {};

constexpr float kInf = std::numeric_limits<float>::infinity();

/// GQA with sinks and an lse.
KernelConfig sinksConfig(ElementType type, int64_t queryLength = 1) {
  KernelConfig config = gqaConfig(type, queryLength);
  config.withSinks = true;
  return config;
}

/// Gives heads 1, 2, 3 (of at least 4) the special sinks: 12 (far above the
/// scores: the keys keep a few percent of the weight; 100 with `huge`, when
/// they keep about e^-95), -30 (no weight left to it) and -inf (no sink);
/// the others keep their random ones.
void setSpecialSinks(Problem &problem, bool huge = false) {
  ASSERT_GE(problem.sinks.size(), 4u);
  problem.sinks[1] = huge ? 100.0f : 12.0f;
  problem.sinks[2] = -30.0f;
  problem.sinks[3] = -kInf;
}

TEST_F(CPUSinks, LengthsAndSplitCounts) {
  // Lengths 0, 1, 2, odd and the full cache; 1, 3 and 16 splits and 64
  // (more than most sequences have tokens); f32, then bf16 with a sink of
  // 100.
  for (ElementType type : {ElementType::F32, ElementType::BF16}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    Problem problem(sinksConfig(type), {0, 1, 2, 37, 129, 300}, 300, random);
    setSpecialSinks(problem, /*huge=*/type == ElementType::BF16);
    expectEverySplitMatches(problem, {1, 3, 16, 64});
  }
}

TEST_F(CPUSinks, QueryTokensAndWindows) {
  // Lq = 2 and 4: tokens before the first key (lengths below Lq) see only
  // the sink; with W = 1, 3 and 50 as well.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (int64_t queryLength : {2, 4})
      for (int64_t window : {0, 1, 3, 50}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " Lq=" << queryLength
                     << " W=" << window << " " << seedNote());
        KernelConfig config = sinksConfig(type, queryLength);
        config.windowLeft = window;
        Problem problem(config, {0, 1, 2, 3, 7, 61, 200}, 200, random);
        setSpecialSinks(problem);
        expectEverySplitMatches(problem, {3, 16});
      }
}

TEST_F(CPUSinks, EveryDtypeLayoutAndHeadRatio) {
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
          KernelConfig config = sinksConfig(type, queryLength);
          config.cacheLayout = layout;
          config.numQueryHeads = queryHeads;
          config.numKVHeads = kvHeads;
          config.headDim = 128;
          Problem problem(config, {0, 1, 2, 37, 250}, 250, random);
          setSpecialSinks(problem);
          expectEverySplitMatches(problem, {5});
        }
}

TEST_F(CPUSinks, WithAWindowAndASoftCap) {
  // MQA, W = 21 and a cap of 30 over scores far beyond it (deviation ~20).
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (int64_t queryLength : {1, 4}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " Lq="
                                      << queryLength << " " << seedNote());
      KernelConfig config = sinksConfig(type, queryLength);
      config.numKVHeads = 1;
      config.windowLeft = 21;
      config.logitsSoftCap = 30.0f;
      Problem problem(config, {0, 1, 3, 21, 22, 300}, 300, random, 20.0);
      setSpecialSinks(problem);
      problem.sinks[1] = 45.0f; // above the cap: it wins every row
      expectEverySplitMatches(problem, {1, 3, 16, 64}, LseTolerance::OfLargest);
    }
}

TEST_F(CPUSinks, PagedEqualsDense) {
  // Pages of 16 (3 spare, shuffled): bit-identical to the dense kernel.
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (int64_t window : {0, 21}) {
        SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " "
                                        << getCacheLayoutName(layout) << " W="
                                        << window << " " << seedNote());
        KernelConfig config = sinksConfig(type, window ? 1 : 2);
        config.cacheLayout = layout;
        config.windowLeft = window;
        config.numSplits = 3;
        Problem problem(config, {0, 1, 17, 40, 157, 300}, 304, random);
        setSpecialSinks(problem);
        PagedCaches paged(problem, 16, /*sparePages=*/3, random);
        expectPagedMatchesDense(config, problem, paged, 16);
      }
}

TEST_F(CPUSinks, AutomaticSplitsAndChunkLengthMode) {
  SCOPED_TRACE(seedNote());
  // The planner's split count for a batch of 2 over 4096 positions.
  KernelConfig config = sinksConfig(ElementType::F32, 2);
  PlanningHints hints;
  hints.batch = 2;
  hints.maxLength = 4096;
  Problem problem(config, {4096, 0}, 4096, random);
  setSpecialSinks(problem);
  auto automatic = compile({config, hints});
  ASSERT_TRUE(automatic);
  EXPECT_GT(automatic->getNumSplits(), 1);
  expectMatchesReference(problem, run(*automatic, problem));
  // Chunks of 16 over 512 positions: 32 splits, most of them empty for the
  // short sequences.
  config = sinksConfig(ElementType::F16);
  PlanningHints planned;
  config.chunkLength = 16;
  planned.maxLength = 512;
  auto chunked = compile({config, planned});
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->getNumSplits(), 32);
  Problem chunkedProblem(config, {512, 100, 0, 1, 15, 16, 17}, 512, random);
  setSpecialSinks(chunkedProblem);
  expectMatchesReference(chunkedProblem, run(*chunked, chunkedProblem));
}

TEST_F(CPUSinks, OneKernelReadsNewSinksAtEveryRun) {
  // The sinks are a buffer, never a constant: new values (and lengths)
  // each run.
  SCOPED_TRACE(seedNote());
  KernelConfig config = sinksConfig(ElementType::F32);
  config.numSplits = 7;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  Problem problem(config, {0, 1, 50, 300}, 300, random);
  std::normal_distribution<float> sinkValues(0.0f, 4.0f);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    for (float &sink : problem.sinks)
      sink = sinkValues(random);
    problem.lengths = {step, 1 + step, 50 * step, 300 - step};
    expectMatchesReference(problem, run(*kernel, problem));
  }
}

TEST_F(CPUSinks, MinusInfinityIsNoSink) {
  // Sinks of -inf: bit for bit the kernel without sinks, split or not (a
  // row without keys keeps lse -inf).
  for (bool split : {false, true}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " " << seedNote());
    KernelConfig config = sinksConfig(ElementType::F16, 3);
    config.splitKV = split;
    config.numSplits = 5;
    Problem problem(config, {0, 1, 2, 77, 300}, 300, random);
    std::fill(problem.sinks.begin(), problem.sinks.end(), -kInf);
    Result sinks = run(config, problem);
    expectMatchesReference(problem, sinks);
    config.withSinks = false;
    Result plain = run(config, problem);
    EXPECT_EQ(sinks.output.bytes, plain.output.bytes);
    EXPECT_EQ(sinks.lse, plain.lse);
    EXPECT_TRUE(std::isinf(sinks.lse[0]) && sinks.lse[0] < 0);
  }
}

TEST_F(CPUSinks, LseIncludesTheSink) {
  // lse' = log(e^lse + e^s), out' = out * e^(lse - lse'): against the same
  // kernel without sinks, row by row.
  for (bool split : {false, true}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " " << seedNote());
    KernelConfig config = sinksConfig(ElementType::F32);
    config.splitKV = split;
    config.numSplits = 4;
    Problem problem(config, {0, 5, 300}, 300, random);
    setSpecialSinks(problem);
    Result sinks = run(config, problem);
    config.withSinks = false;
    Result plain = run(config, problem);
    const int64_t heads = config.numQueryHeads, d = config.headDim;
    for (int64_t row = 0; row < problem.rows(); ++row) {
      double sink = problem.sinks[row % heads], lse = plain.lse[row];
      double expected = std::isinf(lse) ? sink
                        : std::isinf(sink)
                            ? lse
                            : std::max(lse, sink) +
                                  std::log1p(std::exp(-std::abs(lse - sink)));
      if (std::isinf(expected))
        EXPECT_EQ(sinks.lse[row], expected) << "row " << row;
      else
        EXPECT_NEAR(sinks.lse[row], expected,
                    1e-5 * std::max(1.0, std::abs(expected)))
            << "row " << row;
      double share = std::isinf(lse) ? 0.0 : std::exp(lse - expected);
      for (int64_t k = 0; k < d; ++k)
        EXPECT_NEAR(sinks.output.get(row * d + k),
                    plain.output.get(row * d + k) * share, 1e-5)
            << "row " << row << " dim " << k;
    }
  }
}

TEST_F(CPUSinks, NaNSinkPoisonsExactlyItsHead) {
  // Head 5's sink is NaN: its rows (every token, every sequence, those
  // without keys too: lengths 0 and 1 with Lq = 2) are NaN, output and lse;
  // the other heads match the reference.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (bool split : {false, true}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " split="
                                      << split << " " << seedNote());
      KernelConfig config = sinksConfig(type, 2);
      config.splitKV = split;
      config.numSplits = 3;
      Problem problem(config, {0, 1, 3, 100}, 100, random);
      setSpecialSinks(problem);
      problem.sinks[5] = std::nanf("");
      const int64_t heads = config.numQueryHeads;
      expectNaNsIn(problem, run(config, problem),
                   [&](int64_t row) { return row % heads == 5; });
    }
}

TEST_F(CPUSinks, RunRequiresTheSinksBuffer) {
  KernelConfig config = sinksConfig(ElementType::F32);
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
  EXPECT_NE(message.find("sinks"), std::string::npos) << message;
  std::vector<float> sinks(8, 0.0f);
  buffers.sinks = sinks.data();
  EXPECT_FALSE(static_cast<bool>(kernel->run(buffers)));
}

} // namespace
