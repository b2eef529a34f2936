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

#include "fd/Reference/Reference.h"
#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>

using namespace fd;
using namespace fd::rt;

namespace {

/// A test kernel and the form it must have been compiled to.
struct KernelCase {
  const char *name;
  bool tensorCores;
};

void PrintTo(const KernelCase &kernel, std::ostream *os) { *os << kernel.name; }

/// Host elements of the manifest's dtype: the bytes uploaded, the values
/// they hold.
struct HostTensor {
  std::string dtype;
  std::vector<uint8_t> bytes;
  std::vector<double> values;

  HostTensor(std::string type, size_t size)
      : dtype(std::move(type)), bytes(size * (dtype == "f32" ? 4 : 2)),
        values(size) {}

  void set(size_t i, double value) {
    float single = static_cast<float>(value);
    if (dtype == "f32") {
      std::memcpy(&bytes[i * 4], &single, 4);
    } else {
      uint16_t bits = dtype == "bf16" ? reference::floatToBFloat16(single)
                                      : reference::floatToHalf(single);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
    values[i] = get(i);
  }
  double get(size_t i) const {
    if (dtype == "f32") {
      float single;
      std::memcpy(&single, &bytes[i * 4], 4);
      return single;
    }
    uint16_t bits;
    std::memcpy(&bits, &bytes[i * 2], 2);
    return dtype == "bf16" ? reference::bfloat16ToFloat(bits)
                           : reference::halfToFloat(bits);
  }
};

class RuntimeGPUFeatures : public testing::TestWithParam<KernelCase> {
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
    std::string directory = std::string(root) + "/" + GetParam().name;
    bundle = KernelBundle::load(directory);
    std::ifstream file(directory + "/manifest.json");
    std::stringstream text;
    text << file.rdbuf();
    ASSERT_EQ(text.str().find("\"tensor_cores\"") != std::string::npos,
              GetParam().tensorCores)
        << GetParam().name << " was compiled to the other kernel form";
    const Manifest &manifest = bundle.manifest;
    ASSERT_TRUE(manifest.windowLeft > 0 || manifest.logitsSoftCap > 0)
        << GetParam().name << " has neither a window nor a soft-cap";
    const char *fixed = std::getenv("FD_TEST_SEED");
    seed = fixed ? std::strtoul(fixed, nullptr, 10) : std::random_device()();
    random.seed(seed);
    RecordProperty("seed", std::to_string(seed));
  }

