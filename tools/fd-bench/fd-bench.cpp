//===- fd-bench.cpp - Decode attention on the GPU: correct, then fast -----===//
//
//   fd-bench --kernels DIR [--csv FILE] [--quick]
//
// DIR holds what bench/prepare_kernels.sh had fd-compile write, one
// directory per shape and split mode: DIR/<config>/B<batch>_L<len>_<auto|s1>.
// For every shape: checks the output against a float64 reference (a subset
// of sizes; output poisoned first), then times the partial + merge launch
// with CUDA events (median, KV buffers rotated when they fit in L2), auto
// splits vs one split, and a 32-layer decode step eager vs CUDA-graph
// replay. Prints a table, writes CSV. Runtime only: no MLIR. Without a GPU
// it says so on one line and exits with 2.
//
//===----------------------------------------------------------------------===//

#include "fd/Reference/Reference.h"
#include "fd/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace fd;
using namespace fd::rt;

namespace {

constexpr int kNoGPUExitCode = 2;
constexpr int kLayers = 32;
constexpr int kL2CacheSizeAttribute = 38; // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

struct ModelConfig {
  const char *name;
  int64_t numQueryHeads, numKVHeads, headDim;
};
const ModelConfig kConfigs[] = {{"llama3-8b", 32, 8, 128},
                                {"mha", 32, 32, 128}};

/// Median of the elapsed times of `iterations` runs of `body`, each timed
/// with a pair of events on `stream`, in microseconds.
double timeMedian(const DriverApi &driver, CUstream stream, int iterations,
                  const std::function<void(int)> &body) {
  CUevent start, end;
  check(driver, driver.cuEventCreate(&start, 0), "creating an event");
  check(driver, driver.cuEventCreate(&end, 0), "creating an event");
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    check(driver, driver.cuEventRecord(start, stream), "recording an event");
    body(i);
    check(driver, driver.cuEventRecord(end, stream), "recording an event");
    check(driver, driver.cuEventSynchronize(end), "waiting for an event");
    float milliseconds = 0;
    check(driver, driver.cuEventElapsedTime(&milliseconds, start, end),
          "reading an event time");
    times.push_back(milliseconds * 1000.0);
  }
  driver.cuEventDestroy(start);
  driver.cuEventDestroy(end);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

class Bench {
public:
  Bench(Device &device, std::string kernelRoot, bool quick)
      : device(device), driver(device.getDriverApi()),
        kernelRoot(std::move(kernelRoot)), quick(quick) {
    check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
          "creating a stream");
    int l2 = 0;
    driver.cuDeviceGetAttribute(&l2, kL2CacheSizeAttribute, 0);
    l2Bytes = l2 > 0 ? l2 : 50 << 20;
  }
  ~Bench() { driver.cuStreamDestroy(stream); }

  /// Device-to-device copy bandwidth (bytes read + written per second).
  double measureCopyBandwidth() {
    size_t bytes = size_t(1) << 30;
    DeviceBuffer source(device, bytes), destination(device, bytes);
    double us = timeMedian(driver, stream, 20, [&](int) {
      check(driver,
            driver.cuMemcpyDtoDAsync(destination.getAddress(),
                                     source.getAddress(), bytes, stream),
            "copying device memory");
    });
    copyBandwidth = 2.0 * bytes / (us * 1e-6);
    return copyBandwidth;
  }

  /// Fills `buffer` with random 16-bit floats: a host-made block repeated on
  /// the device (fully random when the buffer is at most the block).
  void fillRandom(DeviceBuffer &buffer, double deviation,
                  std::vector<double> *values = nullptr) {
    size_t elements = buffer.getSize() / 2;
    size_t blockElements = std::min<size_t>(elements, 32 << 20);
    std::vector<uint16_t> block(blockElements);
    std::normal_distribution<float> distribution(0.0f, deviation);
    for (uint16_t &element : block)
      element = reference::floatToHalf(distribution(random));
    if (values) {
      values->resize(elements);
      for (size_t i = 0; i < elements; ++i)
        (*values)[i] = reference::halfToFloat(block[i % blockElements]);
    }
    buffer.upload(block.data(), blockElements * 2);
    for (size_t filled = blockElements; filled < elements;) {
      size_t chunk = std::min(filled, elements - filled);
      check(driver,
            driver.cuMemcpyDtoDAsync(buffer.getAddress() + filled * 2,
                                     buffer.getAddress(), chunk * 2, stream),
            "replicating random data");
      filled += chunk;
    }
    check(driver, driver.cuStreamSynchronize(stream), "filling buffers");
  }

