//===- Measured.cpp - fd-bench on a GPU: times from CUDA events -----------===//

#include "Measured.h"

#include "fd/Reference/Reference.h"

#include "fd/Reference/Float8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>

using namespace flashdecode::rt;

namespace flashdecode::bench {

namespace {

constexpr int kL2CacheSizeAttribute = 38; // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

} // namespace

namespace {

/// Elements of the host-made block fillRandom repeats on the device.
constexpr size_t kFillBlockElements = size_t(32) << 20;

/// Uploads `block` to the start of `buffer` and repeats it on the device
/// until the buffer is full (its size a whole number of elements).
void uploadRepeated(const DriverApi &driver, CUstream stream,
                    DeviceBuffer &buffer, const void *block,
                    size_t blockBytes) {
  buffer.upload(block, blockBytes);
  for (size_t filled = blockBytes; filled < buffer.getSize();) {
    size_t chunk = std::min(filled, buffer.getSize() - filled);
    check(driver,
          driver.cuMemcpyDtoDAsync(buffer.getAddress() + filled,
                                   buffer.getAddress(), chunk, stream),
          "replicating random data");
    filled += chunk;
  }
  check(driver, driver.cuStreamSynchronize(stream), "filling buffers");
}

} // namespace

FillType getQueryFillType(const Manifest &manifest) {
  if (manifest.dtype == "f16")
    return FillType::F16;
  if (manifest.dtype == "bf16")
    return FillType::BF16;
  throw std::invalid_argument("the kernels take " + manifest.dtype +
                              " queries; fd-bench runs f16 or bf16 ones");
}

FillType getCacheFillType(const Manifest &manifest) {
  return manifest.kvDtype == "e4m3"   ? FillType::E4M3
         : manifest.kvDtype == "e5m2" ? FillType::E5M2
                                      : getQueryFillType(manifest);
}

double decodeWideElement(uint16_t bits, FillType type) {
  return type == FillType::BF16 ? reference::bfloat16ToFloat(bits)
                                : reference::halfToFloat(bits);
}

void fillRandom(const DriverApi &driver, CUstream stream, DeviceBuffer &buffer,
                double deviation, std::mt19937 &random,
                std::vector<double> *values, FillType type) {
  bool isWide = type == FillType::F16 || type == FillType::BF16;
  size_t elementBytes = isWide ? 2 : 1;
  size_t elements = buffer.getSize() / elementBytes;
  size_t blockElements = std::min(elements, kFillBlockElements);
  std::vector<uint8_t> block(blockElements * elementBytes);
  // What the block holds, as floats: only for `values` (a block is 32M
  // elements).
  std::vector<float> decoded(values ? blockElements : 0);
  std::normal_distribution<float> distribution(0.0f, deviation);
  for (size_t i = 0; i < blockElements; ++i) {
    float value = distribution(random);
    if (isWide) {
      uint16_t bits = type == FillType::F16 ? reference::floatToHalf(value)
                                            : reference::floatToBFloat16(value);
      std::memcpy(&block[2 * i], &bits, 2);
      if (values)
        decoded[i] = decodeWideElement(bits, type);
      continue;
    }
    // Moderate magnitudes, far inside both formats' finite range (448 and
    // 57344): the encodings are never NaN (e4m3 magnitude 0x7f) nor
    // infinity or NaN (e5m2 exponent 31).
    value = std::clamp(value, -64.0f, 64.0f);
    uint8_t bits = type == FillType::E4M3
                       ? reference::floatToFloat8E4M3FN(value)
                       : reference::floatToFloat8E5M2(value);
    block[i] = bits;
    if (values)
      decoded[i] = type == FillType::E4M3 ? reference::float8E4M3FNToFloat(bits)
                                          : reference::float8E5M2ToFloat(bits);
  }
  if (values) {
    values->resize(elements);
    for (size_t i = 0; i < elements; ++i)
      (*values)[i] = decoded[i % blockElements];
  }
  uploadRepeated(driver, stream, buffer, block.data(), block.size());
}

CacheScales CacheScales::make(const Device &device, CUstream stream,
                              const Manifest &manifest, size_t cacheElements,
                              std::mt19937 &random, bool values) {
  CacheScales scales;
  size_t count = manifest.getScaleElements(cacheElements);
  if (!count)
    return scales;
  size_t blockElements = std::min(count, kFillBlockElements);
  std::uniform_real_distribution<float> exponent(std::log(0.01f), 0.0f);
  for (auto [buffer, host] :
       {std::make_pair(&scales.keys, &scales.keyValues),
        std::make_pair(&scales.values, &scales.valueValues)}) {
    if (buffer == &scales.values && manifest.sharedKV)
      break;
    std::vector<float> block(blockElements);
    for (float &scale : block)
      scale = std::exp(exponent(random));
    *buffer = std::make_unique<DeviceBuffer>(device, count * sizeof(float));
    uploadRepeated(device.getDriverApi(), stream, **buffer, block.data(),
                   block.size() * sizeof(float));
    if (values) {
      host->resize(count);
      for (size_t i = 0; i < count; ++i)
        (*host)[i] = block[i % blockElements];
    }
  }
  return scales;
}

void CacheScales::bind(DecodeBuffers &buffers) const {
  buffers.kScale = keys ? keys->getAddress() : 0;
  buffers.vScale = values ? values->getAddress() : 0;
}

size_t CacheScales::getBytes() const {
  return (keys ? keys->getSize() : 0) + (values ? values->getSize() : 0);
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
  // Dense: [B, L, Hkv, D]; paged: a pool of B * L / page_size pages (a
  // shared prefix: one sequence). fp8 caches: 1 byte per element, and their
  // scales.
  const int64_t sequences = manifest.sharedPrefix ? 1 : batch;
  CacheSizes sizes =
      CacheSizes::of(manifest, sequences * length * manifest.numKVHeads);
  size_t kvElements = sizes.keys;
  size_t cacheBytes = kvElements * manifest.getCacheElementBytes();
  size_t valueBytes = sizes.values * manifest.getCacheElementBytes();
  size_t scaleBytes = manifest.getScaleElements(kvElements) *
                      (manifest.sharedKV ? 1 : 2) * sizeof(float);
  // Rotate dense copies so each launch streams from HBM, not L2.
  int copies = manifest.pageSize
                   ? 1
                   : std::clamp<int>(
                         static_cast<int>(std::ceil(
                             4.0 * l2Bytes /
                             (double(cacheBytes + valueBytes) + scaleBytes))),
                         1, 8);
  size_t queryElements = batch * manifest.numQueryHeads * manifest.headDim;
  size_t outputElements =
      batch * manifest.numQueryHeads * manifest.valueHeadDim;
  DeviceBuffer query(device, queryElements * 2),
      output(device, outputElements * 2),
      lengths(device, sequences * sizeof(int32_t));
  fillRandom(driver, stream, query, 2.0, random, nullptr,
             getQueryFillType(manifest));
  std::unique_ptr<DeviceBuffer> table;
  int64_t numPages = 0;
  if (manifest.pageSize) {
    std::vector<int32_t> pages(sequences * length / manifest.pageSize);
    numPages = static_cast<int64_t>(pages.size());
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    table =
        std::make_unique<DeviceBuffer>(device, pages.size() * sizeof(int32_t));
    table->upload(pages.data(), pages.size() * sizeof(int32_t));
  }
  std::vector<DeviceBuffer> keys;
  std::vector<std::unique_ptr<DeviceBuffer>> values;
  std::vector<CacheScales> scales;
  std::vector<std::unique_ptr<DecodePlan>> plans;
  FillType cacheType = getCacheFillType(manifest);
  // A shared prefix's query sequences with empty suffixes: each sees all
  // of it.
  std::unique_ptr<DeviceBuffer> suffixes;
  if (manifest.sharedPrefix) {
    suffixes = std::make_unique<DeviceBuffer>(device, batch * sizeof(int32_t));
    std::vector<int32_t> none(batch, 0);
    suffixes->upload(none.data(), none.size() * sizeof(int32_t));
  }
  for (int c = 0; c < copies; ++c) {
    keys.emplace_back(device, cacheBytes);
    fillRandom(driver, stream, keys[c], 1.0, random, nullptr, cacheType);
    values.push_back(valueBytes
                         ? std::make_unique<DeviceBuffer>(device, valueBytes)
                         : nullptr);
    if (values[c])
      fillRandom(driver, stream, *values[c], 1.0, random, nullptr, cacheType);
    // Each copy (layer) its own scales, rotated with its caches.
    scales.push_back(
        CacheScales::make(device, stream, manifest, kvElements, random));
    DecodeBuffers buffers{query.getAddress(),
                          keys[c].getAddress(),
                          values[c] ? values[c]->getAddress() : 0,
                          lengths.getAddress(),
                          output.getAddress(),
                          0,
                          batch,
                          length,
                          table ? table->getAddress() : 0};
    // The pool holds exactly the table's pages.
    buffers.numPages = numPages;
    buffers.suffixLens = suffixes ? suffixes->getAddress() : 0;
    scales[c].bind(buffers);
    plans.push_back(std::make_unique<DecodePlan>(device, bundle, buffers));
  }
  std::vector<int32_t> full(sequences, static_cast<int32_t>(length));
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
