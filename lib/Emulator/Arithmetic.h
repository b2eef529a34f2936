//===- Arithmetic.h - The ALU instructions' shared pieces -------*- C++ -*-===//
//
// Internal to fdemu: what the ALU files (Arithmetic, FloatArithmetic,
// IntegerArithmetic, Conversion) share.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_ARITHMETIC_H
#define FD_EMULATOR_ARITHMETIC_H

#include "WarpState.h"

namespace flashdecode::emu {

inline void writeRegister(WarpState &warp, uint32_t reg, int lane,
                          uint64_t value) {
  if (reg != kNoRegister)
    warp.reg(reg, lane) = value;
}
inline void writeDestination(WarpState &warp, const Instruction &inst, int lane,
                             uint64_t value) {
  writeRegister(warp, inst.operands[0].registers[0], lane, value);
}

/// f32, f64, f16/bf16 (and x2) arithmetic and special functions for the
/// lanes of `mask`; false for an opcode it does not handle.
bool executeFloat(const Instruction &inst, WarpState &warp, uint32_t mask);

/// setp's comparison of two floats (ordered and unordered forms) and of two
/// integers of `type` (signed or unsigned by the type).
bool compareFloat(Compare compare, double x, double y);
bool compareInteger(Compare compare, uint64_t x, uint64_t y, Type type);

/// add, sub, mul, mad, div, rem, min, max, abs, neg, the bitwise and bit
/// counting instructions on integer (or predicate) types for the lanes of
/// `mask`; false for an opcode it does not handle.
bool executeInteger(const Instruction &inst, WarpState &warp, uint32_t mask);
/// prmt's default mode: bytes of {b, a} selected by `selector`'s nibbles.
uint64_t permute(uint64_t a, uint64_t b, uint64_t selector);

/// cvt of one value from inst.sourceType to inst.type.
uint64_t convert(const Instruction &inst, uint64_t source);
/// cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}: the two fp8 values of `source`'s
/// low 16 bits as an f16 pair (the high byte's in the high half).
uint64_t convertFloat8Pair(const Instruction &inst, uint64_t source);

/// lop3.b32: bit i of the result is bit (a_i b_i c_i, read as a 3-bit
/// number) of `lookupTable`.
uint64_t lookup3(uint64_t a, uint64_t b, uint64_t c, uint64_t lookupTable);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_ARITHMETIC_H
