//===- RuntimeGPUQueryLensTest.cpp - Query lengths on a GPU ---------------===//
//
// The kernels with per-sequence query lengths (`query_lens`) that
// bench/test_kernels.sh compiles, on a GPU (in `make test`: fdemu, every
// launch checked for out-of-bounds, uninitialized and racy accesses)
// against the float64 reference, on both kernel forms, fresh random inputs
// (FD_TEST_SEED=N repeats a run): every n in [0, Lq] across the batch and
// out-of-range entries (-1, Lq + 3, the int32 extremes: clamped); lengths 0,
// 1, below n, fewer than the splits, a multiple of the page, odd and full;
// graph replays after new query lengths and lengths are written to device
// memory (both kernels read them at every launch); padding rows exactly zero
// with lse -inf (not the sink) on a fresh workspace whatever their queries
// hold (NaN), while the caches of a sequence without queries never reach the
// device (fdemu's initcheck fails a launch that loads them); paged caches whose
// sequences without queries point at pages never written; ALiBi slopes so
// large that each query token keeps only the key at its position len - n + t;
// a partial kernel that writes no padding row's partials and (fdemu's launch
// counters) runs no row tile of padding rows only.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"
#include "LaunchCounters.h"

#include "fd/Emulator/Emulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

class RuntimeGPUQueryLens : public testing::TestWithParam<KernelCase>,
                            public KernelOnGPU {
protected:
  void SetUp() override {
    loadKernelForm(GetParam().name, GetParam().tensorCores);
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_TRUE(bundle.manifest.withQueryLens)
        << GetParam().name << " was compiled without query lengths";
  }

  int64_t queryLength() const { return bundle.manifest.queryLength; }
  /// The query tokens the kernels give a sequence whose entry is `entry`.
  int64_t queriesOf(int32_t entry) const {
    return std::clamp<int64_t>(entry, 0, queryLength());
  }
  /// A batch of one sequence per query length in [0, Lq] and two more.
  int64_t batchSize() const { return queryLength() + 3; }

  /// Scores of deviation about 2, or twice the cap with a soft-cap.
  double queryDeviation() const {
    return std::max(2.0, 2.0 * bundle.manifest.logitsSoftCap);
  }

  /// Every query length in [0, Lq] and `low` and `high`, out of range, in
  /// random order.
  std::vector<int32_t> everyQueryLength(int32_t low = -1,
                                        int32_t high = kInt32Max) {
    std::vector<int32_t> lengths(queryLength() + 1);
    std::iota(lengths.begin(), lengths.end(), 0);
    lengths.insert(lengths.end(), {low, high});
    std::shuffle(lengths.begin(), lengths.end(), random);
    return lengths;
  }

  /// `batch` lengths cycling from the `shift`th through 0, 1, 2 and 3
  /// (below most n; fewer keys than the splits), 160 (a multiple of the
  /// page), 299 (odd), and the full `maxLength` and one less.
  static std::vector<int32_t> mixedLengths(int64_t batch, int32_t maxLength,
                                           int64_t shift) {
    const int32_t kinds[] = {0, 1, 2, 3, 160, 299, maxLength, maxLength - 1};
    std::vector<int32_t> lengths;
    for (int64_t b = 0; b < batch; ++b)
      lengths.push_back(kinds[(b + shift) % std::size(kinds)]);
    return lengths;
  }

  /// The rows of padding tokens (t >= n) of `queryLens`' sequences.
  std::vector<bool> paddingRows(const std::vector<int32_t> &queryLens) const {
    const int64_t heads = bundle.manifest.numQueryHeads;
    std::vector<bool> padding;
    for (int32_t entry : queryLens)
      for (int64_t t = 0; t < queryLength(); ++t)
        padding.insert(padding.end(), heads, t >= queriesOf(entry));
    return padding;
  }
};

