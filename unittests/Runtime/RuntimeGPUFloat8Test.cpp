//===- RuntimeGPUFloat8Test.cpp - FP8 caches on a GPU ---------------------===//
//
// The kernels with fp8 caches that bench/test_kernels.sh compiles (E4M3 and
// E5M2, scales per tensor and per token and KV head, the cvt decoder of
// sm_90 and the bit-operation one of sm_80, both kernel forms), on a GPU (in
// `make test`: fdemu, every launch checked for out-of-bounds, uninitialized
// and racy accesses) against the float64 reference on the dequantized caches
// (decode(byte) * scale: the attention adds no error of its own beyond the
// query dtype's), fresh random inputs (FD_TEST_SEED=N repeats a run): caches
// of normal values and caches with outlier channels (100x, as real K caches
// have); lengths 0, 1, fewer than the splits, odd and full; graph replays
// after new scales are written to device memory (the kernels read them at
// every launch); paged caches (pages of 1, 16, 256) as pages move; a NaN
// byte in a key poisons exactly the rows that see it; values so small that
// per-token scales times the weights leave f16's normal range; every byte
// pattern of the format through the decoder of each kernel form.
//
//===----------------------------------------------------------------------===//

#include "Float8Harness.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

class RuntimeGPUFloat8 : public testing::TestWithParam<KernelCase>,
                         public Float8KernelOnGPU {
protected:
  void SetUp() override {
    loadKernelForm(GetParam().name, GetParam().tensorCores);
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_TRUE(bundle.manifest.hasFloat8Cache())
        << GetParam().name << " was compiled without an fp8 cache";
  }
};

/// Kernels that read dense caches.
class RuntimeGPUFloat8Dense : public RuntimeGPUFloat8 {
protected:
  void SetUp() override {
    RuntimeGPUFloat8::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_EQ(bundle.manifest.pageSize, 0)
        << GetParam().name << " reads paged caches";
  }

  /// Runs random caches (with outlier channels when `outliers`) at several
  /// lengths, then replays a graph after new scales are written.
  void checkRandomCaches(bool outliers) {
    SCOPED_TRACE(seedNote());
    const int32_t maxLength = 403;
    // Queries of 2 (scores of about 2); with outliers, small enough that
    // the outlier channels keep scores of a few units.
    DenseInputs inputs =
        randomDense(/*batch=*/5, maxLength, outliers ? 0.05 : 2.0);
    if (outliers)
      addOutlierChannels(inputs.keys);
    Float8Caches caches = quantizeCaches(inputs);
    DeviceDecode decode = upload(inputs);
    DecodePlan plan(*device, bundle,
                    withScales(decode.getBuffers(), caches.scales));
    Stream stream(*device);
    // Lengths 0, 1, 3 (fewer than the splits), odd and full.
    checkRun(decode, inputs, stream, {0, 1, 3, 255, maxLength},
             [&] { plan.launch(stream); });

    // The same bytes under new scales before each replay.
    Graph graph = Graph::capture(*device, {&plan}, stream);
    for (int32_t step = 1; step <= 2; ++step) {
      SCOPED_TRACE(testing::Message() << "replay " << step);
      rescaleRandomly(inputs, caches);
      checkRun(decode, inputs, stream,
               {maxLength - step, 7 * step, 1, 0, 100 + step},
               [&] { graph.replay(stream); });
    }
  }
};

TEST_P(RuntimeGPUFloat8Dense, MatchesTheReferenceAndReadsNewScalesAtReplay) {
  checkRandomCaches(/*outliers=*/false);
}

TEST_P(RuntimeGPUFloat8Dense, MatchesTheReferenceWithOutlierChannels) {
  checkRandomCaches(/*outliers=*/true);
}

TEST_P(RuntimeGPUFloat8Dense, SmallValuesKeepTheirPrecision) {
  // Values of 0.01 over 2000 keys: per-token value scales of about
  // 0.01 / 448 (E4M3) or 0.01 / 57344 (E5M2), so a weight times its scale
  // lies below f16's normal range; the output must still have the query
  // dtype's precision.
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 2000;
  DenseInputs inputs = randomDense(/*batch=*/2, maxLength, 2.0);
  for (double &value : inputs.values.values)
    value *= 0.01;
  Float8Caches caches = quantizeCaches(inputs);
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle,
                  withScales(decode.getBuffers(), caches.scales));
  Stream stream(*device);
  checkRun(decode, inputs, stream, {maxLength, 1501},
           [&] { plan.launch(stream); });
}

