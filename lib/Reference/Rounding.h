//===- Rounding.h - Bit-level rounding shared by the reference codecs
//------===//
//
// Private to the reference library: the f16/bf16 (Reference.cpp) and fp8
// (Float8.cpp) encoders round the same way.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_REFERENCE_ROUNDING_H
#define FD_LIB_REFERENCE_ROUNDING_H

#include <cstdint>

namespace flashdecode::reference::detail {

/// Drops the low `shift` (>= 1) bits of `value`, rounding to nearest even.
inline uint32_t shiftRightRoundingToEven(uint32_t value, unsigned shift) {
  uint32_t kept = value >> shift;
  uint32_t remainder = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (kept & 1)))
    ++kept;
  return kept;
}

} // namespace flashdecode::reference::detail

#endif // FD_LIB_REFERENCE_ROUNDING_H
