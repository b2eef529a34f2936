//===- FloatInstructionTest.cpp - fdemu's f32 arithmetic and comparisons --===//
//
// The references are the host's IEEE f32 arithmetic (round to nearest
// even; directed modes through fesetround), with .ftz applied to inputs and
// result and .sat clamping to [0, 1] (NaN to +0) by hand. Any NaN matches
// a NaN (the PTX ISA leaves payloads to the hardware). Where PTX leaves the
// sign of a zero open (min/max of +0 and -0, .sat of -0) either is
// accepted.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseKernel.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>

using namespace flashdecode::emutest;

namespace {

constexpr size_t kCount = 3000;
constexpr float kInfinity = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

float flush(float value) {
  return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(0.0f, value)
                                                : value;
}

float saturate(float value) {
  return std::isnan(value) ? 0.0f : std::clamp(value, 0.0f, 1.0f);
}

bool sameFloat(float actual, float expected) {
  if (std::isnan(expected))
    return std::isnan(actual);
  return std::memcmp(&actual, &expected, 4) == 0;
}

/// Zeros match zeros of either sign.
bool sameFloatAnyZero(float actual, float expected) {
  if (expected == 0.0f)
    return actual == 0.0f;
  return sameFloat(actual, expected);
}

class EmulatorFloat : public ElementwiseTest {
protected:
  /// Every kind of f32: random bit patterns (NaNs, infinities, subnormals,
  /// every exponent), values near 1 (where sums cancel and round), and the
  /// edges.
  std::vector<float> values() {
    std::vector<float> result = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 kInfinity,
                                 -kInfinity,
                                 kNaN,
                                 fromBits(0x00000001),
                                 fromBits(0x807FFFFF),
                                 std::numeric_limits<float>::min(),
                                 std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::max(),
                                 0.5f,
                                 2.0f};
    std::uniform_real_distribution<float> nearOne(-4.0f, 4.0f);
    for (size_t i = 0; i < kCount; ++i)
      result.push_back(i % 2 ? fromBits(static_cast<uint32_t>(random()))
                             : nearOne(random));
    return result;
  }

  /// Values whose pairs with values() make subnormal results likely.
  std::vector<float> tiny() {
    std::vector<float> result = values();
    std::uniform_int_distribution<uint32_t> subnormal(0, 0x01000000);
    for (size_t i = 0; i < result.size(); i += 3)
      result[i] = fromBits(subnormal(random) | (random() & 0x80000000u));
    return result;
  }

  template <typename Reference>
  void checkFloat(const std::string &body, Reference reference,
                  const std::vector<float> &a, const std::vector<float> &b,
                  bool anyZero = false) {
    if (anyZero)
      checkWith<float>(body, reference, sameFloatAnyZero, a, b);
    else
      checkWith<float>(body, reference, sameFloat, a, b);
  }
};

TEST_F(EmulatorFloat, Add) {
  checkFloat(
      "add.f32 %d, %a, %b;", [](float a, float b) { return a + b; }, values(),
      tiny());
  checkFloat(
      "add.rn.ftz.f32 %d, %a, %b;",
      [](float a, float b) { return flush(flush(a) + flush(b)); }, values(),
      tiny());
  checkFloat(
      "add.sat.f32 %d, %a, %b;",
      [](float a, float b) { return saturate(a + b); }, values(), values(),
      /*anyZero=*/true);
}

TEST_F(EmulatorFloat, Sub) {
  checkFloat(
      "sub.f32 %d, %a, %b;", [](float a, float b) { return a - b; }, values(),
      tiny());
  checkFloat(
      "sub.ftz.f32 %d, %a, %b;",
      [](float a, float b) { return flush(flush(a) - flush(b)); }, tiny(),
      tiny());
}

TEST_F(EmulatorFloat, Mul) {
  checkFloat(
      "mul.rn.f32 %d, %a, %b;", [](float a, float b) { return a * b; },
      values(), tiny());
  checkFloat(
      "mul.ftz.f32 %d, %a, %b;",
      [](float a, float b) { return flush(flush(a) * flush(b)); }, values(),
      tiny());
  checkFloat(
      "mul.ftz.sat.f32 %d, %a, %b;",
      [](float a, float b) { return saturate(flush(flush(a) * flush(b))); },
      values(), values(), /*anyZero=*/true);
}

