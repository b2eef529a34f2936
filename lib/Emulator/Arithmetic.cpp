//===- Arithmetic.cpp - ALU instructions of fdemu -------------------------===//
//
// Integer, logic, comparison, selection, conversion, move and floating-point
// instructions, one loop over the active lanes each. f32 arithmetic is host
// f32 arithmetic (round to nearest even, fused multiply-add exact); NaN
// results are the canonical NaN a GPU writes (0x7FFFFFFF). f16/bf16
// arithmetic is computed in double and rounded once to the format. The
// .approx functions return correctly rounded results (a GPU's differ by at
// most 2 ulp; docs/Emulator.md).
//
//===----------------------------------------------------------------------===//

#include "FloatFormats.h"
#include "WarpState.h"

#include <cmath>
#include <limits>

namespace fd::emu {
namespace {

inline void writeRegister(WarpState &warp, uint32_t reg, int lane,
                          uint64_t value) {
  if (reg != kNoRegister)
    warp.reg(reg, lane) = value;
}
inline void writeDestination(WarpState &warp, const Instruction &inst, int lane,
                             uint64_t value) {
  writeRegister(warp, inst.operands[0].registers[0], lane, value);
}

inline uint64_t canonicalFloat(float value) {
  return value != value ? 0x7FFFFFFFull : floatToBits(value);
}

inline float saturateFloat(float value) {
  if (value != value)
    return 0.0f;
  return std::fmin(std::fmax(value, 0.0f), 1.0f);
}

/// An f32 instruction of up to three sources with .ftz and .sat handled.
template <typename Compute>
void floatLanes(const Instruction &inst, WarpState &warp, uint32_t mask,
                Compute compute) {
  const Operand &a = inst.operands[1], &b = inst.operands[2],
                &c = inst.operands[3];
  forEachLane(mask, [&](int lane) {
    float x = bitsToFloat(readOperand(warp, a, lane));
    float y = bitsToFloat(readOperand(warp, b, lane));
    float z = bitsToFloat(readOperand(warp, c, lane));
    if (inst.ftz) {
      x = flushSubnormal(x);
      y = flushSubnormal(y);
      z = flushSubnormal(z);
    }
    float result = compute(x, y, z);
    if (inst.ftz)
      result = flushSubnormal(result);
    if (inst.saturate)
      result = saturateFloat(result);
    writeDestination(warp, inst, lane, canonicalFloat(result));
  });
}

float minMax(float x, float y, bool isMax, bool propagateNaN) {
  if (x != x || y != y) {
    if (propagateNaN || (x != x && y != y))
      return std::numeric_limits<float>::quiet_NaN();
    return x != x ? y : x;
  }
  if (x == 0 && y == 0)
    return isMax ? (std::signbit(x) ? y : x) : (std::signbit(x) ? x : y);
  return isMax ? (x > y ? x : y) : (x < y ? x : y);
}

bool compareFloat(Compare compare, double x, double y) {
  bool unordered = x != x || y != y;
  switch (compare) {
  case Compare::Eq:
    return !unordered && x == y;
  case Compare::Ne:
    return !unordered && x != y;
  case Compare::Lt:
    return !unordered && x < y;
  case Compare::Le:
    return !unordered && x <= y;
  case Compare::Gt:
    return !unordered && x > y;
  case Compare::Ge:
    return !unordered && x >= y;
  case Compare::Equ:
    return unordered || x == y;
  case Compare::Neu:
    return unordered || x != y;
  case Compare::Ltu:
    return unordered || x < y;
  case Compare::Leu:
    return unordered || x <= y;
  case Compare::Gtu:
    return unordered || x > y;
  case Compare::Geu:
    return unordered || x >= y;
  case Compare::Num:
    return !unordered;
  case Compare::Nan:
    return unordered;
  default:
    return false;
  }
}

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
double halfArithmetic(Opcode opcode, double x, double y, double z,
                      bool propagateNaN) {
  switch (opcode) {
  case Opcode::Add:
    return x + y;
  case Opcode::Sub:
    return x - y;
  case Opcode::Mul:
    return x * y;
  case Opcode::Fma:
  case Opcode::Mad:
    return std::fma(x, y, z);
  case Opcode::Min:
  case Opcode::Max:
    return minMax(static_cast<float>(x), static_cast<float>(y),
                  opcode == Opcode::Max, propagateNaN);
  case Opcode::Neg:
    return -x;
  case Opcode::Abs:
    return std::fabs(x);
  case Opcode::Ex2:
    return std::exp2(x);
  default:
    return std::numeric_limits<double>::quiet_NaN();
  }
}

/// x * y + z of f16/bf16 values, rounded to odd in double: the product is
/// exact, and an inexact sum gets an odd last bit, so the one rounding to
/// the 16-bit format that follows is correct. (Rounding to nearest twice
/// is not: bf16's range lets the addend fall below double's precision and
/// leave an exact tie of the format.)
double fusedMultiplyAddToOdd(double x, double y, double z) {
  double product = x * y;
  double sum = product + z;
  if (!std::isfinite(sum))
    return sum;
  // TwoSum: the exact error of the sum.
  double productPart = sum - z;
  double error = (product - productPart) + (z - (sum - productPart));
  if (error == 0 || (doubleToBits(sum) & 1))
    return sum;
  return std::nextafter(sum, error > 0
                                 ? std::numeric_limits<double>::infinity()
                                 : -std::numeric_limits<double>::infinity());
}

/// .ftz on a 16-bit float: a subnormal becomes a zero of its sign.
uint64_t flushNarrowSubnormal(uint64_t bits, Type element) {
  uint64_t exponent = element == Type::F16 ? 0x7C00 : 0x7F80;
  return bits & exponent ? bits : bits & 0x8000;
}

void executeNarrowFloat(const Instruction &inst, WarpState &warp,
                        uint32_t mask) {
  bool isPair = inst.type == Type::F16x2 || inst.type == Type::BF16x2;
  Type element = inst.type == Type::F16x2    ? Type::F16
                 : inst.type == Type::BF16x2 ? Type::BF16
                                             : inst.type;
  forEachLane(mask, [&](int lane) {
    uint64_t result = 0;
    for (int half = 0; half < (isPair ? 2 : 1); ++half) {
      auto operand = [&](int i) {
        uint64_t bits =
            readOperand(warp, inst.operands[i], lane) >> (16 * half) & 0xFFFF;
        return floatValue(inst.ftz ? flushNarrowSubnormal(bits, element) : bits,
                          element);
      };
      bool fused = inst.opcode == Opcode::Fma || inst.opcode == Opcode::Mad;
      double value =
          fused ? fusedMultiplyAddToOdd(operand(1), operand(2), operand(3))
                : halfArithmetic(inst.opcode, operand(1), operand(2),
                                 operand(3), inst.propagateNaN);
      uint64_t bits = roundToFormat(value, element, inst.rounding);
      if (inst.ftz)
        bits = flushNarrowSubnormal(bits, element);
      if (inst.saturate) {
        double rounded = floatValue(bits, element);
        bits = roundToFormat(
            rounded != rounded ? 0.0 : std::fmin(std::fmax(rounded, 0.0), 1.0),
            element, Rounding::Rn);
      }
      result |= bits << (16 * half);
    }
    writeDestination(warp, inst, lane, result);
  });
}

void executeF64(const Instruction &inst, WarpState &warp, uint32_t mask) {
  forEachLane(mask, [&](int lane) {
    double x = bitsToDouble(readOperand(warp, inst.operands[1], lane));
    double y = bitsToDouble(readOperand(warp, inst.operands[2], lane));
    double z = bitsToDouble(readOperand(warp, inst.operands[3], lane));
    double result;
    switch (inst.opcode) {
    case Opcode::Div:
      result = x / y;
      break;
    case Opcode::Rcp:
      result = 1.0 / x;
      break;
    case Opcode::Sqrt:
      result = std::sqrt(x);
      break;
    case Opcode::Rsqrt:
      result = 1.0 / std::sqrt(x);
      break;
    case Opcode::Min:
    case Opcode::Max:
      result = (x != x)                     ? y
               : (y != y)                   ? x
               : inst.opcode == Opcode::Max ? std::fmax(x, y)
                                            : std::fmin(x, y);
      break;
    default:
      result = halfArithmetic(inst.opcode, x, y, z, inst.propagateNaN);
    }
    writeDestination(warp, inst, lane,
                     result != result ? 0x7FFFFFFFFFFFFFFFull
                                      : doubleToBits(result));
  });
}

bool executeF32(const Instruction &inst, WarpState &warp, uint32_t mask) {
  bool directed = inst.rounding == Rounding::Rz ||
                  inst.rounding == Rounding::Rm ||
                  inst.rounding == Rounding::Rp;
  if (directed && (inst.opcode == Opcode::Add || inst.opcode == Opcode::Sub ||
                   inst.opcode == Opcode::Fma || inst.opcode == Opcode::Mad)) {
    // x * y + z (y = 1 for add and sub) rounded to odd in double, then once
    // to f32 in the asked mode: a float product is exact in double, and
    // 53 bits leave the one rounding to f32 correct.
    floatLanes(inst, warp, mask, [&](float x, float y, float z) {
      bool isFused = inst.opcode == Opcode::Fma || inst.opcode == Opcode::Mad;
      double product = isFused ? double(x) * y : x;
      double addend = isFused ? z : inst.opcode == Opcode::Sub ? -y : y;
      double sum = fusedMultiplyAddToOdd(product, 1.0, addend);
      // An exact zero from operands of opposite signs is -0 when rounding
      // down and +0 otherwise (IEEE 754 6.3).
      if (sum == 0 && !(product == 0 && addend == 0 &&
                        std::signbit(product) == std::signbit(addend)))
        sum = inst.rounding == Rounding::Rm ? -0.0 : 0.0;
      return bitsToFloat(roundToFormat(sum, Type::F32, inst.rounding));
    });
    return true;
  }
  switch (inst.opcode) {
  case Opcode::Add:
    floatLanes(inst, warp, mask, [](float x, float y, float) { return x + y; });
    return true;
  case Opcode::Sub:
    floatLanes(inst, warp, mask, [](float x, float y, float) { return x - y; });
    return true;
  case Opcode::Mul:
    if (directed) {
      // The exact product fits in a double; round it once as asked.
      floatLanes(inst, warp, mask, [&](float x, float y, float) {
        return bitsToFloat(
            roundToFormat(double(x) * y, Type::F32, inst.rounding));
      });
      return true;
    }
    floatLanes(inst, warp, mask, [](float x, float y, float) { return x * y; });
    return true;
  case Opcode::Fma:
  case Opcode::Mad:
    floatLanes(inst, warp, mask,
               [](float x, float y, float z) { return std::fmaf(x, y, z); });
    return true;
  case Opcode::Div:
    floatLanes(inst, warp, mask, [](float x, float y, float) { return x / y; });
    return true;
  case Opcode::Min:
  case Opcode::Max: {
    bool isMax = inst.opcode == Opcode::Max;
    floatLanes(inst, warp, mask, [&](float x, float y, float) {
      return minMax(x, y, isMax, inst.propagateNaN);
    });
    return true;
  }
  case Opcode::Abs:
    floatLanes(inst, warp, mask,
               [](float x, float, float) { return std::fabs(x); });
    return true;
  case Opcode::Neg:
    floatLanes(inst, warp, mask, [](float x, float, float) { return -x; });
    return true;
  case Opcode::Rcp:
    floatLanes(inst, warp, mask,
               [](float x, float, float) { return 1.0f / x; });
    return true;
  case Opcode::Sqrt:
    floatLanes(inst, warp, mask,
               [](float x, float, float) { return std::sqrt(x); });
    return true;
  case Opcode::Rsqrt:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(1.0 / std::sqrt(double(x)));
    });
    return true;
  case Opcode::Ex2:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(std::exp2(double(x)));
    });
    return true;
  case Opcode::Lg2:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(std::log2(double(x)));
    });
    return true;
  case Opcode::Sin:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(std::sin(double(x)));
    });
    return true;
  case Opcode::Cos:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(std::cos(double(x)));
    });
    return true;
  case Opcode::Tanh:
    floatLanes(inst, warp, mask, [](float x, float, float) {
      return static_cast<float>(std::tanh(double(x)));
    });
    return true;
  default:
    return false;
  }
}

