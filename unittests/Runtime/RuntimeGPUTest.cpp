//===- RuntimeGPUTest.cpp - The kernels on a GPU vs the float64 reference -===//
//
// Needs a CUDA driver (in `make test`: fdemu, FD_CUDA_DRIVER) and the test
// kernels bench/test_kernels.sh writes (FD_TEST_KERNELS=DIR; the full build
// compiles them and defaults to its copy); skips with the reason otherwise.
// Runs each configuration on fresh random inputs with mixed lengths (0, 1, odd,
// full), then replays a captured CUDA graph while the lengths grow in device
// memory, checking every replay.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

class RuntimeGPU : public testing::TestWithParam<const char *>,
                   public KernelOnGPU {
protected:
  void SetUp() override { load(GetParam()); }
};

TEST_P(RuntimeGPU, MatchesTheReferenceAndReplaysAsLengthsGrow) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam() << " reads paged caches";
  DenseInputs inputs = randomDense(/*batch=*/4, /*maxLength=*/700, 2.0);
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  checkRun(decode, inputs, stream, {0, 1, 37, 700},
           [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 5; ++step) {
    int32_t grown = 1 + 130 * step;
    auto replayStep = [&] {
      checkRun(decode, inputs, stream,
               {grown, 3 + step, 0, std::min<int32_t>(700, 299 + grown)},
               [&] { graph.replay(stream); });
    };
    // The driver's current context is per thread: fdrt makes it current
    // wherever it is used, so a serving loop may replay from any thread.
    if (step == 2)
      std::thread(replayStep).join();
    else
      replayStep();
  }
}

TEST_P(RuntimeGPU, APoisonedKeyGivesNaNNeverAPlausibleAnswer) {
  // A NaN in a live key must reach every row that sees it (as in the float64
  // reference), whatever the split count; a NaN past a sequence's length is
  // never read.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam() << " reads paged caches";
  const int64_t batch = 2, heads = manifest.numKVHeads;
  const int64_t dim = manifest.headDim, rows = rowsOf(batch);
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, 2.0);
  const std::vector<int32_t> live = {200, 150};
  // Live: poisons head 0; past the length.
  inputs.keys.set(inputs.at(0, 100, 0, 3), std::nan(""));
  inputs.keys.set(inputs.at(1, 250, heads - 1, 0), std::nan(""));
  DeviceDecode decode = upload(inputs);
  decode.uploadLengths(live);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  stream.launchAndWait([&] { plan.launch(stream); });
  Result result = download(decode);

  std::vector<double> expected, expectedLse;
  reference(inputs, live, expected, expectedLse);
  const int64_t group = manifest.numQueryHeads / heads;
  int64_t poisonedRows = 0;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t b = row / (manifest.queryLength * manifest.numQueryHeads);
    int64_t kvHead = row % manifest.numQueryHeads / group;
    bool poisoned = b == 0 && kvHead == 0;
    ASSERT_EQ(std::isnan(expectedLse[row]), poisoned) << "row " << row;
    poisonedRows += poisoned;
    EXPECT_EQ(std::isnan(result.lse[row]), poisoned) << "row " << row;
    double maxError = 0, maxValue = 0;
    for (int64_t d = 0; d < dim; ++d) {
      double actual = result.output.get(row * dim + d);
      if (poisoned) {
        EXPECT_TRUE(std::isnan(actual)) << "row " << row << " dim " << d;
        continue;
      }
      maxError = std::max(maxError, std::abs(actual - expected[row * dim + d]));
      maxValue = std::max(maxValue, std::abs(expected[row * dim + d]));
    }
    EXPECT_LE(maxError, 1e-2 * std::max(maxValue, 1e-30)) << "row " << row;
  }
  EXPECT_EQ(poisonedRows, manifest.queryLength * group);
}

/// Kernels that read paged caches.
class RuntimeGPUPaged : public RuntimeGPU {};

TEST_P(RuntimeGPUPaged, PagedCachesMatchTheReferenceAsPagesMove) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam() << " reads dense caches";
  PagedInputs inputs = randomPaged(/*batch=*/3, /*minLength=*/700,
                                   /*unwrittenPages=*/0, 2.0);
  const int64_t maxPages = inputs.maxPages, numPages = inputs.numPages;
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Writes a new shuffled table (sequence 1 sharing sequence 0's first
  // page) and lengths to the device, runs, and checks against attention
  // over the logical caches the table describes.
  auto check = [&](const std::vector<int32_t> &live,
                   const std::function<void()> &run) {
    std::vector<int32_t> table = shuffledTable(inputs);
    table[maxPages] = table[0];
    // Entries outside the pool read its first or last page (docs/KernelABI.md),
    // never memory outside it.
    // Sequence 0 (full) reads its second page, sequence 2 its first.
    table[1] = static_cast<int32_t>(numPages + 9);
    table[2 * maxPages] = -3;
    checkRun(decode, inputs, stream, table, live, run);
  };

  check({maxLength, 133, 9}, [&] { plan.launch(stream); });
  // The graph never changes: pages move and lengths grow in device memory.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step)
    check({maxLength - step, 133 + 97 * step, step},
          [&] { graph.replay(stream); });
}

