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

#include "fd/Reference/Reference.h"
#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

using namespace fd;
using namespace fd::rt;

namespace {

class RuntimeGPU : public testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    const char *root = std::getenv("FD_TEST_KERNELS");
#ifdef FD_DEFAULT_TEST_KERNELS
    if (!root)
      root = FD_DEFAULT_TEST_KERNELS;
#endif
    if (!root)
      GTEST_SKIP() << "FD_TEST_KERNELS is not set (bench/test_kernels.sh "
                      "DIR writes them)";
    try {
      device = std::make_unique<Device>();
    } catch (const CudaError &error) {
      GTEST_SKIP() << "no GPU: " << error.what();
    }
    bundle = KernelBundle::load(std::string(root) + "/" + GetParam());
  }

  uint16_t encode(float value) const {
    return bundle.manifest.dtype == "bf16" ? reference::floatToBFloat16(value)
                                           : reference::floatToHalf(value);
  }
  double decode(uint16_t bits) const {
    return bundle.manifest.dtype == "bf16" ? reference::bfloat16ToFloat(bits)
                                           : reference::halfToFloat(bits);
  }

  /// Random 16-bit values on the device and the doubles they hold.
  DeviceBuffer randomBuffer(size_t elements, double deviation,
                            std::vector<double> &values) {
    std::normal_distribution<float> distribution(0.0f, deviation);
    std::vector<uint16_t> bits(elements);
    values.resize(elements);
    for (size_t i = 0; i < elements; ++i) {
      bits[i] = encode(distribution(random));
      values[i] = decode(bits[i]);
    }
    DeviceBuffer buffer(*device, elements * 2);
    buffer.upload(bits.data(), elements * 2);
    return buffer;
  }

  /// The float64 reference over NHD caches `keys`/`values` of `maxLength`
  /// positions (HND when `isNHD` is false); fills `expected`, `expectedLse`.
  void reference(const std::vector<double> &query,
                 const std::vector<double> &keys,
                 const std::vector<double> &values,
                 const std::vector<int32_t> &lengths, int64_t maxLength,
                 bool isNHD, std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    const Manifest &manifest = bundle.manifest;
    reference::AttentionProblem problem;
    problem.batch = lengths.size();
    problem.queryLength = manifest.queryLength;
    problem.numQueryHeads = manifest.numQueryHeads;
    problem.numKVHeads = manifest.numKVHeads;
    problem.headDim = manifest.headDim;
    problem.maxLength = maxLength;
    problem.isNHD = isNHD;
    problem.scale = 1.0 / std::sqrt(static_cast<double>(manifest.headDim));
    problem.query = query.data();
    problem.keyCache = keys.data();
    problem.valueCache = values.data();
    problem.lengths = lengths.data();
    reference::attention(problem, expected, expectedLse);
  }

  /// Every element written (finite) and max |out - ref| <= 1e-2 max |ref|.
  void expectClose(const std::vector<uint16_t> &result,
                   const std::vector<double> &expected) const {
    double maxError = 0, maxValue = 0;
    for (size_t i = 0; i < result.size(); ++i) {
      double actual = decode(result[i]);
      ASSERT_TRUE(std::isfinite(actual)) << "element " << i << " unwritten";
      maxError = std::max(maxError, std::abs(actual - expected[i]));
      maxValue = std::max(maxValue, std::abs(expected[i]));
    }
    EXPECT_LE(maxError, 1e-2 * std::max(maxValue, 1e-30));
  }

  std::unique_ptr<Device> device;
  KernelBundle bundle;
  std::mt19937 random{std::random_device{}()};
};

