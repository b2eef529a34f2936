//===- CPUAttentionTest.cpp - CPU path numerics vs a float64 reference ----===//
//
// Every test draws fresh random inputs (the seed is printed on failure;
// FD_TEST_SEED=N repeats a run), runs the compiled CPU lowering, and compares
// with attention computed in double precision on the same (rounded) inputs.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include "fd/Planning/SplitPlanner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class SeededTest : public testing::Test, public Seeded {};

//===----------------------------------------------------------------------===//
// The dtype x layout x head-ratio x head-dim matrix
//===----------------------------------------------------------------------===//

using MatrixParam =
    std::tuple<ElementType, CacheLayout, std::pair<int64_t, int64_t>, int64_t>;

class CPUAttentionMatrix : public SeededTest,
                           public testing::WithParamInterface<MatrixParam> {};

TEST_P(CPUAttentionMatrix, SplitAndUnsplitMatchTheReference) {
  auto [type, layout, heads, headDim] = GetParam();
  KernelConfig config;
  config.elementType = type;
  config.cacheLayout = layout;
  config.numQueryHeads = heads.first;
  config.numKVHeads = heads.second;
  config.headDim = headDim;
  config.withLse = true;
  // Lengths 0, 1, odd, not a multiple of any chunk, and the full cache.
  Problem problem(config, {0, 1, 37, 129, 300}, 300, random);
  SCOPED_TRACE(seedNote());

  // Unsplit (fd.attention lowered directly), one split, a few splits, and
  // more splits than the short sequences have tokens.
  config.splitKV = false;
  std::vector<KernelConfig> variants = {config};
  for (int64_t splits : {1, 7, 64}) {
    config.splitKV = true;
    config.numSplits = splits;
    variants.push_back(config);
  }
  for (const KernelConfig &variant : variants) {
    SCOPED_TRACE(testing::Message() << "split=" << variant.splitKV
                                    << " num_splits=" << variant.numSplits);
    auto kernel = compile(variant);
    ASSERT_TRUE(kernel);
    if (variant.splitKV) {
      EXPECT_EQ(kernel->getNumSplits(), variant.numSplits);
    }
    expectMatchesReference(problem, run(*kernel, problem));
  }
}

std::string matrixName(const testing::TestParamInfo<MatrixParam> &info) {
  auto [type, layout, heads, headDim] = info.param;
  return std::string(getElementTypeName(type)) + "_" +
         getCacheLayoutName(layout) + "_Hq" + std::to_string(heads.first) +
         "_Hkv" + std::to_string(heads.second) + "_D" + std::to_string(headDim);
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, CPUAttentionMatrix,
    testing::Combine(testing::Values(ElementType::F32, ElementType::F16,
                                     ElementType::BF16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     // MHA, GQA, MQA.
                     testing::Values(std::make_pair<int64_t, int64_t>(4, 4),
                                     std::make_pair<int64_t, int64_t>(8, 2),
                                     std::make_pair<int64_t, int64_t>(4, 1)),
                     testing::Values(64, 128, 256)),
    matrixName);

//===----------------------------------------------------------------------===//
// Targeted cases
//===----------------------------------------------------------------------===//

class CPUAttention : public SeededTest {};

TEST_F(CPUAttention, CausalQueryTokens) {
  // Query t of Lq attends to keys < len - Lq + t + 1; lengths shorter than
  // Lq leave the first queries without keys.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (int64_t queryLength : {2, 4, 8}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " Lq="
                                      << queryLength << " " << seedNote());
      KernelConfig config = gqaConfig(type, queryLength);
      Problem problem(config, {0, 1, 3, 50, 200}, 200, random);
      for (bool split : {false, true}) {
        config.splitKV = split;
        config.numSplits = 5;
        auto kernel = compile(config);
        ASSERT_TRUE(kernel);
        expectMatchesReference(problem, run(*kernel, problem));
      }
    }
}

