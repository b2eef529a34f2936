//===- CPUAttentionTest.cpp - CPU path numerics vs a float64 reference ----===//
//
// Every test draws fresh random inputs (the seed is printed on failure),
// runs the compiled CPU lowering, and compares with attention computed in
// double precision on the same (rounded) inputs.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Planning/SplitPlanner.h"

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

using namespace fd;

namespace {

/// Values of one element type: the bytes the kernel reads and the exact
/// values those bytes hold, for the reference.
struct Tensor {
  ElementType type;
  std::vector<uint8_t> bytes;
  std::vector<double> values;

  Tensor(ElementType type, size_t size)
      : type(type), bytes(size * getElementTypeSize(type)), values(size) {}

  void set(size_t index, double value) {
    float single = static_cast<float>(value);
    if (type == ElementType::F32) {
      std::memcpy(&bytes[index * 4], &single, 4);
      values[index] = single;
      return;
    }
    uint16_t bits = type == ElementType::F16
                        ? reference::floatToHalf(single)
                        : reference::floatToBFloat16(single);
    std::memcpy(&bytes[index * 2], &bits, 2);
    values[index] = get(index);
  }

  /// Decodes what a kernel wrote.
  double get(size_t index) const {
    if (type == ElementType::F32) {
      float single;
      std::memcpy(&single, &bytes[index * 4], 4);
      return single;
    }
    uint16_t bits;
    std::memcpy(&bits, &bytes[index * 2], 2);
    return type == ElementType::F16 ? reference::halfToFloat(bits)
                                    : reference::bfloat16ToFloat(bits);
  }
};

/// One attention problem: shapes, lengths, inputs.
struct Problem {
  KernelConfig config;
  int64_t batch;
  int64_t maxLength;
  std::vector<int32_t> lengths;
  Tensor query, keyCache, valueCache;

  Problem(const KernelConfig &config, std::vector<int32_t> lengths,
          int64_t maxLength, std::mt19937 &random)
      : config(config), batch(lengths.size()), maxLength(maxLength),
        lengths(std::move(lengths)),
        query(config.elementType, rows() * config.headDim),
        keyCache(config.elementType, cacheSize()),
        valueCache(config.elementType, cacheSize()) {
    // Scores with a standard deviation of about 2: peaked enough that a
    // wrong max or a misplaced key shows.
    std::normal_distribution<double> queryValues(0.0, 2.0);
    std::normal_distribution<double> cacheValues(0.0, 1.0);
    for (size_t i = 0; i < query.values.size(); ++i)
      query.set(i, queryValues(random));
    for (size_t i = 0; i < keyCache.values.size(); ++i) {
      keyCache.set(i, cacheValues(random));
      valueCache.set(i, cacheValues(random));
    }
  }

