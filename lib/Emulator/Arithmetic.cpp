//===- Arithmetic.cpp - ALU instructions of fdemu -------------------------===//
//
// The ALU instructions' dispatch, one loop over the active lanes each; moves,
// comparisons and selections here, floating point in FloatArithmetic.cpp,
// integers in IntegerArithmetic.cpp, cvt in Conversion.cpp.
//
//===----------------------------------------------------------------------===//

#include "Arithmetic.h"
#include "FloatFormats.h"

#include <cmath>
#include <limits>

namespace flashdecode::emu {
namespace {

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
      uint64_t value = 0;
      for (unsigned i = 0; i < source.count; ++i) {
        uint64_t element = source.registers[i] != kNoRegister
                               ? warp.reg(source.registers[i], lane)
                               : source.elementValues[i];
        value |= truncateTo(element, part) << (8 * part * i);
      }
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
    if (inst.sourceType == Type::E4M3x2 || inst.sourceType == Type::E5M2x2) {
      forEachLane(mask, [&](int lane) {
        writeDestination(
            warp, inst, lane,
            convertFloat8Pair(inst, readOperand(warp, inst.operands[1], lane)));
      });
      return true;
    }
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
  case Opcode::Lop3:
    forEachLane(mask, [&](int lane) {
      writeDestination(warp, inst, lane,
                       lookup3(readOperand(warp, inst.operands[1], lane),
                               readOperand(warp, inst.operands[2], lane),
                               readOperand(warp, inst.operands[3], lane),
                               readOperand(warp, inst.operands[4], lane)));
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
  if (isFloat(inst.type))
    return executeFloat(inst, warp, mask);
  return executeInteger(inst, warp, mask);
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
  if (inst.opcode == Opcode::Lop3 &&
      (inst.numOperands != 5 || inst.type != Type::B32 ||
       inst.operands[4].kind != Operand::Kind::Immediate))
    return "lop3 forms other than lop3.b32 d, a, b, c, immLut";
  bool toFloat8 = inst.type == Type::E4M3x2 || inst.type == Type::E5M2x2;
  bool fromFloat8 =
      inst.sourceType == Type::E4M3x2 || inst.sourceType == Type::E5M2x2;
  if (inst.opcode == Opcode::Cvt && toFloat8)
    return "conversions to e4m3x2/e5m2x2";
  if (inst.opcode == Opcode::Cvt && fromFloat8 &&
      (inst.type != Type::F16x2 || inst.rounding != Rounding::Rn || inst.ftz ||
       inst.saturate || inst.numOperands != 2))
    return "fp8 conversions other than "
           "cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a";
  if (inst.relu && !fromFloat8)
    return ".relu other than on cvt.rn.relu.f16x2.{e4m3x2,e5m2x2}";
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

} // namespace flashdecode::emu