TEST_F(CPUAttention, APoisonedKeyGivesNaNNeverAPlausibleAnswer) {
  // A NaN in a live key reaches the output and the lse of every row that
  // sees it, split or not (as in the float64 reference); a NaN past a
  // sequence's length is never read.
  for (ElementType type : {ElementType::F32, ElementType::BF16}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    KernelConfig config = gqaConfig(type, /*queryLength=*/2);
    Problem problem(config, {200, 150}, 300, random);
    problem.keys.set(problem.at(0, 100, 0, 3), std::nan(""));
    problem.keys.set(problem.at(1, 250, 1, 0), std::nan(""));
    for (bool split : {false, true}) {
      config.splitKV = split;
      config.numSplits = 5;
      auto kernel = compile(config);
      ASSERT_TRUE(kernel);
      // Sequence 0's KV head 0 (query heads 0-3).
      expectNaNsIn(problem, run(*kernel, problem), [&](int64_t row) {
        return row / (config.queryLength * config.numQueryHeads) == 0 &&
               row % config.numQueryHeads / 4 == 0;
      });
    }
  }
}

TEST_F(CPUAttention, AutomaticSplitsFollowThePlanner) {
  KernelConfig config;
  config.numQueryHeads = 8;
  config.numKVHeads = 2;
  config.headDim = 128;
  PlanningHints hints;
  hints.batch = 3;
  hints.maxLength = 2048;
  auto kernel = compile({config, hints});
  ASSERT_TRUE(kernel);
  // The compiler plans with the op's work: 4 rows per KV head, D = 128, f16.
  SplitWorkload workload;
  workload.rowsPerKVHead = 4;
  workload.headDim = 128;
  workload.kvElementBytes = 2;
  EXPECT_EQ(kernel->getNumSplits(),
            planNumSplits(3, 2, 2048, {}, workload).numSplits);
  EXPECT_GT(kernel->getNumSplits(), 1);
  SCOPED_TRACE(seedNote());
  Problem problem(config, {2048, 1000, 17}, 2048, random);
  expectMatchesReference(problem, run(*kernel, problem));
}

TEST_F(CPUAttention, ChunkLengthModeIsIndependentOfTheBatch) {
  // With a fixed chunk, a sequence is reduced in the same chunks, in the
  // same order, alone or beside longer sequences that enlarge the grid:
  // its output is bit-identical.
  for (ElementType type : {ElementType::F32, ElementType::F16}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    KernelConfig config;
    config.elementType = type;
    config.numQueryHeads = 4;
    config.numKVHeads = 1;
    config.headDim = 64;
    config.withLse = true;

    PlanningHints hints;
    config.chunkLength = 16;
    hints.batch = 1;
    hints.maxLength = 100;
    auto alone = compile({config, hints});
    hints.batch = 4;
    hints.maxLength = 512;
    auto batched = compile({config, hints});
    ASSERT_TRUE(alone && batched);
    EXPECT_EQ(alone->getNumSplits(), 7);    // ceil(100 / 16)
    EXPECT_EQ(batched->getNumSplits(), 32); // ceil(512 / 16)

    Problem mixed(config, {512, 100, 3, 250}, 512, random);
    // The same sequence alone: copy sequence 1 of the mixed batch.
    Problem single(config, {100}, 512, random);
    size_t cacheStride = mixed.cacheSize() / mixed.batch;
    size_t queryStride = mixed.query.bytes.size() / mixed.batch;
    size_t elementSize = getElementTypeSize(type);
    std::memcpy(single.query.bytes.data(), &mixed.query.bytes[queryStride],
                queryStride);
    std::memcpy(single.keys.bytes.data(),
                &mixed.keys.bytes[cacheStride * elementSize],
                cacheStride * elementSize);
    std::memcpy(single.values.bytes.data(),
                &mixed.values.bytes[cacheStride * elementSize],
                cacheStride * elementSize);

    Result inBatch = run(*batched, mixed);
    Result byItself = run(*alone, single);
    size_t outputStride = inBatch.output.bytes.size() / mixed.batch;
    EXPECT_EQ(std::memcmp(&inBatch.output.bytes[outputStride],
                          byItself.output.bytes.data(), outputStride),
              0);
    EXPECT_EQ(
        std::memcmp(&inBatch.lse[4], byItself.lse.data(), 4 * sizeof(float)),
        0);
    expectMatchesReference(mixed, inBatch);
  }
}

