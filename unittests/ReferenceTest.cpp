//===- ReferenceTest.cpp - The yardstick, measured ------------------------===//

#include "fd/Reference/Reference.h"

#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace fd::reference;

namespace {

/// What LLVM's APFloat makes of `value` in 16-bit `semantics`.
uint16_t apfloatBits(float value, const llvm::fltSemantics &semantics) {
  llvm::APFloat converted(value);
  bool losesInfo = false;
  converted.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return converted.bitcastToAPInt().getZExtValue();
}

float apfloatValue(uint16_t bits, const llvm::fltSemantics &semantics) {
  llvm::APFloat value(semantics, llvm::APInt(16, bits));
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToFloat();
}

bool sameFloat(float lhs, float rhs) {
  return (std::isnan(lhs) && std::isnan(rhs)) ||
         std::memcmp(&lhs, &rhs, sizeof(float)) == 0;
}

TEST(Reference, DecodesEvery16BitPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    ASSERT_TRUE(sameFloat(halfToFloat(bits),
                          apfloatValue(bits, llvm::APFloat::IEEEhalf())))
        << "half " << bits;
    ASSERT_TRUE(sameFloat(bfloat16ToFloat(bits),
                          apfloatValue(bits, llvm::APFloat::BFloat())))
        << "bfloat16 " << bits;
  }
}

TEST(Reference, RoundsFloatsToNearestEven) {
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<uint32_t> anyBits;
  std::vector<float> values = {0.0f,
                               -0.0f,
                               65504.0f,
                               65519.0f,
                               65520.0f,
                               1e-8f,
                               2.9802322e-8f,
                               5.9604645e-8f,
                               6.1e-5f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = anyBits(random);
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    values.push_back(value);
  }
  for (float value : values) {
    if (!std::isnan(value)) {
      ASSERT_EQ(floatToHalf(value),
                apfloatBits(value, llvm::APFloat::IEEEhalf()))
          << value;
      ASSERT_EQ(floatToBFloat16(value),
                apfloatBits(value, llvm::APFloat::BFloat()))
          << value;
    } else {
      ASSERT_TRUE(std::isnan(halfToFloat(floatToHalf(value))));
      ASSERT_TRUE(std::isnan(bfloat16ToFloat(floatToBFloat16(value))));
    }
  }
}

TEST(Reference, AttentionOfHandComputableCases) {
  // One KV head, D = 32, two sequences: length 2 with keys making the
  // scores 0 and log(3) (weights 1/4, 3/4), and length 0.
  constexpr int64_t d = 32;
  std::vector<double> query(2 * d, 0.0), keys(2 * 2 * d, 0.0),
      values(2 * 2 * d, 0.0);
  query[0] = 1.0;
  keys[d] = std::log(3.0); // key 1 of sequence 0
  for (int64_t i = 0; i < d; ++i) {
    values[i] = 4.0;
    values[d + i] = 8.0;
  }
  int32_t lengths[] = {2, 0};
  AttentionProblem problem;
  problem.batch = 2;
  problem.numQueryHeads = 1;
  problem.numKVHeads = 1;
  problem.headDim = d;
  problem.maxLength = 2;
  problem.scale = 1.0;
  problem.query = query.data();
  problem.keyCache = keys.data();
  problem.valueCache = values.data();
  problem.lengths = lengths;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  EXPECT_NEAR(output[0], 0.25 * 4.0 + 0.75 * 8.0, 1e-12);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-12);
  EXPECT_EQ(output[d], 0.0);
  EXPECT_TRUE(std::isinf(lse[1]) && lse[1] < 0);
}

} // namespace
