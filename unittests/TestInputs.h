//===- TestInputs.h - Random inputs of the numerics tests -------*- C++ -*-===//
//
// What the CPU and the GPU numerics tests share: a seed a failing run prints
// and FD_TEST_SEED=N repeats, and host tensors of f32, f16 or bf16 elements
// with the exact values they hold (what the float64 reference reads).
// Header-only: the GPU tests build without MLIR (FD_RUNTIME_ONLY).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_TESTINPUTS_H
#define FD_UNITTESTS_TESTINPUTS_H

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

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

} // namespace flashdecode::test

#endif // FD_UNITTESTS_TESTINPUTS_H
