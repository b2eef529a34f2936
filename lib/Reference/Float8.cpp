//===- Float8.cpp - exact FP8 codecs for the reference --------------------===//

#include "fd/Reference/Float8.h"
#include "Rounding.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashdecode::reference {

using detail::shiftRightRoundingToEven;

namespace {

/// An 8-bit float: a sign bit, the biased exponent, then `mantissaBits`. Every
/// magnitude above `maxFinite` is special: with infinities maxFinite + 1 is
/// infinity and the rest NaN (E5M2); without, they are all NaN (E4M3FN's one
/// NaN, S.1111.111).
struct Float8Format {
  unsigned mantissaBits;
  unsigned bias;
  uint8_t maxFinite;
  bool hasInfinity;
  /// The NaN the encoder writes, as ml_dtypes does.
  uint8_t quietNaN;
};

constexpr Float8Format e4m3fn = {3, 7, 0x7e, false, 0x7f};
constexpr Float8Format e5m2 = {2, 15, 0x7b, true, 0x7e};

} // namespace

static uint8_t encode(const Float8Format &format, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint8_t sign = (bits >> 24) & 0x80;
  uint32_t magnitude = bits & 0x7fffffff;
  // What overflows a format without infinities is NaN, as in APFloat.
  uint8_t overflow =
      format.hasInfinity ? format.maxFinite + 1 : format.quietNaN;
  if (magnitude > 0x7f800000)
    return sign | format.quietNaN;
  if (magnitude == 0x7f800000)
    return sign | overflow;
  // Float exponents (biased by 127) of the smallest normal FP8 and of half
  // the smallest subnormal FP8, 2^(1 - bias) and 2^(-bias - mantissaBits).
  uint32_t minNormal = 128 - format.bias;
  uint32_t halfMinSubnormal = 127 - format.bias - format.mantissaBits;
  if (magnitude >= minNormal << 23) {
    // Rebias 127 -> bias; a carry out of the mantissa bumps the exponent.
    uint32_t rounded = shiftRightRoundingToEven(
        magnitude - ((127 - format.bias) << 23), 23 - format.mantissaBits);
    return sign | (rounded > format.maxFinite ? overflow : rounded);
  }
  if (magnitude < halfMinSubnormal << 23)
    return sign;
  // A subnormal FP8 counts units of 2^(1 - bias - mantissaBits); rounding the
  // largest ones up gives the smallest normal's bits.
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  return sign |
         shiftRightRoundingToEven(mantissa, halfMinSubnormal + 24 - exponent);
}

static float decode(const Float8Format &format, uint8_t bits) {
  float sign = (bits & 0x80) ? -1.0f : 1.0f;
  uint32_t magnitude = bits & 0x7f;
  if (magnitude > format.maxFinite)
    return format.hasInfinity && magnitude == format.maxFinite + 1u
               ? sign * std::numeric_limits<float>::infinity()
               : std::numeric_limits<float>::quiet_NaN();
  uint32_t exponent = magnitude >> format.mantissaBits;
  uint32_t mantissa = magnitude & ((1u << format.mantissaBits) - 1);
  int unitExponent = 1 - static_cast<int>(format.bias + format.mantissaBits);
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), unitExponent);
  return sign *
         std::ldexp(static_cast<float>(mantissa | (1u << format.mantissaBits)),
                    unitExponent + static_cast<int>(exponent) - 1);
}

uint8_t floatToFloat8E4M3FN(float value) { return encode(e4m3fn, value); }

float float8E4M3FNToFloat(uint8_t bits) { return decode(e4m3fn, bits); }

uint8_t floatToFloat8E5M2(float value) { return encode(e5m2, value); }

float float8E5M2ToFloat(uint8_t bits) { return decode(e5m2, bits); }

} // namespace flashdecode::reference