  int64_t rows() const {
    return batch * config.queryLength * config.numQueryHeads;
  }
  size_t cacheSize() const {
    return batch * maxLength * config.numKVHeads * config.headDim;
  }
};

struct Result {
  Tensor output;
  std::vector<float> lse;
};

/// The float64 reference on the problem's (rounded) inputs.
void reference(const Problem &problem, std::vector<double> &output,
               std::vector<double> &lse) {
  const KernelConfig &config = problem.config;
  reference::AttentionProblem reference;
  reference.batch = problem.batch;
  reference.queryLength = config.queryLength;
  reference.numQueryHeads = config.numQueryHeads;
  reference.numKVHeads = config.numKVHeads;
  reference.headDim = config.headDim;
  reference.maxLength = problem.maxLength;
  reference.isNHD = config.cacheLayout == CacheLayout::NHD;
  reference.scale =
      config.scale ? *config.scale : 1.0 / std::sqrt(double(config.headDim));
  reference.query = problem.query.values.data();
  reference.keyCache = problem.keyCache.values.data();
  reference.valueCache = problem.valueCache.values.data();
  reference.lengths = problem.lengths.data();
  reference::attention(reference, output, lse);
}

Result run(const CPUAttentionKernel &kernel, const Problem &problem) {
  Result result{Tensor(problem.config.elementType,
                       problem.rows() * problem.config.headDim),
                std::vector<float>(problem.rows())};
  // Poison the outputs: every element must be written.
  std::fill(result.output.bytes.begin(), result.output.bytes.end(), 0x7f);
  std::fill(result.lse.begin(), result.lse.end(),
            std::numeric_limits<float>::quiet_NaN());
  AttentionBuffers buffers;
  buffers.query = problem.query.bytes.data();
  buffers.keyCache = problem.keyCache.bytes.data();
  buffers.valueCache = problem.valueCache.bytes.data();
  buffers.seqLens = problem.lengths.data();
  buffers.output = result.output.bytes.data();
  buffers.lse = result.lse.data();
  buffers.batch = problem.batch;
  buffers.maxLength = problem.maxLength;
  llvm::Error error = kernel.run(buffers);
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return result;
}

std::unique_ptr<CPUAttentionKernel> compile(const KernelConfig &config) {
  auto kernel = CPUAttentionKernel::compile(config);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

double tolerance(ElementType type) {
  return type == ElementType::F32 ? 1e-5 : 1e-2;
}

/// Checks a result against the float64 reference: relative error (max abs
/// error over max abs value) within the dtype's tolerance, empty rows exactly
/// zero with lse = -inf.
void expectMatchesReference(const Problem &problem, const Result &result) {
  std::vector<double> expected, expectedLse;
  reference(problem, expected, expectedLse);
  int64_t d = problem.config.headDim;
  double maxError = 0.0, maxValue = 0.0, maxLseError = 0.0;
  for (int64_t row = 0; row < problem.rows(); ++row) {
    if (std::isinf(expectedLse[row])) {
      EXPECT_TRUE(std::isinf(result.lse[row]) && result.lse[row] < 0)
          << "row " << row << " has no keys: lse " << result.lse[row];
      for (int64_t k = 0; k < d; ++k)
        EXPECT_EQ(result.output.get(row * d + k), 0.0)
            << "row " << row << " has no keys";
      continue;
    }
    maxLseError =
        std::max(maxLseError, std::abs(result.lse[row] - expectedLse[row]) /
                                  std::max(1.0, std::abs(expectedLse[row])));
    for (int64_t k = 0; k < d; ++k) {
      double actual = result.output.get(row * d + k);
      ASSERT_TRUE(std::isfinite(actual)) << "row " << row << " dim " << k;
      maxError = std::max(maxError, std::abs(actual - expected[row * d + k]));
      maxValue = std::max(maxValue, std::abs(expected[row * d + k]));
    }
  }
  double limit = tolerance(problem.config.elementType);
  EXPECT_LE(maxError, limit * std::max(maxValue, 1e-30))
      << "relative error " << maxError / maxValue;
  EXPECT_LE(maxLseError, 1e-5) << "lse error";
}

class Seeded : public testing::Test {
protected:
  Seeded() : seed(std::random_device()()), random(seed) {
    RecordProperty("seed", std::to_string(seed));
  }
  std::string seedNote() const { return "seed " + std::to_string(seed); }

  unsigned seed;
  std::mt19937 random;
};

//===----------------------------------------------------------------------===//
// The dtype x layout x head-ratio x head-dim matrix
//===----------------------------------------------------------------------===//

using MatrixParam =
    std::tuple<ElementType, CacheLayout, std::pair<int64_t, int64_t>, int64_t>;

class CPUAttentionMatrix : public Seeded,
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

class CPUAttention : public Seeded {};

TEST_F(CPUAttention, CausalQueryTokens) {
  // Query t of Lq attends to keys < len - Lq + t + 1; lengths shorter than
  // Lq leave the first queries without keys.
  for (ElementType type : {ElementType::F32, ElementType::BF16})
    for (int64_t queryLength : {2, 4, 8}) {
      SCOPED_TRACE(testing::Message() << getElementTypeName(type) << " Lq="
                                      << queryLength << " " << seedNote());
      KernelConfig config;
      config.elementType = type;
      config.numQueryHeads = 8;
      config.numKVHeads = 2;
      config.headDim = 64;
      config.queryLength = queryLength;
      config.withLse = true;
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
    KernelConfig config;
    config.elementType = type;
    config.numQueryHeads = 8;
    config.numKVHeads = 2;
    config.headDim = 64;
    config.queryLength = 2;
    config.withLse = true;
    const int64_t maxLength = 300;
    Problem problem(config, {200, 150}, maxLength, random);
    auto at = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
      return ((b * maxLength + j) * config.numKVHeads + h) * config.headDim + d;
    };
    problem.keyCache.set(at(0, 100, 0, 3), std::nan(""));
    problem.keyCache.set(at(1, 250, 1, 0), std::nan(""));
    std::vector<double> expected, expectedLse;
    reference(problem, expected, expectedLse);
    for (bool split : {false, true}) {
      config.splitKV = split;
      config.numSplits = 5;
      auto kernel = compile(config);
      ASSERT_TRUE(kernel);
      Result result = run(*kernel, problem);
      const int64_t d = config.headDim, group = 4;
      for (int64_t row = 0; row < problem.rows(); ++row) {
        bool poisoned =
            row / (config.queryLength * config.numQueryHeads) == 0 &&
            row % config.numQueryHeads / group == 0;
        ASSERT_EQ(std::isnan(expectedLse[row]), poisoned) << "row " << row;
        EXPECT_EQ(std::isnan(result.lse[row]), poisoned) << "row " << row;
        for (int64_t k = 0; k < d; ++k) {
          double actual = result.output.get(row * d + k);
          if (poisoned)
            EXPECT_TRUE(std::isnan(actual)) << "row " << row << " dim " << k;
          else
            EXPECT_NEAR(actual, expected[row * d + k], 2e-2)
                << "row " << row << " dim " << k;
        }
      }
    }
  }
}

TEST_F(CPUAttention, AutomaticSplitsFollowThePlanner) {
  KernelConfig config;
  config.numQueryHeads = 8;
  config.numKVHeads = 2;
  config.headDim = 128;
  config.batch = 3;
  config.maxLength = 2048;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->getNumSplits(), planNumSplits(3, 2, 2048).numSplits);
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
    config.chunkLength = 16;
    config.withLse = true;

