//===- IntegerArithmetic.cpp - fdemu's integer and bitwise instructions ---===//
//
// Computed in 64 (or, for products, 128) bits from operands sign- or
// zero-extended by the instruction's type, then truncated to the result's
// width.
//
//===----------------------------------------------------------------------===//

#include "Arithmetic.h"

#include <algorithm>

namespace flashdecode::emu {

bool compareInteger(Compare compare, uint64_t x, uint64_t y, Type type) {
  unsigned bytes = getTypeSize(type);
  if (isSigned(type)) {
    int64_t sx = signExtend(x, bytes), sy = signExtend(y, bytes);
    switch (compare) {
    case Compare::Eq:
      return sx == sy;
    case Compare::Ne:
      return sx != sy;
    case Compare::Lt:
      return sx < sy;
    case Compare::Le:
      return sx <= sy;
    case Compare::Gt:
      return sx > sy;
    case Compare::Ge:
      return sx >= sy;
    default:
      return false;
    }
  }
  x = truncateTo(x, bytes);
  y = truncateTo(y, bytes);
  switch (compare) {
  case Compare::Eq:
    return x == y;
  case Compare::Ne:
    return x != y;
  case Compare::Lt:
  case Compare::Lo:
    return x < y;
  case Compare::Le:
  case Compare::Ls:
    return x <= y;
  case Compare::Gt:
  case Compare::Hi:
    return x > y;
  case Compare::Ge:
  case Compare::Hs:
    return x >= y;
  default:
    return false;
  }
}

/// f16/bf16 (and their x2 forms) and f64 arithmetic through double.

namespace {

unsigned __int128 widen(uint64_t value, unsigned bytes, bool isSignedType) {
  return isSignedType
             ? static_cast<unsigned __int128>(
                   static_cast<__int128>(signExtend(value, bytes)))
             : static_cast<unsigned __int128>(truncateTo(value, bytes));
}

} // namespace

uint64_t integerOperation(const Instruction &inst, uint64_t x, uint64_t y,
                          uint64_t z) {
  unsigned bytes = getTypeSize(inst.type);
  unsigned bits = bytes * 8;
  bool sign = isSigned(inst.type);
  int64_t sx = signExtend(x, bytes), sy = signExtend(y, bytes);
  uint64_t ux = truncateTo(x, bytes), uy = truncateTo(y, bytes);
  switch (inst.opcode) {
  case Opcode::Add:
  case Opcode::Sub: {
    if (inst.saturate && sign) {
      __int128 wide =
          inst.opcode == Opcode::Add ? __int128(sx) + sy : __int128(sx) - sy;
      __int128 high = (__int128(1) << (bits - 1)) - 1, low = -high - 1;
      return static_cast<uint64_t>(wide > high  ? high
                                   : wide < low ? low
                                                : wide);
    }
    return inst.opcode == Opcode::Add ? x + y : x - y;
  }
  case Opcode::Mul:
  case Opcode::Mad: {
    unsigned __int128 product = widen(x, bytes, sign) * widen(y, bytes, sign);
    if (inst.wide)
      return static_cast<uint64_t>(product) + z;
    if (inst.high)
      return static_cast<uint64_t>(product >> bits) + z;
    return static_cast<uint64_t>(product) + z;
  }
  case Opcode::Div:
    if (uy == 0)
      return ~0ull;
    if (sign)
      return sy == -1 ? static_cast<uint64_t>(-sx) : sx / sy;
    return ux / uy;
  case Opcode::Rem:
    if (uy == 0)
      return x;
    if (sign)
      return sy == -1 ? 0 : sx % sy;
    return ux % uy;
  case Opcode::Min:
    return sign ? (sx < sy ? sx : sy) : (ux < uy ? ux : uy);
  case Opcode::Max:
    return sign ? (sx > sy ? sx : sy) : (ux > uy ? ux : uy);
  case Opcode::Abs:
    return sx < 0 ? -static_cast<uint64_t>(sx) : sx;
  case Opcode::Neg:
    return -x;
  case Opcode::And:
    return inst.type == Type::Pred ? (x && y) : x & y;
  case Opcode::Or:
    return inst.type == Type::Pred ? (x || y) : x | y;
  case Opcode::Xor:
    return inst.type == Type::Pred ? (!x != !y) : x ^ y;
  case Opcode::Not:
    return inst.type == Type::Pred ? !x : ~x;
  case Opcode::CNot:
    return ux == 0;
  case Opcode::Shl:
    return truncateTo(y, 4) >= bits ? 0 : x << truncateTo(y, 4);
  case Opcode::Shr: {
    uint64_t amount = truncateTo(y, 4);
    if (sign)
      return amount >= bits ? (sx < 0 ? ~0ull : 0) : sx >> amount;
    return amount >= bits ? 0 : ux >> amount;
  }
  case Opcode::Bfe: {
    // Bit i is a[position + i] while i < length and position + i is inside
    // the type; every other bit is the field's sign (0 when unsigned), so
    // a field reaching past the top is sign-filled from there.
    unsigned position = y & 0xFF, length = z & 0xFF;
    if (length == 0)
      return 0;
    unsigned kept = position >= bits ? 0 : std::min(length, bits - position);
    uint64_t field = 0;
    if (kept >= 64)
      field = ux;
    else if (kept > 0)
      field = (ux >> position) & ((uint64_t(1) << kept) - 1);
    unsigned top = std::min(position + length - 1, bits - 1);
    if (sign && kept < 64 && ((ux >> top) & 1))
      field |= ~0ull << kept;
    return field;
  }
  case Opcode::Popc:
    return __builtin_popcountll(ux);
  case Opcode::Clz:
    return ux == 0 ? bits : __builtin_clzll(ux) - (64 - bits);
  case Opcode::Brev: {
    uint64_t reversed = 0;
    for (unsigned i = 0; i < bits; ++i)
      reversed |= ((ux >> i) & 1) << (bits - 1 - i);
    return reversed;
  }
  default:
    return 0;
  }
}

uint64_t lookup3(uint64_t a, uint64_t b, uint64_t c, uint64_t lookupTable) {
  uint32_t result = 0;
  for (int i = 0; i < 32; ++i) {
    unsigned index = ((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1);
    result |= static_cast<uint32_t>((lookupTable >> index) & 1) << i;
  }
  return result;
}

uint64_t permute(uint64_t a, uint64_t b, uint64_t selector) {
  uint64_t bytes = (truncateTo(b, 4) << 32) | truncateTo(a, 4);
  uint32_t result = 0;
  for (int i = 0; i < 4; ++i) {
    unsigned nibble = (selector >> (4 * i)) & 0xF;
    uint32_t byte = (bytes >> (8 * (nibble & 7))) & 0xFF;
    if (nibble & 8)
      byte = (byte & 0x80) ? 0xFF : 0;
    result |= byte << (8 * i);
  }
  return result;
}

} // namespace flashdecode::emu
