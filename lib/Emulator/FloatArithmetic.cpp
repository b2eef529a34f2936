//===- FloatArithmetic.cpp - fdemu's floating-point instructions ----------===//
//
// f32 arithmetic is host f32 arithmetic (round to nearest even, fused
// multiply-add exact); directed rounding goes through round-to-odd in double;
// NaN results are the canonical NaN a GPU writes (0x7FFFFFFF). f16/bf16
// arithmetic is computed in double and rounded once to the format. The
// .approx functions return correctly rounded results (a GPU's differ by at
// most 2 ulp; docs/Emulator.md).
//
//===----------------------------------------------------------------------===//

#include "Arithmetic.h"
#include "FloatFormats.h"

#include <cmath>
#include <limits>

namespace flashdecode::emu {
namespace {

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

} // namespace

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

namespace {

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

} // namespace

bool executeFloat(const Instruction &inst, WarpState &warp, uint32_t mask) {
  if (inst.type == Type::F32)
    return executeF32(inst, warp, mask);
  if (inst.type == Type::F64) {
    executeF64(inst, warp, mask);
    return true;
  }
  executeNarrowFloat(inst, warp, mask);
  return true;
}

} // namespace flashdecode::emu
