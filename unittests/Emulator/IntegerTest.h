//===- IntegerTest.h - Inputs of the integer instruction tests --*- C++ -*-===//
//
// Random bit patterns after each type's edge values, small values for shift
// amounts and bit positions, and divisors PTX defines a quotient for.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_EMULATOR_INTEGERTEST_H
#define FD_UNITTESTS_EMULATOR_INTEGERTEST_H

#include "ElementwiseKernel.h"

#include <limits>

namespace flashdecode::emutest {

class IntegerTest : public ElementwiseTest {
protected:
  static constexpr size_t kCount = 2000;

  template <typename T> std::vector<T> values() {
    using Limits = std::numeric_limits<T>;
    return randomBits<T>(kCount,
                         {0, 1, T(-1), Limits::min(), Limits::max(),
                          T(Limits::min() + 1), T(Limits::max() - 1), 2, 3, 7});
  }
  /// Values in [0, limit), e.g. shift amounts and bit positions.
  template <typename T> std::vector<T> small(uint64_t limit) {
    std::vector<T> result;
    for (size_t i = 0; i < kCount + 10; ++i)
      result.push_back(static_cast<T>(i < limit ? i : random() % limit));
    return result;
  }
  /// Divisors: no zero; -1 only where the dividend is not the minimum.
  template <typename T>
  std::vector<T> divisors(const std::vector<T> &dividends) {
    std::vector<T> result = values<T>();
    for (size_t i = 0; i < result.size(); ++i)
      if (result[i] == 0 || (std::is_signed_v<T> && result[i] == T(-1) &&
                             dividends[i] == std::numeric_limits<T>::min()))
        result[i] = 3;
    return result;
  }
};

// Short names for the PTX types the tests spell out.
using u16 = uint16_t;
using s16 = int16_t;
using u32 = uint32_t;
using s32 = int32_t;
using u64 = uint64_t;
using s64 = int64_t;
using u128 = unsigned __int128;
using s128 = __int128;

} // namespace flashdecode::emutest

#endif // FD_UNITTESTS_EMULATOR_INTEGERTEST_H
