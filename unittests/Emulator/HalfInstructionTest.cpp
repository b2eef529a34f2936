//===- HalfInstructionTest.cpp - fdemu's f16/bf16 arithmetic vs APFloat ---===//
//
// add/sub/mul/fma/min/max/neg/abs on .f16, .bf16 and their x2 forms,
// against the same operation in LLVM's APFloat (exactly rounded in the
// format), with .ftz flushing subnormal inputs and results and .sat
// clamping to [0, 1]. Fused multiply-adds get addends far below the
// product, where rounding the exact result twice (once to double, once to
// the format) would go wrong.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseKernel.h"

#include "llvm/ADT/APFloat.h"

#include <functional>

using namespace flashdecode::emutest;
using llvm::APFloat;

namespace {

constexpr size_t kCount = 4000;

enum class Op { Add, Sub, Mul, Fma, Min, Max, Neg, Abs };

struct Flags {
  bool ftz = false, sat = false, propagateNaN = false;
};

APFloat fromBits(const llvm::fltSemantics &semantics, uint16_t bits) {
  return APFloat(semantics, llvm::APInt(16, bits));
}

APFloat flushed(APFloat value) {
  return value.isDenormal()
             ? APFloat::getZero(value.getSemantics(), value.isNegative())
             : value;
}

/// One 16-bit result as PTX defines it, computed by APFloat.
uint16_t reference(const llvm::fltSemantics &semantics, Op op, Flags flags,
                   uint16_t aBits, uint16_t bBits, uint16_t cBits) {
  APFloat a = fromBits(semantics, aBits), b = fromBits(semantics, bBits),
          c = fromBits(semantics, cBits);
  if (flags.ftz) {
    a = flushed(a);
    b = flushed(b);
    c = flushed(c);
  }
  auto rm = llvm::RoundingMode::NearestTiesToEven;
  APFloat result = a;
  switch (op) {
  case Op::Add:
    result.add(b, rm);
    break;
  case Op::Sub:
    result.subtract(b, rm);
    break;
  case Op::Mul:
    result.multiply(b, rm);
    break;
  case Op::Fma:
    result.fusedMultiplyAdd(b, c, rm);
    break;
  case Op::Min:
  case Op::Max:
    if (a.isNaN() || b.isNaN()) {
      result = flags.propagateNaN || (a.isNaN() && b.isNaN())
                   ? APFloat::getNaN(semantics)
               : a.isNaN() ? b
                           : a;
    } else {
      bool less = a.compare(b) == APFloat::cmpLessThan;
      result = (op == Op::Min) == less ? a : b;
    }
    break;
  case Op::Neg:
    result.changeSign();
    break;
  case Op::Abs:
    result.clearSign();
    break;
  }
  if (flags.ftz)
    result = flushed(result);
  if (flags.sat) {
    if (result.isNaN() || result.isNegative())
      result = APFloat::getZero(semantics);
    else if (result.compare(APFloat::getOne(semantics)) ==
             APFloat::cmpGreaterThan)
      result = APFloat::getOne(semantics);
  }
  return static_cast<uint16_t>(result.bitcastToAPInt().getZExtValue());
}

class EmulatorHalf : public ElementwiseTest {
protected:
  /// Random patterns (every class of value); a third of the triples are
  /// products landing near ties with a tiny addend.
  void makeInputs(const llvm::fltSemantics &semantics, std::vector<uint16_t> &a,
                  std::vector<uint16_t> &b, std::vector<uint16_t> &c) {
    int fractionBits = APFloat::semanticsPrecision(semantics) - 1;
    int bias = -APFloat::semanticsMinExponent(semantics) + 1;
    auto make = [&](bool negative, int exponent, uint32_t fraction) {
      return static_cast<uint16_t>((negative ? 0x8000 : 0) |
                                   (exponent + bias) << fractionBits |
                                   fraction);
    };
    for (size_t i = 0; i < kCount; ++i) {
      if (i % 3) {
        a.push_back(static_cast<uint16_t>(random()));
        b.push_back(static_cast<uint16_t>(random()));
        c.push_back(static_cast<uint16_t>(random()));
        continue;
      }
      // Short significands, so products often have exactly one bit more
      // than the format: ties, broken only by the addend.
      uint32_t shortFraction = (1u << (fractionBits - 4)) - 1;
      a.push_back(
          make(false, int(random() % 4), (random() & shortFraction) << 4));
      b.push_back(make(random() & 1, int(random() % 4),
                       (random() & shortFraction) << 4 | (random() & 1) << 3));
      c.push_back(
          make(random() & 1, -bias / 2 - int(random() % 4),
               static_cast<uint32_t>(random()) & ((1u << fractionBits) - 1)));
    }
  }