  void runShape(const ModelConfig &config, int64_t batch, int64_t length,
                FILE *csv) {
    int64_t kvElements = batch * length * config.numKVHeads * config.headDim;
    size_t kvBytes = 2 * kvElements * 2;
    // Rotate copies so each launch streams from HBM, not L2.
    int copies = std::clamp<int>(
        static_cast<int>(std::ceil(4.0 * l2Bytes / kvBytes)), 1, 8);
    size_t queryElements = batch * config.numQueryHeads * config.headDim;
    for (const char *mode : {"auto", "s1"}) {
      std::string directory = kernelRoot + "/" + config.name + "/B" +
                              std::to_string(batch) + "_L" +
                              std::to_string(length) + "_" + mode;
      KernelBundle bundle = KernelBundle::load(directory);
      DeviceBuffer query(device, queryElements * 2),
          output(device, queryElements * 2),
          lengths(device, batch * sizeof(int32_t));
      std::vector<DeviceBuffer> keys, values;
      for (int c = 0; c < copies; ++c) {
        keys.emplace_back(device, kvElements * 2);
        values.emplace_back(device, kvElements * 2);
      }
      std::vector<double> queryValues, keyValues, valueValues;
      bool verify = shouldVerify(batch, length);
      fillRandom(query, 2.0, verify ? &queryValues : nullptr);
      fillRandom(keys[0], 1.0, verify ? &keyValues : nullptr);
      fillRandom(values[0], 1.0, verify ? &valueValues : nullptr);
      for (int c = 1; c < copies; ++c) {
        fillRandom(keys[c], 1.0);
        fillRandom(values[c], 1.0);
      }
      std::vector<std::unique_ptr<DecodePlan>> plans;
      for (int c = 0; c < copies; ++c) {
        DecodeBuffers buffers{query.getAddress(),
                              keys[c].getAddress(),
                              values[c].getAddress(),
                              lengths.getAddress(),
                              output.getAddress(),
                              0,
                              batch,
                              length};
        plans.push_back(std::make_unique<DecodePlan>(device, bundle, buffers));
      }

      double maxRelativeError = -1;
      if (verify)
        maxRelativeError =
            verifyOutput(config, batch, length, *plans[0], output, lengths,
                         queryValues, keyValues, valueValues);
      std::vector<int32_t> full(batch, static_cast<int32_t>(length));
      lengths.upload(full.data(), full.size() * sizeof(int32_t));

      int iterations = quick ? 20 : 100;
      for (int i = 0; i < 5; ++i)
        plans[i % copies]->launch(stream);
      double us = timeMedian(driver, stream, iterations,
                             [&](int i) { plans[i % copies]->launch(stream); });
      double tbPerSecond = kvBytes / (us * 1e-6) / 1e12;
      if (std::string(mode) == "auto")
        denseMicroseconds[{batch, length}] = us;

      double eagerUs = -1, graphUs = -1;
      if (std::string(mode) == "auto")
        timeLayerStep(plans, eagerUs, graphUs);
      std::printf(
          "| %s | %lld | %lld | %s | %lld | %.1f | %.1f | %.2f | "
          "%.0f %% | %s | %s | %s |\n",
          config.name, static_cast<long long>(batch),
          static_cast<long long>(length), mode,
          static_cast<long long>(bundle.manifest.numSplits), us, kvBytes / 1e6,
          tbPerSecond, 100.0 * kvBytes / (us * 1e-6) / copyBandwidth,
          maxRelativeError < 0 ? "-"
                               : formatDouble("%.1e", maxRelativeError).c_str(),
          eagerUs < 0 ? "-" : formatDouble("%.0f", eagerUs).c_str(),
          graphUs < 0 ? "-" : formatDouble("%.0f", graphUs).c_str());
      std::fflush(stdout);
      if (csv)
        std::fprintf(
            csv, "%s,%lld,%lld,%s,%lld,%.3f,%zu,%.4f,%.2f,%g,%.2f,%.2f\n",
            config.name, static_cast<long long>(batch),
            static_cast<long long>(length), mode,
            static_cast<long long>(bundle.manifest.numSplits), us, kvBytes,
            tbPerSecond, 100.0 * kvBytes / (us * 1e-6) / copyBandwidth,
            maxRelativeError, eagerUs, graphUs);
      if (verify && !(maxRelativeError >= 0 && maxRelativeError <= 1e-2))
        failures++;
    }
  }

