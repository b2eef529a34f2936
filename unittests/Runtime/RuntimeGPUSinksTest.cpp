//===- RuntimeGPUSinksTest.cpp - Attention sinks on a GPU -----------------===//
//
// The attention-sink kernels bench/test_kernels.sh compiles, on a GPU (in
// `make test`: fdemu, every launch checked for out-of-bounds, uninitialized
// and racy accesses) against the float64 reference, on both kernel forms,
// fresh random inputs (FD_TEST_SEED=N repeats a run): sinks random, far
// above every score (100: a merge that left the sink out of its max would
// overflow), very negative and -inf; lengths 0 (zeros, lse = the sink), 1,
// below Lq, odd and full; graph replays after new sink values are written
// to device memory (the merge reads them at every launch); a NaN sink
// poisons exactly its head's rows; paged caches as pages move.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
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

constexpr float kInf = std::numeric_limits<float>::infinity();

class RuntimeGPUSinks : public testing::TestWithParam<KernelCase>,
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
    ASSERT_TRUE(bundle.manifest.withSinks)
        << GetParam().name << " was compiled without sinks";
    ASSERT_GE(bundle.manifest.numQueryHeads, 8);
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
};

TEST_P(RuntimeGPUSinks, MatchesTheReferenceAndReadsNewSinksAtEveryReplay) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int32_t maxLength = 601;
  DenseInputs inputs = randomDense(/*batch=*/5, maxLength, 2.0);
  inputs.features.sinks = specialSinks();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  // Lengths 0, 1, 2 (below Lq = 4: tokens without keys), odd and full.
  checkRun(decode, inputs, stream, {0, 1, 2, 299, maxLength},
           [&] { plan.launch(stream); });

  // New sinks in the same buffer before each replay: the same lengths
  // first (only the sinks changed), then growing ones. Every sink -inf
  // (none), every sink 100, random ones, the special ones shifted by a head.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 4; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    std::vector<float> sinks = specialSinks();
    if (step == 0)
      std::fill(sinks.begin(), sinks.end(), -kInf);
    else if (step == 1)
      std::fill(sinks.begin(), sinks.end(), 100.0f);
    else if (step == 2)
      sinks = randomSinks();
    else
      std::rotate(sinks.begin(), sinks.begin() + 1, sinks.end());
    inputs.features.sinks = sinks;
    std::vector<int32_t> live = {0, 1, 2, 299, maxLength};
    if (step > 0)
      live = {3 * step, 1 + 131 * step, 0, step, maxLength - step};
    checkRun(decode, inputs, stream, live, [&] { graph.replay(stream); });
  }
}

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

/// Kernels that read paged caches.
class RuntimeGPUSinksPaged : public RuntimeGPUSinks {};

TEST_P(RuntimeGPUSinksPaged, MatchesTheReferenceAsPagesAndSinksChange) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_NE(manifest.pageSize, 0) << GetParam().name << " reads dense caches";
  SCOPED_TRACE(seedNote());
  PagedInputs inputs = randomPaged(/*batch=*/3, /*minLength=*/300,
                                   /*unwrittenPages=*/0, 2.0);
  inputs.features.sinks = specialSinks();
  const int32_t maxLength = inputs.getMaxLength();
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, decode.getBuffers());
  Stream stream(*device);

  checkRun(decode, inputs, stream, shuffledTable(inputs), {maxLength, 17, 0},
           [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(testing::Message() << "replay " << step);
    inputs.features.sinks = step == 2 ? randomSinks() : specialSinks();
    if (step == 3)
      std::reverse(inputs.features.sinks.begin(), inputs.features.sinks.end());
    checkRun(decode, inputs, stream, shuffledTable(inputs),
             {maxLength - 7 * step, 1 + 40 * step, step == 2 ? 0 : 1},
             [&] { graph.replay(stream); });
  }
}

std::string caseName(const testing::TestParamInfo<KernelCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUSinks,
                         testing::Values(KernelCase{"sinks_tc", true},
                                         KernelCase{"sinks_win50_mqa_bf16",
                                                    true},
                                         KernelCase{"sinks_win3_spec4", true},
                                         KernelCase{"sinks_f32", false}),
                         caseName);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUSinksPaged,
                         testing::Values(KernelCase{"sinks_paged16", true}),
                         caseName);

} // namespace
