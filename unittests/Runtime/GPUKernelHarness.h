//===- GPUKernelHarness.h - Test kernels on a GPU ---------------*- C++ -*-===//
//
// What RuntimeGPUTest and RuntimeGPUFeaturesTest share: a fixture mix-in
// that loads one of the kernels bench/test_kernels.sh compiles onto a GPU
// (skipping with the reason without them or a GPU), random inputs of the
// manifest's dtype over dense or paged caches and their device buffers, and
// runs checked against the float64 reference (with the manifest's window,
// soft-cap, attention sinks and ALiBi).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H
#define FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H

#include "../TestInputs.h"

#include "fd/Reference/Reference.h"
#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace fd::test {

inline Storage getStorage(const std::string &dtype) {
  return dtype == "f32"   ? Storage::F32
         : dtype == "f16" ? Storage::F16
                          : Storage::BF16;
}

/// A non-blocking stream, destroyed with this object.
class Stream {
public:
  explicit Stream(const rt::Device &device) : driver(device.getDriverApi()) {
    rt::check(driver, driver.cuStreamCreate(&stream, rt::kStreamNonBlocking),
              "creating a stream");
  }
  ~Stream() { driver.cuStreamDestroy(stream); }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  operator rt::CUstream() const { return stream; }

  /// Runs `run` (which queues work here) and waits for it.
  void launchAndWait(const std::function<void()> &run) const {
    run();
    rt::check(driver, driver.cuStreamSynchronize(stream),
              "running the kernels");
  }

private:
  const rt::DriverApi &driver;
  rt::CUstream stream = nullptr;
};

/// Random inputs of a decode over dense caches of `batch` sequences of
/// `maxLength` positions, in the manifest's dtype and layout.
struct DenseInputs {
  int64_t batch, maxLength, heads, dim;
  bool isNHD;
  HostTensor query, keys, values;
  /// The attention sinks, [Hq], when the manifest has them; else empty.
  std::vector<float> sinks = {};
  /// The ALiBi slopes, [Hq], when the manifest has them; else empty.
  std::vector<float> alibiSlopes = {};

  /// Index of element `d` of key/value `j` of sequence `b`, KV head `h`.
  size_t at(int64_t b, int64_t j, int64_t h, int64_t d) const {
    return (isNHD ? (b * maxLength + j) * heads + h
                  : (b * heads + h) * maxLength + j) *
               dim +
           d;
  }
};

/// Random inputs of a decode over paged caches: `batch` sequences of
/// `maxPages` pages of `pageSize` positions, pools of `numPages` pages in
/// the manifest's layout of which only the first `writtenPages` reach the
/// device.
struct PagedInputs {
  int64_t batch, pageSize, maxPages, numPages, writtenPages;
  HostTensor query, keys, values;
  /// The attention sinks, [Hq], when the manifest has them; else empty.
  std::vector<float> sinks = {};
  /// The ALiBi slopes, [Hq], when the manifest has them; else empty.
  std::vector<float> alibiSlopes = {};

  int64_t getMaxLength() const { return maxPages * pageSize; }
};

/// A decode's device buffers: the query and caches it reads, the output, lse
/// and lengths of its `batch` sequences and, with paged caches, the block
/// table, with sinks the sinks, with ALiBi the slopes.
struct DeviceDecode {
  rt::DeviceBuffer query, keys, values, output, lse, lengths;
  int64_t batch, maxLength;
  std::optional<rt::DeviceBuffer> table;
  int64_t numPages = 0;
  std::optional<rt::DeviceBuffer> sinks, alibiSlopes;

  rt::DecodeBuffers getBuffers() const {
    rt::DecodeBuffers buffers{query.getAddress(),
                              keys.getAddress(),
                              values.getAddress(),
                              lengths.getAddress(),
                              output.getAddress(),
                              lse.getAddress(),
                              batch,
                              maxLength};
    if (table) {
      buffers.blockTable = table->getAddress();
      buffers.numPages = numPages;
    }
    if (sinks)
      buffers.sinks = sinks->getAddress();
    if (alibiSlopes)
      buffers.alibiSlopes = alibiSlopes->getAddress();
    return buffers;
  }

  /// Overwrites the sinks in device memory (no rebinding: the merge reads
  /// them at every launch).
  void uploadSinks(const std::vector<float> &values) {
    sinks->upload(values.data(), values.size() * sizeof(float));
  }
  /// Overwrites the ALiBi slopes (the partial kernel reads them at every
  /// launch).
  void uploadAlibiSlopes(const std::vector<float> &values) {
    alibiSlopes->upload(values.data(), values.size() * sizeof(float));
  }

