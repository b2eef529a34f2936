//===- GPUKernelHarness.h - Test kernels on a GPU ---------------*- C++ -*-===//
//
// What the RuntimeGPU*Test files share: a fixture mix-in that loads one of
// the kernels bench/test_kernels.sh compiles onto a GPU (skipping with the
// reason without them or a GPU), random inputs of the manifest's dtype over
// dense or paged caches with the inputs of its features (sinks, ALiBi
// slopes, per-sequence query lengths) and their device buffers
// (GPUDecodeInputs.h), and runs checked against the float64 reference.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H
#define FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H

#include "GPUDecodeInputs.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace flashdecode::test {

/// A test kernel and the form it must have been compiled to (the parameter
/// of the suites that run each kernel form).
struct KernelCase {
  const char *name;
  bool tensorCores;
};

inline void PrintTo(const KernelCase &kernel, std::ostream *os) {
  *os << kernel.name;
}

/// A test's name for its kernel case: the kernel's name (any case type with
/// a `name`).
template <typename Case>
std::string caseName(const testing::TestParamInfo<Case> &info) {
  return info.param.name;
}

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
    openDevice();
    if (testing::Test::IsSkipped())
      return;
    directory = std::string(root) + "/" + name;
    bundle = rt::KernelBundle::load(directory);
  }

  /// Opens the GPU; skips the test (the caller returns on IsSkipped())
  /// without one.
  void openDevice() {
    try {
      device = std::make_unique<rt::Device>();
    } catch (const rt::CudaError &error) {
      GTEST_SKIP() << "no GPU: " << error.what();
    }
  }

  /// load(name), then fails unless the kernel was compiled to the expected
  /// form (the manifest's math_units): a test of one form must not pass on
  /// the other. The caller returns on IsSkipped() or HasFatalFailure().
  void loadKernelForm(const std::string &name, bool tensorCores) {
    load(name);
    if (testing::Test::IsSkipped())
      return;
    std::ifstream file(directory + "/manifest.json");
    std::stringstream text;
    text << file.rdbuf();
    ASSERT_EQ(text.str().find("\"tensor_cores\"") != std::string::npos,
              tensorCores)
        << name << " was compiled to the other kernel form";
  }

  int64_t rowsOf(int64_t batch) const {
    return batch * bundle.manifest.queryLength * bundle.manifest.numQueryHeads;
  }
  /// The elements of a value cache of `cacheRows` rows: none where the
  /// values are the keys' (Manifest::sharedKV).
  size_t valueElementsOf(size_t cacheRows) const {
    return bundle.manifest.sharedKV ? 0
                                    : cacheRows * bundle.manifest.valueHeadDim;
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

  /// Per-sequence query lengths when the manifest has them, cycling through
  /// Lq, 0, 1, ..., Lq - 1 over the batch; else none.
  std::vector<int32_t> cyclingQueryLens(int64_t batch) const {
    std::vector<int32_t> lengths;
    const int64_t queryLength = bundle.manifest.queryLength;
    if (bundle.manifest.withQueryLens)
      for (int64_t b = 0; b < batch; ++b)
        lengths.push_back((b + queryLength) % (queryLength + 1));
    return lengths;
  }

  /// With a sharded cache, its last rank (which holds the least of a
  /// sequence); else none.
  std::vector<int32_t> lastShardRank() const {
    if (!bundle.manifest.kvShardWorld)
      return {};
    return {static_cast<int32_t>(bundle.manifest.kvShardWorld - 1)};
  }

  /// The inputs of the manifest's features for `batch` sequences.
  FeatureInputs defaultFeatures(int64_t batch) {
    return {randomSinks(), bloomSlopes(), cyclingQueryLens(batch),
            lastShardRank()};
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
    HostTensor values =
        randomTensor(valueElementsOf(batch * maxLength * heads), 1.0);
    return {batch,
            maxLength,
            heads,
            dim,
            isNHD(),
            std::move(query),
            std::move(keys),
            std::move(values),
            defaultFeatures(batch),
            manifest.valueHeadDim};
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
    const size_t poolRows = numPages * pageSize * manifest.numKVHeads;
    HostTensor query =
        randomTensor(rowsOf(batch) * manifest.headDim, queryDeviation);
    HostTensor keys = randomTensor(poolRows * manifest.headDim, 1.0);
    HostTensor values = randomTensor(valueElementsOf(poolRows), 1.0);
    return {batch,           pageSize,          maxPages,
            numPages,        writtenPages,      std::move(query),
            std::move(keys), std::move(values), defaultFeatures(batch)};
  }

  /// Copies the dense inputs to the device (of the caches only the first
  /// `writtenSequences` sequences' keys and values, the whole batch by
  /// default: the rest stays unwritten), and allocates the output, lse and
  /// lengths.
  DeviceDecode upload(const DenseInputs &inputs,
                      std::optional<int64_t> writtenSequences = {}) const {
    // The sequence is the outermost dimension in both layouts.
    const int64_t written = writtenSequences.value_or(inputs.batch);
    return upload(inputs.query, inputs.keys, inputs.values, inputs.features,
                  inputs.batch, inputs.maxLength, written, inputs.batch);
  }

  /// Copies the query and the written pages of the pools to the device, and
  /// allocates the block table, output, lse and lengths.
  DeviceDecode upload(const PagedInputs &inputs) const {
    DeviceDecode decode = upload(
        inputs.query, inputs.keys, inputs.values, inputs.features, inputs.batch,
        inputs.getMaxLength(), inputs.writtenPages, inputs.numPages);
    decode.table.emplace(*device,
                         inputs.batch * inputs.maxPages * sizeof(int32_t));
    decode.numPages = inputs.numPages;
    return decode;
  }

  /// A block table of distinct written pages, shuffled; of top-k lists
  /// (Manifest::topK), every third entry a hole (-1).
  std::vector<int32_t> shuffledTable(const PagedInputs &inputs) {
    std::vector<int32_t> table(inputs.writtenPages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), random);
    table.resize(inputs.batch * inputs.maxPages);
    if (bundle.manifest.topK)
      for (size_t i = 1; i < table.size(); i += 3)
        table[i] = -1;
    return table;
  }

  /// The float64 reference of the decode of `inputs` at lengths `live`.
  void reference(const DenseInputs &inputs, const std::vector<int32_t> &live,
                 std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    referenceAttention(bundle.manifest, inputs.query, inputs.keys.values,
                       inputs.values.values, inputs.features, live,
                       inputs.maxLength, inputs.isNHD, expected, expectedLse);
  }

  /// The reference over the logical caches block table `table` makes of the
  /// pools (gatherPages: pages that were never uploaded hold NaN).
  void reference(const PagedInputs &inputs, const std::vector<int32_t> &table,
                 const std::vector<int32_t> &live,
                 std::vector<double> &expected,
                 std::vector<double> &expectedLse) const {
    std::vector<double> keys, values;
    gatherPages(inputs, table, bundle.manifest.numKVHeads,
                bundle.manifest.headDim, bundle.manifest.valueHeadDim, isNHD(),
                keys, values);
    // Of top-k lists, the positions of negative entries are no keys.
    std::vector<uint8_t> holes;
    if (bundle.manifest.topK)
      for (int64_t b = 0; b < inputs.batch; ++b)
        for (int64_t j = 0; j < inputs.getMaxLength(); ++j)
          holes.push_back(
              table[b * inputs.maxPages + j / inputs.pageSize] < 0);
    referenceAttention(bundle.manifest, inputs.query, keys, values,
                       inputs.features, live, inputs.getMaxLength(),
                       /*isNHD=*/true, expected, expectedLse,
                       holes.empty() ? nullptr : holes.data());
  }

  /// The output and lse the decode wrote.
  Result download(const DeviceDecode &decode) const {
    int64_t rows = rowsOf(decode.batch);
    Result result{HostTensor(getStorage(bundle.manifest.dtype),
                             rows * bundle.manifest.valueHeadDim),
                  std::vector<float>(rows)};
    decode.output.download(result.output.bytes.data(),
                           result.output.bytes.size());
    decode.lse.download(result.lse.data(), rows * sizeof(float));
    return result;
  }

  /// Compares the decode's output and lse with the reference: every element
  /// written, max |out - ref| within 1e-2 (f16/bf16) or 1e-4 (f32) of
  /// max |ref|, rows without keys (the reference's rows of zeros: padding
  /// tokens' too) exactly zero with lse -inf (or the sink), the lse within
  /// 1e-3 relative; NaN exactly in the rows the reference has NaN.
  void expectMatches(const DeviceDecode &decode,
                     const std::vector<double> &expected,
                     const std::vector<double> &expectedLse) const {
    const int64_t dim = bundle.manifest.valueHeadDim;
    const int64_t rows = rowsOf(decode.batch);
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

  /// Writes the lengths `live` and `inputs`' feature inputs to the device,
  /// poisons the output, runs `run` (which queues the decode of `inputs` on
  /// `stream`) and compares with the reference.
  void checkRun(DeviceDecode &decode, const DenseInputs &inputs,
                const Stream &stream, const std::vector<int32_t> &live,
                const std::function<void()> &run) const {
    SCOPED_TRACE(runNote(live, inputs.features));
    decode.uploadLengths(live);
    decode.uploadFeatures(inputs.features);
    decode.poisonOutput();
    stream.launchAndWait(run);
    std::vector<double> expected, expectedLse;
    reference(inputs, live, expected, expectedLse);
    expectMatches(decode, expected, expectedLse);
  }

  /// The same with the block table `table`; the reference must not read a
  /// page that was never uploaded either.
  void checkRun(DeviceDecode &decode, const PagedInputs &inputs,
                const Stream &stream, const std::vector<int32_t> &table,
                const std::vector<int32_t> &live,
                const std::function<void()> &run) const {
    SCOPED_TRACE(runNote(live, inputs.features));
    decode.table->upload(table.data(), table.size() * sizeof(int32_t));
    decode.uploadLengths(live);
    decode.uploadFeatures(inputs.features);
    decode.poisonOutput();
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
  /// Copies the query and the caches (of each, its first `written` of
  /// `parts` sequences or pages: the rest stays unwritten; no value cache
  /// when `values` is empty) and the feature inputs to the device, and
  /// allocates the output, lse and lengths of `batch` sequences.
  DeviceDecode upload(const HostTensor &query, const HostTensor &keys,
                      const HostTensor &values, const FeatureInputs &features,
                      int64_t batch, int64_t maxLength, int64_t written,
                      int64_t parts) const {
    auto copy = [&](const HostTensor &tensor, size_t bytes) {
      rt::DeviceBuffer buffer(*device, tensor.bytes.size());
      buffer.upload(tensor.bytes.data(), bytes);
      return buffer;
    };
    auto copyWritten = [&](const HostTensor &tensor) {
      return copy(tensor, tensor.bytes.size() / parts * written);
    };
    int64_t rows = rowsOf(batch);
    std::optional<rt::DeviceBuffer> valueBuffer;
    if (!values.bytes.empty())
      valueBuffer.emplace(copyWritten(values));
    DeviceDecode decode{
        copy(query, query.bytes.size()),
        copyWritten(keys),
        std::move(valueBuffer),
        rt::DeviceBuffer(*device, rows * bundle.manifest.valueHeadDim *
                                      query.getElementSize()),
        rt::DeviceBuffer(*device, rows * sizeof(float)),
        rt::DeviceBuffer(*device, batch * sizeof(int32_t)),
        batch,
        maxLength};
    decode.allocateFeatures(*device, features);
    return decode;
  }

  /// For SCOPED_TRACE: the lengths and, when there, the query lengths.
  static std::string runNote(const std::vector<int32_t> &live,
                             const FeatureInputs &features) {
    std::string note = "lengths";
    for (int32_t length : live)
      note += " " + std::to_string(length);
    if (!features.queryLens.empty()) {
      note += ", query lengths";
      for (int32_t length : features.queryLens)
        note += " " + std::to_string(length);
    }
    return note;
  }
};

} // namespace flashdecode::test

#endif // FD_UNITTESTS_RUNTIME_GPUKERNELHARNESS_H