TEST_P(RuntimeGPUQueryLens, MatchesTheReferenceAndReadsNewQueryLensAtReplays) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 601;
  const int64_t batch = batchSize();
  DenseInputs inputs = randomDense(batch, maxLength, queryDeviation());
  inputs.features.queryLens = everyQueryLength();
  DeviceDecode decode = upload(inputs);
  // A fresh workspace: a merge that read a padding row's partial (which
  // the partial kernel leaves unwritten) would fail fdemu's initcheck.
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  checkRun(decode, inputs, stream, mixedLengths(batch, maxLength, 0),
           [&] { plan.launch(stream); });

  // New query lengths and lengths in the same buffers before each replay:
  // rows that were real become padding and back. Then no sequence with a
  // query (entries 0 and below), and all with Lq (entries Lq and above).
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 4; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    std::vector<int32_t> &queryLens = inputs.features.queryLens;
    if (step <= 2) {
      queryLens = everyQueryLength(kInt32Min, queryLength() + 3);
    } else {
      const int32_t most = queryLength();
      const std::vector<int32_t> entries =
          step == 3 ? std::vector<int32_t>{0, -1, kInt32Min}
                    : std::vector<int32_t>{most, most + 1, kInt32Max};
      for (int64_t b = 0; b < batch; ++b)
        queryLens[b] = entries[b % entries.size()];
    }
    checkRun(decode, inputs, stream, mixedLengths(batch, maxLength, step),
             [&] { graph.replay(stream); });
  }
}

TEST_P(RuntimeGPUQueryLens, PaddingRowsAreZerosAndNothingUnseenIsRead) {
  // Of the caches only those of the sequences with queries reach the
  // device (the last has none): fdemu's initcheck fails the launch if the
  // kernels load the rest. Values no query sees are NaN (before the first
  // token's window, past the length, all of a sequence without queries):
  // one read would poison a row, even masked (0 * NaN). With sinks, a
  // padding row that took its sink would get a finite lse.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 300;
  const int64_t batch = batchSize(), heads = manifest.numKVHeads;
  const int64_t dim = manifest.headDim;
  DenseInputs inputs = randomDense(batch, maxLength, queryDeviation());
  std::vector<int32_t> &queryLens = inputs.features.queryLens;
  queryLens = everyQueryLength(kInt32Min, kInt32Max);
  std::iter_swap(std::find(queryLens.begin(), queryLens.end(), kInt32Min),
                 queryLens.end() - 1);
  // Without queries the full cache; n in [1, Lq) long odd lengths (with a
  // window, keys before the first token's window but after those of
  // Lq tokens' are unseen); entry Lq 2 keys (below n for Lq > 2), entry
  // int32 max (n = Lq) 299.
  std::vector<int32_t> live;
  for (int32_t entry : queryLens)
    live.push_back(entry <= 0               ? maxLength
                   : entry < queryLength()  ? maxLength - 1 - 20 * entry
                   : entry == queryLength() ? 2
                                            : maxLength - 1);
  // The keys some query sees: [first, len) with first = len - n + 1 - W
  // (the first token's window), none without queries.
  for (int64_t b = 0; b < batch; ++b) {
    int64_t queries = queriesOf(queryLens[b]), length = live[b];
    int64_t first = manifest.windowLeft > 0
                        ? length - queries + 1 - manifest.windowLeft
                        : 0;
    if (queries == 0)
      first = length;
    for (int64_t j = 0; j < maxLength; ++j)
      if (j < first || j >= length)
        for (int64_t h = 0; h < heads; ++h)
          inputs.values.set(inputs.at(b, j, h, h % dim), std::nan(""));
  }

  // Padding rows' queries are garbage (NaN): the kernels may load them but
  // must not use them.
  std::vector<bool> padding = paddingRows(queryLens);
  for (size_t row = 0; row < padding.size(); ++row)
    if (padding[row])
      for (int64_t d = 0; d < dim; ++d)
        inputs.query.set(row * dim + d, std::nan(""));
  DeviceDecode decode = upload(inputs, /*writtenSequences=*/batch - 1);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  checkRun(decode, inputs, stream, live, [&] { plan.launch(stream); });

  // Independent of the reference: padding rows are exact zeros, lse -inf.
  Result result = download(decode);
  int64_t paddingCount = 0;
  for (size_t row = 0; row < padding.size(); ++row) {
    if (!padding[row])
      continue;
    ++paddingCount;
    EXPECT_EQ(result.lse[row], -std::numeric_limits<float>::infinity())
        << "row " << row;
    for (int64_t d = 0; d < dim; ++d)
      ASSERT_EQ(result.output.get(row * dim + d), 0.0)
          << "row " << row << " dim " << d;
  }
  EXPECT_GE(paddingCount, (queryLength() + 1) * manifest.numQueryHeads);
}