unsigned __int128 widen(uint64_t value, unsigned bytes, bool isSignedType) {
  return isSignedType
             ? static_cast<unsigned __int128>(
                   static_cast<__int128>(signExtend(value, bytes)))
             : static_cast<unsigned __int128>(truncateTo(value, bytes));
}

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

void executeMov(const Instruction &inst, WarpState &warp, uint32_t mask) {
  const Operand &destination = inst.operands[0], &source = inst.operands[1];
  unsigned bytes = getTypeSize(inst.type);
  if (destination.kind == Operand::Kind::Vector) {
    unsigned part = bytes / destination.count;
    forEachLane(mask, [&](int lane) {
      uint64_t value = readOperand(warp, source, lane);
      for (unsigned i = 0; i < destination.count; ++i)
        writeRegister(warp, destination.registers[i], lane,
                      truncateTo(value >> (8 * part * i), part));
    });
  } else if (source.kind == Operand::Kind::Vector) {
    unsigned part = bytes / source.count;
    forEachLane(mask, [&](int lane) {
      // Immediate elements are already in place in source.value.
      uint64_t value = source.value;
      for (unsigned i = 0; i < source.count; ++i)
        if (source.registers[i] != kNoRegister)
          value |= truncateTo(warp.reg(source.registers[i], lane), part)
                   << (8 * part * i);
      writeDestination(warp, inst, lane, value);
    });
  } else {
    forEachLane(mask, [&](int lane) {
      uint64_t value = readOperand(warp, source, lane);
      writeDestination(warp, inst, lane,
                       inst.type == Type::Pred ? value != 0
                                               : truncateTo(value, bytes));
    });
  }
}

