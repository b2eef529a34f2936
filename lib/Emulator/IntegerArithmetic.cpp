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

namespace {

unsigned __int128 widen(uint64_t value, unsigned bytes, bool isSignedType) {
  return isSignedType
             ? static_cast<unsigned __int128>(
                   static_cast<__int128>(signExtend(value, bytes)))
             : static_cast<unsigned __int128>(truncateTo(value, bytes));
}

/// Writes `operation(a, b, c)` of the lanes of `mask` (c: the third source
/// where the instruction has one, else 0), truncated to `resultBytes`
/// unless a predicate. Each opcode picks its operation once per warp
/// instruction, not per lane.
template <typename Operation>
void forEachLaneResult(const Instruction &inst, WarpState &warp, uint32_t mask,
                       unsigned resultBytes, Operation operation) {
  const Operand &a = inst.operands[1], &b = inst.operands[2],
                &c = inst.operands[3];
  bool hasThird = inst.opcode == Opcode::Mad || inst.opcode == Opcode::Bfe;
  bool predicate = inst.type == Type::Pred;
  forEachLane(mask, [&](int lane) {
    uint64_t result =
        operation(readOperand(warp, a, lane), readOperand(warp, b, lane),
                  hasThird ? readOperand(warp, c, lane) : 0);
    writeDestination(warp, inst, lane,
                     predicate ? result : truncateTo(result, resultBytes));
  });
}

} // namespace

