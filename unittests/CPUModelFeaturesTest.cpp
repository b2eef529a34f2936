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

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using namespace fd;

namespace {

/// Elements of one type: the bytes the kernel reads and the values they hold.
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
    } else {
      uint16_t bits = type == ElementType::F16
                          ? reference::floatToHalf(single)
                          : reference::floatToBFloat16(single);
      std::memcpy(&bytes[index * 2], &bits, 2);
    }
    values[index] = get(index);
  }

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

/// Random inputs (queries of deviation `queryDeviation`, caches of 1) for
/// `config` over dense caches of `maxLength` positions.
struct Problem {
  KernelConfig config;
  int64_t batch, maxLength;
  std::vector<int32_t> lengths;
  Tensor query, keys, values;

  Problem(const KernelConfig &config, std::vector<int32_t> lengths,
          int64_t maxLength, std::mt19937 &random, double queryDeviation = 2.0)
      : config(config), batch(lengths.size()), maxLength(maxLength),
        lengths(std::move(lengths)),
        query(config.elementType, rows() * config.headDim),
        keys(config.elementType, cacheSize()),
        values(config.elementType, cacheSize()) {
    std::normal_distribution<double> queryValues(0.0, queryDeviation);
    std::normal_distribution<double> cacheValues(0.0, 1.0);
    for (size_t i = 0; i < query.values.size(); ++i)
      query.set(i, queryValues(random));
    for (size_t i = 0; i < keys.values.size(); ++i) {
      keys.set(i, cacheValues(random));
      values.set(i, cacheValues(random));
    }
  }

  int64_t rows() const {
    return batch * config.queryLength * config.numQueryHeads;
  }
  size_t cacheSize() const {
    return batch * maxLength * config.numKVHeads * config.headDim;
  }
  /// Index of element `d` of key/value `position` of KV head `head`.
  size_t at(int64_t b, int64_t position, int64_t head, int64_t d) const {
    bool isNHD = config.cacheLayout == CacheLayout::NHD;
    int64_t row = isNHD ? (b * maxLength + position) * config.numKVHeads + head
                        : (b * config.numKVHeads + head) * maxLength + position;
    return row * config.headDim + d;
  }
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
  reference.windowLeft = config.windowLeft;
  reference.logitsSoftCap = config.logitsSoftCap ? *config.logitsSoftCap : 0.0;
  reference.query = problem.query.values.data();
  reference.keyCache = problem.keys.values.data();
  reference.valueCache = problem.values.values.data();
  reference.lengths = problem.lengths.data();
  reference::attention(reference, output, lse);
}

/// The problem's caches as a shuffled pool of pages and a block table.
struct PagedCaches {
  std::vector<int32_t> blockTable;
  int64_t pagesPerSequence = 0, numPages = 0;
  std::vector<uint8_t> keys, values;

  PagedCaches(const Problem &dense, int64_t pageSize, std::mt19937 &random) {
    const KernelConfig &config = dense.config;
    size_t element = getElementTypeSize(config.elementType);
    size_t rowBytes = config.headDim * element;
    bool isNHD = config.cacheLayout == CacheLayout::NHD;
    pagesPerSequence = (dense.maxLength + pageSize - 1) / pageSize;
    numPages = dense.batch * pagesPerSequence + 3; // spare pages unused
    blockTable.resize(numPages);
    std::iota(blockTable.begin(), blockTable.end(), 0);
    std::shuffle(blockTable.begin(), blockTable.end(), random);
    blockTable.resize(dense.batch * pagesPerSequence);
    size_t pageBytes = pageSize * config.numKVHeads * rowBytes;
    keys.assign(numPages * pageBytes, 0x55);
    values.assign(numPages * pageBytes, 0x55);
    for (int64_t b = 0; b < dense.batch; ++b)
      for (int64_t j = 0; j < dense.maxLength; ++j)
        for (int64_t h = 0; h < config.numKVHeads; ++h) {
          int64_t page = blockTable[b * pagesPerSequence + j / pageSize];
          int64_t slot = j % pageSize;
          size_t offset =
              page * pageBytes +
              (isNHD ? slot * config.numKVHeads + h : h * pageSize + slot) *
                  rowBytes;
          size_t from = dense.at(b, j, h, 0) * element;
          std::memcpy(&keys[offset], &dense.keys.bytes[from], rowBytes);
          std::memcpy(&values[offset], &dense.values.bytes[from], rowBytes);
        }
  }
};

