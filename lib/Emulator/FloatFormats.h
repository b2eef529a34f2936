//===- FloatFormats.h - Exact f16/bf16/f32 rounding for fdemu ---*- C++ -*-===//
//
// Every narrowing conversion goes through one rounding routine: the value
// (exact in double) is scaled by the target format's quantum at its
// exponent, rounded to an integer in the requested mode and rebuilt, with
// subnormals, overflow per mode and canonical NaNs as PTX defines them.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_FLOATFORMATS_H
#define FD_EMULATOR_FLOATFORMATS_H

#include "fd/Emulator/Program.h"

#include <cstdint>
#include <cstring>

namespace flashdecode::emu {

inline float bitsToFloat(uint64_t bits) {
  uint32_t word = static_cast<uint32_t>(bits);
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}
inline uint64_t floatToBits(float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  return word;
}
inline double bitsToDouble(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, 8);
  return value;
}
inline uint64_t doubleToBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return bits;
}

/// Sign-preserving zero for f32 subnormals (.ftz).
float flushSubnormal(float value);

/// Rounds `value` to f16 (`Type::F16`), bf16 (`Type::BF16`) or f32
/// (`Type::F32`) in `rounding` (None and Rn: nearest even) and returns the
/// bit pattern. NaN gives the canonical NaN (0x7FFF, 0x7FFF, 0x7FFFFFFF).
uint64_t roundToFormat(double value, Type format, Rounding rounding);

/// The value of an f16 or bf16 bit pattern.
double halfBitsToDouble(uint16_t bits);
double bfloat16BitsToDouble(uint16_t bits);

/// The value of one fp8 byte of a packed `Type::E4M3x2` or `Type::E5M2x2`:
/// E4M3FN (bias 7, subnormals, no infinities, S.1111.111 the only NaN, 448
/// the largest) or E5M2 (bias 15, IEEE-like: subnormals, infinities, NaNs).
double float8BitsToDouble(uint8_t bits, Type pairType);

/// Reads `bits` as a floating-point value of `type` (f16, bf16, f32, f64).
double floatValue(uint64_t bits, Type type);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_FLOATFORMATS_H