/// Kernels with the fused merge.
class RuntimeGPUFusedMerge : public RuntimeGPU {};

TEST_P(RuntimeGPUFusedMerge, EveryLaunchLeavesTheCountersZero) {
  // One kernel, which counts its blocks in the caller's counters: zero
  // before the first launch, and zero again after every launch and replay
  // (the last block of each sequence and KV head resets its own), which is
  // what lets the next one merge at the right block.
  const Manifest &manifest = bundle.manifest;
  ASSERT_TRUE(manifest.fusedMerge) << GetParam();
  ASSERT_EQ(manifest.kernels.size(), 1u) << "no merge kernel";
  const int64_t batch = 3, counterCount = batch * manifest.numKVHeads;
  ASSERT_EQ(manifest.getMergeCounterBytes(batch),
            counterCount * static_cast<int64_t>(sizeof(int32_t)));
  DenseInputs inputs = randomDense(batch, /*maxLength=*/300, 2.0);
  DeviceDecode decode = upload(inputs);
  DeviceBuffer counters(*device, counterCount * sizeof(int32_t));
  counters.zero();
  DecodeBuffers buffers = decode.getBuffers();
  buffers.mergeCounters = counters.getAddress();
  DecodePlan plan(*device, bundle, buffers);
  Stream stream(*device);
  auto expectZeroCounters = [&] {
    std::vector<int32_t> values(counterCount, -1);
    counters.download(values.data(), values.size() * sizeof(int32_t));
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(values[i], 0) << "counter " << i;
  };

  checkRun(decode, inputs, stream, {300, 1, 0}, [&] { plan.launch(stream); });
  expectZeroCounters();
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 3; ++step) {
    checkRun(decode, inputs, stream, {7 + 100 * step, 300, 2 * step},
             [&] { graph.replay(stream); });
    expectZeroCounters();
  }
}

class RuntimeDevice : public testing::Test, public KernelOnGPU {};

TEST_F(RuntimeDevice, DatasheetBandwidthFromTheMemoryClockAndBus) {
  // fd-bench's roofline_fraction: two transfers per memory clock over the
  // bus width. fdemu's H200 reports its datasheet's 4.8 TB/s (6144 bits at
  // 3.125 GHz), its A100 2.039 TB/s; a GPU, its own.
  openDevice();
  if (IsSkipped())
    return;
  double peak = device->getPeakDramBytesPerSecond();
  std::string name = device->getName();
  if (name == "fdemu (emulated H200)")
    EXPECT_NEAR(peak, 4.8e12, 4.8e12 * 1e-6);
  else if (name == "fdemu (emulated A100)")
    EXPECT_NEAR(peak, 2.039e12, 2.039e12 * 1e-6);
  else
    EXPECT_GT(peak, 1e11) << name;
}

INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPU,
                         testing::Values("gqa_f16", "gqa_bf16", "gqa_hnd",
                                         "spec4", "mqa_tiles", "gqa8_d96_spec4",
                                         "gqa6_d64_spec3", "mha_f16",
                                         "mqa_s100", "gqa_bf16_s300"));
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUPaged,
                         testing::Values("paged16", "paged_spec",
                                         "mha_paged16"));
// Schedules written by hand (fd-compile --schedule, bench/test_kernels.sh):
// other row tiles, K/V stages, held q fragments and launch bounds than the
// planner's, and the other kernel form.
INSTANTIATE_TEST_SUITE_P(HandSchedule, RuntimeGPU,
                         testing::Values("hand_mqa_d64_stages3",
                                         "hand_gqa4_cuda_cores"));
INSTANTIATE_TEST_SUITE_P(HandSchedule, RuntimeGPUPaged,
                         testing::Values("hand_paged_gqa8_d64_stages4"));
// The fused merge: the partial kernel merges (bench/test_kernels.sh).
INSTANTIATE_TEST_SUITE_P(FusedMerge, RuntimeGPU,
                         testing::Values("fused_gqa_f16", "fused_mqa_tiles",
                                         "fused_mha_s16",
                                         "fused_gqa8_d96_spec4",
                                         "fused_mqa_f32_spec2_s48",
                                         "fused_gqa_bf16_s37"));
INSTANTIATE_TEST_SUITE_P(FusedMerge, RuntimeGPUPaged,
                         testing::Values("fused_paged_spec"));
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUFusedMerge,
                         testing::Values("fused_gqa_f16", "fused_mha_s16"));

} // namespace
