//===- FloatFormats.cpp - Exact f16/bf16/f32 rounding for fdemu -----------===//

#include "FloatFormats.h"

#include <cmath>
#include <limits>
#include <optional>

namespace flashdecode::emu {

float flushSubnormal(float value) {
  if (std::fpclassify(value) == FP_SUBNORMAL)
    return std::signbit(value) ? -0.0f : 0.0f;
  return value;
}

namespace {

struct Format {
  int mantissaBits; // stored fraction bits
  int exponentBits;
  int minExponent; // of the smallest normal
  int maxExponent; // of the largest finite
  uint64_t canonicalNaN;
};

Format getFormat(Type format) {
  switch (format) {
  case Type::F16:
    return {10, 5, -14, 15, 0x7FFF};
  case Type::BF16:
    return {7, 8, -126, 127, 0x7FFF};
  default:
    return {23, 8, -126, 127, 0x7FFFFFFF};
  }
}

double roundToInteger(double value, Rounding rounding, bool negative) {
  switch (rounding) {
  case Rounding::Rz:
    return std::trunc(value);
  case Rounding::Rm:
    return negative ? std::ceil(value) : std::floor(value);
  case Rounding::Rp:
    return negative ? std::floor(value) : std::ceil(value);
  default:
    return std::nearbyint(value); // the default environment: nearest even
  }
}

} // namespace

namespace {

/// Round to nearest even of a value whose result is a normal number of
/// `format`, on the bits: the double's 53-bit significand loses its low
/// 52 - mantissaBits bits, a carry out of the significand moving the
/// exponent up. Empty where the result would be subnormal, infinite or NaN.
std::optional<uint64_t> roundNormalToNearest(double value,
                                             const Format &format) {
  uint64_t bits = doubleToBits(value);
  int exponent = static_cast<int>(bits >> 52 & 0x7FF) - 1023;
  if (exponent < format.minExponent || exponent > format.maxExponent)
    return std::nullopt;
  int dropped = 52 - format.mantissaBits;
  uint64_t significand = (bits & ((uint64_t(1) << 52) - 1)) | uint64_t(1) << 52;
  uint64_t kept = significand >> dropped;
  uint64_t rest = significand & ((uint64_t(1) << dropped) - 1);
  uint64_t half = uint64_t(1) << (dropped - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  if (kept >> (format.mantissaBits + 1)) {
    kept >>= 1;
    if (++exponent > format.maxExponent)
      return std::nullopt;
  }
  int totalBits = 1 + format.exponentBits + format.mantissaBits;
  uint64_t sign = (bits >> 63) << (totalBits - 1);
  uint64_t biased = exponent + ((1 << (format.exponentBits - 1)) - 1);
  return sign | biased << format.mantissaBits |
         (kept & ((uint64_t(1) << format.mantissaBits) - 1));
}

} // namespace

uint64_t roundToFormat(double value, Type type, Rounding rounding) {
  Format format = getFormat(type);
  // Most conversions: to nearest, to a normal result.
  if (rounding == Rounding::None || rounding == Rounding::Rn)
    if (std::optional<uint64_t> bits = roundNormalToNearest(value, format))
      return *bits;
  int totalBits = 1 + format.exponentBits + format.mantissaBits;
  uint64_t signBit = uint64_t(1) << (totalBits - 1);
  uint64_t infinity = ((uint64_t(1) << format.exponentBits) - 1)
                      << format.mantissaBits;
  if (std::isnan(value))
    return format.canonicalNaN;
  bool negative = std::signbit(value);
  uint64_t sign = negative ? signBit : 0;
  double magnitude = std::fabs(value);
  if (std::isinf(value))
    return sign | infinity;
  if (magnitude == 0)
    return sign;
  // The quantum (weight of the last fraction bit) at this magnitude.
  int exponent = std::max(std::ilogb(magnitude), format.minExponent);
  int quantumExponent = exponent - format.mantissaBits;
  // Magnitude in units of the quantum; rounding the magnitude with the
  // sign in mind gives directed modes for negative values.
  double units = roundToInteger(std::ldexp(magnitude, -quantumExponent),
                                rounding, negative);
  double rounded = std::ldexp(units, quantumExponent);
  double largest = std::ldexp(2.0 - std::ldexp(1.0, -format.mantissaBits),
                              format.maxExponent);
  if (rounded > largest) {
    bool toInfinity = rounding == Rounding::None || rounding == Rounding::Rn ||
                      (rounding == Rounding::Rp && !negative) ||
                      (rounding == Rounding::Rm && negative);
    if (toInfinity)
      return sign | infinity;
    rounded = largest;
  }
  if (rounded == 0)
    return sign;
  int roundedExponent = std::ilogb(rounded);
  if (roundedExponent < format.minExponent) {
    // Subnormal: the fraction field holds the value in quanta.
    return sign | static_cast<uint64_t>(std::ldexp(
                      rounded, -(format.minExponent - format.mantissaBits)));
  }
  uint64_t biased = roundedExponent + ((1 << (format.exponentBits - 1)) - 1);
  uint64_t fraction = static_cast<uint64_t>(
      std::ldexp(rounded, format.mantissaBits - roundedExponent) -
      std::ldexp(1.0, format.mantissaBits));
  return sign | (biased << format.mantissaBits) | fraction;
}

double halfBitsToDouble(uint16_t bits) {
  double sign = bits & 0x8000 ? -1.0 : 1.0;
  int exponent = (bits >> 10) & 0x1F;
  uint64_t fraction = bits & 0x3FF;
  if (exponent == 0x1F)
    return fraction ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0)
    return sign * (static_cast<double>(fraction) * 0x1p-24);
  // A normal half is a normal double: rebias the exponent, widen the
  // fraction.
  return bitsToDouble(uint64_t(bits & 0x8000) << 48 |
                      uint64_t(exponent - 15 + 1023) << 52 | fraction << 42);
}

double float8BitsToDouble(uint8_t bits, Type pairType) {
  bool e4m3 = pairType == Type::E4M3x2;
  int fractionBits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  int exponent = (bits & 0x7F) >> fractionBits;
  int fraction = bits & ((1 << fractionBits) - 1);
  int maxExponent = e4m3 ? 15 : 31;
  double sign = bits & 0x80 ? -1.0 : 1.0;
  if (exponent == maxExponent) {
    if (e4m3 && fraction != 7) // E4M3FN has normals up to 1.1111.110 = 448
      return sign * std::ldexp(fraction + 8, exponent - bias - 3);
    return fraction || e4m3 ? std::numeric_limits<double>::quiet_NaN()
                            : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) // subnormal: 0.fraction * 2^(1 - bias)
    return sign * std::ldexp(fraction, 1 - bias - fractionBits);
  return sign * std::ldexp(fraction + (1 << fractionBits),
                           exponent - bias - fractionBits);
}

double bfloat16BitsToDouble(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

double floatValue(uint64_t bits, Type type) {
  switch (type) {
  case Type::F16:
    return halfBitsToDouble(static_cast<uint16_t>(bits));
  case Type::BF16:
    return bfloat16BitsToDouble(static_cast<uint16_t>(bits));
  case Type::F64:
    return bitsToDouble(bits);
  default:
    return bitsToFloat(bits);
  }
}

} // namespace flashdecode::emu
