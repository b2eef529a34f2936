//===- Verify.cpp - fd-bench's check of a decode against float64 ----------===//

#include "Verify.h"
#include "Measured.h"

#include "fd/Reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace flashdecode::bench {

using namespace flashdecode::rt;

double verifyDecode(Device &device, CUstream stream, const KernelBundle &bundle,
                    const ModelConfig &config, int64_t batch, int64_t length,
                    std::mt19937 &random) {
  const DriverApi &driver = device.getDriverApi();
  const Manifest &manifest = bundle.manifest;
  const int64_t valueDim = config.getValueHeadDim();
  size_t queryElements = batch * config.numQueryHeads * config.headDim;
  CacheSizes sizes =
      CacheSizes::of(manifest, batch * length * config.numKVHeads);
  size_t kvElements = sizes.keys;
  size_t elementBytes = manifest.getCacheElementBytes();
  DeviceBuffer query(device, queryElements * 2),
      output(device, batch * config.numQueryHeads * valueDim * 2),
      keys(device, kvElements * elementBytes),
      lengths(device, batch * sizeof(int32_t));
  std::unique_ptr<DeviceBuffer> values;
  if (sizes.values)
    values =
        std::make_unique<DeviceBuffer>(device, sizes.values * elementBytes);
  std::vector<double> queryValues, keyValues, valueValues;
  FillType queryType = getQueryFillType(manifest);
  FillType cacheType = getCacheFillType(manifest);
  fillRandom(driver, stream, query, 2.0, random, &queryValues, queryType);
  fillRandom(driver, stream, keys, 1.0, random, &keyValues, cacheType);
  if (values)
    fillRandom(driver, stream, *values, 1.0, random, &valueValues, cacheType);
  // fp8 caches: the reference reads what the kernels dequantize, each
  // element times its scale (element i's token and head: i / D in every
  // layout, i / D_v in the values).
  CacheScales scales = CacheScales::make(device, stream, manifest, kvElements,
                                         random, /*values=*/true);
  auto scaleOf = [&](const std::vector<double> &scaleValues, size_t i,
                     int64_t rowLength) {
    return scaleValues[manifest.hasTokenHeadScales() ? i / rowLength : 0];
  };
  if (manifest.hasFloat8Cache()) {
    for (size_t i = 0; i < kvElements; ++i)
      keyValues[i] *= scaleOf(scales.keyValues, i, config.headDim);
    for (size_t i = 0; i < sizes.values; ++i)
      valueValues[i] *= scaleOf(scales.valueValues, i, valueDim);
  }
  DecodeBuffers buffers{query.getAddress(),
                        keys.getAddress(),
                        values ? values->getAddress() : 0,
                        lengths.getAddress(),
                        output.getAddress(),
                        0,
                        batch,
                        length};
  scales.bind(buffers);
  DecodePlan plan(device, bundle, buffers);
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
  problem.valueHeadDim = valueDim;
  problem.maxLength = length;
  problem.scale = manifest.scale
                      ? manifest.scale
                      : 1.0 / std::sqrt(static_cast<double>(config.headDim));
  problem.windowLeft = bundle.manifest.windowLeft;
  problem.logitsSoftCap = bundle.manifest.logitsSoftCap;
  problem.query = queryValues.data();
  problem.keyCache = keyValues.data();
  problem.valueCache = values ? valueValues.data() : nullptr;
  problem.lengths = live.data();
  std::vector<double> expected, lse;
  reference::attention(problem, expected, lse);
  double maxError = 0, maxValue = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    double actual = decodeWideElement(result[i], queryType);
    if (!std::isfinite(actual))
      return std::numeric_limits<double>::infinity();
    maxError = std::max(maxError, std::abs(actual - expected[i]));
    maxValue = std::max(maxValue, std::abs(expected[i]));
  }
  return maxError / std::max(maxValue, 1e-30);
}

} // namespace flashdecode::bench