TEST_P(RuntimeGPUQueryLens, ThePartialKernelWritesNoPaddingRow) {
  // A workspace of the caller's, filled with a pattern first: afterwards
  // every padding row's partials (output and lse, every split) still hold
  // it, every real row's lse partials do not (an empty chunk writes -inf).
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int64_t batch = batchSize(), dim = manifest.headDim;
  const int64_t splits = manifest.numSplits;
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, queryDeviation());
  inputs.features.queryLens = everyQueryLength();
  DeviceDecode decode = upload(inputs);
  const uint8_t pattern = 0xA5;
  std::vector<uint8_t> bytes(manifest.getWorkspaceBytes(batch), pattern);
  DeviceBuffer workspace(*device, bytes.size());
  workspace.upload(bytes.data(), bytes.size());
  DecodeBuffers buffers = decode.getBuffers();
  buffers.workspace = workspace.getAddress();
  DecodePlan plan(*device, bundle, buffers);
  Stream stream(*device);
  checkRun(decode, inputs, stream, mixedLengths(batch, 300, 2),
           [&] { plan.launch(stream); });

  workspace.download(bytes.data(), bytes.size());
  // [rows, splits, D] partial outputs, then [rows, splits] lse, in f32.
  const size_t lseStart = manifest.workspace.getPartialLseOffset(batch);
  auto holdsPattern = [&](size_t begin, size_t size) {
    return std::all_of(bytes.begin() + begin, bytes.begin() + begin + size,
                       [&](uint8_t byte) { return byte == pattern; });
  };
  std::vector<bool> padding = paddingRows(inputs.features.queryLens);
  for (size_t row = 0; row < padding.size(); ++row)
    for (int64_t split = 0; split < splits; ++split) {
      size_t partial = row * splits + split;
      bool lseUnwritten = holdsPattern(lseStart + partial * 4, 4);
      ASSERT_EQ(lseUnwritten, bool(padding[row]))
          << "row " << row << " split " << split << " lse";
      if (padding[row]) {
        ASSERT_TRUE(holdsPattern(partial * dim * 4, dim * 4))
            << "row " << row << " split " << split << " output";
      }
    }
}

/// Kernels with ALiBi.
class RuntimeGPUQueryLensAlibi : public RuntimeGPUQueryLens {};

TEST_P(RuntimeGPUQueryLensAlibi, LargeSlopesKeepEachTokensOwnKey) {
  // Slopes of 100 and no sinks: each real token's weight is all on the key
  // at its own position p = len - n + t (the one before keeps e^-100), so
  // its output is that value whatever the reference says.
  const Manifest &manifest = bundle.manifest;
  ASSERT_TRUE(manifest.withAlibi) << GetParam().name << " has no ALiBi";
  SCOPED_TRACE(seedNote());
  const int64_t batch = batchSize();
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, 2.0);
  FeatureInputs &features = inputs.features;
  std::fill(features.alibiSlopes.begin(), features.alibiSlopes.end(), 100.0f);
  std::fill(features.sinks.begin(), features.sinks.end(),
            -std::numeric_limits<float>::infinity());
  features.queryLens = everyQueryLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  const std::vector<int32_t> live = mixedLengths(batch, 300, 3);
  checkRun(decode, inputs, stream, live, [&] { plan.launch(stream); });

  Result result = download(decode);
  const int64_t heads = manifest.numQueryHeads, dim = manifest.headDim;
  const int64_t group = heads / manifest.numKVHeads;
  int64_t checked = 0;
  for (int64_t row = 0; row < rowsOf(batch); ++row) {
    int64_t b = row / (queryLength() * heads);
    int64_t t = row / heads % queryLength();
    int64_t queries = queriesOf(features.queryLens[b]);
    int64_t p = live[b] - queries + t;
    if (t >= queries || p < 0)
      continue;
    ++checked;
    for (int64_t d = 0; d < dim; ++d)
      ASSERT_NEAR(result.output.get(row * dim + d),
                  inputs.values.values[inputs.at(b, p, row % heads / group, d)],
                  1e-2)
          << "row " << row << " dim " << d;
  }
  EXPECT_GT(checked, 0);
}

/// Kernels whose query rows take more than one row tile.
class RuntimeGPUQueryLensTiles : public RuntimeGPUQueryLens {};