void executeSetp(const Instruction &inst, WarpState &warp, uint32_t mask) {
  bool floating = isFloat(inst.type);
  forEachLane(mask, [&](int lane) {
    uint64_t x = readOperand(warp, inst.operands[1], lane);
    uint64_t y = readOperand(warp, inst.operands[2], lane);
    if (inst.ftz && inst.type == Type::F32) {
      // setp.ftz compares subnormal inputs as zeros of their sign.
      x = floatToBits(flushSubnormal(bitsToFloat(x)));
      y = floatToBits(flushSubnormal(bitsToFloat(y)));
    }
    bool result = floating
                      ? compareFloat(inst.compare, floatValue(x, inst.type),
                                     floatValue(y, inst.type))
                      : compareInteger(inst.compare, x, y, inst.type);
    bool complement = !result;
    if (inst.boolOp != BoolOp::None) {
      bool c = readOperand(warp, inst.operands[3], lane) != 0;
      auto combine = [&](bool value) {
        return inst.boolOp == BoolOp::And  ? value && c
               : inst.boolOp == BoolOp::Or ? value || c
                                           : value != c;
      };
      result = combine(result);
      complement = combine(complement);
    }
    writeDestination(warp, inst, lane, result);
    writeRegister(warp, inst.secondDestination, lane, complement);
  });
}

} // namespace