/// The exact product (it fits a double) rounded to f32 in `mode`.
float multiplyRounded(float a, float b, int mode) {
  int previous = std::fegetround();
  std::fesetround(mode);
  volatile double product = double(a) * double(b);
  volatile float rounded = static_cast<float>(product);
  std::fesetround(previous);
  return rounded;
}

TEST_F(EmulatorFloat, MulDirectedRounding) {
  checkFloat(
      "mul.rz.f32 %d, %a, %b;",
      [](float a, float b) { return multiplyRounded(a, b, FE_TOWARDZERO); },
      values(), tiny());
  checkFloat(
      "mul.rm.f32 %d, %a, %b;",
      [](float a, float b) { return multiplyRounded(a, b, FE_DOWNWARD); },
      values(), tiny());
  checkFloat(
      "mul.rp.f32 %d, %a, %b;",
      [](float a, float b) { return multiplyRounded(a, b, FE_UPWARD); },
      values(), tiny());
}

/// a + b and fma(a, b, c) in rounding `mode`, by the host.
float addRounded(float a, float b, int mode) {
  int previous = std::fegetround();
  std::fesetround(mode);
  volatile float x = a, y = b;
  volatile float sum = x + y;
  std::fesetround(previous);
  return sum;
}
float fmaRounded(float a, float b, float c, int mode) {
  int previous = std::fegetround();
  std::fesetround(mode);
  volatile float result = std::fmaf(a, b, c);
  std::fesetround(previous);
  return result;
}

TEST_F(EmulatorFloat, AddSubFmaDirectedRounding) {
  // nvcc's expf and logf use fma.rm.f32; roundf uses add.rz.f32.
  for (auto [suffix, mode] :
       {std::pair{"rz", FE_TOWARDZERO}, std::pair{"rm", FE_DOWNWARD},
        std::pair{"rp", FE_UPWARD}}) {
    int fe = mode;
    SCOPED_TRACE(suffix);
    checkFloat(
        std::string("add.") + suffix + ".f32 %d, %a, %b;",
        [=](float a, float b) { return addRounded(a, b, fe); }, values(),
        tiny());
    checkFloat(
        std::string("sub.") + suffix + ".f32 %d, %a, %b;",
        [=](float a, float b) { return addRounded(a, -b, fe); }, values(),
        values());
    checkWith<float>(
        std::string("fma.") + suffix + ".f32 %d, %a, %b, %c;",
        [=](float x, float y, float z) { return fmaRounded(x, y, z, fe); },
        sameFloat, values(), values(), tiny());
  }
}

TEST_F(EmulatorFloat, Fma) {
  std::vector<float> a = values(), b = values(), c = tiny();
  checkWith<float>(
      "fma.rn.f32 %d, %a, %b, %c;",
      [](float x, float y, float z) { return std::fmaf(x, y, z); }, sameFloat,
      a, b, c);
  checkWith<float>(
      "fma.rn.ftz.sat.f32 %d, %a, %b, %c;",
      [](float x, float y, float z) {
        return saturate(flush(std::fmaf(flush(x), flush(y), flush(z))));
      },
      sameFloatAnyZero, a, b, c);
  // mad.f32 is fma on sm_20 and later.
  checkWith<float>(
      "mad.rn.f32 %d, %a, %b, %c;",
      [](float x, float y, float z) { return std::fmaf(x, y, z); }, sameFloat,
      a, b, c);
}

TEST_F(EmulatorFloat, Div) {
  checkFloat(
      "div.rn.f32 %d, %a, %b;", [](float a, float b) { return a / b; },
      values(), tiny());
  checkFloat(
      "div.rn.ftz.f32 %d, %a, %b;",
      [](float a, float b) { return flush(flush(a) / flush(b)); }, tiny(),
      values());
}

/// min/max as PTX defines them: a NaN operand yields the other; two NaNs
/// (or, with .NaN, any) yield NaN.
float minMax(float a, float b, bool isMax, bool propagateNaN) {
  if (std::isnan(a) || std::isnan(b)) {
    if (propagateNaN || (std::isnan(a) && std::isnan(b)))
      return kNaN;
    return std::isnan(a) ? b : a;
  }
  return isMax ? (a > b ? a : b) : (a < b ? a : b);
}

