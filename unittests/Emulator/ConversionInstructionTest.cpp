//===- ConversionInstructionTest.cpp - fdemu's cvt forms against APFloat --===//
//
// Every float rounding is checked against LLVM's APFloat, whose conversions
// are IEEE-exact in every rounding mode: f32 to f16/bf16 over random values
// of the narrow formats' whole range, their subnormals, exact halfway cases
// (and one f32 ulp either side), overflow and NaN/inf; f16/bf16 to f32
// over every bit pattern; float to integer and integral rounding through
// APFloat's roundToIntegral with PTX's saturation (NaN gives 0); integer
// to float through convertFromAPInt; fp8 pairs to f16x2 over every 16-bit
// input against the reference's FP8 codecs (fd/Reference/Float8.h).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseKernel.h"

#include "fd/Reference/Float8.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APSInt.h"

#include <cmath>
#include <limits>

using namespace flashdecode::emutest;
using llvm::APFloat;
using RoundingMode = llvm::RoundingMode;

namespace {

constexpr size_t kCount = 4000;

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// `value` rounded to `semantics` in `mode`, as bits.
uint64_t apfloatBits(double value, const llvm::fltSemantics &semantics,
                     RoundingMode mode) {
  APFloat converted(value);
  bool losesInfo = false;
  converted.convert(semantics, mode, &losesInfo);
  return converted.bitcastToAPInt().getZExtValue();
}

double apfloatValue(uint64_t bits, const llvm::fltSemantics &semantics) {
  APFloat value(semantics,
                llvm::APInt(APFloat::semanticsSizeInBits(semantics), bits));
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), RoundingMode::NearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

bool isNaNBits(uint64_t bits, const llvm::fltSemantics &semantics) {
  return APFloat(semantics,
                 llvm::APInt(APFloat::semanticsSizeInBits(semantics), bits))
      .isNaN();
}

/// A NaN result must be a NaN; everything else bit-exact.
template <typename T> auto sameOrBothNaN(const llvm::fltSemantics &semantics) {
  return [&semantics](T actual, T expected) {
    if (isNaNBits(expected, semantics))
      return isNaNBits(actual, semantics);
    return actual == expected;
  };
}

class EmulatorConversion : public ElementwiseTest {
protected:
  /// f32 inputs for rounding to the 16-bit `semantics`.
  std::vector<float> narrowingInputs(const llvm::fltSemantics &semantics) {
    float largest = APFloat::getLargest(semantics).convertToFloat();
    std::vector<float> inputs = {0.0f,
                                 -0.0f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 fromBits(0xFFC00001),
                                 fromBits(0x7F800001),
                                 largest,
                                 -largest,
                                 std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::min()};
    int minExponent = APFloat::semanticsMinExponent(semantics);
    int maxExponent = APFloat::semanticsMaxExponent(semantics);
    int precision = APFloat::semanticsPrecision(semantics);
    // Unbiased f32 exponents; -127 is the f32 subnormals.
    std::uniform_int_distribution<int> exponents(
        std::max(minExponent - precision - 2, -127),
        std::min(maxExponent + 1, 127));
    std::uniform_int_distribution<uint32_t> narrowBits(0, 0xFFFF);
    while (inputs.size() < kCount) {
      switch (inputs.size() % 4) {
      case 0: { // anywhere in (and just beyond) the format's range
        uint32_t exponent = exponents(random) + 127;
        uint32_t bits = (random() & 0x807FFFFFu) | exponent << 23;
        inputs.push_back(fromBits(bits));
        break;
      }
      case 1: { // halfway between two neighbours, and one f32 ulp off it
        uint64_t low = narrowBits(random);
        APFloat next(semantics,
                     llvm::APInt(APFloat::semanticsSizeInBits(semantics), low));
        if (!next.isFinite() || next.isLargest())
          break;
        double lowValue = apfloatValue(low, semantics);
        next.next(/*nextDown=*/lowValue < 0 || (lowValue == 0 && (low >> 15)));
        float halfway =
            static_cast<float>((lowValue + next.convertToDouble()) / 2);
        inputs.push_back(halfway);
        inputs.push_back(std::nextafter(halfway, 0.0f));
        inputs.push_back(std::nextafter(
            halfway,
            std::copysign(std::numeric_limits<float>::infinity(), halfway)));
        break;
      }
      case 2: // overflow: around the largest finite value
        inputs.push_back(
            largest *
            std::uniform_real_distribution<float>(0.99f, 1.01f)(random) *
            (random() & 1 ? 1 : -1));
        break;
      default: // f32 subnormals and any bit pattern
        inputs.push_back(fromBits(static_cast<uint32_t>(random()) &
                                  (random() & 1 ? 0x807FFFFFu : ~0u)));
      }
    }
    return inputs;
  }