bool executeArithmetic(const Instruction &inst, WarpState &warp,
                       uint32_t mask) {
  switch (inst.opcode) {
  case Opcode::Mov:
    executeMov(inst, warp, mask);
    return true;
  case Opcode::Setp:
    executeSetp(inst, warp, mask);
    return true;
  case Opcode::Selp: {
    unsigned bytes = getTypeSize(inst.type);
    forEachLane(mask, [&](int lane) {
      bool condition = readOperand(warp, inst.operands[3], lane) != 0;
      writeDestination(
          warp, inst, lane,
          truncateTo(readOperand(warp, inst.operands[condition ? 1 : 2], lane),
                     bytes));
    });
    return true;
  }
  case Opcode::Cvt:
    if (inst.numOperands == 3) {
      // cvt.rn.{f16,bf16}x2.f32 d, a, b: a to the upper half.
      Type element = inst.type == Type::F16x2 ? Type::F16 : Type::BF16;
      forEachLane(mask, [&](int lane) {
        auto half = [&](int i) {
          float value = bitsToFloat(readOperand(warp, inst.operands[i], lane));
          uint64_t bits = roundToFormat(value, element, inst.rounding);
          if (inst.saturate) {
            double clamped = floatValue(bits, element);
            clamped = clamped != clamped
                          ? 0.0
                          : std::fmin(std::fmax(clamped, 0.0), 1.0);
            bits = roundToFormat(clamped, element, Rounding::Rn);
          }
          return bits;
        };
        writeDestination(warp, inst, lane, half(1) << 16 | half(2));
      });
      return true;
    }
    forEachLane(mask, [&](int lane) {
      writeDestination(
          warp, inst, lane,
          convert(inst, readOperand(warp, inst.operands[1], lane)));
    });
    return true;
  case Opcode::Prmt:
    forEachLane(mask, [&](int lane) {
      writeDestination(warp, inst, lane,
                       permute(readOperand(warp, inst.operands[1], lane),
                               readOperand(warp, inst.operands[2], lane),
                               readOperand(warp, inst.operands[3], lane)));
    });
    return true;
  case Opcode::Bfi: {
    unsigned bits = getTypeSize(inst.type) * 8;
    forEachLane(mask, [&](int lane) {
      uint64_t a = readOperand(warp, inst.operands[1], lane);
      uint64_t b = readOperand(warp, inst.operands[2], lane);
      unsigned position = readOperand(warp, inst.operands[3], lane) & 0xFF;
      unsigned length = readOperand(warp, inst.operands[4], lane) & 0xFF;
      uint64_t result = b;
      for (unsigned i = 0; i < length && position + i < bits; ++i) {
        uint64_t bit = uint64_t(1) << (position + i);
        result = (result & ~bit) | (((a >> i) & 1) << (position + i));
      }
      writeDestination(warp, inst, lane, truncateTo(result, bits / 8));
    });
    return true;
  }
  default:
    break;
  }
  if (inst.type == Type::F32)
    return executeF32(inst, warp, mask);
  if (inst.type == Type::F64) {
    executeF64(inst, warp, mask);
    return true;
  }
  if (isFloat(inst.type)) {
    executeNarrowFloat(inst, warp, mask);
    return true;
  }
  switch (inst.opcode) {
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Mad:
  case Opcode::Div:
  case Opcode::Rem:
  case Opcode::Min:
  case Opcode::Max:
  case Opcode::Abs:
  case Opcode::Neg:
  case Opcode::And:
  case Opcode::Or:
  case Opcode::Xor:
  case Opcode::Not:
  case Opcode::CNot:
  case Opcode::Shl:
  case Opcode::Shr:
  case Opcode::Bfe:
  case Opcode::Popc:
  case Opcode::Clz:
  case Opcode::Brev: {
    unsigned bytes = inst.wide ? 2 * getTypeSize(inst.type)
                     : inst.opcode == Opcode::Popc || inst.opcode == Opcode::Clz
                         ? 4
                         : getTypeSize(inst.type);
    forEachLane(mask, [&](int lane) {
      uint64_t result = integerOperation(
          inst, readOperand(warp, inst.operands[1], lane),
          readOperand(warp, inst.operands[2], lane),
          inst.opcode == Opcode::Mad ? readOperand(warp, inst.operands[3], lane)
          : inst.opcode == Opcode::Bfe
              ? readOperand(warp, inst.operands[3], lane)
              : 0);
      writeDestination(warp, inst, lane,
                       inst.type == Type::Pred ? result
                                               : truncateTo(result, bytes));
    });
    return true;
  }
  default:
    return false;
  }
}