/// Dense kernels without sinks (a sink takes a share of every weight).
class RuntimeGPUFloat8Decode : public RuntimeGPUFloat8Dense {};

TEST_P(RuntimeGPUFloat8Decode, EveryBytePatternDecodesExactly) {
  // One key per sequence, so each output row is its value row: decode(byte)
  // x scale, with scales of 1 exact in every output dtype. The value rows
  // hold every byte pattern of the format but E5M2's infinities (an
  // infinite value gives NaN: the kernels weigh masked keys' values by 0).
  const Manifest &manifest = bundle.manifest;
  ASSERT_FALSE(manifest.withSinks) << GetParam().name << " reads sinks";
  const int64_t dim = manifest.headDim;
  std::vector<uint8_t> patterns;
  for (int byte = 0; byte < 256; ++byte)
    if (isE4M3() || (byte & 0x7f) != 0x7c)
      patterns.push_back(static_cast<uint8_t>(byte));
  const int64_t batch = (patterns.size() + dim - 1) / dim;
  DenseInputs inputs = randomDense(batch, /*maxLength=*/3, 1.0);
  quantizeInPlace(inputs.keys);
  quantizeInPlace(inputs.values);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < manifest.numKVHeads; ++h)
      for (int64_t d = 0; d < dim; ++d)
        inputs.values.bytes[inputs.at(b, 0, h, d)] =
            patterns[(b * dim + d) % patterns.size()];
  QuantizedCache ones{
      {},
      std::vector<float>(isPerToken() ? inputs.keys.values.size() / dim : 1,
                         1.0f)};
  DeviceDecode decode = upload(inputs);
  ScaleBuffers scales = uploadScales(ones, ones);
  DecodePlan plan(*device, bundle, withScales(decode.getBuffers(), scales));
  Stream stream(*device);
  std::vector<int32_t> live(batch, 1);
  decode.uploadLengths(live);
  decode.uploadFeatures(inputs.features);
  decode.poisonOutput();
  stream.launchAndWait([&] { plan.launch(stream); });

  Result result = download(decode);
  const int64_t heads = manifest.numQueryHeads;
  const int64_t group = heads / manifest.numKVHeads;
  for (int64_t row = 0; row < rowsOf(batch); ++row) {
    int64_t b = row / (manifest.queryLength * heads);
    int64_t t = row / heads % manifest.queryLength;
    // Only the last query token sees the one key (per-sequence query
    // lengths may leave a sequence without it).
    if (t != manifest.queryLength - 1 || (!inputs.features.queryLens.empty() &&
                                          inputs.features.queryLens[b] < 1))
      continue;
    for (int64_t d = 0; d < dim; ++d) {
      uint8_t byte =
          inputs.values.bytes[inputs.at(b, 0, row % heads / group, d)];
      double expected = isE4M3() ? reference::float8E4M3FNToFloat(byte)
                                 : reference::float8E5M2ToFloat(byte);
      double actual = result.output.get(row * dim + d);
      if (std::isnan(expected))
        ASSERT_TRUE(std::isnan(actual))
            << "byte 0x" << std::hex << int(byte) << std::dec << " row " << row;
      else
        ASSERT_EQ(actual, expected)
            << "byte 0x" << std::hex << int(byte) << std::dec << " row " << row;
    }
  }
}