  void uploadLengths(const std::vector<int32_t> &live) {
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
  }
  /// Fills the output with NaNs: every element must be written.
  void poisonOutput() {
    std::vector<uint8_t> poison(output.getSize(), 0xFF);
    output.upload(poison.data(), poison.size());
  }
};

/// A fixture mix-in over one of the test kernels bench/test_kernels.sh
/// compiles (FD_TEST_KERNELS=DIR; the full build defaults to its copy) on a
/// GPU (in `make test`: fdemu, FD_CUDA_DRIVER), with random inputs
/// (FD_TEST_SEED=N repeats a run).
class KernelOnGPU : public Seeded {
protected:
  /// Opens the GPU and loads the kernel `name`; skips the test (its SetUp
  /// then returns on IsSkipped()) without FD_TEST_KERNELS or a GPU.
  void load(const std::string &name) {
    const char *root = std::getenv("FD_TEST_KERNELS");
#ifdef FD_DEFAULT_TEST_KERNELS
    if (!root)
      root = FD_DEFAULT_TEST_KERNELS;
#endif
    if (!root)
      GTEST_SKIP() << "FD_TEST_KERNELS is not set (bench/test_kernels.sh "
                      "DIR writes them)";
    try {
      device = std::make_unique<rt::Device>();
    } catch (const rt::CudaError &error) {
      GTEST_SKIP() << "no GPU: " << error.what();
    }
    directory = std::string(root) + "/" + name;
    bundle = rt::KernelBundle::load(directory);
  }

  int64_t rowsOf(int64_t batch) const {
    return batch * bundle.manifest.queryLength * bundle.manifest.numQueryHeads;
  }
  bool isNHD() const { return bundle.manifest.kvLayout == "NHD"; }

  /// Sinks of deviation 2 for every query head when the manifest has them;
  /// else none.
  std::vector<float> randomSinks() {
    std::vector<float> sinks;
    std::normal_distribution<float> distribution(0.0f, 2.0f);
    if (bundle.manifest.withSinks)
      for (int64_t h = 0; h < bundle.manifest.numQueryHeads; ++h)
        sinks.push_back(distribution(random));
    return sinks;
  }

  /// BLOOM's ALiBi slopes 2^(-8 (h + 1) / Hq) when the manifest has ALiBi;
  /// else none.
  std::vector<float> bloomSlopes() const {
    std::vector<float> slopes;
    const int64_t heads = bundle.manifest.numQueryHeads;
    if (bundle.manifest.withAlibi)
      for (int64_t h = 0; h < heads; ++h)
        slopes.push_back(std::exp2(-8.0f * (h + 1) / float(heads)));
    return slopes;
  }

  /// `size` normal values of the given deviation in the manifest's dtype.
  HostTensor randomTensor(size_t size, double deviation) {
    HostTensor tensor(getStorage(bundle.manifest.dtype), size);
    tensor.fillNormal(deviation, random);
    return tensor;
  }

  /// Queries of deviation `queryDeviation`, caches of 1.
  DenseInputs randomDense(int64_t batch, int64_t maxLength,
                          double queryDeviation) {
    const rt::Manifest &manifest = bundle.manifest;
    const int64_t heads = manifest.numKVHeads, dim = manifest.headDim;
    HostTensor query = randomTensor(rowsOf(batch) * dim, queryDeviation);
    HostTensor keys = randomTensor(batch * maxLength * heads * dim, 1.0);
    HostTensor values = randomTensor(keys.values.size(), 1.0);
    return {batch,         maxLength,        heads,           dim,
            isNHD(),       std::move(query), std::move(keys), std::move(values),
            randomSinks(), bloomSlopes()};
  }

  /// Sequences of at least `minLength` positions, 5 spare pages and, past
  /// them, `unwrittenPages` pages that are never uploaded; queries of
  /// deviation `queryDeviation`, caches of 1.
  PagedInputs randomPaged(int64_t batch, int64_t minLength,
                          int64_t unwrittenPages, double queryDeviation) {
    const rt::Manifest &manifest = bundle.manifest;
    const int64_t pageSize = manifest.pageSize;
    const int64_t maxPages = (minLength + pageSize - 1) / pageSize;
    const int64_t writtenPages = batch * maxPages + 5;
    const int64_t numPages = writtenPages + unwrittenPages;
    const size_t poolSize =
        numPages * pageSize * manifest.numKVHeads * manifest.headDim;
    HostTensor query =
        randomTensor(rowsOf(batch) * manifest.headDim, queryDeviation);
    HostTensor keys = randomTensor(poolSize, 1.0);
    HostTensor values = randomTensor(poolSize, 1.0);
    return {batch,         pageSize,         maxPages,        numPages,
            writtenPages,  std::move(query), std::move(keys), std::move(values),
            randomSinks(), bloomSlopes()};
  }