TEST_P(RuntimeGPU, MatchesTheReferenceAndReplaysAsLengthsGrow) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam() << " reads paged caches";
  const int64_t batch = 4, maxLength = 700;
  const int64_t rows = batch * manifest.queryLength * manifest.numQueryHeads;
  std::vector<double> query, keys, values;
  DeviceBuffer queryBuffer = randomBuffer(rows * manifest.headDim, 2.0, query);
  size_t cacheElements =
      batch * maxLength * manifest.numKVHeads * manifest.headDim;
  DeviceBuffer keyBuffer = randomBuffer(cacheElements, 1.0, keys);
  DeviceBuffer valueBuffer = randomBuffer(cacheElements, 1.0, values);
  DeviceBuffer output(*device, rows * manifest.headDim * 2);
  DeviceBuffer lse(*device, rows * sizeof(float));
  DeviceBuffer lengths(*device, batch * sizeof(int32_t));

  DecodeBuffers buffers{queryBuffer.getAddress(),
                        keyBuffer.getAddress(),
                        valueBuffer.getAddress(),
                        lengths.getAddress(),
                        output.getAddress(),
                        lse.getAddress(),
                        batch,
                        maxLength};
  DecodePlan plan(*device, bundle, buffers);
  CUstream stream;
  const DriverApi &driver = device->getDriverApi();
  check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
        "creating a stream");

  auto runAndCheck = [&](const std::vector<int32_t> &live,
                         const std::function<void()> &run) {
    SCOPED_TRACE(testing::Message() << "lengths " << live[0] << " " << live[1]
                                    << " " << live[2] << " " << live[3]);
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
    std::vector<uint16_t> poison(rows * manifest.headDim, 0xFFFF);
    output.upload(poison.data(), poison.size() * 2);
    run();
    check(driver, driver.cuStreamSynchronize(stream), "running the kernels");
    std::vector<uint16_t> result(rows * manifest.headDim);
    std::vector<float> resultLse(rows);
    output.download(result.data(), result.size() * 2);
    lse.download(resultLse.data(), resultLse.size() * sizeof(float));

    std::vector<double> expected, expectedLse;
    reference(query, keys, values, live, maxLength, manifest.kvLayout == "NHD",
              expected, expectedLse);
    expectClose(result, expected);
    for (int64_t row = 0; row < rows; ++row) {
      if (std::isinf(expectedLse[row])) {
        EXPECT_TRUE(std::isinf(resultLse[row]) && resultLse[row] < 0);
        for (int64_t d = 0; d < manifest.headDim; ++d)
          EXPECT_EQ(decode(result[row * manifest.headDim + d]), 0.0);
      } else {
        EXPECT_NEAR(resultLse[row], expectedLse[row],
                    1e-3 * std::max(1.0, std::abs(expectedLse[row])));
      }
    }
  };

  runAndCheck({0, 1, 37, 700}, [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 5; ++step) {
    int32_t grown = 1 + 130 * step;
    auto replayStep = [&] {
      runAndCheck({grown, 3 + step, 0, std::min<int32_t>(700, 299 + grown)},
                  [&] { graph.replay(stream); });
    };
    // The driver's current context is per thread: fdrt makes it current
    // wherever it is used, so a serving loop may replay from any thread.
    if (step == 2)
      std::thread(replayStep).join();
    else
      replayStep();
  }
  driver.cuStreamDestroy(stream);
}