  void checkNarrowing(const char *body, const llvm::fltSemantics &semantics,
                      RoundingMode mode) {
    checkWith<uint16_t>(
        body,
        [&](float value) {
          return static_cast<uint16_t>(apfloatBits(value, semantics, mode));
        },
        sameOrBothNaN<uint16_t>(semantics), narrowingInputs(semantics));
  }

  /// Every 16-bit pattern.
  std::vector<uint16_t> every16BitPattern() {
    std::vector<uint16_t> bits(65536);
    for (uint32_t i = 0; i < bits.size(); ++i)
      bits[i] = static_cast<uint16_t>(i);
    return bits;
  }
};

TEST_F(EmulatorConversion, F16FromF32) {
  checkNarrowing("cvt.rn.f16.f32 %d, %a;", APFloat::IEEEhalf(),
                 RoundingMode::NearestTiesToEven);
  checkNarrowing("cvt.rz.f16.f32 %d, %a;", APFloat::IEEEhalf(),
                 RoundingMode::TowardZero);
  checkNarrowing("cvt.rm.f16.f32 %d, %a;", APFloat::IEEEhalf(),
                 RoundingMode::TowardNegative);
  checkNarrowing("cvt.rp.f16.f32 %d, %a;", APFloat::IEEEhalf(),
                 RoundingMode::TowardPositive);
}

TEST_F(EmulatorConversion, BF16FromF32) {
  checkNarrowing("cvt.rn.bf16.f32 %d, %a;", APFloat::BFloat(),
                 RoundingMode::NearestTiesToEven);
  checkNarrowing("cvt.rz.bf16.f32 %d, %a;", APFloat::BFloat(),
                 RoundingMode::TowardZero);
}

TEST_F(EmulatorConversion, PairFromF32) {
  // cvt.rn.f16x2.f32 d, a, b puts a in the upper half.
  std::vector<float> a = narrowingInputs(APFloat::IEEEhalf());
  std::vector<float> b = narrowingInputs(APFloat::IEEEhalf());
  std::reverse(b.begin(), b.end());
  auto check = [&](const char *body, const llvm::fltSemantics &semantics) {
    auto round = [&](float value) {
      return uint32_t(
          apfloatBits(value, semantics, RoundingMode::NearestTiesToEven));
    };
    auto same = sameOrBothNaN<uint16_t>(semantics);
    checkWith<uint32_t>(
        body,
        [&](float upper, float lower) {
          return round(upper) << 16 | round(lower);
        },
        [&](uint32_t actual, uint32_t expected) {
          return same(uint16_t(actual >> 16), uint16_t(expected >> 16)) &&
                 same(uint16_t(actual), uint16_t(expected));
        },
        a, b);
  };
  check("cvt.rn.f16x2.f32 %d, %a, %b;", APFloat::IEEEhalf());
  check("cvt.rn.bf16x2.f32 %d, %a, %b;", APFloat::BFloat());
}

TEST_F(EmulatorConversion, F32FromF16AndBF16) {
  auto widen = [](const llvm::fltSemantics &semantics) {
    return [&semantics](uint16_t bits) {
      return static_cast<float>(apfloatValue(bits, semantics));
    };
  };
  auto same = [](float actual, float expected) {
    return std::isnan(expected) ? std::isnan(actual)
                                : std::memcmp(&actual, &expected, 4) == 0;
  };
  checkWith<float>("cvt.f32.f16 %d, %a;", widen(APFloat::IEEEhalf()), same,
                   every16BitPattern());
  checkWith<float>("cvt.f32.bf16 %d, %a;", widen(APFloat::BFloat()), same,
                   every16BitPattern());
}

/// What cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} writes for one fp8 byte whose
/// value (as the reference decodes it) is `value`: the exact f16, the
/// canonical f16 NaN 0x7FFF for a NaN, and with .relu +0 for anything
/// negative or -0 (PTX ISA: ".relu clamps the result to 0 if negative. NaN
/// results are converted to canonical NaN").
uint16_t float8ToHalfBits(float value, bool relu) {
  if (std::isnan(value))
    return 0x7FFF;
  if (relu && (value < 0 || std::signbit(value)))
    return 0;
  return static_cast<uint16_t>(
      apfloatBits(value, APFloat::IEEEhalf(), RoundingMode::NearestTiesToEven));
}

TEST_F(EmulatorConversion, F16x2FromFloat8Pairs) {
  using flashdecode::reference::float8E4M3FNToFloat;
  using flashdecode::reference::float8E5M2ToFloat;
  // The upper byte's value goes to the upper half (PTX ISA, cvt).
  auto pair = [](float (*decode)(uint8_t), bool relu) {
    return [decode, relu](uint16_t bits) {
      return uint32_t(float8ToHalfBits(decode(bits >> 8), relu)) << 16 |
             float8ToHalfBits(decode(bits & 0xFF), relu);
    };
  };
  check<uint32_t>("cvt.rn.f16x2.e4m3x2 %d, %a;",
                  pair(float8E4M3FNToFloat, false), every16BitPattern());
  check<uint32_t>("cvt.rn.relu.f16x2.e4m3x2 %d, %a;",
                  pair(float8E4M3FNToFloat, true), every16BitPattern());
  check<uint32_t>("cvt.rn.f16x2.e5m2x2 %d, %a;", pair(float8E5M2ToFloat, false),
                  every16BitPattern());
  check<uint32_t>("cvt.rn.relu.f16x2.e5m2x2 %d, %a;",
                  pair(float8E5M2ToFloat, true), every16BitPattern());
  // The same forms on values worked out by hand, which checks the
  // reference too: e4m3 0x38 = 1, 0x7E = 448, 0x01 = 2^-9 (an f16 normal),
  // 0x80 = -0, 0x7F and 0xFF NaN; e5m2 is f16 with 8 fraction bits fewer
  // (0x3C = 1, 0x7C = inf, 0xFC = -inf, 0x01 = 2^-16, 0x7D NaN).
  std::vector<uint16_t> e4m3 = {0x7E38, 0x8001, 0xFF7F, 0xC0B8};
  std::vector<uint32_t> e4m3Expected = {0x5F003C00, 0x80001800, 0x7FFF7FFF,
                                        0xC000BC00};
  std::vector<uint32_t> e4m3Relu = {0x5F003C00, 0x00001800, 0x7FFF7FFF, 0};
  std::vector<uint16_t> e5m2 = {0x7C3C, 0xFC01, 0x7D80, 0x7BFB};
  std::vector<uint32_t> e5m2Expected = {0x7C003C00, 0xFC000100, 0x7FFF8000,
                                        0x7B00FB00};
  std::vector<uint32_t> e5m2Relu = {0x7C003C00, 0x00000100, 0x7FFF0000,
                                    0x7B000000};
  EXPECT_EQ(run<uint32_t>("cvt.rn.f16x2.e4m3x2 %d, %a;", e4m3), e4m3Expected);
  EXPECT_EQ(run<uint32_t>("cvt.rn.relu.f16x2.e4m3x2 %d, %a;", e4m3), e4m3Relu);
  EXPECT_EQ(run<uint32_t>("cvt.rn.f16x2.e5m2x2 %d, %a;", e5m2), e5m2Expected);
  EXPECT_EQ(run<uint32_t>("cvt.rn.relu.f16x2.e5m2x2 %d, %a;", e5m2), e5m2Relu);
}

TEST_F(EmulatorConversion, Float8DequantizationSequence) {
  // A word of four e4m3 values split into byte pairs {0, 2} and {1, 3} by
  // prmt, converted, scaled by the f16 pair %b and summed: the kind of
  // sequence an fp8 KV cache's decoding runs.
  std::vector<uint32_t> words = randomBits<uint32_t>(kCount);
  std::vector<uint32_t> scales;
  for (size_t i = 0; i < words.size(); ++i) {
    auto scale = [&] {
      // Finite f16 values between 2^-8 and 2^8, either sign.
      return uint32_t((random() & 0x8000) | (7 + random() % 16) << 10 |
                      (random() & 0x3FF));
    };
    scales.push_back(scale() << 16 | scale());
  }
  auto value = [](uint32_t word, int byte) {
    return APFloat(flashdecode::reference::float8E4M3FNToFloat(
        static_cast<uint8_t>(word >> (8 * byte))));
  };
  auto half = [](uint32_t bits) {
    return APFloat(APFloat::IEEEhalf(), llvm::APInt(16, bits & 0xFFFF));
  };
  auto rm = RoundingMode::NearestTiesToEven;
  checkWith<uint32_t>(
      "{ .reg .b32 %even, %odd, %low, %high;\n"
      "  .reg .b16 %evenBytes, %oddBytes, %unused;\n"
      "  prmt.b32 %even, %a, 0, 0x7020;\n"
      "  prmt.b32 %odd, %a, 0, 0x7031;\n"
      "  mov.b32 {%evenBytes, %unused}, %even;\n"
      "  mov.b32 {%oddBytes, %unused}, %odd;\n"
      "  cvt.rn.f16x2.e4m3x2 %low, %evenBytes;\n"
      "  cvt.rn.f16x2.e4m3x2 %high, %oddBytes;\n"
      "  mul.rn.f16x2 %low, %low, %b;\n"
      "  fma.rn.f16x2 %d, %high, %b, %low; }",
      [&](uint32_t word, uint32_t scale) {
        uint32_t result = 0;
        for (int i = 0; i < 2; ++i) { // half i: bytes i * 2 and i * 2 + 1
          bool losesInfo = false;
          APFloat even = value(word, 2 * i), odd = value(word, 2 * i + 1);
          even.convert(APFloat::IEEEhalf(), rm, &losesInfo);
          odd.convert(APFloat::IEEEhalf(), rm, &losesInfo);
          APFloat s = half(scale >> (16 * i));
          even.multiply(s, rm);
          odd.fusedMultiplyAdd(s, even, rm);
          result |= uint32_t(odd.bitcastToAPInt().getZExtValue()) << (16 * i);
        }
        return result;
      },
      [](uint32_t actual, uint32_t expected) {
        auto same = sameOrBothNaN<uint16_t>(APFloat::IEEEhalf());
        return same(uint16_t(actual), uint16_t(expected)) &&
               same(uint16_t(actual >> 16), uint16_t(expected >> 16));
      },
      words, scales);
}

TEST_F(EmulatorConversion, F32FromF64AndBack) {
  std::vector<double> inputs = {0.0,
                                -0.0,
                                1e300,
                                -1e-300,
                                3.4028235677973366e38,
                                std::numeric_limits<double>::quiet_NaN()};
  std::uniform_int_distribution<int> exponents(-160, 130);
  while (inputs.size() < kCount)
    inputs.push_back(
        std::ldexp(std::uniform_real_distribution<double>(-2, 2)(random),
                   exponents(random)));
  auto narrow = [](RoundingMode mode) {
    return [mode](double value) {
      return static_cast<uint32_t>(
          apfloatBits(value, APFloat::IEEEsingle(), mode));
    };
  };
  auto same = sameOrBothNaN<uint32_t>(APFloat::IEEEsingle());
  checkWith<uint32_t>("cvt.rn.f32.f64 %d, %a;",
                      narrow(RoundingMode::NearestTiesToEven), same, inputs);
  checkWith<uint32_t>("cvt.rz.f32.f64 %d, %a;",
                      narrow(RoundingMode::TowardZero), same, inputs);
  checkWith<uint32_t>("cvt.rm.f32.f64 %d, %a;",
                      narrow(RoundingMode::TowardNegative), same, inputs);
  std::vector<float> floats = narrowingInputs(APFloat::IEEEsingle());
  checkWith<double>(
      "cvt.f64.f32 %d, %a;", [](float value) { return double(value); },
      [](double actual, double expected) {
        return std::isnan(expected) ? std::isnan(actual)
                                    : std::memcmp(&actual, &expected, 8) == 0;
      },
      floats);
}

/// Float-to-integer inputs: fractions and halves near zero, values near
/// and beyond the 32-bit limits, NaN and infinities.
std::vector<float> integerInputs(std::mt19937_64 &random) {
  std::vector<float> inputs = {0.5f,
                               -0.5f,
                               1.5f,
                               2.5f,
                               -2.5f,
                               -0.0f,
                               0.49999997f,
                               2147483520.0f,
                               2147483648.0f,
                               -2147483648.0f,
                               -2147483904.0f,
                               4294967040.0f,
                               4294967296.0f,
                               1e20f,
                               -1e20f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  std::uniform_real_distribution<float> small(-100.0f, 100.0f);
  std::uniform_int_distribution<int> exponents(-4, 66);
  while (inputs.size() < kCount) {
    float halves = std::round(small(random) * 2) / 2;
    inputs.push_back(
        inputs.size() % 3 == 0 ? halves
        : inputs.size() % 3 == 1
            ? small(random)
            : std::ldexp(std::uniform_real_distribution<float>(-1, 1)(random),
                         exponents(random)));
  }
  return inputs;
}

/// PTX float-to-integer: round as asked, clamp to the type, NaN to 0.
template <typename T> auto toInteger(RoundingMode mode) {
  return [mode](float value) -> T {
    if (std::isnan(value))
      return 0;
    APFloat rounded(value);
    rounded.roundToIntegral(mode);
    double integral = rounded.convertToDouble();
    if (integral <= double(std::numeric_limits<T>::min()))
      return std::numeric_limits<T>::min();
    if (integral >= double(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(integral);
  };
}

TEST_F(EmulatorConversion, IntegerFromF32) {
  std::vector<float> inputs = integerInputs(random);
  check<int32_t>("cvt.rzi.s32.f32 %d, %a;",
                 toInteger<int32_t>(RoundingMode::TowardZero), inputs);
  check<int32_t>("cvt.rni.s32.f32 %d, %a;",
                 toInteger<int32_t>(RoundingMode::NearestTiesToEven), inputs);
  check<int32_t>("cvt.rmi.s32.f32 %d, %a;",
                 toInteger<int32_t>(RoundingMode::TowardNegative), inputs);
  check<int32_t>("cvt.rpi.s32.f32 %d, %a;",
                 toInteger<int32_t>(RoundingMode::TowardPositive), inputs);
  check<uint32_t>("cvt.rzi.u32.f32 %d, %a;",
                  toInteger<uint32_t>(RoundingMode::TowardZero), inputs);
  check<int64_t>("cvt.rni.s64.f32 %d, %a;",
                 toInteger<int64_t>(RoundingMode::NearestTiesToEven), inputs);
  check<int16_t>("cvt.rzi.s16.f32 %d, %a;",
                 toInteger<int16_t>(RoundingMode::TowardZero), inputs);
}

TEST_F(EmulatorConversion, IntegralF32) {
  std::vector<float> inputs = integerInputs(random);
  auto integral = [](RoundingMode mode) {
    return [mode](float value) {
      APFloat rounded(value);
      rounded.roundToIntegral(mode);
      return rounded.convertToFloat();
    };
  };
  auto same = [](float actual, float expected) {
    return std::isnan(expected) ? std::isnan(actual)
                                : std::memcmp(&actual, &expected, 4) == 0;
  };
  checkWith<float>("cvt.rni.f32.f32 %d, %a;",
                   integral(RoundingMode::NearestTiesToEven), same, inputs);
  checkWith<float>("cvt.rzi.f32.f32 %d, %a;",
                   integral(RoundingMode::TowardZero), same, inputs);
  checkWith<float>("cvt.rmi.f32.f32 %d, %a;",
                   integral(RoundingMode::TowardNegative), same, inputs);
  checkWith<float>("cvt.rpi.f32.f32 %d, %a;",
                   integral(RoundingMode::TowardPositive), same, inputs);
}

TEST_F(EmulatorConversion, FloatFromInteger) {
  auto fromInteger = [](const llvm::fltSemantics &semantics, RoundingMode mode,
                        bool isSigned) {
    return [&semantics, mode, isSigned](auto value) {
      APFloat result(semantics);
      result.convertFromAPInt(llvm::APInt(sizeof(value) * 8,
                                          static_cast<uint64_t>(value),
                                          isSigned),
                              isSigned, mode);
      return static_cast<uint32_t>(result.bitcastToAPInt().getZExtValue());
    };
  };
  std::vector<int32_t> s32 =
      randomBits<int32_t>(kCount, {0, -1, INT32_MIN, INT32_MAX, 16777217});
  std::vector<uint32_t> u32 = randomBits<uint32_t>(kCount, {0, ~0u, 16777217});
  std::vector<int64_t> s64 = randomBits<int64_t>(kCount, {INT64_MIN, -1});
  for (size_t i = 0; i < s32.size(); i += 2)
    s32[i] >>= i % 31; // small magnitudes too
  const auto &single = APFloat::IEEEsingle();
  check<uint32_t>("cvt.rn.f32.s32 %d, %a;",
                  fromInteger(single, RoundingMode::NearestTiesToEven, true),
                  s32);
  check<uint32_t>("cvt.rz.f32.s32 %d, %a;",
                  fromInteger(single, RoundingMode::TowardZero, true), s32);
  check<uint32_t>("cvt.rm.f32.u32 %d, %a;",
                  fromInteger(single, RoundingMode::TowardNegative, false),
                  u32);
  check<uint32_t>("cvt.rn.f32.s64 %d, %a;",
                  fromInteger(single, RoundingMode::NearestTiesToEven, true),
                  s64);
  check<uint16_t>(
      "cvt.rn.f16.s32 %d, %a;",
      [&](int32_t value) {
        return static_cast<uint16_t>(fromInteger(
            APFloat::IEEEhalf(), RoundingMode::NearestTiesToEven, true)(value));
      },
      s32);
}

TEST_F(EmulatorConversion, IntegerWidenNarrow) {
  std::vector<int32_t> s32 = randomBits<int32_t>(
      kCount, {0, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769});
  for (size_t i = 0; i < s32.size(); i += 2)
    s32[i] >>= 16 + i % 16; // near the narrow limits
  std::vector<int16_t> s16 = randomBits<int16_t>(kCount, {-1, INT16_MIN});
  std::vector<int64_t> s64 = randomBits<int64_t>(kCount, {INT64_MIN, -1});
  for (size_t i = 0; i < s64.size(); i += 2)
    s64[i] >>= 32 + i % 32;
  std::vector<uint64_t> u64 = randomBits<uint64_t>(kCount, {~0ull, 1ull << 32});
  // Narrowing truncates; widening extends by the source's signedness.
  check<uint16_t>(
      "cvt.u16.u32 %d, %a;", [](int32_t a) { return uint16_t(a); }, s32);
  check<int16_t>(
      "cvt.s16.s32 %d, %a;", [](int32_t a) { return int16_t(a); }, s32);
  check<int32_t>(
      "cvt.s32.s16 %d, %a;", [](int16_t a) { return int32_t(a); }, s16);
  check<uint32_t>(
      "cvt.u32.s16 %d, %a;", [](int16_t a) { return uint32_t(int32_t(a)); },
      s16);
  check<uint32_t>(
      "cvt.u32.u16 %d, %a;", [](int16_t a) { return uint32_t(uint16_t(a)); },
      s16);
  check<int64_t>(
      "cvt.s64.s32 %d, %a;", [](int32_t a) { return int64_t(a); }, s32);
  check<uint64_t>(
      "cvt.u64.u32 %d, %a;", [](int32_t a) { return uint64_t(uint32_t(a)); },
      s32);
  check<uint32_t>(
      "cvt.u32.u64 %d, %a;", [](uint64_t a) { return uint32_t(a); }, u64);
  // .sat clamps to the destination's range.
  auto clampTo = [](auto low, auto high) {
    return [low, high](auto value) {
      using Wide = __int128;
      return static_cast<decltype(low)>(
          std::clamp<Wide>(Wide(value), Wide(low), Wide(high)));
    };
  };
  check<int8_t>("cvt.sat.s8.s32 %d, %a;",
                clampTo(int8_t(INT8_MIN), int8_t(INT8_MAX)), s32);
  check<uint8_t>("cvt.sat.u8.s32 %d, %a;",
                 clampTo(uint8_t(0), uint8_t(UINT8_MAX)), s32);
  check<int16_t>("cvt.sat.s16.s32 %d, %a;",
                 clampTo(int16_t(INT16_MIN), int16_t(INT16_MAX)), s32);
  check<uint32_t>("cvt.sat.u32.s32 %d, %a;", clampTo(0u, UINT32_MAX), s32);
  check<int32_t>("cvt.sat.s32.s64 %d, %a;", clampTo(INT32_MIN, INT32_MAX), s64);
  check<uint32_t>("cvt.sat.u32.u64 %d, %a;", clampTo(0u, UINT32_MAX), u64);
  check<uint64_t>("cvt.sat.u64.s64 %d, %a;", clampTo(uint64_t(0), UINT64_MAX),
                  s64);
}

TEST_F(EmulatorConversion, MovPackUnpack) {
  std::vector<uint16_t> low = randomBits<uint16_t>(kCount),
                        high = randomBits<uint16_t>(kCount);
  std::vector<uint32_t> words = randomBits<uint32_t>(kCount),
                        others = randomBits<uint32_t>(kCount);
  check<uint32_t>(
      "mov.b32 %d, {%a, %b};",
      [](uint16_t a, uint16_t b) { return uint32_t(b) << 16 | a; }, low, high);
  check<uint64_t>(
      "mov.b64 %d, {%a, %b};",
      [](uint32_t a, uint32_t b) { return uint64_t(b) << 32 | a; }, words,
      others);
  check<uint32_t>(
      "{ .reg .b16 %low, %high;\n"
      "  mov.b32 {%low, %high}, %a;\n"
      "  mov.b32 %d, {%high, %low}; }",
      [](uint32_t a) { return a << 16 | a >> 16; }, words);
  check<uint32_t>(
      "{ .reg .b32 %high;\n"
      "  mov.b64 {_, %high}, %a;\n"
      "  mov.b32 %d, %high; }",
      [](uint64_t a) { return uint32_t(a >> 32); },
      randomBits<uint64_t>(kCount));
  // Immediate elements (nvcc writes bf16 -> f32 as mov.b32 %f, {0, %rs}).
  check<uint32_t>(
      "mov.b32 %d, {0, %a};", [](uint16_t a) { return uint32_t(a) << 16; },
      low);
  check<uint32_t>(
      "mov.b32 %d, {%a, 0x3c00};", [](uint16_t a) { return 0x3c00u << 16 | a; },
      low);
}

} // namespace
