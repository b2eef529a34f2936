//===- IntegerMath.h - Integer helpers of the planning library --*- C++ -*-===//
//
// Standard C++ stand-ins for llvm::divideCeil and llvm::PowerOf2Ceil: the
// planning library links neither LLVM nor MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_PLANNING_INTEGERMATH_H
#define FD_LIB_PLANNING_INTEGERMATH_H

#include <cstdint>

namespace flashdecode::detail {

inline int64_t ceilDiv(int64_t numerator, int64_t denominator) {
  return (numerator + denominator - 1) / denominator;
}

inline int64_t powerOf2Ceil(int64_t value) {
  int64_t power = 1;
  while (power < value)
    power *= 2;
  return power;
}

} // namespace flashdecode::detail

#endif // FD_LIB_PLANNING_INTEGERMATH_H
