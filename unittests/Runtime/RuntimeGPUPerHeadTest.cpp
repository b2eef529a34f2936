//===- RuntimeGPUPerHeadTest.cpp - Sinks and ALiBi on a GPU ---------------===//
//
// The kernels bench/test_kernels.sh compiles with one of the two per-head
// float buffers, attention sinks (the merge reads them) and ALiBi slopes (the
// partial kernel reads them), on a GPU (in `make test`: fdemu, every launch
// checked for out-of-bounds, uninitialized and racy accesses) against the
// float64 reference, on both kernel forms, fresh random inputs
// (FD_TEST_SEED=N repeats a run). Each RuntimeGPUPerHead test runs on the
// kernels of both: lengths 0 (zeros, lse -inf or the sink), 1, below Lq,
// odd and full; graph replays after new values are written to device memory
// (the kernels read them at every launch); paged caches as pages move.
// Special values: sinks far above every score (100: a merge that left the
// sink out of its max would overflow), very negative and -inf; BLOOM's
// geometric slopes, a slope of 0 and a large one (1: far keys vanish).
// RuntimeGPUSinks has what only the sinks have (a NaN sink poisons exactly
// its head's rows), RuntimeGPUAlibi what only ALiBi has (slopes large enough
// (100) that each token keeps only its own key).
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

/// The per-head buffers.
enum class PerHead { Sinks, Alibi };

/// A test kernel, the form it must have been compiled to and the per-head
/// buffer it was compiled with.
struct PerHeadKernel {
  const char *name;
  bool tensorCores;
  PerHead feature;
};

void PrintTo(const PerHeadKernel &kernel, std::ostream *os) {
  *os << kernel.name;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

class RuntimeGPUPerHead : public testing::TestWithParam<PerHeadKernel>,
                          public KernelOnGPU {
protected:
  void SetUp() override {
    loadKernelForm(GetParam().name, GetParam().tensorCores);
    if (IsSkipped() || HasFatalFailure())
      return;
    if (isSinks())
      ASSERT_TRUE(bundle.manifest.withSinks)
          << GetParam().name << " was compiled without sinks";
    else
      ASSERT_TRUE(bundle.manifest.withAlibi)
          << GetParam().name << " was compiled without ALiBi";
    ASSERT_GE(bundle.manifest.numQueryHeads, 8);
  }

  bool isSinks() const { return GetParam().feature == PerHead::Sinks; }

  /// The feature's values among `features`.
  std::vector<float> &valuesOf(FeatureInputs &features) const {
    return isSinks() ? features.sinks : features.alibiSlopes;
  }

  /// Random sinks but for heads 1 to 4: 100 (the keys keep about e^-95 of
  /// the weight), -30 (the sink none), -inf (no sink) and 12 (the keys keep
  /// a few percent).
  std::vector<float> specialSinks() {
    std::vector<float> sinks = randomSinks();
    sinks[1] = 100.0f;
    sinks[2] = -30.0f;
    sinks[3] = -kInf;
    sinks[4] = 12.0f;
    return sinks;
  }

  /// BLOOM's slopes but for heads 1 and 2: 0 (no bias) and 1 (a key 20
  /// positions back keeps e^-20 of its weight).
  std::vector<float> specialSlopes() const {
    std::vector<float> slopes = bloomSlopes();
    slopes[1] = 0.0f;
    slopes[2] = 1.0f;
    return slopes;
  }

  /// Slopes uniform in [-0.05, 0.5] (negative: near keys fade instead) when
  /// the manifest has ALiBi; else none.
  std::vector<float> randomSlopes() {
    std::vector<float> slopes = bloomSlopes();
    std::uniform_real_distribution<float> distribution(-0.05f, 0.5f);
    for (float &slope : slopes)
      slope = distribution(random);
    return slopes;
  }

  std::vector<float> specialValues() {
    return isSinks() ? specialSinks() : specialSlopes();
  }
  std::vector<float> randomValues() {
    return isSinks() ? randomSinks() : randomSlopes();
  }

  /// The values written before replay `step` of the dense test: sinks all
  /// -inf (none), all 100, random ones, the special ones shifted by a head;
  /// slopes all 0, random ones, the special ones reversed, doubled.
  std::vector<float> replayValues(int32_t step) {
    std::vector<float> values = specialValues();
    if (isSinks()) {
      if (step == 0)
        std::fill(values.begin(), values.end(), -kInf);
      else if (step == 1)
        std::fill(values.begin(), values.end(), 100.0f);
      else if (step == 2)
        values = randomSinks();
      else
        std::rotate(values.begin(), values.begin() + 1, values.end());
    } else {
      if (step == 0)
        std::fill(values.begin(), values.end(), 0.0f);
      else if (step == 1)
        values = randomSlopes();
      else if (step == 2)
        std::reverse(values.begin(), values.end());
      else
        for (float &slope : values)
          slope *= 2.0f;
    }
    return values;
  }
};

TEST_P(RuntimeGPUPerHead, MatchesTheReferenceAndReadsNewValuesAtEveryReplay) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 601;
  DenseInputs inputs = randomDense(/*batch=*/5, maxLength, 2.0);
  valuesOf(inputs.features) = specialValues();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Lengths 0, 1, 2 (below Lq = 3 and 4: tokens without keys), odd, full.
  checkRun(decode, inputs, stream, {0, 1, 2, 299, maxLength},
           [&] { plan.launch(stream); });

  // New values in the same buffer before each replay: the same lengths
  // first (only the values changed), then others.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    valuesOf(inputs.features) = replayValues(step);
    std::vector<int32_t> live = {0, 1, 2, 299, maxLength};
    if (step > 0)
      live = {3 * step, 1 + 131 * step, 0, step, maxLength - step};
    checkRun(decode, inputs, stream, live, [&] { graph.replay(stream); });
  }
}