  /// Copies the dense inputs (and sinks) to the device, and allocates the
  /// output, lse and lengths.
  DeviceDecode upload(const DenseInputs &inputs) const {
    return upload(inputs.query, inputs.keys, inputs.values, inputs.sinks,
                  inputs.alibiSlopes, inputs.batch, inputs.maxLength,
                  inputs.keys.bytes.size());
  }

  /// Copies the query, the written pages of the pools (and the sinks) to
  /// the device, and allocates the block table, output, lse and lengths.
  DeviceDecode upload(const PagedInputs &inputs) const {
    size_t pageBytes = inputs.keys.bytes.size() / inputs.numPages;
    DeviceDecode decode =
        upload(inputs.query, inputs.keys, inputs.values, inputs.sinks,
               inputs.alibiSlopes, inputs.batch, inputs.getMaxLength(),
               inputs.writtenPages * pageBytes);
    decode.table.emplace(*device,
                         inputs.batch * inputs.maxPages * sizeof(int32_t));
    decode.numPages = inputs.numPages;
    return decode;
  }

  /// A block table of distinct written pages, shuffled.
  std::vector<int32_t> shuffledTable(const PagedInputs &inputs) {
    std::vector<int32_t> table(inputs.writtenPages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), random);
    table.resize(inputs.batch * inputs.maxPages);
    return table;
  }

  /// The float64 reference, with the manifest's window and soft-cap,
  /// `sinks` and ALiBi `slopes` (none when empty), over caches of `maxLength`
  /// positions (NHD when `isNHD`, else HND).
  void reference(const HostTensor &query, const std::vector<double> &keys,
                 const std::vector<double> &values,
                 const std::vector<float> &sinks,
                 const std::vector<float> &slopes,
                 const std::vector<int32_t> &lengths, int64_t maxLength,
                 bool isNHD, std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    const rt::Manifest &manifest = bundle.manifest;
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
    std::vector<double> sinkValues(sinks.begin(), sinks.end());
    if (!sinks.empty())
      problem.sinks = sinkValues.data();
    std::vector<double> slopeValues(slopes.begin(), slopes.end());
    if (!slopes.empty())
      problem.alibiSlopes = slopeValues.data();
    reference::attention(problem, expected, expectedLse);
  }

  void reference(const DenseInputs &inputs, const std::vector<int32_t> &live,
                 std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    reference(inputs.query, inputs.keys.values, inputs.values.values,
              inputs.sinks, inputs.alibiSlopes, live, inputs.maxLength,
              inputs.isNHD, expected, expectedLse);
  }

  /// The reference over the logical caches block table `table` makes of the
  /// pools: entries clamp into the pool, as the kernels do
  /// (docs/KernelABI.md); pages that were never uploaded hold NaN.
  void reference(const PagedInputs &inputs, const std::vector<int32_t> &table,
                 const std::vector<int32_t> &live,
                 std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    const int64_t pageSize = inputs.pageSize, maxPages = inputs.maxPages;
    const int64_t maxLength = inputs.getMaxLength();
    const int64_t heads = bundle.manifest.numKVHeads;
    const int64_t dim = bundle.manifest.headDim;
    std::vector<double> keys(inputs.batch * maxLength * heads * dim),
        values(keys.size());
    for (int64_t b = 0; b < inputs.batch; ++b)
      for (int64_t j = 0; j < maxLength; ++j)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t page = std::clamp<int64_t>(table[b * maxPages + j / pageSize],
                                             0, inputs.numPages - 1);
          int64_t slot = j % pageSize;
          int64_t from = (isNHD() ? (page * pageSize + slot) * heads + h
                                  : (page * heads + h) * pageSize + slot) *
                         dim;
          int64_t to = ((b * maxLength + j) * heads + h) * dim;
          bool written = page < inputs.writtenPages;
          for (int64_t d = 0; d < dim; ++d) {
            keys[to + d] =
                written ? inputs.keys.values[from + d] : std::nan("");
            values[to + d] =
                written ? inputs.values.values[from + d] : std::nan("");
          }
        }
    reference(inputs.query, keys, values, inputs.sinks, inputs.alibiSlopes,
              live, maxLength,
              /*isNHD=*/true, expected, expectedLse);
  }

  /// The output and lse the decode wrote.
  Result download(const DeviceDecode &decode) const {
    int64_t rows = rowsOf(decode.batch);
    Result result{HostTensor(getStorage(bundle.manifest.dtype),
                             rows * bundle.manifest.headDim),
                  std::vector<float>(rows)};
    decode.output.download(result.output.bytes.data(),
                           result.output.bytes.size());
    decode.lse.download(result.lse.data(), rows * sizeof(float));
    return result;
  }

  /// Compares the decode's output and lse with the reference: every element
  /// written, max |out - ref| within 1e-2 (f16/bf16) or 1e-4 (f32) of
  /// max |ref|, rows without keys (the reference's rows of zeros) exactly
  /// zero with lse -inf (or the sink), the lse within 1e-3 relative; NaN
  /// exactly in the rows the reference has NaN.
  void expectMatches(const DeviceDecode &decode,
                     const std::vector<double> &expected,
                     const std::vector<double> &expectedLse) const {
    const int64_t dim = bundle.manifest.headDim, rows = rowsOf(decode.batch);
    Result written = download(decode);
    const HostTensor &result = written.output;
    const std::vector<float> &resultLse = written.lse;
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
      // Only a row without keys has an output of exact zeros: one with a
      // sink keeps its lse (the sink).
      bool seesNoKey = std::all_of(expected.begin() + row * dim,
                                   expected.begin() + (row + 1) * dim,
                                   [](double x) { return x == 0.0; });
      if (seesNoKey) {
        for (int64_t d = 0; d < dim; ++d)
          ASSERT_EQ(result.get(row * dim + d), 0.0)
              << "row " << row << " sees no key, dim " << d;
      }
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

  /// Sets the lengths to `live`, poisons the output, runs `run` (which
  /// queues the decode of `inputs` on `stream`) and compares with the
  /// reference.
  void checkRun(DeviceDecode &decode, const DenseInputs &inputs,
                const Stream &stream, const std::vector<int32_t> &live,
                const std::function<void()> &run) const {
    SCOPED_TRACE(lengthsNote(live));
    decode.uploadLengths(live);
    decode.poisonOutput();
    stream.launchAndWait(run);
    std::vector<double> expected, expectedLse;
    reference(inputs, live, expected, expectedLse);
    expectMatches(decode, expected, expectedLse);
  }

  /// Sets the block table to `table` and the lengths to `live`, runs `run`
  /// (which queues the decode of `inputs` on `stream`) and compares with the
  /// reference, which must not read a page that was never uploaded either.
  void checkRun(DeviceDecode &decode, const PagedInputs &inputs,
                const Stream &stream, const std::vector<int32_t> &table,
                const std::vector<int32_t> &live,
                const std::function<void()> &run) const {
    SCOPED_TRACE(lengthsNote(live));
    decode.table->upload(table.data(), table.size() * sizeof(int32_t));
    decode.uploadLengths(live);
    stream.launchAndWait(run);
    std::vector<double> expected, expectedLse;
    reference(inputs, table, live, expected, expectedLse);
    for (double x : expectedLse)
      ASSERT_FALSE(std::isnan(x)) << "the reference read an unwritten page";
    expectMatches(decode, expected, expectedLse);
  }

  std::unique_ptr<rt::Device> device;
  rt::KernelBundle bundle;
  /// The kernel's directory (manifest.json, PTX).
  std::string directory;

private:
  /// Copies the query and the caches (of each, its first `cacheBytes`
  /// bytes: the rest stays unwritten) to the device, and allocates the
  /// output, lse and lengths of `batch` sequences.
  DeviceDecode upload(const HostTensor &query, const HostTensor &keys,
                      const HostTensor &values, const std::vector<float> &sinks,
                      const std::vector<float> &slopes, int64_t batch,
                      int64_t maxLength, size_t cacheBytes) const {
    auto copy = [&](const HostTensor &tensor, size_t bytes) {
      rt::DeviceBuffer buffer(*device, tensor.bytes.size());
      buffer.upload(tensor.bytes.data(), bytes);
      return buffer;
    };
    int64_t rows = rowsOf(batch);
    DeviceDecode decode{
        copy(query, query.bytes.size()),
        copy(keys, cacheBytes),
        copy(values, cacheBytes),
        rt::DeviceBuffer(*device, rows * bundle.manifest.headDim *
                                      query.getElementSize()),
        rt::DeviceBuffer(*device, rows * sizeof(float)),
        rt::DeviceBuffer(*device, batch * sizeof(int32_t)),
        batch,
        maxLength};
    if (!sinks.empty()) {
      decode.sinks.emplace(*device, sinks.size() * sizeof(float));
      decode.uploadSinks(sinks);
    }
    if (!slopes.empty()) {
      decode.alibiSlopes.emplace(*device, slopes.size() * sizeof(float));
      decode.uploadAlibiSlopes(slopes);
    }
    return decode;
  }

  static std::string lengthsNote(const std::vector<int32_t> &live) {
    std::string note = "lengths";
    for (int32_t length : live)
      note += " " + std::to_string(length);
    return note;
  }
};

} // namespace fd::test

#endif // FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H
