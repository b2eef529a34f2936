//===- CPUAttentionHarness.h - The CPU path vs the reference ----*- C++ -*-===//
//-*-===//
//
// What CPUAttentionTest and CPUModelFeaturesTest share: random problems,
// compiling and running a KernelConfig on the CPU (dense or paged caches),
// and comparing a result with flashdecode::reference on the same (rounded)
// inputs, with the config's scale, window, soft-cap, attention sinks, ALiBi,
// per-sequence query lengths and fp8 caches (compared on their dequantized
// values).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_CPUATTENTIONHARNESS_H
#define FD_UNITTESTS_CPUATTENTIONHARNESS_H

#include "TestInputs.h"

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace flashdecode::test {

inline Storage getStorage(ElementType type) {
  return type == ElementType::F32   ? Storage::F32
         : type == ElementType::F16 ? Storage::F16
                                    : Storage::BF16;
}

/// Quantizes `values`, a cache of `config`'s shape (rows of `rowLength`
/// elements, in the order of the per-token scales), to its fp8 type.
inline Float8Cache quantize(const KernelConfig &config,
                            const std::vector<double> &values,
                            int64_t rowLength) {
  return quantizeFloat8(values, config.kvCacheType == KVCacheType::E4M3,
                        config.kvScaleGranularity == KVScaleGranularity::Tensor
                            ? values.size()
                            : static_cast<size_t>(rowLength));
}

/// Random inputs (queries of deviation `queryDeviation`: scores of about 2
/// by default, peaked enough that a wrong max or a misplaced key shows;
/// caches of 1) for `config` over dense caches of `maxLength` positions;
/// with `config.withSinks`, sinks of deviation 2; with `config.withAlibi`,
/// BLOOM's slopes 2^(-8 (h + 1) / Hq); with `config.withQueryLens`, query
/// lengths cycling through Lq, 0, 1, ..., Lq - 1 (the caller may set
/// others); with an fp8 cache, f32 caches quantized (float8Keys and
/// float8Values). Values have D_v elements a row; with `config.sharedKV`
/// there are none (the kernel reads the keys' first D_v columns).
struct Problem {
  KernelConfig config;
  int64_t batch, maxLength;
  std::vector<int32_t> lengths;
  HostTensor query, keys, values;
  /// The attention sinks, [Hq], when `config.withSinks`.
  std::vector<float> sinks;
  /// The ALiBi slopes, [Hq], when `config.withAlibi`.
  std::vector<float> alibiSlopes;
  /// The query tokens of each sequence, [B], when `config.withQueryLens`.
  std::vector<int32_t> queryLens;
  /// With an fp8 cache (`keys` and `values` are then the f32 values it was
  /// quantized from): what the kernel and the reference read.
  Float8Cache float8Keys, float8Values;
  /// With a sharded cache (config.isKVSharded()): the rank whose share a
  /// run reads (the caches are then that share: shardOf) and the reference
  /// attends (over the whole caches of the problem its share was taken
  /// from: CPUKVShardTest.cpp).
  int32_t shardRank = 0;

  Problem(const KernelConfig &config, std::vector<int32_t> lengths,
          int64_t maxLength, std::mt19937 &random, double queryDeviation = 2.0)
      : config(config), batch(lengths.size()), maxLength(maxLength),
        lengths(std::move(lengths)),
        query(getStorage(config.elementType), rows() * config.headDim),
        keys(getCacheStorage(config), cacheSize()),
        values(getCacheStorage(config),
               config.sharedKV ? 0 : valueCacheSize()) {
    query.fillNormal(queryDeviation, random);
    std::normal_distribution<double> cacheValues(0.0, 1.0);
    for (size_t i = 0; i < keys.values.size(); ++i)
      keys.set(i, cacheValues(random));
    for (size_t i = 0; i < values.values.size(); ++i)
      values.set(i, cacheValues(random));
    if (config.withSinks) {
      std::normal_distribution<float> sinkValues(0.0f, 2.0f);
      for (int64_t h = 0; h < config.numQueryHeads; ++h)
        sinks.push_back(sinkValues(random));
    }
    if (config.withAlibi)
      for (int64_t h = 0; h < config.numQueryHeads; ++h)
        alibiSlopes.push_back(
            std::exp2(-8.0f * (h + 1) / float(config.numQueryHeads)));
    if (config.withQueryLens)
      for (int64_t b = 0; b < batch; ++b)
        queryLens.push_back(static_cast<int32_t>((b + config.queryLength) %
                                                 (config.queryLength + 1)));
    if (config.hasFloat8Cache())
      quantizeCaches();
  }

  static Storage getCacheStorage(const KernelConfig &config) {
    return config.hasFloat8Cache() ? Storage::F32
                                   : getStorage(config.elementType);
  }

  /// Quantizes `keys` and `values` to the fp8 cache (again, after a caller
  /// changed them).
  void quantizeCaches() {
    float8Keys = quantize(config, keys.values, config.headDim);
    if (!config.sharedKV)
      float8Values = quantize(config, values.values, config.getValueHeadDim());
  }

  /// Sequence b's query tokens: query_lens[b] clamped to [0, Lq], or Lq.
  int64_t queriesOf(int64_t b) const {
    if (queryLens.empty())
      return config.queryLength;
    return std::clamp<int64_t>(queryLens[b], 0, config.queryLength);
  }

  /// Whether row `row` ([B, Lq, Hq] order) sees no key: its token sits
  /// before the sequence's first position, or is padding.
  bool seesNoKey(int64_t row) const {
    int64_t queryLength = config.queryLength;
    int64_t b = row / (queryLength * config.numQueryHeads);
    int64_t t = row / config.numQueryHeads % queryLength;
    return t >= queriesOf(b) || lengths[b] - queriesOf(b) + t < 0;
  }

  int64_t rows() const {
    return batch * config.queryLength * config.numQueryHeads;
  }
  size_t cacheSize() const {
    return batch * maxLength * config.numKVHeads * config.headDim;
  }
  size_t valueCacheSize() const {
    return batch * maxLength * config.numKVHeads * config.getValueHeadDim();
  }
  /// Index of element `d` of key/value `position` of KV head `head`.
  size_t at(int64_t b, int64_t position, int64_t head, int64_t d) const {
    bool isNHD = config.cacheLayout == CacheLayout::NHD;
    int64_t row = isNHD ? (b * maxLength + position) * config.numKVHeads + head
                        : (b * config.numKVHeads + head) * maxLength + position;
    return row * config.headDim + d;
  }
};

/// GQA (8 query heads, 2 KV heads), D = 64, with an lse output.
inline KernelConfig gqaConfig(ElementType type, int64_t queryLength = 1) {
  KernelConfig config;
  config.elementType = type;
  config.numQueryHeads = 8;
  config.numKVHeads = 2;
  config.headDim = 64;
  config.queryLength = queryLength;
  config.withLse = true;
  return config;
}

/// The float64 reference on the problem's (rounded) inputs.
inline void reference(const Problem &problem, std::vector<double> &output,
                      std::vector<double> &lse) {
  const KernelConfig &config = problem.config;
  reference::AttentionProblem reference;
  reference.batch = problem.batch;
  reference.queryLength = config.queryLength;
  reference.numQueryHeads = config.numQueryHeads;
  reference.numKVHeads = config.numKVHeads;
  reference.headDim = config.headDim;
  reference.valueHeadDim = config.getValueHeadDim();
  reference.maxLength = problem.maxLength;
  reference.isNHD = config.cacheLayout == CacheLayout::NHD;
  reference.scale =
      config.scale ? *config.scale : 1.0 / std::sqrt(double(config.headDim));
  reference.windowLeft = config.windowLeft;
  reference.logitsSoftCap = config.logitsSoftCap ? *config.logitsSoftCap : 0.0;
  reference.query = problem.query.values.data();
  const bool isFloat8 = config.hasFloat8Cache();
  reference.keyCache = isFloat8 ? problem.float8Keys.dequantized.data()
                                : problem.keys.values.data();
  reference.valueCache = config.sharedKV ? nullptr
                         : isFloat8 ? problem.float8Values.dequantized.data()
                                    : problem.values.values.data();
  reference.lengths = problem.lengths.data();
  std::vector<double> sinks(problem.sinks.begin(), problem.sinks.end());
  if (config.withSinks)
    reference.sinks = sinks.data();
  std::vector<double> slopes(problem.alibiSlopes.begin(),
                             problem.alibiSlopes.end());
  if (config.withAlibi)
    reference.alibiSlopes = slopes.data();
  if (config.withQueryLens)
    reference.queryLengths = problem.queryLens.data();
  if (config.isKVSharded()) {
    reference.shardWorld = config.kvShardWorld;
    reference.shardInterleave = config.kvShardInterleave;
    reference.shardRank = problem.shardRank;
  }
  reference::attention(reference, output, lse);
}

/// The problem's caches as a shuffled pool of pages of `pageSize` positions,
/// `sparePages` more than the sequences use (filled with 0x55 bytes, never
/// read), and a block table. Sequence 1 shares its first `sharedPages` pages
/// with sequence 0 (prefix sharing: the caller made it hold sequence 0's
/// keys and values there). An fp8 cache's per-token scales are paged alike
/// (NaN in the slots of no position).
struct PagedCaches {
  std::vector<int32_t> blockTable;
  int64_t pagesPerSequence = 0, numPages = 0;
  std::vector<uint8_t> keys, values;
  /// With an fp8 cache: the scales, per tensor or paged.
  std::vector<float> keyScales, valueScales;

  PagedCaches(const Problem &dense, int64_t pageSize, int64_t sparePages,
              std::mt19937 &random, int64_t sharedPages = 0) {
    const KernelConfig &config = dense.config;
    const bool isFloat8 = config.hasFloat8Cache();
    size_t element = isFloat8 ? 1 : getElementTypeSize(config.elementType);
    size_t rowBytes = config.headDim * element;
    size_t valueRowBytes = config.getValueHeadDim() * element;
    const uint8_t *denseKeys =
        isFloat8 ? dense.float8Keys.bytes.data() : dense.keys.bytes.data();
    const uint8_t *denseValues =
        isFloat8 ? dense.float8Values.bytes.data() : dense.values.bytes.data();
    const bool perToken =
        isFloat8 && config.kvScaleGranularity == KVScaleGranularity::TokenHead;
    if (isFloat8 && !perToken) {
      keyScales = dense.float8Keys.scales;
      valueScales = dense.float8Values.scales;
    }
    const bool withValues = !config.sharedKV;
    bool isNHD = config.cacheLayout == CacheLayout::NHD;
    pagesPerSequence = (dense.maxLength + pageSize - 1) / pageSize;
    numPages = dense.batch * pagesPerSequence - sharedPages + sparePages;
    std::vector<int32_t> pageIds(numPages);
    std::iota(pageIds.begin(), pageIds.end(), 0);
    std::shuffle(pageIds.begin(), pageIds.end(), random);
    size_t next = 0;
    blockTable.resize(dense.batch * pagesPerSequence);
    for (int64_t b = 0; b < dense.batch; ++b)
      for (int64_t block = 0; block < pagesPerSequence; ++block)
        blockTable[b * pagesPerSequence + block] =
            b == 1 && block < sharedPages ? blockTable[block] : pageIds[next++];

    size_t pageBytes = pageSize * config.numKVHeads * rowBytes;
    keys.assign(numPages * pageBytes, 0x55);
    if (withValues)
      values.assign(numPages * pageSize * config.numKVHeads * valueRowBytes,
                    0x55);
    if (perToken) {
      keyScales.assign(numPages * pageSize * config.numKVHeads, std::nanf(""));
      if (withValues)
        valueScales = keyScales;
    }
    for (int64_t b = 0; b < dense.batch; ++b)
      for (int64_t j = 0; j < dense.maxLength; ++j)
        for (int64_t h = 0; h < config.numKVHeads; ++h) {
          int64_t page = blockTable[b * pagesPerSequence + j / pageSize];
          int64_t slot = j % pageSize;
          // Rows of head_dim elements, in the pool and in the dense cache.
          size_t row =
              page * pageSize * config.numKVHeads +
              (isNHD ? slot * config.numKVHeads + h : h * pageSize + slot);
          size_t from = dense.at(b, j, h, 0) / config.headDim;
          std::memcpy(&keys[row * rowBytes], denseKeys + from * rowBytes,
                      rowBytes);
          if (withValues)
            std::memcpy(&values[row * valueRowBytes],
                        denseValues + from * valueRowBytes, valueRowBytes);
          if (perToken) {
            keyScales[row] = dense.float8Keys.scales[from];
            if (withValues)
              valueScales[row] = dense.float8Values.scales[from];
          }
        }
  }
};

inline std::unique_ptr<CPUAttentionKernel>
compile(const KernelRequest &request) {
  auto kernel = CPUAttentionKernel::compile(request);
  if (!kernel) {
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  return std::move(*kernel);
}

/// Runs `kernel` on the problem, through `paged` if given.
inline Result run(const CPUAttentionKernel &kernel, const Problem &problem,
                  const PagedCaches *paged = nullptr) {
  const KernelConfig &config = kernel.getConfig();
  Result result{HostTensor(getStorage(config.elementType),
                           problem.rows() * config.getValueHeadDim()),
                std::vector<float>(problem.rows())};
  // Poison the outputs: every element must be written.
  std::fill(result.output.bytes.begin(), result.output.bytes.end(), 0x7f);
  std::fill(result.lse.begin(), result.lse.end(), std::nanf(""));
  AttentionBuffers buffers;
  buffers.query = problem.query.bytes.data();
  const bool isFloat8 = config.hasFloat8Cache();
  const uint8_t *keys =
      isFloat8 ? problem.float8Keys.bytes.data() : problem.keys.bytes.data();
  const uint8_t *values = isFloat8 ? problem.float8Values.bytes.data()
                                   : problem.values.bytes.data();
  buffers.keyCache = paged ? paged->keys.data() : keys;
  if (!config.sharedKV)
    buffers.valueCache = paged ? paged->values.data() : values;
  if (isFloat8)
    buffers.kScale =
        paged ? paged->keyScales.data() : problem.float8Keys.scales.data();
  if (isFloat8 && !config.sharedKV)
    buffers.vScale =
        paged ? paged->valueScales.data() : problem.float8Values.scales.data();
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
  if (config.withSinks)
    buffers.sinks = problem.sinks.data();
  if (config.withAlibi)
    buffers.alibiSlopes = problem.alibiSlopes.data();
  if (config.withQueryLens)
    buffers.queryLens = problem.queryLens.data();
  if (config.isKVSharded())
    buffers.kvShardRank = &problem.shardRank;
  llvm::Error error = kernel.run(buffers);
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return result;
}

/// Compiles `request` (the problem's config, with split, page or feature
/// fields changed) and runs it on the problem.
inline Result run(const KernelRequest &request, const Problem &problem,
                  const PagedCaches *paged = nullptr) {
  if (auto kernel = compile(request))
    return run(*kernel, problem, paged);
  const KernelConfig &config = request.config;
  return {HostTensor(getStorage(config.elementType),
                     problem.rows() * config.getValueHeadDim()),
          std::vector<float>(problem.rows(), std::nanf(""))};
}

/// What an lse error is relative to.
enum class LseTolerance {
  /// max(1, |reference lse|) of its own row.
  PerRow,
  /// max(1, the largest |reference lse|): f32 rounding grows with a score's
  /// terms (scores far beyond a soft-cap).
  OfLargest,
};

/// Checks a result against the float64 reference: max |out - ref| within
/// 1e-5 (f32) or 1e-2 (f16/bf16) of max |ref|; rows without keys exactly zero
/// with lse -inf (the sink with sinks); lse errors within 1e-5 relative
/// (`lseTolerance`), when the kernel writes an lse.
inline void
expectMatchesReference(const Problem &problem, const Result &result,
                       LseTolerance lseTolerance = LseTolerance::PerRow) {
  std::vector<double> expected, expectedLse;
  reference(problem, expected, expectedLse);
  const int64_t d = problem.config.getValueHeadDim();
  const bool withLse = problem.config.withLse;
  double maxError = 0.0, maxValue = 0.0, maxLseError = 0.0, maxLse = 1.0;
  int64_t worst = -1;
  for (int64_t row = 0; row < problem.rows(); ++row) {
    bool noKey = problem.seesNoKey(row);
    if (noKey || std::isinf(expectedLse[row])) {
      for (int64_t k = 0; k < d; ++k)
        ASSERT_EQ(result.output.get(row * d + k), 0.0)
            << "row " << row << " sees no key, dim " << k;
    }
    if (std::isinf(expectedLse[row])) {
      EXPECT_TRUE(!withLse ||
                  (std::isinf(result.lse[row]) && result.lse[row] < 0))
          << "row " << row << " sees no key: lse " << result.lse[row];
      continue;
    }
    double lseError = std::abs(result.lse[row] - expectedLse[row]);
    if (lseTolerance == LseTolerance::PerRow)
      lseError /= std::max(1.0, std::abs(expectedLse[row]));
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
  double lseLimit = lseTolerance == LseTolerance::PerRow ? 1e-5 : 1e-5 * maxLse;
  EXPECT_LE(maxLseError, lseLimit) << "lse error (max |lse| " << maxLse << ")";
}

/// The largest |a - b| over the outputs, relative to the largest |b|.
inline double relativeDifference(const Result &a, const Result &b) {
  double difference = 0.0, largest = 1e-30;
  for (size_t i = 0; i < a.output.values.size(); ++i) {
    difference =
        std::max(difference, std::abs(a.output.get(i) - b.output.get(i)));
    largest = std::max(largest, std::abs(b.output.get(i)));
  }
  return difference / largest;
}

/// Runs the problem's config unsplit and with each of `splits` (through
/// `paged` if given, for a config with its page size): every run matches
/// the reference and the unsplit one (within 1e-5 relative for f32, 2e-2 for
/// f16/bf16).
inline void expectEverySplitMatches(const Problem &problem,
                                    std::initializer_list<int64_t> splits,
                                    LseTolerance lse = LseTolerance::PerRow,
                                    const PagedCaches *paged = nullptr) {
  KernelConfig config = problem.config;
  config.splitKV = false;
  Result unsplit = run(config, problem, paged);
  expectMatchesReference(problem, unsplit, lse);
  double limit = config.elementType == ElementType::F32 ? 1e-5 : 2e-2;
  for (int64_t count : splits) {
    SCOPED_TRACE(testing::Message() << "num_splits " << count);
    config.splitKV = true;
    config.numSplits = count;
    Result split = run(config, problem, paged);
    expectMatchesReference(problem, split, lse);
    EXPECT_LE(relativeDifference(split, unsplit), limit);
  }
}

/// Runs `config` on the problem's dense caches, then on `paged` (pages of
/// `pageSize`, the config planned for the problem's batch and length): both
/// match the reference, and each other bit for bit (a page lookup changes
/// where a key is read, not how it is used).
inline void expectPagedMatchesDense(KernelConfig config, const Problem &problem,
                                    const PagedCaches &paged, int64_t pageSize,
                                    LseTolerance lse = LseTolerance::PerRow) {
  Result dense = run(config, problem);
  expectMatchesReference(problem, dense, lse);
  config.pageSize = pageSize;
  PlanningHints hints;
  hints.batch = problem.batch;
  hints.maxLength = problem.maxLength;
  Result actual = run({config, hints}, problem, &paged);
  expectMatchesReference(problem, actual, lse);
  EXPECT_EQ(actual.output.bytes, dense.output.bytes);
  EXPECT_EQ(actual.lse, dense.lse);
}

/// Checks which rows a NaN in the inputs reaches: exactly those `poisoned`
/// picks (by row index), where the reference has NaN too, output and lse;
/// the other rows within 2e-2 of the reference, element by element.
template <typename Poisoned>
void expectNaNsIn(const Problem &problem, const Result &result,
                  Poisoned poisoned) {
  std::vector<double> expected, expectedLse;
  reference(problem, expected, expectedLse);
  const int64_t d = problem.config.getValueHeadDim();
  for (int64_t row = 0; row < problem.rows(); ++row) {
    bool isPoisoned = poisoned(row);
    ASSERT_EQ(std::isnan(expectedLse[row]), isPoisoned) << "row " << row;
    EXPECT_EQ(std::isnan(result.lse[row]), isPoisoned) << "row " << row;
    for (int64_t k = 0; k < d; ++k) {
      double actual = result.output.get(row * d + k);
      if (isPoisoned)
        EXPECT_TRUE(std::isnan(actual)) << "row " << row << " dim " << k;
      else
        EXPECT_NEAR(actual, expected[row * d + k], 2e-2)
            << "row " << row << " dim " << k;
    }
  }
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_CPUATTENTIONHARNESS_H