/// Kernels that read paged caches.
class RuntimeGPUPerHeadPaged : public RuntimeGPUPerHead {};

TEST_P(RuntimeGPUPerHeadPaged, MatchesTheReferenceAsPagesAndValuesChange) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam().name << " reads dense caches";
  SCOPED_TRACE(seedNote());
  PagedInputs inputs = randomPaged(/*batch=*/3, /*minLength=*/300,
                                   /*unwrittenPages=*/0, 2.0);
  valuesOf(inputs.features) = specialValues();
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  checkRun(decode, inputs, stream, shuffledTable(inputs), {maxLength, 17, 0},
           [&] { plan.launch(stream); });
  // Before each replay: random values or the special ones (reversed in
  // step 3), and new random values for the other per-head buffer when the
  // kernels read it too.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    std::vector<float> &values = valuesOf(inputs.features);
    values = step == 2 ? randomValues() : specialValues();
    if (step == 3)
      std::reverse(values.begin(), values.end());
    if (isSinks())
      inputs.features.alibiSlopes = randomSlopes();
    else
      inputs.features.sinks = randomSinks();
    checkRun(decode, inputs, stream, shuffledTable(inputs),
             {maxLength - 7 * step, 1 + 40 * step, step == 2 ? 0 : 1},
             [&] { graph.replay(stream); });
  }
}

/// The kernels with sinks.
class RuntimeGPUSinks : public RuntimeGPUPerHead {};

TEST_P(RuntimeGPUSinks, NaNSinkPoisonsExactlyItsHead) {
  // Head 5's sink is NaN: its rows are NaN, output and lse (those without
  // keys too: a length 0); the other heads match the reference.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  DenseInputs inputs = randomDense(/*batch=*/3, /*maxLength=*/200, 2.0);
  inputs.features.sinks = specialSinks();
  inputs.features.sinks[5] = std::nanf("");
  DeviceDecode decode = upload(inputs);
  const std::vector<int32_t> live = {0, 7, 200};
  decode.uploadLengths(live);
  decode.poisonOutput();
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);
  stream.launchAndWait([&] { plan.launch(stream); });

  std::vector<double> expected, expectedLse;
  reference(inputs, live, expected, expectedLse);
  const int64_t heads = manifest.numQueryHeads;
  for (size_t row = 0; row < expectedLse.size(); ++row)
    ASSERT_EQ(std::isnan(expectedLse[row]), row % heads == 5) << "row " << row;
  // Where the reference's lse is NaN the whole row must be NaN (the
  // reference leaves a row without keys at zeros, lse = the NaN sink).
  expectMatches(decode, expected, expectedLse);
}

/// The kernels with ALiBi.
class RuntimeGPUAlibi : public RuntimeGPUPerHead {};

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

const std::vector<PerHeadKernel> kDenseKernels = {
    {"sinks_tc", true, PerHead::Sinks},
    {"sinks_win50_mqa_bf16", true, PerHead::Sinks},
    {"sinks_win3_spec4", true, PerHead::Sinks},
    {"sinks_f32", false, PerHead::Sinks},
    {"alibi_tc", true, PerHead::Alibi},
    {"alibi_win100_bf16_spec4", true, PerHead::Alibi},
    {"alibi_f32_spec3", false, PerHead::Alibi},
    {"alibi_mha_bf16_d64", false, PerHead::Alibi},
    // The fused merge (bench/test_kernels.sh).
    {"fused_sinks_f32", false, PerHead::Sinks}};

/// kDenseKernels compiled with `feature`.
std::vector<PerHeadKernel> denseKernelsWith(PerHead feature) {
  std::vector<PerHeadKernel> kernels;
  for (const PerHeadKernel &kernel : kDenseKernels)
    if (kernel.feature == feature)
      kernels.push_back(kernel);
  return kernels;
}

INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUPerHead,
                         testing::ValuesIn(kDenseKernels),
                         caseName<PerHeadKernel>);
INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUPerHeadPaged,
    testing::Values(PerHeadKernel{"sinks_paged16", true, PerHead::Sinks},
                    PerHeadKernel{"alibi_sinks_paged16", true, PerHead::Alibi}),
    caseName<PerHeadKernel>);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUSinks,
                         testing::ValuesIn(denseKernelsWith(PerHead::Sinks)),
                         caseName<PerHeadKernel>);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUAlibi,
                         testing::ValuesIn(denseKernelsWith(PerHead::Alibi)),
                         caseName<PerHeadKernel>);

} // namespace
