//===- KernelMatrixOnGPUTest.cpp - Every matrix kernel on a GPU -----------===//
//
// Compiles every configuration of the kernel matrix (KernelMatrix.h: what
// PTXAssemblyTest assembles, compiled once for both) and runs it on a GPU —
// in `make test` on fdemu, whose every launch is checked for out-of-bounds,
// uninitialized and racy accesses — against the float64 reference on fresh
// random inputs (FD_TEST_SEED=N repeats a run): sequences of an odd length
// the chunks do not divide, of none, one key and fewer keys than splits,
// over dense caches or shuffled pages, with the inputs of the
// configuration's features and fp8 caches quantized as a user would. The
// curated RuntimeGPU* tests go deeper (graph replays, NaNs, moving pages,
// the fused merge's counters) on fewer configurations.
//
//===----------------------------------------------------------------------===//

#include "KernelMatrix.h"
#include "Runtime/Float8Harness.h"

#include <gtest/gtest.h>

#include <optional>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

class KernelMatrixOnGPU : public testing::TestWithParam<MatrixConfig>,
                          public Float8KernelOnGPU {
protected:
  void SetUp() override {
    openDevice();
    if (IsSkipped())
      return;
    llvm::Expected<CompiledKernels> kernels = compileMatrixConfig(GetParam());
    ASSERT_TRUE(static_cast<bool>(kernels))
        << llvm::toString(kernels.takeError());
    bundle.manifest = Manifest::parse(kernels->manifest);
    for (const auto &[name, ptx] : kernels->ptx)
      bundle.ptx[name] = ptx;
  }

  /// The plan's buffers, with the fp8 caches' scales when there.
  DecodeBuffers buffersOf(const DeviceDecode &decode,
                          const std::optional<Float8Caches> &caches) const {
    DecodeBuffers buffers = decode.getBuffers();
    return caches ? withScales(buffers, caches->scales) : buffers;
  }

  /// The fp8 caches of `inputs` quantized, when the manifest has them.
  template <typename Inputs>
  std::optional<Float8Caches> quantizeIfFloat8(Inputs &inputs) {
    if (!bundle.manifest.hasFloat8Cache())
      return std::nullopt;
    return quantizeCaches(inputs);
  }
};

/// The longest length, odd: 4 splits make chunks of 12 keys, which it is
/// not a multiple of.
constexpr int32_t kMaxLength = 45;

/// The longest, none, one key, and fewer keys than splits.
const std::vector<int32_t> kLengths = {kMaxLength, 0, 1, 3};

TEST_P(KernelMatrixOnGPU, MatchesTheReference) {
  SCOPED_TRACE(seedNote());
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  Stream stream(*device);
  if (bundle.manifest.pageSize == 0) {
    DenseInputs inputs = randomDense(batch, kMaxLength, 2.0);
    std::optional<Float8Caches> caches = quantizeIfFloat8(inputs);
    DeviceDecode decode = upload(inputs);
    DecodePlan plan(*device, bundle, buffersOf(decode, caches));
    checkRun(decode, inputs, stream, kLengths, [&] { plan.launch(stream); });
    return;
  }
  PagedInputs inputs =
      randomPaged(batch, kMaxLength, /*unwrittenPages=*/0, 2.0);
  std::optional<Float8Caches> caches = quantizeIfFloat8(inputs);
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, buffersOf(decode, caches));
  checkRun(decode, inputs, stream, shuffledTable(inputs), kLengths,
           [&] { plan.launch(stream); });
}

std::string configName(const testing::TestParamInfo<MatrixConfig> &info) {
  return describe(info.param);
}

INSTANTIATE_TEST_SUITE_P(Matrix, KernelMatrixOnGPU,
                         testing::ValuesIn(getKernelMatrix()), configName);

} // namespace