  std::string seedNote() const {
    return "seed " + std::to_string(seed) + " (FD_TEST_SEED)";
  }
  int64_t rowsOf(int64_t batch) const {
    return batch * bundle.manifest.queryLength * bundle.manifest.numQueryHeads;
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

  HostTensor randomTensor(size_t size, double deviation) {
    HostTensor tensor(bundle.manifest.dtype, size);
    std::normal_distribution<double> distribution(0.0, deviation);
    for (size_t i = 0; i < size; ++i)
      tensor.set(i, distribution(random));
    return tensor;
  }
  DeviceBuffer upload(const HostTensor &tensor, size_t bytes = 0) {
    DeviceBuffer buffer(*device, tensor.bytes.size());
    buffer.upload(tensor.bytes.data(), bytes ? bytes : tensor.bytes.size());
    return buffer;
  }

  /// The float64 reference with the manifest's window and soft-cap.
  void reference(const HostTensor &query, const std::vector<double> &keys,
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
    problem.windowLeft = manifest.windowLeft;
    problem.logitsSoftCap = manifest.logitsSoftCap;
    problem.query = query.values.data();
    problem.keyCache = keys.data();
    problem.valueCache = values.data();
    problem.lengths = lengths.data();
    reference::attention(problem, expected, expectedLse);
  }

  /// Downloads the output and lse and compares them with the reference:
  /// every element written, max |out - ref| within 1e-2 (f16/bf16) or 1e-4
  /// (f32) of max |ref|, rows without keys zero with lse -inf, the lse
  /// within 1e-3 relative; NaN exactly in the rows the reference has NaN.
  void expectMatches(const DeviceBuffer &output, const DeviceBuffer &lse,
                     int64_t rows, const std::vector<double> &expected,
                     const std::vector<double> &expectedLse) const {
    const int64_t dim = bundle.manifest.headDim;
    HostTensor result(bundle.manifest.dtype, rows * dim);
    std::vector<float> resultLse(rows);
    output.download(result.bytes.data(), result.bytes.size());
    lse.download(resultLse.data(), rows * sizeof(float));
    double maxError = 0, maxValue = 0;
    int64_t worst = 0;
    for (int64_t row = 0; row < rows; ++row) {
      if (std::isnan(expectedLse[row])) {
        EXPECT_TRUE(std::isnan(resultLse[row])) << "row " << row;
        for (int64_t d = 0; d < dim; ++d)
          EXPECT_TRUE(std::isnan(result.get(row * dim + d)))
              << "row " << row << " dim " << d << " should be NaN";
        continue;
      }
      if (std::isinf(expectedLse[row])) {
        EXPECT_TRUE(std::isinf(resultLse[row]) && resultLse[row] < 0)
            << "row " << row << " sees no key: lse " << resultLse[row];
        for (int64_t d = 0; d < dim; ++d)
          ASSERT_EQ(result.get(row * dim + d), 0.0)
              << "row " << row << " sees no key, dim " << d;
        continue;
      }
      EXPECT_NEAR(resultLse[row], expectedLse[row],
                  1e-3 * std::max(1.0, std::abs(expectedLse[row])))
          << "row " << row;
      for (int64_t d = 0; d < dim; ++d) {
        int64_t i = row * dim + d;
        double actual = result.get(i);
        ASSERT_TRUE(std::isfinite(actual)) << "row " << row << " dim " << d;
        if (std::abs(actual - expected[i]) > maxError) {
          maxError = std::abs(actual - expected[i]);
          worst = i;
        }
        maxValue = std::max(maxValue, std::abs(expected[i]));
      }
    }
    double limit = bundle.manifest.dtype == "f32" ? 1e-4 : 1e-2;
    EXPECT_LE(maxError, limit * std::max(maxValue, 1e-30))
        << "worst: row " << worst / dim << " dim " << worst % dim
        << " expected " << expected[worst] << " got " << result.get(worst);
  }

  std::unique_ptr<Device> device;
  KernelBundle bundle;
  unsigned seed = 0;
  std::mt19937 random;
};

/// Runs `run` on `stream` and waits for it.
void launchAndWait(const Device &device, CUstream stream,
                   const std::function<void()> &run) {
  run();
  const DriverApi &driver = device.getDriverApi();
  check(driver, driver.cuStreamSynchronize(stream), "running the kernels");
}

TEST_P(RuntimeGPUFeatures, MatchesTheReferenceAndReplaysAsLengthsGrow) {
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int64_t batch = 5, maxLength = 601, dim = manifest.headDim;
  const int64_t rows = rowsOf(batch);
  const bool isNHD = manifest.kvLayout == "NHD";
  const int64_t window = manifest.windowLeft;
  HostTensor query = randomTensor(rows * dim, queryDeviation());
  size_t cacheSize = batch * maxLength * manifest.numKVHeads * dim;
  HostTensor keys = randomTensor(cacheSize, 1.0);
  HostTensor values = randomTensor(cacheSize, 1.0);
  DeviceBuffer queryBuffer = upload(query), keyBuffer = upload(keys),
               valueBuffer = upload(values);
  DeviceBuffer output(*device, rows * dim * (manifest.dtype == "f32" ? 4 : 2));
  DeviceBuffer lse(*device, rows * sizeof(float));
  DeviceBuffer lengths(*device, batch * sizeof(int32_t));
  DecodePlan plan(*device, bundle,
                  {queryBuffer.getAddress(), keyBuffer.getAddress(),
                   valueBuffer.getAddress(), lengths.getAddress(),
                   output.getAddress(), lse.getAddress(), batch, maxLength});
  const DriverApi &driver = device->getDriverApi();
  CUstream stream;
  check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
        "creating a stream");