TEST_F(EmulatorFloat, MinMax) {
  std::vector<float> a = values(), b = values();
  // NaN against numbers in both positions, and equal values.
  for (size_t i = 0; i < a.size(); i += 7)
    (i % 2 ? a[i] : b[i]) = kNaN;
  for (size_t i = 3; i < a.size(); i += 11)
    b[i] = -a[i];
  auto expectMinMax = [&](const char *body, bool isMax, bool propagateNaN,
                          bool ftz) {
    checkFloat(
        body,
        [&](float x, float y) {
          return ftz ? minMax(flush(x), flush(y), isMax, propagateNaN)
                     : minMax(x, y, isMax, propagateNaN);
        },
        a, b, /*anyZero=*/true);
  };
  expectMinMax("min.f32 %d, %a, %b;", false, false, false);
  expectMinMax("max.f32 %d, %a, %b;", true, false, false);
  expectMinMax("max.NaN.f32 %d, %a, %b;", true, true, false);
  expectMinMax("min.NaN.f32 %d, %a, %b;", false, true, false);
  expectMinMax("min.ftz.f32 %d, %a, %b;", false, false, true);
  expectMinMax("max.ftz.NaN.f32 %d, %a, %b;", true, true, true);
}

TEST_F(EmulatorFloat, AbsNeg) {
  std::vector<float> a = tiny();
  checkWith<float>(
      "abs.f32 %d, %a;", [](float x) { return std::fabs(x); }, sameFloat, a);
  checkWith<float>(
      "abs.ftz.f32 %d, %a;", [](float x) { return std::fabs(flush(x)); },
      sameFloat, a);
  checkWith<float>(
      "neg.f32 %d, %a;", [](float x) { return -x; }, sameFloat, a);
  checkWith<float>(
      "neg.ftz.f32 %d, %a;", [](float x) { return -flush(x); }, sameFloat, a);
}

TEST_F(EmulatorFloat, SetpOrderedAndUnordered) {
  std::vector<float> a = values(), b = values();
  for (size_t i = 0; i < a.size(); i += 5)
    b[i] = a[i];
  for (size_t i = 1; i < a.size(); i += 9)
    (i % 2 ? a[i] : b[i]) = kNaN;
  auto run = [&](const char *form, auto compare, bool unordered) {
    check<Pred>(
        std::string("setp.") + form + ".f32 %d, %a, %b;",
        [&](float x, float y) {
          bool nan = std::isnan(x) || std::isnan(y);
          return Pred{nan ? unordered : compare(x, y)};
        },
        a, b);
  };
  auto eq = [](float x, float y) { return x == y; };
  auto ne = [](float x, float y) { return x != y; };
  auto lt = [](float x, float y) { return x < y; };
  auto le = [](float x, float y) { return x <= y; };
  auto gt = [](float x, float y) { return x > y; };
  auto ge = [](float x, float y) { return x >= y; };
  auto always = [](float, float) { return true; };
  run("eq", eq, false);
  run("ne", ne, false);
  run("lt", lt, false);
  run("le", le, false);
  run("gt", gt, false);
  run("ge", ge, false);
  run("equ", eq, true);
  run("neu", ne, true);
  run("ltu", lt, true);
  run("leu", le, true);
  run("gtu", gt, true);
  run("geu", ge, true);
  run("num", always, false);
  run(
      "nan", [](float, float) { return false; }, true);
  // .ftz compares flushed subnormals as zeros.
  check<Pred>(
      "setp.eq.ftz.f32 %d, %a, %b;",
      [](float x, float y) { return Pred{flush(x) == flush(y)}; }, tiny(),
      tiny());
}

/// Distance in representable f32 values (both finite or equal infinities).
int64_t ulpDistance(float x, float y) {
  auto ordered = [](float value) {
    int32_t bits;
    std::memcpy(&bits, &value, 4);
    return bits < 0 ? int64_t(INT32_MIN) - bits : int64_t(bits);
  };
  return std::llabs(ordered(x) - ordered(y));
}

