//===- APFloatOracle.h - LLVM's APFloat as the codecs' oracle ---*- C++ -*-===//
//
// The reference codec tests (ReferenceTest: f16, bf16; ReferenceFloat8Test:
// e4m3fn, e5m2) check the reference's conversions against what LLVM's
// APFloat makes of the same values: an implementation written apart from it.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_APFLOATORACLE_H
#define FD_UNITTESTS_APFLOATORACLE_H

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flashdecode::test {

/// The bit pattern APFloat makes of `value` in the 8- or 16-bit `semantics`,
/// rounding to nearest even.
inline uint16_t apfloatBits(float value, const llvm::fltSemantics &semantics) {
  llvm::APFloat converted(value);
  bool losesInfo = false;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return converted.bitcastToAPInt().getZExtValue();
}

/// The float APFloat reads from `bits` in the 8- or 16-bit `semantics`.
inline float apfloatValue(uint16_t bits, const llvm::fltSemantics &semantics) {
  llvm::APFloat value(
      semantics, llvm::APInt(llvm::APFloat::getSizeInBits(semantics), bits));
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToFloat();
}

/// Equal bit for bit (so -0 is not +0), or both NaN.
inline bool sameFloat(float lhs, float rhs) {
  return (std::isnan(lhs) && std::isnan(rhs)) ||
         std::memcmp(&lhs, &rhs, sizeof(float)) == 0;
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_APFLOATORACLE_H