TEST_P(RuntimeGPUFloat8Dense, NaNKeyPoisonsExactlyTheRowsThatSeeIt) {
  // One key element of sequence 0, KV head 0, at its last position is the
  // format's NaN: the rows of that head's group whose query sees it (its
  // last query token's at least, whatever the window) are NaN (output and
  // lse); every other row matches the reference.
  SCOPED_TRACE(seedNote());
  const Manifest &manifest = bundle.manifest;
  DenseInputs inputs = randomDense(/*batch=*/3, /*maxLength=*/120, 2.0);
  Float8Caches caches = quantizeCaches(inputs);
  size_t poisoned = inputs.at(0, 119, 0, manifest.headDim / 2);
  inputs.keys.bytes[poisoned] = isE4M3() ? 0x7f : 0xfe;
  inputs.keys.values[poisoned] = std::nan("");
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle,
                  withScales(decode.getBuffers(), caches.scales));
  Stream stream(*device);
  const std::vector<int32_t> live = {120, 90, 120};
  decode.uploadLengths(live);
  decode.uploadFeatures(inputs.features);
  decode.poisonOutput();
  stream.launchAndWait([&] { plan.launch(stream); });

  std::vector<double> expected, expectedLse;
  reference(inputs, live, expected, expectedLse);
  int64_t nanRows = 0;
  for (double lse : expectedLse)
    nanRows += std::isnan(lse);
  ASSERT_GT(nanRows, 0) << "no row sees the NaN key";
  expectMatches(decode, expected, expectedLse);
}

/// Kernels that read paged caches.
class RuntimeGPUFloat8Paged : public RuntimeGPUFloat8 {};

TEST_P(RuntimeGPUFloat8Paged, MatchesTheReferenceAsPagesAndScalesChange) {
  ASSERT_NE(bundle.manifest.pageSize, 0)
      << GetParam().name << " reads dense caches";
  SCOPED_TRACE(seedNote());
  PagedInputs inputs = randomPaged(/*batch=*/3, /*minLength=*/300,
                                   /*unwrittenPages=*/0, 2.0);
  addOutlierChannels(inputs.keys);
  Float8Caches caches = quantizeCaches(inputs);
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle,
                  withScales(decode.getBuffers(), caches.scales));
  Stream stream(*device);
  checkRun(decode, inputs, stream, shuffledTable(inputs), {maxLength, 17, 0},
           [&] { plan.launch(stream); });

  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 2; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    rescaleRandomly(inputs, caches);
    checkRun(decode, inputs, stream, shuffledTable(inputs),
             {maxLength - 5 * step, 1 + 33 * step, 1},
             [&] { graph.replay(stream); });
  }
}

const KernelCase kWithoutSinks[] = {{"fp8_e4m3_tc", true},
                                    {"fp8_e5m2_tc_token", true},
                                    {"fp8_e4m3_tc_token_sm80", true},
                                    {"fp8_e4m3_tc_bf16", true},
                                    {"fp8_e4m3_tc_bf16_token_sm80", true},
                                    {"fp8_e5m2_tc_bf16_token", true},
                                    {"fp8_e4m3_mqa_token", true},
                                    {"fp8_e4m3_mha_token", true},
                                    {"fp8_e4m3_mha_bf16_token", false},
                                    {"fp8_e4m3_f32_d40_spec3_sm80", false}};
const KernelCase kWithEveryFeature[] = {
    {"fp8_e4m3_tc_every_feature", true},
    {"fp8_e5m2_f32_hnd_every_feature", false},
    // The fused merge (bench/test_kernels.sh).
    {"fused_fp8_e4m3_every_feature", true}};

INSTANTIATE_TEST_SUITE_P(WithoutSinks, RuntimeGPUFloat8Dense,
                         testing::ValuesIn(kWithoutSinks),
                         caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(EveryFeature, RuntimeGPUFloat8Dense,
                         testing::ValuesIn(kWithEveryFeature),
                         caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUFloat8Decode,
                         testing::ValuesIn(kWithoutSinks),
                         caseName<KernelCase>);
INSTANTIATE_TEST_SUITE_P(
    Kernels, RuntimeGPUFloat8Paged,
    testing::Values(KernelCase{"fp8_e5m2_tc_bf16_paged16_hnd_spec4", true},
                    KernelCase{"fp8_e4m3_tc_paged256_spec8", true},
                    KernelCase{"fp8_e5m2_mha_bf16_paged16_sm80", false},
                    KernelCase{"fp8_e5m2_mha_paged1_hnd", true}),
    caseName<KernelCase>);

} // namespace