  void checkScalar(const char *opcode, const llvm::fltSemantics &semantics,
                   Op op, Flags flags = {}) {
    std::vector<uint16_t> a, b, c;
    makeInputs(semantics, a, b, c);
    bool unary = op == Op::Neg || op == Op::Abs;
    std::string body = std::string(opcode) + " %d, %a" + (unary ? "" : ", %b") +
                       (op == Op::Fma ? ", %c" : "") + ";";
    checkWith<uint16_t>(
        body,
        [&](uint16_t x, uint16_t y, uint16_t z) {
          return reference(semantics, op, flags, x, y, z);
        },
        sameOrBothNaN(semantics, op == Op::Min || op == Op::Max), a, b, c);
  }

  void checkPair(const char *opcode, const llvm::fltSemantics &semantics, Op op,
                 Flags flags = {}) {
    std::vector<uint16_t> a, b, c;
    makeInputs(semantics, a, b, c);
    std::vector<uint32_t> pairA, pairB, pairC;
    for (size_t i = 0; i + 1 < a.size(); i += 2) {
      pairA.push_back(uint32_t(a[i + 1]) << 16 | a[i]);
      pairB.push_back(uint32_t(b[i + 1]) << 16 | b[i]);
      pairC.push_back(uint32_t(c[i + 1]) << 16 | c[i]);
    }
    auto same = sameOrBothNaN(semantics, op == Op::Min || op == Op::Max);
    checkWith<uint32_t>(
        std::string(opcode) + " %d, %a, %b" + (op == Op::Fma ? ", %c" : "") +
            ";",
        [&](uint32_t x, uint32_t y, uint32_t z) {
          auto half = [&](int shift) {
            return uint32_t(reference(semantics, op, flags, x >> shift,
                                      y >> shift, z >> shift));
          };
          return half(16) << 16 | half(0);
        },
        [&](uint32_t actual, uint32_t expected) {
          return same(uint16_t(actual), uint16_t(expected)) &&
                 same(uint16_t(actual >> 16), uint16_t(expected >> 16));
        },
        pairA, pairB, pairC);
  }

  /// Any NaN matches a NaN; for min/max (`anyZero`), whose choice between
  /// +0 and -0 PTX leaves open, any zero matches a zero.
  static std::function<bool(uint16_t, uint16_t)>
  sameOrBothNaN(const llvm::fltSemantics &semantics, bool anyZero) {
    return [&semantics, anyZero](uint16_t actual, uint16_t expected) {
      APFloat want = fromBits(semantics, expected);
      APFloat got = fromBits(semantics, actual);
      if (want.isNaN())
        return got.isNaN();
      if (anyZero && want.isZero())
        return got.isZero();
      return actual == expected;
    };
  }
};

const llvm::fltSemantics &half() { return APFloat::IEEEhalf(); }
const llvm::fltSemantics &bfloat() { return APFloat::BFloat(); }

TEST_F(EmulatorHalf, F16) {
  checkScalar("add.f16", half(), Op::Add);
  checkScalar("sub.rn.f16", half(), Op::Sub);
  checkScalar("mul.f16", half(), Op::Mul);
  checkScalar("fma.rn.f16", half(), Op::Fma);
  checkScalar("add.ftz.f16", half(), Op::Add, {true, false, false});
  checkScalar("fma.rn.sat.f16", half(), Op::Fma, {false, true, false});
  checkScalar("min.f16", half(), Op::Min);
  checkScalar("max.NaN.f16", half(), Op::Max, {false, false, true});
  checkScalar("neg.f16", half(), Op::Neg);
  checkScalar("abs.f16", half(), Op::Abs);
}

TEST_F(EmulatorHalf, F16x2) {
  checkPair("add.rn.f16x2", half(), Op::Add);
  checkPair("mul.f16x2", half(), Op::Mul);
  checkPair("mul.rn.f16x2", half(), Op::Mul);
  checkPair("fma.rn.f16x2", half(), Op::Fma);
  checkPair("fma.rn.ftz.f16x2", half(), Op::Fma, {true, false, false});
  checkPair("max.f16x2", half(), Op::Max);
}

TEST_F(EmulatorHalf, BF16) {
  checkScalar("add.bf16", bfloat(), Op::Add);
  checkScalar("sub.rn.bf16", bfloat(), Op::Sub);
  checkScalar("mul.rn.bf16", bfloat(), Op::Mul);
  checkScalar("fma.rn.bf16", bfloat(), Op::Fma);
  checkScalar("min.bf16", bfloat(), Op::Min);
  checkScalar("max.NaN.bf16", bfloat(), Op::Max, {false, false, true});
  checkScalar("neg.bf16", bfloat(), Op::Neg);
  checkScalar("abs.bf16", bfloat(), Op::Abs);
}

TEST_F(EmulatorHalf, BF16x2) {
  checkPair("add.rn.bf16x2", bfloat(), Op::Add);
  checkPair("mul.rn.bf16x2", bfloat(), Op::Mul);
  checkPair("fma.rn.bf16x2", bfloat(), Op::Fma);
  checkPair("min.NaN.bf16x2", bfloat(), Op::Min, {false, false, true});
}

} // namespace
