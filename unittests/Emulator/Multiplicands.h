//===- Multiplicands.h - Tensor-core operands for the tests -----*- C++ -*-===//
//
// The f16 and bf16 operands the tensor-core tests (TensorCoreTest.cpp,
// WarpgroupMmaTest.cpp) draw and check against float64.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_EMULATOR_MULTIPLICANDS_H
#define FD_UNITTESTS_EMULATOR_MULTIPLICANDS_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace flashdecode::emutest {

/// f16 or bf16 (`bfloat`) bits and their value.
inline double multiplicandValue(uint16_t bits, bool bfloat) {
  if (bfloat) {
    uint32_t word = uint32_t(bits) << 16;
    float value;
    std::memcpy(&value, &word, 4);
    return value;
  }
  int exponent = (bits >> 10) & 31, fraction = bits & 1023;
  double magnitude = exponent ? std::ldexp(1024 + fraction, exponent - 25)
                              : std::ldexp(fraction, -24);
  return bits & 0x8000 ? -magnitude : magnitude;
}

/// Random f16 or bf16 bits of magnitude 2^-4 to 2^4 with every fraction bit
/// used.
inline uint16_t randomMultiplicand(std::mt19937_64 &random, bool bfloat) {
  uint64_t bits = random();
  if (bfloat) // exponent field 123..131
    return uint16_t((bits & 0x8000) | (123 + bits % 9) << 7 |
                    (bits >> 8 & 0x7F));
  return uint16_t((bits & 0x8000) | (11 + bits % 9) << 10 |
                  (bits >> 8 & 0x3FF));
}

} // namespace flashdecode::emutest

#endif // FD_UNITTESTS_EMULATOR_MULTIPLICANDS_H