bool executeInteger(const Instruction &inst, WarpState &warp, uint32_t mask) {
  unsigned bytes = getTypeSize(inst.type);
  unsigned bits = bytes * 8;
  bool sign = isSigned(inst.type);
  bool predicate = inst.type == Type::Pred;
  // Results as wide as the type, or `resultBytes` (mul/mad .wide: twice
  // that; popc, clz: 4).
  auto lanesTo = [&](unsigned resultBytes, auto operation) {
    forEachLaneResult(inst, warp, mask, resultBytes, operation);
    return true;
  };
  auto lanes = [&](auto operation) { return lanesTo(bytes, operation); };
  auto sx = [=](uint64_t x) { return signExtend(x, bytes); };
  auto ux = [=](uint64_t x) { return truncateTo(x, bytes); };
  switch (inst.opcode) {
  case Opcode::Add:
  case Opcode::Sub: {
    bool add = inst.opcode == Opcode::Add;
    if (inst.saturate && sign)
      return lanes([=](uint64_t x, uint64_t y, uint64_t) {
        __int128 wide = add ? __int128(sx(x)) + sx(y) : __int128(sx(x)) - sx(y);
        __int128 high = (__int128(1) << (bits - 1)) - 1, low = -high - 1;
        return static_cast<uint64_t>(wide > high  ? high
                                     : wide < low ? low
                                                  : wide);
      });
    if (add)
      return lanes([](uint64_t x, uint64_t y, uint64_t) { return x + y; });
    return lanes([](uint64_t x, uint64_t y, uint64_t) { return x - y; });
  }
  case Opcode::Mul:
  case Opcode::Mad: {
    // .wide: the product's low 2 x bits (the result type is twice as wide);
    // .hi: its high bits; .lo: its low bits. Mad adds c (0 for mul).
    unsigned shift = inst.high && !inst.wide ? bits : 0;
    unsigned resultBytes = inst.wide ? 2 * bytes : bytes;
    return lanesTo(resultBytes, [=](uint64_t x, uint64_t y, uint64_t z) {
      unsigned __int128 product = widen(x, bytes, sign) * widen(y, bytes, sign);
      return static_cast<uint64_t>(product >> shift) + z;
    });
  }
  case Opcode::Div:
    return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
      if (ux(y) == 0)
        return ~0ull;
      if (sign)
        return sx(y) == -1 ? static_cast<uint64_t>(-sx(x)) : sx(x) / sx(y);
      return ux(x) / ux(y);
    });
  case Opcode::Rem:
    return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
      if (ux(y) == 0)
        return x;
      if (sign)
        return sx(y) == -1 ? 0 : sx(x) % sx(y);
      return ux(x) % ux(y);
    });
  case Opcode::Min:
    if (sign)
      return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
        return std::min(sx(x), sx(y));
      });
    return lanes([=](uint64_t x, uint64_t y, uint64_t) {
      return std::min(ux(x), ux(y));
    });
  case Opcode::Max:
    if (sign)
      return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
        return std::max(sx(x), sx(y));
      });
    return lanes([=](uint64_t x, uint64_t y, uint64_t) {
      return std::max(ux(x), ux(y));
    });
  case Opcode::Abs:
    return lanes([=](uint64_t x, uint64_t, uint64_t) -> uint64_t {
      return sx(x) < 0 ? -static_cast<uint64_t>(sx(x)) : sx(x);
    });
  case Opcode::Neg:
    return lanes([](uint64_t x, uint64_t, uint64_t) { return -x; });
  case Opcode::And:
    if (predicate)
      return lanes(
          [](uint64_t x, uint64_t y, uint64_t) -> uint64_t { return x && y; });
    return lanes([](uint64_t x, uint64_t y, uint64_t) { return x & y; });
  case Opcode::Or:
    if (predicate)
      return lanes(
          [](uint64_t x, uint64_t y, uint64_t) -> uint64_t { return x || y; });
    return lanes([](uint64_t x, uint64_t y, uint64_t) { return x | y; });
  case Opcode::Xor:
    if (predicate)
      return lanes([](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
        return !x != !y;
      });
    return lanes([](uint64_t x, uint64_t y, uint64_t) { return x ^ y; });
  case Opcode::Not:
    if (predicate)
      return lanes(
          [](uint64_t x, uint64_t, uint64_t) -> uint64_t { return !x; });
    return lanes([](uint64_t x, uint64_t, uint64_t) { return ~x; });
  case Opcode::CNot:
    return lanes(
        [=](uint64_t x, uint64_t, uint64_t) -> uint64_t { return ux(x) == 0; });
  case Opcode::Shl:
    return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
      uint64_t amount = truncateTo(y, 4);
      return amount >= bits ? 0 : x << amount;
    });
  case Opcode::Shr:
    if (sign)
      return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
        uint64_t amount = truncateTo(y, 4);
        return amount >= bits ? (sx(x) < 0 ? ~0ull : 0) : sx(x) >> amount;
      });
    return lanes([=](uint64_t x, uint64_t y, uint64_t) -> uint64_t {
      uint64_t amount = truncateTo(y, 4);
      return amount >= bits ? 0 : ux(x) >> amount;
    });
  case Opcode::Bfe:
    // Bit i is a[position + i] while i < length and position + i is inside
    // the type; every other bit is the field's sign (0 when unsigned), so
    // a field reaching past the top is sign-filled from there.
    return lanes([=](uint64_t x, uint64_t y, uint64_t z) -> uint64_t {
      unsigned position = y & 0xFF, length = z & 0xFF;
      if (length == 0)
        return 0;
      unsigned kept = position >= bits ? 0 : std::min(length, bits - position);
      uint64_t field = 0;
      if (kept >= 64)
        field = ux(x);
      else if (kept > 0)
        field = (ux(x) >> position) & ((uint64_t(1) << kept) - 1);
      unsigned top = std::min(position + length - 1, bits - 1);
      if (sign && kept < 64 && ((ux(x) >> top) & 1))
        field |= ~0ull << kept;
      return field;
    });
  case Opcode::Popc:
    return lanesTo(4, [=](uint64_t x, uint64_t, uint64_t) -> uint64_t {
      return __builtin_popcountll(ux(x));
    });
  case Opcode::Clz:
    return lanesTo(4, [=](uint64_t x, uint64_t, uint64_t) -> uint64_t {
      return ux(x) == 0 ? bits : __builtin_clzll(ux(x)) - (64 - bits);
    });
  case Opcode::Brev:
    return lanes([=](uint64_t x, uint64_t, uint64_t) {
      uint64_t reversed = 0;
      for (unsigned i = 0; i < bits; ++i)
        reversed |= ((ux(x) >> i) & 1) << (bits - 1 - i);
      return reversed;
    });
  default:
    return false;
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