TEST_F(CPUAttention, OneKernelServesEveryLength) {
  // The lengths are read at run time: the same compiled kernel (as a CUDA
  // graph would replay it) is right as the sequences grow.
  KernelConfig config;
  config.numQueryHeads = 8;
  config.numKVHeads = 8;
  config.headDim = 64;
  config.numSplits = 4;
  config.elementType = ElementType::F32;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  SCOPED_TRACE(seedNote());
  Problem problem(config, {1, 5}, 64, random);
  for (int32_t step = 0; step < 60; step += 7) {
    problem.lengths = {1 + step, 5 + step};
    expectMatchesReference(problem, run(*kernel, problem));
  }
}

/// Makes sequence 1 of `dense` repeat sequence 0's first `positions`
/// keys and values (prefix sharing).
void sharePrefix(Problem &dense, int64_t positions) {
  const KernelConfig &config = dense.config;
  size_t rowBytes = config.headDim * dense.keys.getElementSize();
  for (int64_t position = 0; position < positions; ++position)
    for (int64_t head = 0; head < config.numKVHeads; ++head) {
      size_t from = dense.at(0, position, head, 0);
      size_t to = dense.at(1, position, head, 0);
      for (HostTensor *cache : {&dense.keys, &dense.values}) {
        std::memcpy(&cache->bytes[to * cache->getElementSize()],
                    &cache->bytes[from * cache->getElementSize()], rowBytes);
        std::copy_n(&cache->values[from], config.headDim, &cache->values[to]);
      }
    }
}

TEST_F(CPUAttention, PagedEqualsDenseOnTheSameLogicalCache) {
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (int64_t pageSize : {1, 16, 64, 256}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " "
                     << getCacheLayoutName(layout) << " page " << pageSize
                     << " " << seedNote());
        KernelConfig config = gqaConfig(type);
        config.cacheLayout = layout;
        config.numSplits = 3; // chunks that do not align with pages
        // Lengths that end mid-page; sequences 0 and 1 share a prefix.
        Problem dense(config, {300, 290, 1, 0, 157}, 300, random);
        int64_t sharedPages = std::max<int64_t>(1, 130 / pageSize);
        sharePrefix(dense, std::min(sharedPages * pageSize, dense.maxLength));
        // Two spare pages that no sequence uses.
        PagedCaches paged(dense, pageSize, /*sparePages=*/2, random,
                          sharedPages);
        auto denseKernel = compile(config);
        config.pageSize = pageSize;
        PlanningHints hints;
        hints.batch = dense.batch;
        hints.maxLength = paged.pagesPerSequence * pageSize;
        auto pagedKernel = compile({config, hints});
        ASSERT_TRUE(denseKernel && pagedKernel);

        Result expected = run(*denseKernel, dense);
        expectMatchesReference(dense, expected);
        Result actual = run(*pagedKernel, dense, &paged);
        // The same keys in the same order: bit-identical results.
        EXPECT_EQ(actual.output.bytes, expected.output.bytes);
        EXPECT_EQ(std::memcmp(actual.lse.data(), expected.lse.data(),
                              actual.lse.size() * sizeof(float)),
                  0);
      }
}

TEST(CPUAttentionErrors, RejectsUnsupportedConfigurations) {
  auto message = [](KernelConfig config) {
    auto kernel = CPUAttentionKernel::compile(config);
    EXPECT_FALSE(kernel);
    return kernel ? std::string() : llvm::toString(kernel.takeError());
  };
  KernelConfig config;
  config.headDim = 100;
  EXPECT_EQ(message(config),
            "head_dim 100 is not supported: expected a multiple of 8 in "
            "[32, 576]");
  config = KernelConfig();
  config.numQueryHeads = 30;
  config.numKVHeads = 8;
  EXPECT_EQ(message(config),
            "num_q_heads (30) must be a multiple of num_kv_heads (8)");
  config = KernelConfig();
  config.queryLength = 9;
  EXPECT_EQ(message(config), "query_len 9 is not supported: expected 1 to 8 "
                             "query tokens per sequence");
}

TEST(CPUAttentionErrors, RunRejectsMissingBuffers) {
  KernelConfig config;
  config.withLse = true;
  config.numSplits = 2;
  auto kernel = CPUAttentionKernel::compile(config);
  ASSERT_TRUE(static_cast<bool>(kernel)) << llvm::toString(kernel.takeError());
  AttentionBuffers buffers;
  llvm::Error error = (*kernel)->run(buffers);
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("buffers are required"),
            std::string::npos);
}

} // namespace
