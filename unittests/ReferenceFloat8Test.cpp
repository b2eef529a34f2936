//===- ReferenceFloat8Test.cpp - The FP8 codecs, measured -----------------===//

#include "APFloatOracle.h"
#include "fd/Reference/Float8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace flashdecode::reference;

namespace {

using flashdecode::test::apfloatBits;
using flashdecode::test::apfloatValue;
using flashdecode::test::sameFloat;

constexpr float inf = std::numeric_limits<float>::infinity();

/// One format under test, with what is known about it independently of the
/// codec: its layout and what LLVM's APFloat does with it.
struct Format {
  const char *name;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  const llvm::fltSemantics &semantics;
  unsigned mantissaBits;
  /// The smallest subnormal, 2^(1 - bias - mantissaBits).
  float unit;
  uint8_t maxFinite;
};

const Format &e4m3fn() {
  static const Format format = {"E4M3FN",
                                floatToFloat8E4M3FN,
                                float8E4M3FNToFloat,
                                llvm::APFloat::Float8E4M3FN(),
                                3,
                                0x1p-9f,
                                0x7e};
  return format;
}

const Format &e5m2() {
  static const Format format = {"E5M2",
                                floatToFloat8E5M2,
                                float8E5M2ToFloat,
                                llvm::APFloat::Float8E5M2(),
                                2,
                                0x1p-16f,
                                0x7b};
  return format;
}

const Format *const formats[] = {&e4m3fn(), &e5m2()};

/// The finite non-negative values, by magnitude bits: k units up to two
/// binades' worth (the subnormals and the first normal binade share the
/// smallest step), then each further binade doubles the one before it.
std::vector<float> finiteLadder(const Format &format) {
  unsigned binade = 1u << format.mantissaBits;
  std::vector<float> values;
  for (unsigned k = 0; k <= format.maxFinite; ++k)
    values.push_back(k <= 2 * binade ? k * format.unit
                                     : 2 * values[k - binade]);
  return values;
}

TEST(ReferenceFloat8, DecodesEveryPatternLikeAPFloat) {
  for (const Format *format : formats)
    for (unsigned bits = 0; bits <= 0xff; ++bits)
      ASSERT_TRUE(sameFloat(format->decode(bits),
                            apfloatValue(bits, format->semantics)))
          << format->name << " 0x" << std::hex << bits;
}

TEST(ReferenceFloat8, DecodesEveryPatternAlongTheLadder) {
  for (const Format *format : formats) {
    std::vector<float> ladder = finiteLadder(*format);
    for (unsigned magnitude = 0; magnitude <= 0x7f; ++magnitude) {
      float positive = format->decode(magnitude);
      float negative = format->decode(magnitude | 0x80);
      if (magnitude <= format->maxFinite) {
        EXPECT_TRUE(sameFloat(positive, ladder[magnitude]))
            << format->name << " 0x" << std::hex << magnitude;
        EXPECT_TRUE(sameFloat(negative, -ladder[magnitude]))
            << format->name << " 0x" << std::hex << (magnitude | 0x80);
      } else if (format == &e5m2() && magnitude == 0x7c) {
        EXPECT_EQ(positive, inf);
        EXPECT_EQ(negative, -inf);
      } else {
        EXPECT_TRUE(std::isnan(positive) && std::isnan(negative))
            << format->name << " 0x" << std::hex << magnitude;
      }
    }
  }
}

TEST(ReferenceFloat8, DecodesKnownConstants) {
  EXPECT_EQ(float8E4M3FNToFloat(0x7e), 448.0f);
  EXPECT_EQ(float8E4M3FNToFloat(0xfe), -448.0f);
  EXPECT_EQ(float8E4M3FNToFloat(0x01), 0x1p-9f);
  EXPECT_EQ(float8E4M3FNToFloat(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(float8E4M3FNToFloat(0x08), 0x1p-6f);
  EXPECT_EQ(float8E4M3FNToFloat(0x38), 1.0f);
  EXPECT_EQ(float8E4M3FNToFloat(0xb8), -1.0f);
  EXPECT_EQ(float8E4M3FNToFloat(0x78), 256.0f);
  EXPECT_TRUE(std::isnan(float8E4M3FNToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(float8E4M3FNToFloat(0xff)));
  EXPECT_TRUE(sameFloat(float8E4M3FNToFloat(0x80), -0.0f));

  EXPECT_EQ(float8E5M2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(float8E5M2ToFloat(0x7c), inf);
  EXPECT_EQ(float8E5M2ToFloat(0xfc), -inf);
  EXPECT_EQ(float8E5M2ToFloat(0x01), 0x1p-16f);
  EXPECT_EQ(float8E5M2ToFloat(0x03), 3 * 0x1p-16f);
  EXPECT_EQ(float8E5M2ToFloat(0x04), 0x1p-14f);
  EXPECT_EQ(float8E5M2ToFloat(0x3c), 1.0f);
  EXPECT_EQ(float8E5M2ToFloat(0xbc), -1.0f);
  EXPECT_TRUE(std::isnan(float8E5M2ToFloat(0x7d)));
  EXPECT_TRUE(std::isnan(float8E5M2ToFloat(0x7e)));
  EXPECT_TRUE(std::isnan(float8E5M2ToFloat(0xff)));
  EXPECT_TRUE(sameFloat(float8E5M2ToFloat(0x80), -0.0f));
}

TEST(ReferenceFloat8, RoundTripsEveryPattern) {
  for (const Format *format : formats)
    for (unsigned bits = 0; bits <= 0xff; ++bits) {
      float value = format->decode(bits);
      if (std::isnan(value))
        EXPECT_TRUE(std::isnan(format->decode(format->encode(value))))
            << format->name << " 0x" << std::hex << bits;
      else
        EXPECT_EQ(format->encode(value), bits)
            << format->name << " 0x" << std::hex << bits;
    }
}

TEST(ReferenceFloat8, RoundsToTheNearerNeighbourAndTiesToEven) {
  for (const Format *format : formats) {
    std::vector<float> ladder = finiteLadder(*format);
    for (unsigned lower = 0; lower < format->maxFinite; ++lower) {
      // Every midpoint needs one bit more than FP8 has: exact in float.
      float midpoint = (ladder[lower] + ladder[lower + 1]) / 2;
      unsigned even = (lower & 1) ? lower + 1 : lower;
      for (uint8_t sign : {0x00, 0x80}) {
        float sense = sign ? -1.0f : 1.0f;
        SCOPED_TRACE(testing::Message()
                     << format->name << " midpoint " << sense * midpoint);
        EXPECT_EQ(format->encode(sense * midpoint), sign | even);
        EXPECT_EQ(format->encode(sense * std::nextafter(midpoint, 0.0f)),
                  sign | lower);
        EXPECT_EQ(format->encode(sense * std::nextafter(midpoint, inf)),
                  sign | (lower + 1));
      }
    }
  }
}

TEST(ReferenceFloat8, E4M3FNOverflowsToNaN) {
  // 464 is halfway from 448 (mantissa 110) to the NaN's 480 (111).
  EXPECT_EQ(floatToFloat8E4M3FN(464.0f), 0x7e);
  EXPECT_EQ(floatToFloat8E4M3FN(-464.0f), 0xfe);
  EXPECT_EQ(floatToFloat8E4M3FN(std::nextafter(464.0f, inf)), 0x7f);
  EXPECT_EQ(floatToFloat8E4M3FN(-std::nextafter(464.0f, inf)), 0xff);
  EXPECT_EQ(floatToFloat8E4M3FN(480.0f), 0x7f);
  EXPECT_EQ(floatToFloat8E4M3FN(1e6f), 0x7f);
  EXPECT_EQ(floatToFloat8E4M3FN(std::numeric_limits<float>::max()), 0x7f);
  EXPECT_EQ(floatToFloat8E4M3FN(-std::numeric_limits<float>::max()), 0xff);
  EXPECT_EQ(floatToFloat8E4M3FN(inf), 0x7f);
  EXPECT_EQ(floatToFloat8E4M3FN(-inf), 0xff);
}

TEST(ReferenceFloat8, E5M2OverflowsToInfinity) {
  // 61440 is halfway from 57344 (mantissa 11) to 65536, infinity's place.
  EXPECT_EQ(floatToFloat8E5M2(std::nextafter(61440.0f, 0.0f)), 0x7b);
  EXPECT_EQ(floatToFloat8E5M2(61440.0f), 0x7c);
  EXPECT_EQ(floatToFloat8E5M2(-61440.0f), 0xfc);
  EXPECT_EQ(floatToFloat8E5M2(1e6f), 0x7c);
  EXPECT_EQ(floatToFloat8E5M2(std::numeric_limits<float>::max()), 0x7c);
  EXPECT_EQ(floatToFloat8E5M2(-std::numeric_limits<float>::max()), 0xfc);
  EXPECT_EQ(floatToFloat8E5M2(inf), 0x7c);
  EXPECT_EQ(floatToFloat8E5M2(-inf), 0xfc);
}

TEST(ReferenceFloat8, UnderflowKeepsTheSign) {
  for (const Format *format : formats) {
    SCOPED_TRACE(format->name);
    EXPECT_EQ(format->encode(0.0f), 0x00);
    EXPECT_EQ(format->encode(-0.0f), 0x80);
    EXPECT_EQ(format->encode(std::numeric_limits<float>::denorm_min()), 0x00);
    EXPECT_EQ(format->encode(-std::numeric_limits<float>::denorm_min()), 0x80);
    EXPECT_EQ(format->encode(format->unit / 4), 0x00);
    EXPECT_EQ(format->encode(-format->unit / 2), 0x80);
    EXPECT_EQ(format->encode(-std::nextafter(format->unit / 2, inf)), 0x81);
  }
}

TEST(ReferenceFloat8, NaNBecomesTheQuietNaNOfItsSign) {
  std::vector<uint32_t> nans = {0x7fc00000, 0x7f800001, 0x7fffffff, 0x7fa00000};
  for (uint32_t nanBits : nans)
    for (uint32_t sign : {0u, 0x80000000u}) {
      float value;
      uint32_t bits = nanBits | sign;
      std::memcpy(&value, &bits, sizeof(value));
      uint8_t signBit = sign ? 0x80 : 0x00;
      EXPECT_EQ(floatToFloat8E4M3FN(value), signBit | 0x7f) << std::hex << bits;
      EXPECT_EQ(floatToFloat8E5M2(value), signBit | 0x7e) << std::hex << bits;
    }
}

TEST(ReferenceFloat8, RoundsLikeAPFloat) {
  // Fixed seed: a failure names its input and reproduces.
  std::mt19937 random(14);
  std::uniform_int_distribution<uint32_t> anyBits;
  // Float exponents from below half the smallest E5M2 subnormal (2^-17) to
  // past E4M3FN's and E5M2's largest finite values.
  std::uniform_int_distribution<uint32_t> nearRange(127 - 19, 127 + 17);
  std::vector<float> values;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = anyBits(random);
    if (i % 2)
      bits = (bits & 0x807fffff) | (nearRange(random) << 23);
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isnan(value))
      values.push_back(value);
  }
  for (float value : values)
    for (const Format *format : formats)
      ASSERT_EQ(format->encode(value), apfloatBits(value, format->semantics))
          << format->name << " " << value;
}

} // namespace