  auto runAndCheck = [&](const std::vector<int32_t> &live,
                         const std::function<void()> &run) {
    std::stringstream shown;
    for (int32_t length : live)
      shown << length << " ";
    SCOPED_TRACE("lengths " + shown.str());
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
    std::vector<uint8_t> poison(output.getSize(), 0xFF); // NaNs
    output.upload(poison.data(), poison.size());
    launchAndWait(*device, stream, run);
    std::vector<double> expected, expectedLse;
    reference(query, keys.values, values.values, live, maxLength, isNHD,
              expected, expectedLse);
    expectMatches(output, lse, rows, expected, expectedLse);
  };

  // Lengths 0, 1, shorter than the window (and than Lq for W = 3), odd and
  // the full cache.
  int32_t shorter = window > 1 ? window - 1 : 2;
  runAndCheck({0, 1, shorter, 299, static_cast<int32_t>(maxLength)},
              [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 0; step < 4; ++step) {
    int32_t grown = 1 + 131 * step;
    int32_t aroundWindow = static_cast<int32_t>(window) - 1 + step;
    runAndCheck({grown, 3 + step, std::max(0, aroundWindow), 0,
                 std::min<int32_t>(maxLength, 300 + grown)},
                [&] { graph.replay(stream); });
  }
  driver.cuStreamDestroy(stream);
}

TEST_P(RuntimeGPUFeatures, NaNsReachTheRowsThatSeeThemOnly) {
  // A NaN in the key each sequence's last token sees last poisons exactly
  // the rows the reference poisons; NaNs in the keys and values right before
  // the first attended key (with a window), at key 0 and past the length
  // are never read.
  const Manifest &manifest = bundle.manifest;
  ASSERT_EQ(manifest.pageSize, 0) << GetParam().name << " reads paged caches";
  SCOPED_TRACE(seedNote());
  const int64_t batch = 3, maxLength = 300, dim = manifest.headDim;
  const int64_t heads = manifest.numKVHeads, rows = rowsOf(batch);
  const bool isNHD = manifest.kvLayout == "NHD";
  const std::vector<int32_t> live = {200, 197, 251};
  HostTensor query = randomTensor(rows * dim, queryDeviation());
  size_t cacheSize = batch * maxLength * heads * dim;
  HostTensor keys = randomTensor(cacheSize, 1.0);
  HostTensor values = randomTensor(cacheSize, 1.0);
  auto at = [&](int64_t b, int64_t j, int64_t h, int64_t d) {
    return (isNHD ? (b * maxLength + j) * heads + h
                  : (b * heads + h) * maxLength + j) *
               dim +
           d;
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
  DeviceBuffer queryBuffer = upload(query), keyBuffer = upload(keys),
               valueBuffer = upload(values);
  DeviceBuffer output(*device, rows * dim * (manifest.dtype == "f32" ? 4 : 2));
  DeviceBuffer lse(*device, rows * 4), lengths(*device, batch * 4);
  lengths.upload(live.data(), live.size() * sizeof(int32_t));
  DecodePlan plan(*device, bundle,
                  {queryBuffer.getAddress(), keyBuffer.getAddress(),
                   valueBuffer.getAddress(), lengths.getAddress(),
                   output.getAddress(), lse.getAddress(), batch, maxLength});
  const DriverApi &driver = device->getDriverApi();
  CUstream stream;
  check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
        "creating a stream");
  launchAndWait(*device, stream, [&] { plan.launch(stream); });
  driver.cuStreamDestroy(stream);

  std::vector<double> expected, expectedLse;
  reference(query, keys.values, values.values, live, maxLength, isNHD, expected,
            expectedLse);
  int64_t poisoned = std::count_if(expectedLse.begin(), expectedLse.end(),
                                   [](double x) { return std::isnan(x); });
  // At least the last token of each poisoned head; never everything.
  ASSERT_GE(poisoned, 2 * manifest.numQueryHeads / heads);
  ASSERT_LT(poisoned, rows);
  expectMatches(output, lse, rows, expected, expectedLse);
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
  const int64_t maxPages = (700 + pageSize - 1) / pageSize;
  const int64_t maxLength = maxPages * pageSize;
  const int64_t writtenPages = batch * maxPages + 5,
                numPages = writtenPages + 2;
  const int64_t heads = manifest.numKVHeads, dim = manifest.headDim;
  const int64_t rows = rowsOf(batch);
  const bool isNHD = manifest.kvLayout == "NHD";
  const size_t pageElements = pageSize * heads * dim;
  HostTensor query = randomTensor(rows * dim, queryDeviation());
  HostTensor poolKeys = randomTensor(numPages * pageElements, 1.0);
  HostTensor poolValues = randomTensor(numPages * pageElements, 1.0);
  const size_t writtenBytes = writtenPages * pageElements *
                              (poolKeys.bytes.size() / poolKeys.values.size());
  DeviceBuffer queryBuffer = upload(query);
  DeviceBuffer keyPool = upload(poolKeys, writtenBytes);
  DeviceBuffer valuePool = upload(poolValues, writtenBytes);
  DeviceBuffer tableBuffer(*device, batch * maxPages * sizeof(int32_t));
  DeviceBuffer lengths(*device, batch * sizeof(int32_t));
  DeviceBuffer output(*device, rows * dim * (manifest.dtype == "f32" ? 4 : 2));
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

  auto runAndCheck = [&](const std::vector<int32_t> &live,
                         const std::function<void()> &run) {
    SCOPED_TRACE(testing::Message()
                 << "lengths " << live[0] << " " << live[1] << " " << live[2]);
    std::vector<int32_t> pages(writtenPages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    std::vector<int32_t> table(pages.begin(), pages.begin() + batch * maxPages);
    int64_t skipped = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t page = 0; (page + 1) * pageSize <= firstAttendedKey(live[b]);
           ++page, ++skipped)
        table[b * maxPages + page] = writtenPages + page % 2;
    EXPECT_GT(skipped, 0) << "no page lies before a window";
    tableBuffer.upload(table.data(), table.size() * sizeof(int32_t));
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
    launchAndWait(*device, stream, run);

    // The logical caches; unwritten pages hold NaN (the reference must not
    // read them either).
    std::vector<double> keys(batch * maxLength * heads * dim),
        values(keys.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < maxLength; ++j)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t page = table[b * maxPages + j / pageSize];
          int64_t slot = j % pageSize;
          int64_t from = (isNHD ? (page * pageSize + slot) * heads + h
                                : (page * heads + h) * pageSize + slot) *
                         dim;
          int64_t to = ((b * maxLength + j) * heads + h) * dim;
          bool written = page < writtenPages;
          for (int64_t d = 0; d < dim; ++d) {
            keys[to + d] = written ? poolKeys.values[from + d] : std::nan("");
            values[to + d] =
                written ? poolValues.values[from + d] : std::nan("");
          }
        }
    std::vector<double> expected, expectedLse;
    reference(query, keys, values, live, maxLength, /*isNHD=*/true, expected,
              expectedLse);
    for (double x : expectedLse)
      ASSERT_FALSE(std::isnan(x)) << "the reference read an unwritten page";
    expectMatches(output, lse, rows, expected, expectedLse);
  };

  runAndCheck({static_cast<int32_t>(maxLength), 133, 1},
              [&] { plan.launch(stream); });
  Graph graph = Graph::capture(*device, {&plan}, stream);
  for (int32_t step = 1; step <= 3; ++step)
    runAndCheck({static_cast<int32_t>(maxLength) - 5 * step, 133 + 97 * step,
                 step == 3 ? 0 : 13 * step},
                [&] { graph.replay(stream); });
  driver.cuStreamDestroy(stream);
}

std::string caseName(const testing::TestParamInfo<KernelCase> &info) {
  return info.param.name;
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
                         caseName);
INSTANTIATE_TEST_SUITE_P(Kernels, RuntimeGPUFeaturesPaged,
                         testing::Values(KernelCase{"paged16_win21_cap20_tc",
                                                    true}),
                         caseName);

} // namespace