    config.batch = 1;
    config.maxLength = 100;
    auto alone = compile(config);
    config.batch = 4;
    config.maxLength = 512;
    auto batched = compile(config);
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
    std::memcpy(single.keyCache.bytes.data(),
                &mixed.keyCache.bytes[cacheStride * elementSize],
                cacheStride * elementSize);
    std::memcpy(single.valueCache.bytes.data(),
                &mixed.valueCache.bytes[cacheStride * elementSize],
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

/// Copies a dense problem's caches into a shuffled pool of pages of
/// `pageSize` positions, with sequence 1 sharing its first `sharedPages`
/// pages with sequence 0 (whose contents it is given), and returns the
/// block table.
struct PagedCaches {
  std::vector<int32_t> blockTable;
  int64_t pagesPerSequence;
  int64_t numPages;
  std::vector<uint8_t> keys, values;
};

PagedCaches makePaged(Problem &dense, int64_t pageSize, int64_t sharedPages,
                      std::mt19937 &random) {
  const KernelConfig &config = dense.config;
  size_t element = getElementTypeSize(config.elementType);
  size_t rowBytes = config.headDim * element;
  bool isNHD = config.cacheLayout == CacheLayout::NHD;
  auto denseOffset = [&](int64_t b, int64_t position, int64_t head) {
    int64_t row =
        isNHD ? (b * dense.maxLength + position) * config.numKVHeads + head
              : (b * config.numKVHeads + head) * dense.maxLength + position;
    return row * rowBytes;
  };
  // Sequence 1 repeats sequence 0's first shared positions (prefix sharing).
  int64_t sharedPositions = std::min(sharedPages * pageSize, dense.maxLength);
  for (int64_t position = 0; position < sharedPositions; ++position)
    for (int64_t head = 0; head < config.numKVHeads; ++head) {
      for (Tensor *cache : {&dense.keyCache, &dense.valueCache}) {
        std::memcpy(&cache->bytes[denseOffset(1, position, head)],
                    &cache->bytes[denseOffset(0, position, head)], rowBytes);
        std::copy_n(&cache->values[denseOffset(0, position, head) / element],
                    config.headDim,
                    &cache->values[denseOffset(1, position, head) / element]);
      }
    }

  PagedCaches paged;
  paged.pagesPerSequence = (dense.maxLength + pageSize - 1) / pageSize;
  // Two spare pages that no sequence uses, so the pool is larger than needed.
  paged.numPages = dense.batch * paged.pagesPerSequence - sharedPages + 2;
  std::vector<int32_t> pageIds(paged.numPages);
  std::iota(pageIds.begin(), pageIds.end(), 0);
  std::shuffle(pageIds.begin(), pageIds.end(), random);
  size_t next = 0;
  paged.blockTable.resize(dense.batch * paged.pagesPerSequence);
  for (int64_t b = 0; b < dense.batch; ++b)
    for (int64_t block = 0; block < paged.pagesPerSequence; ++block)
      paged.blockTable[b * paged.pagesPerSequence + block] =
          b == 1 && block < sharedPages ? paged.blockTable[block]
                                        : pageIds[next++];

  size_t pageBytes = pageSize * config.numKVHeads * rowBytes;
  paged.keys.assign(paged.numPages * pageBytes, 0x55);
  paged.values.assign(paged.numPages * pageBytes, 0x55);
  for (int64_t b = 0; b < dense.batch; ++b)
    for (int64_t position = 0; position < dense.maxLength; ++position)
      for (int64_t head = 0; head < config.numKVHeads; ++head) {
        int64_t page =
            paged.blockTable[b * paged.pagesPerSequence + position / pageSize];
        int64_t slot = position % pageSize;
        size_t offset =
            page * pageBytes +
            (isNHD ? slot * config.numKVHeads + head : head * pageSize + slot) *
                rowBytes;
        std::memcpy(&paged.keys[offset],
                    &dense.keyCache.bytes[denseOffset(b, position, head)],
                    rowBytes);
        std::memcpy(&paged.values[offset],
                    &dense.valueCache.bytes[denseOffset(b, position, head)],
                    rowBytes);
      }
  return paged;
}

TEST_F(CPUAttention, PagedEqualsDenseOnTheSameLogicalCache) {
  for (ElementType type : {ElementType::F32, ElementType::F16})
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND})
      for (int64_t pageSize : {1, 16, 64, 256}) {
        SCOPED_TRACE(testing::Message()
                     << getElementTypeName(type) << " "
                     << getCacheLayoutName(layout) << " page " << pageSize
                     << " " << seedNote());
        KernelConfig config;
        config.elementType = type;
        config.cacheLayout = layout;
        config.numQueryHeads = 8;
        config.numKVHeads = 2;
        config.headDim = 64;
        config.numSplits = 3; // chunks that do not align with pages
        config.withLse = true;
        // Lengths that end mid-page; sequences 0 and 1 share a prefix.
        Problem dense(config, {300, 290, 1, 0, 157}, 300, random);
        PagedCaches paged = makePaged(
            dense, pageSize,
            /*sharedPages=*/std::max<int64_t>(1, 130 / pageSize), random);
        auto denseKernel = compile(config);
        config.pageSize = pageSize;
        config.batch = dense.batch;
        config.maxLength = paged.pagesPerSequence * pageSize;
        auto pagedKernel = compile(config);
        ASSERT_TRUE(denseKernel && pagedKernel);

        Result expected = run(*denseKernel, dense);
        expectMatchesReference(dense, expected);
        Result actual{Tensor(type, dense.rows() * config.headDim),
                      std::vector<float>(dense.rows())};
        AttentionBuffers buffers;
        buffers.query = dense.query.bytes.data();
        buffers.keyCache = paged.keys.data();
        buffers.valueCache = paged.values.data();
        buffers.seqLens = dense.lengths.data();
        buffers.output = actual.output.bytes.data();
        buffers.lse = actual.lse.data();
        buffers.batch = dense.batch;
        buffers.blockTable = paged.blockTable.data();
        buffers.maxPagesPerSequence = paged.pagesPerSequence;
        buffers.numPages = paged.numPages;
        llvm::Error error = pagedKernel->run(buffers);
        ASSERT_FALSE(error) << llvm::toString(std::move(error));
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
            "[32, 256]");
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