std::string checkArithmeticImplemented(const Instruction &inst) {
  bool directed = inst.rounding == Rounding::Rz ||
                  inst.rounding == Rounding::Rm ||
                  inst.rounding == Rounding::Rp;
  if (inst.type == Type::F32 && directed &&
      (inst.opcode == Opcode::Div || inst.opcode == Opcode::Rcp ||
       inst.opcode == Opcode::Sqrt))
    return "directed rounding of f32 div/rcp/sqrt";
  if (inst.opcode == Opcode::Cvt && !isFloat(inst.type) &&
      !isFloat(inst.sourceType) && inst.rounding != Rounding::None)
    return "rounding modifiers on integer conversions";
  if (inst.opcode == Opcode::Cvt && isFloat(inst.type) &&
      !isFloat(inst.sourceType) && getTypeSize(inst.sourceType) == 8 &&
      directed)
    return "directed rounding of 64-bit integers to float";
  if (inst.opcode == Opcode::Prmt && inst.numOperands != 4)
    return "prmt modes other than the default";
  if ((inst.opcode == Opcode::Add || inst.opcode == Opcode::Sub) &&
      inst.saturate && !isFloat(inst.type) && inst.type != Type::S32)
    return "saturating integer add/sub other than s32";
  bool narrow = inst.type == Type::F16 || inst.type == Type::BF16 ||
                inst.type == Type::F16x2 || inst.type == Type::BF16x2;
  if (narrow && inst.opcode != Opcode::Cvt && inst.opcode != Opcode::Mov &&
      inst.opcode != Opcode::Setp && inst.opcode != Opcode::Selp) {
    switch (inst.opcode) {
    case Opcode::Add:
    case Opcode::Sub:
    case Opcode::Mul:
    case Opcode::Fma:
    case Opcode::Mad:
    case Opcode::Min:
    case Opcode::Max:
    case Opcode::Neg:
    case Opcode::Abs:
    case Opcode::Ex2:
      break;
    default:
      return std::string(getTypeName(inst.type)) + " form of this instruction";
    }
  }
  if (inst.opcode == Opcode::Setp &&
      (inst.type == Type::F16x2 || inst.type == Type::BF16x2))
    return "packed setp";
  return "";
}

} // namespace fd::emu
