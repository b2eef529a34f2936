//===- RuntimeGPUFeaturesTest.cpp - Windows and soft-caps on a GPU --------===//
//
// The sliding-window and logit-soft-cap kernels bench/test_kernels.sh
// compiles, on a GPU (in `make test`: fdemu, every launch checked for
// out-of-bounds, uninitialized and racy accesses) against the float64
// reference, on both kernel forms (tensor cores and CUDA cores), fresh
// random inputs (FD_TEST_SEED=N repeats a run): lengths 0, 1, shorter than
// the window, odd and full, growing across graph replays; scores far beyond
// the cap; keys before every window never read (a NaN there changes
// nothing; a page there is never loaded).
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

class RuntimeGPUFeatures : public testing::TestWithParam<KernelCase>,
                           public KernelOnGPU {
protected:
  void SetUp() override {
    loadKernelForm(GetParam().name, GetParam().tensorCores);
    if (IsSkipped() || HasFatalFailure())
      return;
    const Manifest &manifest = bundle.manifest;
    ASSERT_TRUE(manifest.windowLeft > 0 || manifest.logitsSoftCap > 0)
        << GetParam().name << " has neither a window nor a soft-cap";
  }

  /// Scores of deviation about 2, or twice the cap with a soft-cap: far
  /// beyond it, where an uncapped softmax would be one-hot.
  double queryDeviation() const {
    return std::max(2.0, 2.0 * bundle.manifest.logitsSoftCap);
  }
  /// The first key some query sees: keys before it are read by no one.
  int64_t firstAttendedKey(int64_t length) const {
    const Manifest &manifest = bundle.manifest;
    if (!manifest.windowLeft)
      return 0;
    return std::max<int64_t>(0, length - manifest.queryLength + 1 -
                                    manifest.windowLeft);
  }
};

TEST_P(RuntimeGPUFeatures, MatchesTheReferenceAndReplaysAsLengthsGrow) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 601, window = manifest.windowLeft;
  DenseInputs inputs = randomDense(/*batch=*/5, maxLength, queryDeviation());
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Lengths 0, 1, shorter than the window (and than Lq for W = 3), odd and
  // the full cache.
  int32_t shorter = window > 1 ? window - 1 : 2;
  checkRun(decode, inputs, stream, {0, 1, shorter, 299, maxLength},
           [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 4; ++step) {
    int32_t grown = 1 + 131 * step;
    checkRun(decode, inputs, stream,
             {grown, 3 + step, std::max(0, window - 1 + step), 0,
              std::min(maxLength, 300 + grown)},
             [&] { graph.replay(stream); });
  }
}

TEST_P(RuntimeGPUFeatures, NaNsReachTheRowsThatSeeThemOnly) {
  // A NaN in the key each sequence's last token sees last poisons exactly
  // the rows the reference poisons; NaNs in the keys and values right before
  // the first attended key (with a window), at key 0 and past the length
  // are never read.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int64_t batch = 3, dim = manifest.headDim;
  const int64_t heads = manifest.numKVHeads, rows = rowsOf(batch);
  const std::vector<int32_t> live = {200, 197, 251};
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, queryDeviation());
  HostTensor &keys = inputs.keys, &values = inputs.values;
  auto at = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
    return inputs.at(b, j, h, d);
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t first = firstAttendedKey(live[b]);
      std::vector<int64_t> unread = {int64_t(live[b]), live[b] + 1};
      if (first > 0)
        unread.insert(unread.end(), {0, first - 1});
      for (int64_t j : unread) {
        keys.set(at(b, j, h, h % dim), std::nan(""));
        values.set(at(b, j, h, (h + 5) % dim), std::nan(""));
      }
    }
  // Live: sequence 0's KV head 0 and sequence 1's last head.
  keys.set(at(0, live[0] - 1, 0, 3), std::nan(""));
  keys.set(at(1, live[1] - 1, heads - 1, 0), std::nan(""));
  DeviceDecode decode = upload(inputs);
  decode.uploadLengths(live);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  stream.launchAndWait([&] { plan.launch(stream); });

  std::vector<double> expected, expectedLse;
  reference(inputs, live, expected, expectedLse);
  int64_t poisoned = std::count_if(expectedLse.begin(), expectedLse.end(),
                                   [](double x) { return std::isnan(x); });
  // At least the last token of each poisoned head; never everything.
  ASSERT_GE(poisoned, 2 * manifest.numQueryHeads / heads);
  ASSERT_LT(poisoned, rows);
  expectMatches(decode, expected, expectedLse);
}

/// Kernels that read paged caches.
class RuntimeGPUFeaturesPaged : public RuntimeGPUFeatures {};

TEST_P(RuntimeGPUFeaturesPaged, PagesBeforeTheWindowAreNeverLoaded) {
  // The block table sends every page wholly before a sequence's first
  // attended key to pool pages no copy ever wrote: fdemu's initcheck fails
  // the launch if any is loaded. Pages move and lengths grow between graph
  // replays.
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam().name << " reads dense caches";
  ASSERT_GT(manifest.windowLeft, 0) << GetParam().name << " has no window";
  SCOPED_TRACE(seedNote());
  const int64_t batch = 3, pageSize = manifest.pageSize;
  PagedInputs inputs = randomPaged(batch, /*minLength=*/700,
                                   /*unwrittenPages=*/2, queryDeviation());
  const int64_t maxPages = inputs.maxPages, writtenPages = inputs.writtenPages;
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Pages wholly before a sequence's first attended key go to the
  // unwritten pages.
  auto check = [&](const std::vector<int32_t> &live,
                   const std::function<void()> &run) {
    std::vector<int32_t> table = shuffledTable(inputs);
    int64_t skipped = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t page = 0; (page + 1) * pageSize <= firstAttendedKey(live[b]);
           ++page, ++skipped)
        table[b * maxPages + page] = writtenPages + page % 2;
    EXPECT_GT(skipped, 0) << "no page lies before a window";
    checkRun(decode, inputs, stream, table, live, run);
  };

  check({maxLength, 133, 1}, [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step)
    check({maxLength - 5 * step, 133 + 97 * step, step == 3 ? 0 : 13 * step},
          [&] { graph.replay(stream); });
}

INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUFeatures,
                         testing::Values(KernelCase{"win100_tc", true},
                                         KernelCase{"win3_tc_spec4", true},
                                         KernelCase{"win100_tc_spec4", true},
                                         KernelCase{"win50_mqa_bf16", true},
                                         KernelCase{"cap30_tc_d64", true},
                                         KernelCase{"win37_f32_hnd_spec3",
                                                    false},
                                         KernelCase{"cap5_mha_bf16", false},
                                         KernelCase{"win1_cap50_mha", false}),
                         caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUFeaturesPaged,
                         testing::Values(KernelCase{"paged16_win21_cap20_tc",
                                                    true}),
                         caseName<KernelCase>);

} // namespace
