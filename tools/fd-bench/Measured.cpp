//===- Measured.cpp - fd-bench on a GPU: times from CUDA events -----------===//

#include "Measured.h"

#include "fd/Reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

using namespace flashdecode::rt;

namespace flashdecode::bench {

namespace {

constexpr int kL2CacheSizeAttribute = 38; // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

} // namespace

void fillRandom(const DriverApi &driver, CUstream stream, DeviceBuffer &buffer,
                double deviation, std::mt19937 &random,
                std::vector<double> *values) {
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

EventTimer::EventTimer(const Device &device, CUstream stream, bool quick)
    : device(device), driver(device.getDriverApi()), stream(stream),
      quick(quick) {
  int l2 = 0;
  driver.cuDeviceGetAttribute(&l2, kL2CacheSizeAttribute, 0);
  l2Bytes = l2 > 0 ? l2 : 50 << 20;
}

/// Median of the elapsed times of `iterations` runs of `body`, each timed
/// with a pair of events on the stream, in microseconds.
double EventTimer::timeMedian(int iterations,
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

double EventTimer::measureCopyBandwidth() {
  size_t bytes = size_t(1) << 30;
  DeviceBuffer source(device, bytes), destination(device, bytes);
  double us = timeMedian(20, [&](int) {
    check(driver,
          driver.cuMemcpyDtoDAsync(destination.getAddress(),
                                   source.getAddress(), bytes, stream),
          "copying device memory");
  });
  return 2.0 * bytes / (us * 1e-6);
}

Timing EventTimer::measure(const KernelBundle &bundle, int64_t batch,
                           int64_t length, bool withStep) {
  const Manifest &manifest = bundle.manifest;
  // Dense: [B, L, Hkv, D]; paged: a pool of B * L / page_size pages.
  size_t kvElements = batch * length * manifest.numKVHeads * manifest.headDim;
  // Rotate dense copies so each launch streams from HBM, not L2.
  int copies =
      manifest.pageSize
          ? 1
          : std::clamp<int>(
                static_cast<int>(std::ceil(4.0 * l2Bytes / (4.0 * kvElements))),
                1, 8);
  size_t queryElements = batch * manifest.numQueryHeads * manifest.headDim;
  DeviceBuffer query(device, queryElements * 2),
      output(device, queryElements * 2),
      lengths(device, batch * sizeof(int32_t));
  fillRandom(driver, stream, query, 2.0, random);
  std::unique_ptr<DeviceBuffer> table;
  int64_t numPages = 0;
  if (manifest.pageSize) {
    std::vector<int32_t> pages(batch * length / manifest.pageSize);
    numPages = static_cast<int64_t>(pages.size());
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    table =
        std::make_unique<DeviceBuffer>(device, pages.size() * sizeof(int32_t));
    table->upload(pages.data(), pages.size() * sizeof(int32_t));
  }
  std::vector<DeviceBuffer> keys, values;
  std::vector<std::unique_ptr<DecodePlan>> plans;
  for (int c = 0; c < copies; ++c) {
    keys.emplace_back(device, kvElements * 2);
    values.emplace_back(device, kvElements * 2);
    fillRandom(driver, stream, keys[c], 1.0, random);
    fillRandom(driver, stream, values[c], 1.0, random);
    DecodeBuffers buffers{query.getAddress(),
                          keys[c].getAddress(),
                          values[c].getAddress(),
                          lengths.getAddress(),
                          output.getAddress(),
                          0,
                          batch,
                          length,
                          table ? table->getAddress() : 0};
    // The pool holds exactly the table's pages.
    buffers.numPages = numPages;
    plans.push_back(std::make_unique<DecodePlan>(device, bundle, buffers));
  }
  std::vector<int32_t> full(batch, static_cast<int32_t>(length));
  lengths.upload(full.data(), full.size() * sizeof(int32_t));

  for (int i = 0; i < 5; ++i)
    plans[i % copies]->launch(stream);
  Timing timing;
  timing.microseconds = timeMedian(
      quick ? 20 : 100, [&](int i) { plans[i % copies]->launch(stream); });
  if (!withStep)
    return timing;
  // A decode step of kLayers attention calls over the layers' caches (the
  // rotated copies stand for the layers), eager vs one graph replay.
  std::vector<const DecodePlan *> layers;
  for (int l = 0; l < kLayers; ++l)
    layers.push_back(plans[l % plans.size()].get());
  int iterations = quick ? 10 : 30;
  timing.eagerStepMicroseconds = timeMedian(iterations, [&](int) {
    for (const DecodePlan *layer : layers)
      layer->launch(stream);
  });
  Graph graph = Graph::capture(device, layers, stream);
  graph.replay(stream);
  timing.graphStepMicroseconds =
      timeMedian(iterations, [&](int) { graph.replay(stream); });
  return timing;
}

} // namespace flashdecode::bench