TEST_P(RuntimeGPUQueryLensTiles, RowTilesOfPaddingAreSkipped) {
  // On fdemu, whose counters say what a launch executed: with one query per
  // sequence the real rows (a group's) fill fewer row tiles than Lq tokens'
  // and the partial kernel runs only those; with none it loads no key.
  std::optional<LaunchCounters> launchCounters = LaunchCounters::find();
  if (!launchCounters)
    GTEST_SKIP() << "not on fdemu: no launch counters";
  SCOPED_TRACE(seedNote());
  const int64_t batch = 4;
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, 2.0);
  DeviceDecode decode = upload(inputs);
  decode.uploadLengths(std::vector<int32_t>(batch, 300));
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  // What the partial kernel executed with every entry `entry`.
  struct Executed {
    uint64_t warpInstructions, loadedBytes;
  };
  auto partialKernel = [&](int32_t entry) {
    inputs.features.queryLens.assign(batch, entry);
    decode.uploadFeatures(inputs.features);
    std::unique_ptr<FdemuCounters> counters = launchCounters->ofFirstLaunch(
        [&] { stream.launchAndWait([&] { plan.launch(stream); }); });
    const uint64_t *classes = counters->total.warpInstructions;
    return Executed{
        std::accumulate(classes, classes + FDEMU_NUM_CLASSES, uint64_t(0)),
        counters->globalLoadBytes};
  };
  Executed all = partialKernel(queryLength()), one = partialKernel(1);
  Executed none = partialKernel(0);
  EXPECT_LT(one.warpInstructions, 0.85 * all.warpInstructions);
  EXPECT_LT(none.warpInstructions, one.warpInstructions / 10);
  EXPECT_LT(none.loadedBytes, all.loadedBytes / 50);
}

/// Kernels that read paged caches.
class RuntimeGPUQueryLensPaged : public RuntimeGPUQueryLens {};

TEST_P(RuntimeGPUQueryLensPaged, SequencesWithoutQueriesLoadNoPage) {
  // The block table sends every page of a sequence without queries to pool
  // pages no copy ever wrote: fdemu's initcheck fails the launch if any is
  // loaded. Pages move, query lengths and lengths change between replays.
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam().name << " reads dense caches";
  SCOPED_TRACE(seedNote());
  const int64_t batch = batchSize();
  PagedInputs inputs = randomPaged(batch, /*minLength=*/300,
                                   /*unwrittenPages=*/2, queryDeviation());
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  auto check = [&](int32_t step, const std::function<void()> &run) {
    std::vector<int32_t> &queryLens = inputs.features.queryLens;
    queryLens = everyQueryLength(step % 2 ? kInt32Min : -1,
                                 step % 2 ? queryLength() + 3 : kInt32Max);
    std::vector<int32_t> table = shuffledTable(inputs);
    for (int64_t b = 0; b < batch; ++b)
      if (queriesOf(queryLens[b]) == 0)
        for (int64_t page = 0; page < inputs.maxPages; ++page)
          table[b * inputs.maxPages + page] = inputs.writtenPages + page % 2;
    checkRun(decode, inputs, stream, table,
             mixedLengths(batch, maxLength, step), run);
  };
  check(0, [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    check(step, [&] { graph.replay(stream); });
  }
}

constexpr KernelCase kTensorCoreAlibi = {"qlens_win3_cap30_sinks_alibi_spec4",
                                         true};
constexpr KernelCase kCudaCoreAlibi = {"qlens_win37_cap20_sinks_alibi_f32",
                                       false};

INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUQueryLens,
    testing::Values(KernelCase{"qlens_spec4", true},
                    KernelCase{"qlens_bf16_spec8", true},
                    KernelCase{"qlens_gqa6_d64_spec3", true}, kTensorCoreAlibi,
                    KernelCase{"qlens_mha_d96_spec3", false},
                    KernelCase{"qlens_mqa_f32_spec2", false}, kCudaCoreAlibi),
    caseName<KernelCase>);
// The fused merge (bench/test_kernels.sh).
INSTANTIATE_TEST_SUITE_P(
    FusedMerge, RuntimeGPUQueryLens,
    testing::Values(KernelCase{"fused_qlens_every_feature", true},
                    KernelCase{"fused_qlens_mqa_f32_spec2", false}),
    caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUQueryLensAlibi,
                         testing::Values(kTensorCoreAlibi, kCudaCoreAlibi),
                         caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUQueryLensTiles,
    testing::Values(KernelCase{"qlens_bf16_spec8", true},
                    KernelCase{"qlens_gqa6_d64_spec3", true},
                    KernelCase{"qlens_mqa_f32_spec2", false}),
    caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUQueryLensPaged,
    testing::Values(KernelCase{"qlens_paged16_spec8", true},
                    KernelCase{"qlens_mha_f32_paged16_hnd", false}),
    caseName<KernelCase>);

} // namespace