  /// Paged caches (pages shuffled in the pool) against the dense time of
  /// the same shape: the cost of reading through a block table.
  void runPaged(const ModelConfig &config, int64_t batch, int64_t length,
                int64_t pageSize, FILE *csv) {
    std::string directory = kernelRoot + "/paged/B" + std::to_string(batch) +
                            "_L" + std::to_string(length) + "_p" +
                            std::to_string(pageSize);
    KernelBundle bundle = KernelBundle::load(directory);
    int64_t pagesPerSequence = length / pageSize;
    int64_t numPages = batch * pagesPerSequence;
    int64_t kvElements =
        numPages * pageSize * config.numKVHeads * config.headDim;
    size_t kvBytes = 2 * kvElements * 2;
    size_t queryElements = batch * config.numQueryHeads * config.headDim;
    DeviceBuffer query(device, queryElements * 2),
        output(device, queryElements * 2), keys(device, kvElements * 2),
        values(device, kvElements * 2),
        lengths(device, batch * sizeof(int32_t)),
        table(device, numPages * sizeof(int32_t));
    fillRandom(query, 2.0);
    fillRandom(keys, 1.0);
    fillRandom(values, 1.0);
    std::vector<int32_t> pages(numPages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    table.upload(pages.data(), pages.size() * sizeof(int32_t));
    std::vector<int32_t> full(batch, static_cast<int32_t>(length));
    lengths.upload(full.data(), full.size() * sizeof(int32_t));
    DecodeBuffers buffers{query.getAddress(),
                          keys.getAddress(),
                          values.getAddress(),
                          lengths.getAddress(),
                          output.getAddress(),
                          0,
                          batch,
                          length,
                          table.getAddress()};
    DecodePlan plan(device, bundle, buffers);
    for (int i = 0; i < 5; ++i)
      plan.launch(stream);
    double us = timeMedian(driver, stream, quick ? 20 : 100,
                           [&](int) { plan.launch(stream); });
    double dense = denseMicroseconds.count({batch, length})
                       ? denseMicroseconds[{batch, length}]
                       : -1;
    std::printf(
        "| %s | %lld | %lld | paged p%lld | %lld | %.1f | %.1f | "
        "%.2f | %.0f %% | vs dense: %s | - | - |\n",
        config.name, static_cast<long long>(batch),
        static_cast<long long>(length), static_cast<long long>(pageSize),
        static_cast<long long>(bundle.manifest.numSplits), us, kvBytes / 1e6,
        kvBytes / (us * 1e-6) / 1e12,
        100.0 * kvBytes / (us * 1e-6) / copyBandwidth,
        dense < 0 ? "-"
                  : formatDouble("%+.1f %%", 100.0 * (us / dense - 1)).c_str());
    if (csv)
      std::fprintf(csv, "%s,%lld,%lld,p%lld,%lld,%.3f,%zu,%.4f,%.2f,-1,-1,-1\n",
                   config.name, static_cast<long long>(batch),
                   static_cast<long long>(length),
                   static_cast<long long>(pageSize),
                   static_cast<long long>(bundle.manifest.numSplits), us,
                   kvBytes, kvBytes / (us * 1e-6) / 1e12,
                   100.0 * kvBytes / (us * 1e-6) / copyBandwidth);
  }

  int failures = 0;

private:
  std::map<std::pair<int64_t, int64_t>, double> denseMicroseconds;

  static std::string formatDouble(const char *format, double value) {
    char text[32];
    std::snprintf(text, sizeof(text), format, value);
    return text;
  }

  bool shouldVerify(int64_t batch, int64_t length) const {
    return (batch <= 8 && length <= 4096) || (batch == 1 && length <= 16384);
  }

  /// Runs the plan on mixed lengths with the output poisoned (NaN) first and
  /// returns max |out - ref| / max |ref|; any NaN (unwritten) fails.
  double verifyOutput(const ModelConfig &config, int64_t batch, int64_t length,
                      const DecodePlan &plan, DeviceBuffer &output,
                      DeviceBuffer &lengths,
                      const std::vector<double> &queryValues,
                      const std::vector<double> &keyValues,
                      const std::vector<double> &valueValues) {
    // Live lengths below the maximum, one sequence empty when batch > 2.
    std::vector<int32_t> live(batch);
    for (int64_t b = 0; b < batch; ++b)
      live[b] = static_cast<int32_t>(
          b == 2 ? 0 : std::max<int64_t>(1, length - 37 * b));
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
    std::vector<uint16_t> poison(output.getSize() / 2, 0xFFFF);
    output.upload(poison.data(), output.getSize());
    plan.launch(stream);
    check(driver, driver.cuStreamSynchronize(stream), "running the kernels");
    std::vector<uint16_t> result(output.getSize() / 2);
    output.download(result.data(), output.getSize());

    reference::AttentionProblem problem;
    problem.batch = batch;
    problem.numQueryHeads = config.numQueryHeads;
    problem.numKVHeads = config.numKVHeads;
    problem.headDim = config.headDim;
    problem.maxLength = length;
    problem.scale = 1.0 / std::sqrt(static_cast<double>(config.headDim));
    problem.query = queryValues.data();
    problem.keyCache = keyValues.data();
    problem.valueCache = valueValues.data();
    problem.lengths = live.data();
    std::vector<double> expected, lse;
    reference::attention(problem, expected, lse);
    double maxError = 0, maxValue = 0;
    for (size_t i = 0; i < result.size(); ++i) {
      double actual = reference::halfToFloat(result[i]);
      if (!std::isfinite(actual))
        return std::numeric_limits<double>::infinity();
      maxError = std::max(maxError, std::abs(actual - expected[i]));
      maxValue = std::max(maxValue, std::abs(expected[i]));
    }
    return maxError / std::max(maxValue, 1e-30);
  }

  /// A decode step of kLayers attention calls over the layers' caches (the
  /// rotated copies stand for the layers), eager vs one graph replay.
  void timeLayerStep(const std::vector<std::unique_ptr<DecodePlan>> &plans,
                     double &eagerUs, double &graphUs) {
    std::vector<const DecodePlan *> layers;
    for (int l = 0; l < kLayers; ++l)
      layers.push_back(plans[l % plans.size()].get());
    int iterations = quick ? 10 : 30;
    eagerUs = timeMedian(driver, stream, iterations, [&](int) {
      for (const DecodePlan *layer : layers)
        layer->launch(stream);
    });
    Graph graph = Graph::capture(device, layers, stream);
    graph.replay(stream);
    graphUs = timeMedian(driver, stream, iterations,
                         [&](int) { graph.replay(stream); });
  }

  Device &device;
  const DriverApi &driver;
  std::string kernelRoot;
  bool quick;
  CUstream stream = nullptr;
  double l2Bytes = 0;
  double copyBandwidth = 1;
  std::mt19937 random{std::random_device{}()};
};

void usage() {
  std::puts("usage: fd-bench --kernels DIR [--csv FILE] [--quick]\n"
            "  --kernels DIR  what bench/prepare_kernels.sh wrote\n"
            "  --csv FILE     also write the rows as CSV\n"
            "  --quick        B in {1, 8}, L in {1k, 16k}, fewer iterations");
}

} // namespace

