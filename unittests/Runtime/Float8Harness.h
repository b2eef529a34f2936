//===- Float8Harness.h - fp8 caches for the kernel tests --------*- C++ -*-===//
//
// What the tests of kernels with fp8 caches share (RuntimeGPUFloat8Test,
// KernelMatrixOnGPUTest): caches quantized as a user would (their bytes
// what the kernels read, their values the dequantized ones the float64
// reference reads), their scales on the device and in the plan's buffers,
// and new scales for the same bytes.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_FLOAT8HARNESS_H
#define FD_UNITTESTS_RUNTIME_FLOAT8HARNESS_H

#include "GPUKernelHarness.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

namespace flashdecode::test {

/// A cache's fp8 values (decoded, unscaled) and its scales: what the
/// kernels read, as the reference reads it once scaled.
struct QuantizedCache {
  std::vector<double> decoded;
  std::vector<float> scales;
};

/// KernelOnGPU with the manifest's fp8 caches.
class Float8KernelOnGPU : public KernelOnGPU {
protected:
  bool isE4M3() const { return bundle.manifest.kvDtype == "e4m3"; }
  bool isPerToken() const { return bundle.manifest.hasTokenHeadScales(); }

  /// Multiplies channels 3 and 17 of every key by 100 (outlier channels),
  /// before quantization.
  void addOutlierChannels(HostTensor &keys) const {
    const int64_t dim = bundle.manifest.headDim;
    for (size_t i = 0; i < keys.values.size(); ++i)
      if (i % dim == 3 || i % dim == 17)
        keys.values[i] *= 100.0;
  }

  /// Quantizes `cache` as a user would (quantizeFloat8): its bytes become
  /// the fp8 bytes the kernels read (one per element), its values the
  /// dequantized ones the reference reads.
  /// `rowLength`: the cache's head dim (0: the keys').
  QuantizedCache quantizeInPlace(HostTensor &cache,
                                 int64_t rowLength = 0) const {
    Float8Cache float8 = quantizeFloat8(
        cache.values, isE4M3(),
        isPerToken() ? static_cast<size_t>(rowLength ? rowLength
                                                     : bundle.manifest.headDim)
                     : cache.values.size());
    QuantizedCache quantized{{}, float8.scales};
    for (uint8_t byte : float8.bytes)
      quantized.decoded.push_back(isE4M3()
                                      ? reference::float8E4M3FNToFloat(byte)
                                      : reference::float8E5M2ToFloat(byte));
    cache.bytes = std::move(float8.bytes);
    cache.values = std::move(float8.dequantized);
    return quantized;
  }

  /// Gives `cache` (quantized by quantizeInPlace) the scales `scales`: the
  /// values the same bytes then stand for.
  void rescale(HostTensor &cache, QuantizedCache &quantized,
               std::vector<float> scales) const {
    const size_t span = cache.values.size() / scales.size();
    for (size_t i = 0; i < cache.values.size(); ++i)
      cache.values[i] = quantized.decoded[i] * double(scales[i / span]);
    quantized.scales = std::move(scales);
  }

  /// `scales` times random factors in [0.25, 4].
  std::vector<float> randomlyScaled(const std::vector<float> &scales) {
    std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
    std::vector<float> result = scales;
    for (float &scale : result)
      scale *= std::exp2(exponent(random));
    return result;
  }

  /// The device buffers of both caches' scales (of the keys' alone where
  /// the values are the keys').
  struct ScaleBuffers {
    rt::DeviceBuffer keys;
    std::optional<rt::DeviceBuffer> values;

    void upload(const QuantizedCache &keyCache,
                const QuantizedCache &valueCache) {
      keys.upload(keyCache.scales.data(),
                  keyCache.scales.size() * sizeof(float));
      if (values)
        values->upload(valueCache.scales.data(),
                       valueCache.scales.size() * sizeof(float));
    }
  };

  ScaleBuffers uploadScales(const QuantizedCache &keyCache,
                            const QuantizedCache &valueCache) const {
    ScaleBuffers buffers{
        rt::DeviceBuffer(*device, keyCache.scales.size() * sizeof(float)),
        std::nullopt};
    if (!bundle.manifest.sharedKV)
      buffers.values.emplace(*device, valueCache.scales.size() * sizeof(float));
    buffers.upload(keyCache, valueCache);
    return buffers;
  }

  static rt::DecodeBuffers withScales(rt::DecodeBuffers buffers,
                                      const ScaleBuffers &scales) {
    buffers.kScale = scales.keys.getAddress();
    buffers.vScale = scales.values ? scales.values->getAddress() : 0;
    return buffers;
  }

  /// Both caches quantized (quantizeInPlace) and their scales on the
  /// device.
  struct Float8Caches {
    QuantizedCache keys, values;
    ScaleBuffers scales;
  };

  /// Quantizes the caches of `inputs` (DenseInputs or PagedInputs) in
  /// place and uploads their scales.
  template <typename Inputs> Float8Caches quantizeCaches(Inputs &inputs) {
    QuantizedCache keys = quantizeInPlace(inputs.keys);
    QuantizedCache values;
    if (!bundle.manifest.sharedKV)
      values = quantizeInPlace(inputs.values, bundle.manifest.valueHeadDim);
    ScaleBuffers scales = uploadScales(keys, values);
    return {std::move(keys), std::move(values), std::move(scales)};
  }

  /// Writes new random scales of the same bytes to the device, and the
  /// values the caches of `inputs` then stand for.
  template <typename Inputs>
  void rescaleRandomly(Inputs &inputs, Float8Caches &caches) {
    rescale(inputs.keys, caches.keys, randomlyScaled(caches.keys.scales));
    if (!bundle.manifest.sharedKV)
      rescale(inputs.values, caches.values,
              randomlyScaled(caches.values.scales));
    caches.scales.upload(caches.keys, caches.values);
  }
};

} // namespace flashdecode::test

#endif // FD_UNITTESTS_RUNTIME_FLOAT8HARNESS_H
