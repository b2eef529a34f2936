//===- RuntimeGPUAlibiTest.cpp - ALiBi on a GPU ---------------------------===//
//
// The ALiBi kernels bench/test_kernels.sh compiles, on a GPU (in `make
// test`: fdemu, every launch checked for out-of-bounds, uninitialized and
// racy accesses) against the float64 reference, on both kernel forms, fresh
// random inputs (FD_TEST_SEED=N repeats a run): BLOOM's geometric slopes, a
// slope of 0 and a large one (1: far keys vanish); lengths 0, 1, below Lq,
// odd and full; graph replays after new slopes are written to device memory
// (the partial kernel reads them at every launch); slopes large enough (100)
// that each token keeps only its own key; paged caches (with sinks) as pages
// move.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace fd;
using namespace fd::rt;
using namespace fd::test;

namespace {

/// A test kernel and the form it must have been compiled to.
struct KernelCase {
  const char *name;
  bool tensorCores;
};

void PrintTo(const KernelCase &kernel, std::ostream *os) { *os << kernel.name; }

class RuntimeGPUAlibi : public testing::TestWithParam<KernelCase>,
                        public KernelOnGPU {
protected:
  void SetUp() override {
    load(GetParam().name);
    if (IsSkipped())
      return;
    std::ifstream file(directory + "/manifest.json");
    std::stringstream text;
    text << file.rdbuf();
    ASSERT_EQ(text.str().find("\"tensor_cores\"") != std::string::npos,
              GetParam().tensorCores)
        << GetParam().name << " was compiled to the other kernel form";
    ASSERT_TRUE(bundle.manifest.withAlibi)
        << GetParam().name << " was compiled without ALiBi";
    ASSERT_GE(bundle.manifest.numQueryHeads, 8);
  }

  /// BLOOM's slopes but for heads 1 and 2: 0 (no bias) and 1 (a key 20
  /// positions back keeps e^-20 of its weight).
  std::vector<float> specialSlopes() const {
    std::vector<float> slopes = bloomSlopes();
    slopes[1] = 0.0f;
    slopes[2] = 1.0f;
    return slopes;
  }

  /// Slopes uniform in [-0.05, 0.5] (negative: near keys fade instead).
  std::vector<float> randomSlopes() {
    std::vector<float> slopes = bloomSlopes();
    std::uniform_real_distribution<float> distribution(-0.05f, 0.5f);
    for (float &slope : slopes)
      slope = distribution(random);
    return slopes;
  }
};

TEST_P(RuntimeGPUAlibi, MatchesTheReferenceAndReadsNewSlopesAtEveryReplay) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 601;
  DenseInputs inputs = randomDense(/*batch=*/5, maxLength, 2.0);
  inputs.features.alibiSlopes = specialSlopes();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Lengths 0, 1, 2 (below Lq = 3 and 4: tokens without keys), odd, full.
  checkRun(decode, inputs, stream, {0, 1, 2, 299, maxLength},
           [&] { plan.launch(stream); });

  // New slopes in the same buffer before each replay: the same lengths
  // first (only the slopes changed), then others. Every slope 0, random
  // ones, the special ones reversed, BLOOM's doubled.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    std::vector<float> slopes = specialSlopes();
    if (step == 0)
      std::fill(slopes.begin(), slopes.end(), 0.0f);
    else if (step == 1)
      slopes = randomSlopes();
    else if (step == 2)
      std::reverse(slopes.begin(), slopes.end());
    else
      for (float &slope : slopes)
        slope *= 2.0f;
    inputs.features.alibiSlopes = slopes;
    std::vector<int32_t> live = {0, 1, 2, 299, maxLength};
    if (step > 0)
      live = {3 * step, 1 + 131 * step, 0, step, maxLength - step};
    checkRun(decode, inputs, stream, live, [&] { graph.replay(stream); });
  }
}

TEST_P(RuntimeGPUAlibi, LargeSlopesKeepEachTokensOwnKey) {
  // Slopes of 100: each token's weight all on the key at its own position
  // (the one before keeps e^-100), in whichever split holds it.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  DenseInputs inputs = randomDense(/*batch=*/4, /*maxLength=*/300, 2.0);
  std::fill(inputs.features.alibiSlopes.begin(),
            inputs.features.alibiSlopes.end(), 100.0f);
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  const std::vector<int32_t> live = {0, 5, 177, 300};
  checkRun(decode, inputs, stream, live, [&] { plan.launch(stream); });

  Result result = download(decode);
  const int64_t heads = manifest.numQueryHeads, dim = manifest.headDim;
  const int64_t queryLength = manifest.queryLength;
  const int64_t group = heads / manifest.numKVHeads;
  for (int64_t row = 0; row < rowsOf(inputs.batch); ++row) {
    int64_t b = row / (queryLength * heads), t = row / heads % queryLength;
    int64_t p = live[b] - queryLength + t;
    if (p < 0)
      continue;
    for (int64_t d = 0; d < dim; ++d)
      ASSERT_NEAR(result.output.get(row * dim + d),
                  inputs.values.values[inputs.at(b, p, row % heads / group, d)],
                  1e-2)
          << "row " << row << " dim " << d;
  }
}

/// Kernels that read paged caches.
class RuntimeGPUAlibiPaged : public RuntimeGPUAlibi {};

TEST_P(RuntimeGPUAlibiPaged, MatchesTheReferenceAsPagesAndSlopesChange) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam().name << " reads dense caches";
  SCOPED_TRACE(seedNote());
  PagedInputs inputs = randomPaged(/*batch=*/3, /*minLength=*/300,
                                   /*unwrittenPages=*/0, 2.0);
  inputs.features.alibiSlopes = specialSlopes();
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  checkRun(decode, inputs, stream, shuffledTable(inputs), {maxLength, 17, 0},
           [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    inputs.features.alibiSlopes = step == 2 ? randomSlopes() : specialSlopes();
    if (step == 3)
      std::reverse(inputs.features.alibiSlopes.begin(),
                   inputs.features.alibiSlopes.end());
    inputs.features.sinks = randomSinks();
    checkRun(decode, inputs, stream, shuffledTable(inputs),
             {maxLength - 7 * step, 1 + 40 * step, step == 2 ? 0 : 1},
             [&] { graph.replay(stream); });
  }
}

std::string caseName(const testing::TestParamInfo<KernelCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUAlibi,
    testing::Values(KernelCase{"alibi_tc", true},
                    KernelCase{"alibi_win100_bf16_spec4", true},
                    KernelCase{"alibi_f32_spec3", false},
                    KernelCase{"alibi_mha_bf16_d64", false}),
    caseName);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUAlibiPaged,
                         testing::Values(KernelCase{"alibi_sinks_paged16",
                                                    true}),
                         caseName);

} // namespace