TEST_P(RuntimeGPU, APoisonedKeyGivesNaNNeverAPlausibleAnswer) {
  // A NaN in a live key must reach every row that sees it (as in the float64
  // reference), whatever the split count; a NaN past a sequence's length is
  // never read.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam() << " reads paged caches";
  const int64_t batch = 2, maxLength = 300, heads = manifest.numKVHeads;
  const int64_t dim = manifest.headDim;
  const int64_t rows = batch * manifest.queryLength * manifest.numQueryHeads;
  const bool isNHD = manifest.kvLayout == "NHD";
  std::vector<double> query, keys, values;
  DeviceBuffer queryBuffer = randomBuffer(rows * dim, 2.0, query);
  size_t cacheElements = batch * maxLength * heads * dim;
  randomBuffer(cacheElements, 1.0, keys);
  DeviceBuffer valueBuffer = randomBuffer(cacheElements, 1.0, values);
  auto at = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
    return (isNHD ? (b * maxLength + j) * heads + h
                  : (b * heads + h) * maxLength + j) *
               dim +
           d;
  };
  const std::vector<int32_t> live = {200, 150};
  keys[at(0, 100, 0, 3)] = std::nan("");         // live: poisons head 0
  keys[at(1, 250, heads - 1, 0)] = std::nan(""); // past the length
  std::vector<uint16_t> keyBits(cacheElements);
  for (size_t i = 0; i < cacheElements; ++i)
    keyBits[i] = std::isnan(keys[i])
                     ? (manifest.dtype == "bf16" ? 0x7FC0 : 0x7E00)
                     : encode(static_cast<float>(keys[i]));
  DeviceBuffer keyBuffer(*device, cacheElements * 2);
  keyBuffer.upload(keyBits.data(), cacheElements * 2);
  DeviceBuffer output(*device, rows * dim * 2), lse(*device, rows * 4),
      lengths(*device, batch * sizeof(int32_t));
  lengths.upload(live.data(), live.size() * sizeof(int32_t));
  DecodePlan plan(*device, bundle,
                  {queryBuffer.getAddress(), keyBuffer.getAddress(),
                   valueBuffer.getAddress(), lengths.getAddress(),
                   output.getAddress(), lse.getAddress(), batch, maxLength});
  const DriverApi &driver = device->getDriverApi();
  CUstream stream;
  check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
        "creating a stream");
  plan.launch(stream);
  check(driver, driver.cuStreamSynchronize(stream), "running the kernels");
  driver.cuStreamDestroy(stream);
  std::vector<uint16_t> result(rows * dim);
  std::vector<float> resultLse(rows);
  output.download(result.data(), result.size() * 2);
  lse.download(resultLse.data(), resultLse.size() * sizeof(float));

  std::vector<double> expected, expectedLse;
  reference(query, keys, values, live, maxLength, isNHD, expected, expectedLse);
  const int64_t group = manifest.numQueryHeads / heads;
  int64_t poisonedRows = 0;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t b = row / (manifest.queryLength * manifest.numQueryHeads);
    int64_t kvHead = row % manifest.numQueryHeads / group;
    bool poisoned = b == 0 && kvHead == 0;
    ASSERT_EQ(std::isnan(expectedLse[row]), poisoned) << "row " << row;
    poisonedRows += poisoned;
    EXPECT_EQ(std::isnan(resultLse[row]), poisoned) << "row " << row;
    double maxError = 0, maxValue = 0;
    for (int64_t d = 0; d < dim; ++d) {
      double actual = decode(result[row * dim + d]);
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
  const int64_t batch = 3, pageSize = manifest.pageSize;
  const int64_t maxPages = (700 + pageSize - 1) / pageSize;
  const int64_t maxLength = maxPages * pageSize;
  const int64_t numPages = batch * maxPages + 5;
  const int64_t heads = manifest.numKVHeads, dim = manifest.headDim;
  const int64_t rows = batch * manifest.queryLength * manifest.numQueryHeads;
  const bool isNHD = manifest.kvLayout == "NHD";
  std::vector<double> query, poolKeys, poolValues;
  DeviceBuffer queryBuffer = randomBuffer(rows * dim, 2.0, query);
  DeviceBuffer keyPool =
      randomBuffer(numPages * pageSize * heads * dim, 1.0, poolKeys);
  DeviceBuffer valuePool =
      randomBuffer(numPages * pageSize * heads * dim, 1.0, poolValues);
  DeviceBuffer tableBuffer(*device, batch * maxPages * sizeof(int32_t));
  DeviceBuffer lengths(*device, batch * sizeof(int32_t));
  DeviceBuffer output(*device, rows * dim * 2);
  DeviceBuffer lse(*device, rows * sizeof(float));
  DecodeBuffers buffers{queryBuffer.getAddress(),
                        keyPool.getAddress(),
                        valuePool.getAddress(),
                        lengths.getAddress(),
                        output.getAddress(),
                        lse.getAddress(),
                        batch,
                        maxLength,
                        tableBuffer.getAddress()};
  buffers.numPages = numPages;
  DecodePlan plan(*device, bundle, buffers);
  const DriverApi &driver = device->getDriverApi();
  CUstream stream;
  check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
        "creating a stream");

  // Writes a new shuffled table (sequence 1 sharing sequence 0's first
  // page) and lengths to the device, runs, and checks against attention
  // over the logical caches the table describes.
  auto check = [&](const std::vector<int32_t> &live,
                   const std::function<void()> &run) {
    std::vector<int32_t> pages(numPages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    std::vector<int32_t> table(pages.begin(), pages.begin() + batch * maxPages);
    table[maxPages] = table[0];
    // Entries outside the pool read its first or last page (docs/KernelABI.md),
    // never memory outside it.
    // Sequence 0 (full) reads its second page, sequence 2 its first.
    table[1] = static_cast<int32_t>(numPages + 9);
    table[2 * maxPages] = -3;
    tableBuffer.upload(table.data(), table.size() * sizeof(int32_t));
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
    run();
    rt::check(driver, driver.cuStreamSynchronize(stream),
              "running the kernels");
    std::vector<uint16_t> result(rows * dim);
    output.download(result.data(), result.size() * 2);

    std::vector<double> keys(batch * maxLength * heads * dim),
        values(keys.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < maxLength; ++j)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t page = std::clamp<int64_t>(table[b * maxPages + j / pageSize],
                                             0, numPages - 1);
          int64_t slot = j % pageSize;
          int64_t from = (isNHD ? (page * pageSize + slot) * heads + h
                                : (page * heads + h) * pageSize + slot) *
                         dim;
          int64_t to = ((b * maxLength + j) * heads + h) * dim;
          std::copy_n(&poolKeys[from], dim, &keys[to]);
          std::copy_n(&poolValues[from], dim, &values[to]);
        }
    std::vector<double> expected, expectedLse;
    reference(query, keys, values, live, maxLength, /*isNHD=*/true, expected,
              expectedLse);
    expectClose(result, expected);
  };

  check({static_cast<int32_t>(maxLength), 133, 9},
        [&] { plan.launch(stream); });
  // The graph never changes: pages move and lengths grow in device memory.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step)
    check({static_cast<int32_t>(maxLength) - step, 133 + 97 * step, step},
          [&] { graph.replay(stream); });
  driver.cuStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPU,
                         testing::Values("gqa_f16", "gqa_bf16", "gqa_hnd",
                                         "spec4", "mqa_tiles", "gqa8_d96_spec4",
                                         "gqa6_d64_spec3", "mha_f16"));
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUPaged,
                         testing::Values("paged16", "paged_spec",
                                         "mha_paged16"));

} // namespace