struct Result {
  Tensor output;
  std::vector<float> lse;
};

std::unique_ptr<CPUAttentionKernel> compile(const KernelConfig &config) {
  auto kernel = CPUAttentionKernel::compile(config);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

/// Runs `kernel` on the problem, through `paged` if given.
Result run(const CPUAttentionKernel &kernel, const Problem &problem,
           const PagedCaches *paged = nullptr) {
  const KernelConfig &config = kernel.getConfig();
  Result result{Tensor(config.elementType, problem.rows() * config.headDim),
                std::vector<float>(problem.rows())};
  // Poison the outputs: every element must be written.
  std::fill(result.output.bytes.begin(), result.output.bytes.end(), 0x7f);
  std::fill(result.lse.begin(), result.lse.end(), std::nanf(""));
  AttentionBuffers buffers;
  buffers.query = problem.query.bytes.data();
  buffers.keyCache = paged ? paged->keys.data() : problem.keys.bytes.data();
  buffers.valueCache =
      paged ? paged->values.data() : problem.values.bytes.data();
  buffers.seqLens = problem.lengths.data();
  buffers.output = result.output.bytes.data();
  buffers.lse = config.withLse ? result.lse.data() : nullptr;
  buffers.batch = problem.batch;
  buffers.maxLength = problem.maxLength;
  if (paged) {
    buffers.blockTable = paged->blockTable.data();
    buffers.maxPagesPerSequence = paged->pagesPerSequence;
    buffers.numPages = paged->numPages;
  }
  llvm::Error error = kernel.run(buffers);
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return result;
}

/// Compiles `config` (the problem's, with split, page or feature fields
/// changed) and runs it on the problem.
Result run(const KernelConfig &config, const Problem &problem,
           const PagedCaches *paged = nullptr) {
  if (auto kernel = compile(config))
    return run(*kernel, problem, paged);
  return {Tensor(config.elementType, problem.rows() * config.headDim),
          std::vector<float>(problem.rows(), std::nanf(""))};
}

/// Max |out - ref| within 1e-5 (f32) or 1e-2 (f16/bf16) of max |ref|; rows
/// without keys exactly zero with lse -inf; max |lse - ref| within 1e-5 of
/// max(1, max |ref lse|) (f32 rounding grows with a score's terms).
void expectMatchesReference(const Problem &problem, const Result &result) {
  std::vector<double> expected, expectedLse;
  reference(problem, expected, expectedLse);
  const int64_t d = problem.config.headDim;
  const bool withLse = problem.config.withLse;
  double maxError = 0.0, maxValue = 0.0, maxLseError = 0.0, maxLse = 1.0;
  int64_t worst = -1;
  for (int64_t row = 0; row < problem.rows(); ++row) {
    if (std::isinf(expectedLse[row])) {
      EXPECT_TRUE(!withLse ||
                  (std::isinf(result.lse[row]) && result.lse[row] < 0))
          << "row " << row << " sees no key: lse " << result.lse[row];
      for (int64_t k = 0; k < d; ++k)
        ASSERT_EQ(result.output.get(row * d + k), 0.0)
            << "row " << row << " sees no key, dim " << k;
      continue;
    }
    double lseError = std::abs(result.lse[row] - expectedLse[row]);
    if (withLse && !(lseError <= maxLseError)) // NaN-safe max
      maxLseError = lseError;
    maxLse = std::max(maxLse, std::abs(expectedLse[row]));
    for (int64_t k = 0; k < d; ++k) {
      double actual = result.output.get(row * d + k);
      ASSERT_TRUE(std::isfinite(actual)) << "row " << row << " dim " << k;
      double error = std::abs(actual - expected[row * d + k]);
      if (error > maxError) {
        maxError = error;
        worst = row * d + k;
      }
      maxValue = std::max(maxValue, std::abs(expected[row * d + k]));
    }
  }
  double limit = problem.config.elementType == ElementType::F32 ? 1e-5 : 1e-2;
  EXPECT_LE(maxError, limit * std::max(maxValue, 1e-30))
      << "worst: row " << worst / d << " dim " << worst % d << " expected "
      << expected[worst] << " got " << result.output.get(worst);
  EXPECT_LE(maxLseError, 1e-5 * maxLse)
      << "lse error (max |lse| " << maxLse << ")";
}

/// A fixture drawing its seed from FD_TEST_SEED or the random device.
class CPUModelFeatures : public testing::Test {
protected:
  CPUModelFeatures() {
    const char *fixed = std::getenv("FD_TEST_SEED");
    seed = fixed ? std::strtoul(fixed, nullptr, 10) : std::random_device()();
    random.seed(seed);
    RecordProperty("seed", std::to_string(seed));
  }
  std::string seedNote() const {
    return "seed " + std::to_string(seed) +
           " (FD_TEST_SEED=" + std::to_string(seed) + " repeats it)";
  }

  unsigned seed = 0;
  std::mt19937 random;
};

KernelConfig gqaConfig(ElementType type, int64_t queryLength = 1) {
  KernelConfig config;
  config.elementType = type;
  config.numQueryHeads = 8;
  config.numKVHeads = 2;
  config.headDim = 64;
  config.queryLength = queryLength;
  config.withLse = true;
  return config;
}

/// Runs `config` unsplit and with each of `splits` on the problem.
void expectEverySplitMatches(const Problem &problem,
                             std::initializer_list<int64_t> splits) {
  KernelConfig config = problem.config;
  config.splitKV = false;
  expectMatchesReference(problem, run(config, problem));
  for (int64_t count : splits) {
    SCOPED_TRACE(testing::Message() << "num_splits " << count);
    config.splitKV = true;
    config.numSplits = count;
    expectMatchesReference(problem, run(config, problem));
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
    expectEverySplitMatches(problem, {1, 3, 7, 16});
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
        expectEverySplitMatches(problem, {3, 16});
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
          expectEverySplitMatches(problem, {5});
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
        expectEverySplitMatches(problem, {1, 4, 64});
        config.scale = 3.0f;
        Problem scaled(config, {1, 100}, 100, random);
        expectEverySplitMatches(scaled, {7});
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
      expectEverySplitMatches(problem, {1, 3, 16, 64});
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
        PagedCaches paged(problem, 16, random);
        Result dense = run(config, problem);
        expectMatchesReference(problem, dense);
        config.pageSize = 16;
        config.batch = problem.batch;
        config.maxLength = problem.maxLength;
        Result actual = run(config, problem, &paged);
        expectMatchesReference(problem, actual);
        EXPECT_EQ(actual.output.bytes, dense.output.bytes);
        EXPECT_EQ(actual.lse, dense.lse);
      }
}

TEST_F(CPUModelFeatures, ChunkLengthModeCutsOnlyTheWindow) {
  // Chunks of 16 over the W + Lq - 1 = 37 keys a query sees: 3 splits.
  SCOPED_TRACE(seedNote());
  for (int64_t queryLength : {1, 3}) {
    KernelConfig config = gqaConfig(ElementType::F16, queryLength);
    config.windowLeft = 38 - queryLength;
    config.chunkLength = 16;
    config.maxLength = 512;
    auto kernel = compile(config);
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->getNumSplits(), 3) << "Lq=" << queryLength;
    Problem problem(config, {512, 100, 0, 1, 36, 37, 38, 250}, 512, random);
    expectMatchesReference(problem, run(config, problem));
  }
}

TEST_F(CPUModelFeatures, AutomaticSplitsAndGrowingLengthsWithAWindow) {
  // The planner chooses the split count for the window; one kernel serves
  // lengths growing past the window.
  SCOPED_TRACE(seedNote());
  KernelConfig config = gqaConfig(ElementType::F32, 2);
  config.windowLeft = 100;
  config.batch = 2;
  config.maxLength = 4096;
  Problem problem(config, {4096, 99}, 4096, random);
  expectMatchesReference(problem, run(config, problem));
  config.numSplits = 6;
  auto kernel = compile(config);
  ASSERT_TRUE(kernel);
  for (int32_t step = 0; step < 300; step += 37) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    problem.lengths = {step, 1 + 3 * step};
    expectMatchesReference(problem, run(*kernel, problem));
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
      std::vector<double> expected, expectedLse;
      reference(problem, expected, expectedLse);
      Result result = run(config, problem);
      const int64_t d = config.headDim, heads = config.numQueryHeads;
      for (int64_t row = 0; row < problem.rows(); ++row) {
        int64_t b = row / (2 * heads), kvHead = row % heads / 4;
        bool poisoned = (b == 0 && kvHead == 0) || (b == 1 && kvHead == 1);
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

} // namespace
