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
#include "Runtime/LaunchCounters.h"

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

/// Split-value tiles (KernelABI.md): their stages' rows lie so that the
/// warps' K and V reads and the block's copies meet distinct banks.
class SplitValueTileBanks : public KernelMatrixOnGPU {};

TEST_P(SplitValueTileBanks, TheTokenLoopMeetsDistinctBanks) {
  // On fdemu, whose launch counters count the passes that bank conflicts
  // add: the checked run of one sequence at two lengths (2 and 8 steps of 8
  // keys a split) costs the same conflicts, those of the work outside the
  // token loop (the state's publication); the loop adds none.
  std::optional<LaunchCounters> launchCounters = LaunchCounters::find();
  if (!launchCounters)
    GTEST_SKIP() << "not on fdemu: no launch counters";
  SCOPED_TRACE(seedNote());
  constexpr int32_t kSplits = 4, kStepKeys = 8;
  Stream stream(*device);
  auto partialKernelConflicts = [&](int32_t steps) {
    const int32_t length = kSplits * kStepKeys * steps;
    DenseInputs inputs = randomDense(1, length, 2.0);
    std::optional<Float8Caches> caches = quantizeIfFloat8(inputs);
    DeviceDecode decode = upload(inputs);
    DecodePlan plan(*device, bundle, buffersOf(decode, caches));
    return launchCounters
        ->ofFirstLaunch([&] {
          checkRun(decode, inputs, stream, {length},
                   [&] { plan.launch(stream); });
        })
        ->sharedBankConflicts;
  };
  EXPECT_EQ(partialKernelConflicts(8), partialKernelConflicts(2));
}

/// The row layouts of the split-value tile: MLA's latent rows (D_v = 512:
/// a lane's V reads of a key take two 16-byte passes) in f16 and bf16,
/// Gemma 4's values of their own, D_v of 128 (8-byte V reads) and 256
/// (16-byte); fp8 rows (16 bytes apart modulo 128) with per-token scales,
/// over e4m3 MLA (36 pieces a key: a copy's pass takes a piece of each key)
/// and e5m2 values of their own.
std::vector<MatrixConfig> splitValueRowLayouts() {
  auto make = [](ElementType type, int64_t headDim, int64_t valueHeadDim,
                 bool sharedKV, int64_t groupSize) {
    MatrixConfig config{type, headDim,          groupSize, 1,
                        0,    CacheLayout::NHD, "sm_90"};
    config.valueHeadDim = valueHeadDim;
    config.sharedKV = sharedKV;
    config.suite = "Banks";
    return config;
  };
  auto overFloat8 = [](MatrixConfig config, KVCacheType format) {
    config.kvCacheType = format;
    config.kvScale = KVScaleGranularity::TokenHead;
    return config;
  };
  return {make(ElementType::BF16, 576, 512, true, 16),
          make(ElementType::F16, 576, 512, true, 32),
          make(ElementType::BF16, 512, 512, false, 8),
          make(ElementType::F16, 192, 128, false, 4),
          make(ElementType::F16, 576, 256, true, 16),
          overFloat8(make(ElementType::BF16, 576, 512, true, 16),
                     KVCacheType::E4M3),
          overFloat8(make(ElementType::F16, 512, 512, false, 8),
                     KVCacheType::E5M2)};
}

/// A chunk's blocks merged in their cluster (ClusterMerge.cpp) each write
/// runs of the chunk's partial rows that start and end on 32-byte sectors:
/// no sector of them is left for two blocks' stores to share (which
/// fdemu's DRAM term counts twice, and a GPU's L2 must merge).
class ClusterPartialStores : public KernelMatrixOnGPU {};

TEST_P(ClusterPartialStores, FillWholeSectors) {
  std::optional<LaunchCounters> launchCounters = LaunchCounters::find();
  if (!launchCounters)
    GTEST_SKIP() << "not on fdemu: no launch counters";
  SCOPED_TRACE(seedNote());
  Stream stream(*device);
  DenseInputs inputs = randomDense(1, kMaxLength, 2.0);
  DeviceDecode decode = upload(inputs);
  DecodePlan plan(*device, bundle, buffersOf(decode, std::nullopt));
  std::unique_ptr<FdemuCounters> partialKernel =
      launchCounters->ofFirstLaunch([&] {
        checkRun(decode, inputs, stream, {kMaxLength},
                 [&] { plan.launch(stream); });
      });
  // Each chunk's rows (a KV head's) of D_v f32 and their lses, each lse at
  // worst a sector alone.
  const Manifest &manifest = bundle.manifest;
  const uint64_t lses =
      manifest.numQueryHeads * manifest.queryLength * manifest.numSplits;
  const uint64_t rowBytes = lses * manifest.valueHeadDim * 4;
  EXPECT_EQ(partialKernel->globalStoreBytes, rowBytes + 4 * lses);
  EXPECT_LE(32 * partialKernel->total.globalStoreSectors, rowBytes + 32 * lses);
}

/// MLA's latent rows (D_v = 512) over clusters of 8 and 4 blocks: 16 and
/// 32 groups of 4 dims a block; f32 rows of 128 on CUDA cores over 3: 12
/// groups a block (11 would end a block's run mid-sector), the last block
/// 8.
std::vector<MatrixConfig> clusteredRows() {
  auto make = [](ElementType type, int64_t headDim, int64_t groupSize,
                 int64_t clusterCtas) {
    MatrixConfig config{type, headDim,          groupSize, 1,
                        0,    CacheLayout::NHD, "sm_90"};
    config.clusterCtas = clusterCtas;
    config.suite = "Stores";
    return config;
  };
  std::vector<MatrixConfig> params;
  for (int64_t clusterCtas : {8, 4}) {
    params.push_back(make(ElementType::BF16, 576, 16, clusterCtas));
    params.back().valueHeadDim = 512;
    params.back().sharedKV = true;
  }
  params.push_back(make(ElementType::F32, 128, 4, 3));
  return params;
}

std::string configName(const testing::TestParamInfo<MatrixConfig> &info) {
  return describe(info.param);
}

INSTANTIATE_TEST_SUITE_P(Matrix, KernelMatrixOnGPU,
                         testing::ValuesIn(getKernelMatrix()), configName);
INSTANTIATE_TEST_SUITE_P(Kernels, SplitValueTileBanks,
                         testing::ValuesIn(splitValueRowLayouts()), configName);
INSTANTIATE_TEST_SUITE_P(Kernels, ClusterPartialStores,
                         testing::ValuesIn(clusteredRows()), configName);

} // namespace
