//===- TestInputs.h - Random inputs of the numerics tests -------*- C++ -*-===//
//
// What the CPU and the GPU numerics tests share: a seed a failing run prints
// and FD_TEST_SEED=N repeats, host tensors of f32, f16 or bf16 elements
// with the exact values they hold (what the float64 reference reads), and
// fp8 caches quantized from them.
// Header-only: the GPU tests build without MLIR (FD_RUNTIME_ONLY).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_TESTINPUTS_H
#define FD_UNITTESTS_TESTINPUTS_H

#include "fd/Reference/Float8.h"
#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace flashdecode::test {

/// A fixture mix-in: the random inputs' generator, seeded from FD_TEST_SEED
/// (to repeat a run) or the random device, and the seed recorded as the
/// test's "seed" property.
class Seeded {
protected:
  Seeded() {
    const char *fixed = std::getenv("FD_TEST_SEED");
    seed = fixed ? std::strtoul(fixed, nullptr, 10) : std::random_device()();
    random.seed(seed);
    testing::Test::RecordProperty("seed", std::to_string(seed));
  }

  /// For SCOPED_TRACE: the seed and how to repeat it.
  std::string seedNote() const {
    return "seed " + std::to_string(seed) +
           " (FD_TEST_SEED=" + std::to_string(seed) + " repeats it)";
  }

  unsigned seed = 0;
  std::mt19937 random;
};

/// How a tensor stores its elements.
enum class Storage { F32, F16, BF16 };

/// Elements of one storage type: the bytes a kernel reads or writes and the
/// exact values they hold.
struct HostTensor {
  Storage storage;
  std::vector<uint8_t> bytes;
  std::vector<double> values;

  HostTensor(Storage storage, size_t size)
      : storage(storage), bytes(size * getElementSize()), values(size) {}

  size_t getElementSize() const { return storage == Storage::F32 ? 4 : 2; }

  /// Stores `value` rounded to the element type (NaN stays NaN).
  void set(size_t index, double value) {
    float single = static_cast<float>(value);
    if (storage == Storage::F32) {
      std::memcpy(&bytes[index * 4], &single, 4);
    } else {
      uint16_t bits = storage == Storage::F16
                          ? reference::floatToHalf(single)
                          : reference::floatToBFloat16(single);
      std::memcpy(&bytes[index * 2], &bits, 2);
    }
    values[index] = get(index);
  }

  /// Decodes the bytes (e.g. what a kernel wrote).
  double get(size_t index) const {
    if (storage == Storage::F32) {
      float single;
      std::memcpy(&single, &bytes[index * 4], 4);
      return single;
    }
    uint16_t bits;
    std::memcpy(&bits, &bytes[index * 2], 2);
    return storage == Storage::F16 ? reference::halfToFloat(bits)
                                   : reference::bfloat16ToFloat(bits);
  }

  /// Fills the tensor with normal values of the given deviation.
  void fillNormal(double deviation, std::mt19937 &random) {
    std::normal_distribution<double> distribution(0.0, deviation);
    for (size_t i = 0; i < values.size(); ++i)
      set(i, distribution(random));
  }
};

/// What a kernel wrote: the output and the lse.
struct Result {
  HostTensor output;
  std::vector<float> lse;
};

/// An fp8 cache quantized as a user would: one scale per tensor or per
/// (token, KV head) row, amax / the format's largest finite value (448 for
/// E4M3, 57344 for E5M2), and bytes encode(value / scale). The kernel reads
/// the bytes and scales, the reference `dequantized`: decode(byte) * scale.
struct Float8Cache {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<double> dequantized;
};

/// Quantizes `values` (a cache in the order of its per-token scales) to
/// E4M3 (`isE4M3`) or E5M2, one scale per `scaleSpan` consecutive elements:
/// the whole cache, or head_dim for per (token, KV head) scales.
inline Float8Cache quantizeFloat8(const std::vector<double> &values,
                                  bool isE4M3, size_t scaleSpan) {
  const double largest = isE4M3 ? 448.0 : 57344.0;
  Float8Cache cache;
  for (size_t begin = 0; begin < values.size(); begin += scaleSpan) {
    double amax = 0.0;
    for (size_t i = begin; i < begin + scaleSpan; ++i)
      amax = std::max(amax, std::abs(values[i]));
    // An all-zero row (never drawn) must not divide by zero.
    float scale = amax > 0.0 ? static_cast<float>(amax / largest) : 1.0f;
    cache.scales.push_back(scale);
    for (size_t i = begin; i < begin + scaleSpan; ++i) {
      float scaled = static_cast<float>(values[i]) / scale;
      uint8_t byte = isE4M3 ? reference::floatToFloat8E4M3FN(scaled)
                            : reference::floatToFloat8E5M2(scaled);
      float decoded = isE4M3 ? reference::float8E4M3FNToFloat(byte)
                             : reference::float8E5M2ToFloat(byte);
      cache.bytes.push_back(byte);
      cache.dequantized.push_back(double(decoded) * scale);
    }
  }
  return cache;
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_TESTINPUTS_H