/// Within one ulp of the exact value (rounded from double), NaN for NaN,
/// and infinities and zeros exactly where the exact value has them. This is
/// fdemu's bound (it rounds the double result once); a GPU's .approx
/// results are looser (ex2 2 ulp, lg2 an absolute error near 1).
bool withinOneUlp(float actual, float expected) {
  if (std::isnan(expected) || std::isinf(expected) || expected == 0.0f)
    return sameFloatAnyZero(actual, expected);
  return !std::isnan(actual) && ulpDistance(actual, expected) <= 1;
}

class EmulatorSpecialFunction : public EmulatorFloat {
protected:
  template <typename Exact>
  void checkApproximate(const std::string &body, Exact exact,
                        const std::vector<float> &inputs) {
    checkWith<float>(
        body, [&](float x) { return static_cast<float>(exact(double(x))); },
        withinOneUlp, inputs);
  }
  std::vector<float> uniform(float low, float high) {
    std::uniform_real_distribution<float> distribution(low, high);
    std::vector<float> result = values();
    for (size_t i = 0; i < result.size(); i += 2)
      result[i] = distribution(random);
    return result;
  }
};

TEST_F(EmulatorSpecialFunction, Ex2) {
  std::vector<float> inputs = uniform(-160.0f, 140.0f);
  checkApproximate(
      "ex2.approx.f32 %d, %a;", [](double x) { return std::exp2(x); }, inputs);
  checkApproximate(
      "ex2.approx.ftz.f32 %d, %a;",
      [](double x) { return flush(float(std::exp2(flush(x)))); }, inputs);
}

TEST_F(EmulatorSpecialFunction, Lg2) {
  // Mostly positive (every exponent, subnormals), some negative (NaN).
  std::vector<float> inputs = tiny();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (i % 4)
      inputs[i] = std::fabs(inputs[i]);
  checkApproximate(
      "lg2.approx.f32 %d, %a;", [](double x) { return std::log2(x); }, inputs);
  checkApproximate(
      "lg2.approx.ftz.f32 %d, %a;",
      [](double x) { return std::log2(flush(x)); }, inputs);
}

TEST_F(EmulatorSpecialFunction, Rcp) {
  checkApproximate(
      "rcp.approx.f32 %d, %a;", [](double x) { return 1.0 / x; }, values());
  checkApproximate(
      "rcp.approx.ftz.f32 %d, %a;",
      [](double x) { return flush(float(1.0 / flush(x))); }, tiny());
  // rcp.rn is IEEE division: correctly rounded.
  checkWith<float>(
      "rcp.rn.f32 %d, %a;", [](float x) { return 1.0f / x; }, sameFloat,
      tiny());
}

TEST_F(EmulatorSpecialFunction, Rsqrt) {
  checkApproximate(
      "rsqrt.approx.f32 %d, %a;", [](double x) { return 1.0 / std::sqrt(x); },
      values());
  checkApproximate(
      "rsqrt.approx.ftz.f32 %d, %a;",
      [](double x) { return 1.0 / std::sqrt(flush(x)); }, tiny());
}

TEST_F(EmulatorSpecialFunction, Sqrt) {
  checkWith<float>(
      "sqrt.rn.f32 %d, %a;", [](float x) { return std::sqrt(x); }, sameFloat,
      tiny());
  checkApproximate(
      "sqrt.approx.f32 %d, %a;", [](double x) { return std::sqrt(x); },
      values());
  checkApproximate(
      "sqrt.approx.ftz.f32 %d, %a;",
      [](double x) { return std::sqrt(flush(x)); }, tiny());
}

TEST_F(EmulatorFloat, F64) {
  std::vector<double> a, b, c;
  std::uniform_real_distribution<double> distribution(-1e3, 1e3);
  for (size_t i = 0; i < kCount; ++i) {
    a.push_back(distribution(random));
    b.push_back(distribution(random));
    c.push_back(i % 3 ? distribution(random) : -a.back() * b.back());
  }
  check<double>(
      "add.f64 %d, %a, %b;", [](double x, double y) { return x + y; }, a, b);
  check<double>(
      "mul.rn.f64 %d, %a, %b;", [](double x, double y) { return x * y; }, a, b);
  check<double>(
      "div.rn.f64 %d, %a, %b;", [](double x, double y) { return x / y; }, a, b);
  check<double>(
      "fma.rn.f64 %d, %a, %b, %c;",
      [](double x, double y, double z) { return std::fma(x, y, z); }, a, b, c);
}

} // namespace
