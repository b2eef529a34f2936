//===- Conversion.cpp - fdemu's cvt ---------------------------------------===//
//
// Integer widening and narrowing (with .sat), float to float through the one
// rounding routine of FloatFormats, float to integer rounded as asked,
// saturated and NaN to 0, integer to float, and packed fp8 pairs to f16x2.
//
//===----------------------------------------------------------------------===//

#include "Arithmetic.h"
#include "FloatFormats.h"

#include <cmath>

namespace flashdecode::emu {

uint64_t convert(const Instruction &inst, uint64_t source) {
  Type to = inst.type, from = inst.sourceType;
  unsigned toBytes = getTypeSize(to), fromBytes = getTypeSize(from);
  if (!isFloat(to) && !isFloat(from)) {
    if (inst.saturate) {
      __int128 value = isSigned(from) ? __int128(signExtend(source, fromBytes))
                                      : __int128(truncateTo(source, fromBytes));
      __int128 high = isSigned(to) ? (__int128(1) << (toBytes * 8 - 1)) - 1
                                   : (__int128(1) << (toBytes * 8)) - 1;
      __int128 low = isSigned(to) ? -high - 1 : 0;
      value = value > high ? high : value < low ? low : value;
      return truncateTo(static_cast<uint64_t>(value), toBytes);
    }
    uint64_t value = isSigned(from) ? signExtend(source, fromBytes)
                                    : truncateTo(source, fromBytes);
    return isSigned(to) ? signExtend(value, toBytes)
                        : truncateTo(value, toBytes);
  }
  if (isFloat(from) && isFloat(to)) {
    double value = floatValue(source, from);
    if (inst.ftz && from == Type::F32)
      value = flushSubnormal(static_cast<float>(value));
    if (inst.rounding >= Rounding::Rni) {
      value = inst.rounding == Rounding::Rni   ? std::nearbyint(value)
              : inst.rounding == Rounding::Rzi ? std::trunc(value)
              : inst.rounding == Rounding::Rmi ? std::floor(value)
                                               : std::ceil(value);
    }
    if (inst.saturate)
      value = value != value ? 0.0 : std::fmin(std::fmax(value, 0.0), 1.0);
    if (to == Type::F64)
      return value != value ? 0x7FFFFFFFFFFFFFFFull : doubleToBits(value);
    Rounding rounding =
        inst.rounding >= Rounding::Rni ? Rounding::Rn : inst.rounding;
    uint64_t bits = roundToFormat(value, to, rounding);
    if (inst.ftz && to == Type::F32)
      bits = floatToBits(flushSubnormal(bitsToFloat(bits)));
    return bits;
  }
  if (isFloat(from)) {
    // Float to integer: rounded as asked, saturated, NaN to 0.
    double value = floatValue(source, from);
    if (inst.ftz && from == Type::F32)
      value = flushSubnormal(static_cast<float>(value));
    if (value != value)
      return 0;
    value = inst.rounding == Rounding::Rni   ? std::nearbyint(value)
            : inst.rounding == Rounding::Rmi ? std::floor(value)
            : inst.rounding == Rounding::Rpi ? std::ceil(value)
                                             : std::trunc(value);
    if (isSigned(to)) {
      double high = std::ldexp(1.0, toBytes * 8 - 1);
      int64_t largest =
          toBytes == 8 ? INT64_MAX : (int64_t(1) << (toBytes * 8 - 1)) - 1;
      int64_t result = value >= high   ? largest
                       : value < -high ? -largest - 1
                                       : static_cast<int64_t>(value);
      return truncateTo(static_cast<uint64_t>(result), toBytes);
    }
    double high = std::ldexp(1.0, toBytes * 8);
    if (value >= high)
      return truncateTo(~0ull, toBytes);
    if (value <= 0)
      return 0;
    return static_cast<uint64_t>(value);
  }
  // Integer to float: exact in double for 32-bit sources; 64-bit sources
  // are rounded by the host conversion (nearest even).
  double value = isSigned(from)
                     ? static_cast<double>(signExtend(source, fromBytes))
                     : static_cast<double>(truncateTo(source, fromBytes));
  if (fromBytes == 8 && to == Type::F32)
    return floatToBits(isSigned(from)
                           ? static_cast<float>(signExtend(source, 8))
                           : static_cast<float>(source));
  if (to == Type::F64)
    return doubleToBits(value);
  return roundToFormat(value, to, inst.rounding);
}

// cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a (PTX ISA 9.7.9.21, cvt): "Each
// 8-bit input value in operand a is converted to .f16 type ... the value
// converted from the upper 8 bits of a is stored in the upper 16 bits of d
// and the value converted from the lower 8 bits of a is stored in the lower
// 16 bits of d"; ".relu clamps the result to 0 if negative. NaN results are
// converted to canonical NaN". Every fp8 value is an f16 value, so the
// conversion is exact (roundToFormat only re-encodes it). NaN inputs give
// the canonical f16 NaN 0x7FFF, sign dropped, with or without .relu: that
// is what CUDA 13.0's cuda_fp8.hpp computes where the instruction is absent
// (__nv_cvt_fp8_to_halfraw: "If NaN, return canonical NaN", 0x7FFF for both
// formats), and the canonical NaN of fdemu's other f16 conversions. .relu turns
// -0 into +0 as well: cuda_fp16.hpp's stand-in for the f16 .relu forms is
// max.NaN(x, +0), and PTX's max orders -0 below +0 (not measured on a GPU).
uint64_t convertFloat8Pair(const Instruction &inst, uint64_t source) {
  auto convertByte = [&](uint8_t bits) -> uint64_t {
    double value = float8BitsToDouble(bits, inst.sourceType);
    if (inst.relu && !(value > 0) && value == value)
      return 0;
    return roundToFormat(value, Type::F16, Rounding::Rn);
  };
  return convertByte(static_cast<uint8_t>(source >> 8)) << 16 |
         convertByte(static_cast<uint8_t>(source));
}

} // namespace flashdecode::emu