int main(int argc, char **argv) {
  std::string kernels, csvPath;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--kernels" && i + 1 < argc) {
      kernels = argv[++i];
    } else if (flag == "--csv" && i + 1 < argc) {
      csvPath = argv[++i];
    } else if (flag == "--quick") {
      quick = true;
    } else if (flag == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "fd-bench: unknown flag '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  if (kernels.empty()) {
    std::fprintf(stderr, "fd-bench: --kernels DIR is required\n");
    return 2;
  }

  std::unique_ptr<Device> device;
  try {
    device = std::make_unique<Device>();
  } catch (const CudaError &error) {
    std::printf("fd-bench: no GPU: %s\n", error.what());
    return kNoGPUExitCode;
  }

  try {
    Bench bench(*device, kernels, quick);
    double bandwidth = bench.measureCopyBandwidth();
    std::printf("device: %s, %d SMs; device-to-device copy: %.2f TB/s\n\n",
                device->getName().c_str(), device->getMultiprocessorCount(),
                bandwidth / 1e12);
    std::printf("| config | B | L | splits mode | S | us | KV MB | TB/s | "
                "%% of copy | max rel err | 32-layer eager us | 32-layer "
                "graph us |\n|---|---:|---:|---|---:|---:|---:|---:|---:|"
                "---:|---:|---:|\n");
    FILE *csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
    if (csv)
      std::fputs("config,batch,max_len,mode,num_splits,time_us,kv_bytes,"
                 "tb_per_s,pct_copy_bw,max_rel_err,step32_eager_us,"
                 "step32_graph_us\n",
                 csv);
    std::vector<int64_t> batches =
        quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 8, 64};
    std::vector<int64_t> lengths =
        quick ? std::vector<int64_t>{1024, 16384}
              : std::vector<int64_t>{1024, 4096, 16384, 65536, 131072};
    for (const ModelConfig &config : kConfigs)
      for (int64_t batch : batches)
        for (int64_t length : lengths) {
          size_t kvBytes =
              size_t(4) * batch * length * config.numKVHeads * config.headDim;
          if (kvBytes > (size_t(100) << 30)) {
            std::printf("| %s | %lld | %lld | skipped: KV cache of %.0f GB "
                        "does not fit |\n",
                        config.name, static_cast<long long>(batch),
                        static_cast<long long>(length), kvBytes / 1e9);
            continue;
          }
          bench.runShape(config, batch, length, csv);
        }
    // Paged vs dense (issue goal: within 5 % at L >= 16k).
    for (int64_t batch : {1, 8})
      for (int64_t length : {16384, 65536})
        for (int64_t pageSize : {16, 64})
          bench.runPaged(kConfigs[0], batch, length, pageSize, csv);
    if (csv)
      std::fclose(csv);
    if (bench.failures) {
      std::printf("fd-bench: %d shapes outside the 1e-2 tolerance\n",
                  bench.failures);
      return 1;
    }
  } catch (const std::exception &error) {
    std::fprintf(stderr, "fd-bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
