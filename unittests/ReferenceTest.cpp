//===- ReferenceTest.cpp - The yardstick, measured ------------------------===//

#include "APFloatOracle.h"
#include "ReferenceProblems.h"
#include "TestInputs.h"

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace flashdecode::reference;
using flashdecode::test::apfloatBits;
using flashdecode::test::apfloatValue;
using flashdecode::test::fillNormal;
using flashdecode::test::sameFloat;
using flashdecode::test::Seeded;
using flashdecode::test::singleHead;

namespace {

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

/// Random bit patterns from FD_TEST_SEED or a fresh seed (TestInputs.h).
class ReferenceRounding : public testing::Test, protected Seeded {};

TEST_F(ReferenceRounding, RoundsFloatsToNearestEven) {
  SCOPED_TRACE(seedNote());
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

TEST(Reference, ValuesOfTheirOwnWidthOrTheKeysFirstColumns) {
  // D = 40, D_v = 32, one sequence of two keys scoring 0 and log(3)
  // (weights 1/4, 3/4). In a value cache of its own, value row j holds
  // 4 (j + 1) + d; read from the key cache (MLA), the values are the keys'
  // first 32 columns, which hold 10 (j + 1) + d, the score coming from
  // column 39 alone.
  constexpr int64_t d = 40, dv = 32;
  std::vector<double> query(d, 0.0), keys(2 * d, 0.0), values(2 * dv, 0.0);
  query[d - 1] = 1.0;
  keys[2 * d - 1] = std::log(3.0);
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < dv; ++i) {
      keys[j * d + i] = 10.0 * (j + 1) + i;
      values[j * dv + i] = 4.0 * (j + 1) + i;
    }
  int32_t lengths[] = {2};
  AttentionProblem problem;
  problem.batch = 1;
  problem.numQueryHeads = 1;
  problem.numKVHeads = 1;
  problem.headDim = d;
  problem.valueHeadDim = dv;
  problem.maxLength = 2;
  problem.scale = 1.0;
  problem.query = query.data();
  problem.keyCache = keys.data();
  problem.valueCache = values.data();
  problem.lengths = lengths;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  ASSERT_EQ(output.size(), static_cast<size_t>(dv));
  for (int64_t i = 0; i < dv; ++i)
    EXPECT_NEAR(output[i], 0.25 * (4.0 + i) + 0.75 * (8.0 + i), 1e-12) << i;
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-12);
  problem.valueCache = nullptr;
  attention(problem, output, lse);
  ASSERT_EQ(output.size(), static_cast<size_t>(dv));
  for (int64_t i = 0; i < dv; ++i)
    EXPECT_NEAR(output[i], 0.25 * (10.0 + i) + 0.75 * (20.0 + i), 1e-12) << i;
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-12);
}

TEST(Reference, WindowOfOneIsTheValueAtTheQuerysPosition) {
  // Lq = 3 over length 5: query t sits at p = 2 + t and, with W = 1, sees
  // key p alone: its output is v[p] and its lse the score q . k[p].
  constexpr int64_t d = 8, length = 5, queryLength = 3;
  std::vector<double> query(queryLength * d), keys(length * d),
      values(length * d);
  fillNormal(7, {&query, &keys, &values});
  int32_t lengths[] = {length};
  AttentionProblem problem =
      singleHead(1, queryLength, d, length, query, keys, values, lengths);
  problem.windowLeft = 1;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t t = 0; t < queryLength; ++t) {
    int64_t p = length - queryLength + t;
    double score = 0.0;
    for (int64_t k = 0; k < d; ++k) {
      EXPECT_EQ(output[t * d + k], values[p * d + k]) << "t " << t;
      score += query[t * d + k] * keys[p * d + k];
    }
    EXPECT_NEAR(lse[t], score, 1e-12) << "t " << t;
  }
}

TEST(Reference, WindowSkipsEarlierKeysWithoutReadingThem) {
  // Length 3, W = 2: keys 1 and 2 (scores 0 and log 3: weights 1/4, 3/4);
  // key 0 is NaN and must not be read. W = 3 and W = 100 read key 0: NaN.
  constexpr int64_t d = 4;
  std::vector<double> query(d, 0.0), keys(3 * d, 0.0), values(3 * d, 0.0);
  query[0] = 1.0;
  keys[0] = std::nan("");
  keys[2 * d] = std::log(3.0);
  for (int64_t k = 0; k < d; ++k) {
    values[k] = 100.0;
    values[d + k] = 4.0;
    values[2 * d + k] = 8.0 + k;
  }
  int32_t lengths[] = {3};
  AttentionProblem problem =
      singleHead(1, 1, d, 3, query, keys, values, lengths);
  problem.windowLeft = 2;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t k = 0; k < d; ++k)
    EXPECT_NEAR(output[k], 0.25 * 4.0 + 0.75 * (8.0 + k), 1e-12);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-12);
  for (int64_t window : {3, 100}) {
    problem.windowLeft = window;
    attention(problem, output, lse);
    EXPECT_TRUE(std::isnan(output[0]) && std::isnan(lse[0])) << window;
  }
}

TEST(Reference, WindowLargerThanTheLengthIsNoWindow) {
  constexpr int64_t d = 8, maxLength = 20, queryLength = 2;
  std::vector<double> query(3 * queryLength * d), keys(3 * maxLength * d),
      values(3 * maxLength * d);
  fillNormal(11, {&query, &keys, &values});
  int32_t lengths[] = {20, 7, 1};
  AttentionProblem problem =
      singleHead(3, queryLength, d, maxLength, query, keys, values, lengths);
  std::vector<double> unwindowed, unwindowedLse, output, lse;
  attention(problem, unwindowed, unwindowedLse);
  for (int64_t window : {20, 21, 1000}) {
    problem.windowLeft = window;
    attention(problem, output, lse);
    EXPECT_EQ(output, unwindowed) << window;
    EXPECT_EQ(lse, unwindowedLse) << window;
  }
  // W = 19 drops key 0 for the last query of sequence 0 (at p = 19) only.
  problem.windowLeft = 19;
  attention(problem, output, lse);
  EXPECT_EQ(lse[0], unwindowedLse[0]);
  EXPECT_NE(lse[1], unwindowedLse[1]);
  for (int64_t row = 2; row < 6; ++row)
    EXPECT_EQ(lse[row], unwindowedLse[row]) << row;
}

TEST(Reference, QueriesBeforeTheFirstKeySeeNothing) {
  // Length 1, Lq = 2, W = 1: query 0 sits at p = -1 (zeros, lse -inf),
  // query 1 at p = 0 sees key 0 (score 2, output v[0]).
  constexpr int64_t d = 4;
  std::vector<double> query(2 * d, 1.0), keys(d, 0.5), values(d, 3.0);
  int32_t lengths[] = {1};
  AttentionProblem problem =
      singleHead(1, 2, d, 1, query, keys, values, lengths);
  problem.windowLeft = 1;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t k = 0; k < d; ++k) {
    EXPECT_EQ(output[k], 0.0);
    EXPECT_EQ(output[d + k], 3.0);
  }
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
  EXPECT_NEAR(lse[1], 2.0, 1e-12);
}

TEST(Reference, SoftCapSaturatesHugeScores) {
  // Scores +1e6 and -1e6 capped at c = 5 become 5 and -5: weights
  // e^5 / (e^5 + e^-5) and e^-5 / (e^5 + e^-5), lse log(e^5 + e^-5).
  constexpr int64_t d = 4;
  std::vector<double> query(d, 0.0), keys(2 * d, 0.0), values(2 * d, 0.0);
  query[0] = 1000.0;
  keys[0] = 1000.0;
  keys[d] = -1000.0;
  for (int64_t k = 0; k < d; ++k) {
    values[k] = 1.0 + k;
    values[d + k] = -7.0;
  }
  int32_t lengths[] = {2};
  AttentionProblem problem =
      singleHead(1, 1, d, 2, query, keys, values, lengths);
  problem.logitsSoftCap = 5.0;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  double high = std::exp(5.0), low = std::exp(-5.0);
  for (int64_t k = 0; k < d; ++k)
    EXPECT_NEAR(output[k], (high * (1.0 + k) - 7.0 * low) / (high + low),
                1e-12);
  EXPECT_NEAR(lse[0], std::log(high + low), 1e-12);
  // Uncapped, the score 1e6 takes all the weight.
  problem.logitsSoftCap = 0.0;
  attention(problem, output, lse);
  EXPECT_EQ(output[1], 2.0);
  EXPECT_EQ(lse[0], 1e6);
}

TEST(Reference, SoftCapBendsModerateScoresAndCombinesWithAWindow) {
  // One visible key (W = 1) with score 30: its output is v[p] and its lse
  // the capped score, c tanh(30 / c), for c = 50 and c = 2.
  constexpr int64_t d = 4;
  std::vector<double> query(d, 0.0), keys(3 * d, 0.0), values(3 * d, 0.0);
  query[0] = 6.0;
  keys[2 * d] = 5.0;
  keys[d] = 100.0; // outside the window
  for (int64_t k = 0; k < 3 * d; ++k)
    values[k] = k;
  int32_t lengths[] = {3};
  AttentionProblem problem =
      singleHead(1, 1, d, 3, query, keys, values, lengths);
  problem.windowLeft = 1;
  std::vector<double> output, lse;
  for (double cap : {50.0, 2.0}) {
    problem.logitsSoftCap = cap;
    attention(problem, output, lse);
    EXPECT_NEAR(lse[0], cap * std::tanh(30.0 / cap), 1e-12) << cap;
    EXPECT_NEAR(lse[0], cap == 50.0 ? 26.8524783 : 2.0, 1e-6) << cap;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_EQ(output[k], values[2 * d + k]) << cap;
  }
  // W = 2 adds key 1 (score 600, capped to about c): two capped scores,
  // c tanh(600 / c) and c tanh(30 / c).
  problem.windowLeft = 2;
  problem.logitsSoftCap = 50.0;
  attention(problem, output, lse);
  double s1 = 50.0 * std::tanh(600.0 / 50.0),
         s2 = 50.0 * std::tanh(30.0 / 50.0);
  double w1 = std::exp(s1), w2 = std::exp(s2);
  EXPECT_NEAR(lse[0], std::log(w1 + w2), 1e-12);
  for (int64_t k = 0; k < d; ++k)
    EXPECT_NEAR(output[k],
                (w1 * values[d + k] + w2 * values[2 * d + k]) / (w1 + w2),
                1e-9);
}

} // namespace

//===----------------------------------------------------------------------===//
// Attention sinks
//===----------------------------------------------------------------------===//

TEST(Reference, SinkJoinsTheDenominatorOnly) {
  // Two query heads on one KV head, D = 4, sinks 0 and log 4. Sequence 0
  // has one key of score log 3: head 0's weight is 3 / (3 + 1), head 1's
  // 3 / (3 + 4). Sequence 1 puts a key of score 0 first: weights 1 / 5 and
  // 3 / 5 for head 0, 1 / 8 and 3 / 8 for head 1. Sequence 2 is empty:
  // zeros and lse = the sink.
  constexpr int64_t d = 4, heads = 2, maxLength = 2;
  std::vector<double> query(3 * heads * d, 0.0), keys(3 * maxLength * d, 0.0),
      values(3 * maxLength * d, 0.0);
  for (int64_t row = 0; row < 3 * heads; ++row)
    query[row * d] = 1.0;
  keys[0] = std::log(3.0);                   // sequence 0, key 0
  keys[(maxLength + 1) * d] = std::log(3.0); // sequence 1, key 1
  for (int64_t k = 0; k < d; ++k) {
    values[k] = 8.0 + k;
    values[maxLength * d + k] = 2.0;
    values[(maxLength + 1) * d + k] = 8.0 + k;
  }
  int32_t lengths[] = {1, 2, 0};
  double sinks[] = {0.0, std::log(4.0)};
  AttentionProblem problem =
      singleHead(3, 1, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.sinks = sinks;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t k = 0; k < d; ++k) {
    EXPECT_NEAR(output[k], 0.75 * (8.0 + k), 1e-12);
    EXPECT_NEAR(output[d + k], 3.0 / 7.0 * (8.0 + k), 1e-12);
    EXPECT_NEAR(output[2 * d + k], (2.0 + 3.0 * (8.0 + k)) / 5.0, 1e-12);
    EXPECT_NEAR(output[3 * d + k], (1.0 * 2.0 + 3.0 * (8.0 + k)) / 8.0, 1e-12);
    EXPECT_EQ(output[4 * d + k], 0.0);
    EXPECT_EQ(output[5 * d + k], 0.0);
  }
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-12);
  EXPECT_NEAR(lse[1], std::log(7.0), 1e-12);
  EXPECT_NEAR(lse[2], std::log(5.0), 1e-12); // 1 + 3 + e^0
  EXPECT_NEAR(lse[3], std::log(8.0), 1e-12);
  EXPECT_EQ(lse[4], 0.0);
  EXPECT_EQ(lse[5], std::log(4.0));
}

TEST(Reference, SinkOfMinusInfinityIsNoSink) {
  // Random inputs, Hq = 4 over Hkv = 2, Lq = 2 with a window of 3, lengths
  // 0, 1 and 9: every output and lse bit-identical to no sinks (a row
  // without keys keeps lse -inf).
  constexpr int64_t d = 8, maxLength = 9, queryLength = 2, heads = 4;
  std::vector<double> query(3 * queryLength * heads * d),
      keys(3 * maxLength * 2 * d), values(keys.size());
  fillNormal(23, {&query, &keys, &values});
  int32_t lengths[] = {0, 1, 9};
  AttentionProblem problem =
      singleHead(3, queryLength, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.numKVHeads = 2;
  problem.windowLeft = 3;
  std::vector<double> plain, plainLse, output, lse;
  attention(problem, plain, plainLse);
  std::vector<double> sinks(heads, -std::numeric_limits<double>::infinity());
  problem.sinks = sinks.data();
  attention(problem, output, lse);
  EXPECT_EQ(output, plain);
  EXPECT_EQ(lse, plainLse);
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
}

TEST(Reference, SinkRescalesTheRowByItsShareOfTheLse) {
  // With a sink s, lse' = log(e^lse + e^s) and out' = out * e^(lse - lse'):
  // the keys' share of the new denominator. Rows without keys (length 0,
  // and with Lq = 3 the tokens before the first key) get zeros and lse = s.
  // Sinks far above the scores (1000: no overflow) and far below (-1000).
  constexpr int64_t d = 16, maxLength = 40, queryLength = 3, heads = 4;
  std::vector<double> query(4 * queryLength * heads * d),
      keys(4 * maxLength * d), values(keys.size());
  fillNormal(29, {&query, &keys, &values});
  int32_t lengths[] = {40, 1, 0, 17};
  AttentionProblem problem =
      singleHead(4, queryLength, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  std::vector<double> plain, plainLse, output, lse;
  attention(problem, plain, plainLse);
  const double sinks[heads] = {0.7, 1000.0, -1000.0, -2.5};
  problem.sinks = sinks;
  attention(problem, output, lse);
  for (int64_t row = 0; row < 4 * queryLength * heads; ++row) {
    double sink = sinks[row % heads];
    int64_t b = row / (queryLength * heads), t = row / heads % queryLength;
    bool noKey = lengths[b] - queryLength + t < 0;
    ASSERT_EQ(std::isinf(plainLse[row]), noKey) << "row " << row;
    double expectedLse =
        noKey ? sink
              : std::max(plainLse[row], sink) +
                    std::log1p(std::exp(-std::abs(plainLse[row] - sink)));
    EXPECT_NEAR(lse[row], expectedLse, 1e-9 * std::max(1.0, std::abs(sink)))
        << "row " << row;
    double share = noKey ? 0.0 : std::exp(plainLse[row] - expectedLse);
    for (int64_t k = 0; k < d; ++k)
      EXPECT_NEAR(output[row * d + k], plain[row * d + k] * share, 1e-12)
          << "row " << row << " dim " << k;
  }
  // The sink of 1000 leaves (next to) nothing to the keys; -1000 nothing to
  // itself.
  EXPECT_EQ(lse[1], 1000.0);
  EXPECT_LT(std::abs(output[d]), 1e-300);
  EXPECT_EQ(lse[2], plainLse[2]);
  EXPECT_EQ(output[2 * d], plain[2 * d]);
}

TEST(Reference, NaNSinkPoisonsItsHeadOnly) {
  constexpr int64_t d = 4, heads = 3;
  std::vector<double> query(heads * d), keys(5 * d), values(5 * d);
  fillNormal(31, {&query, &keys, &values});
  int32_t lengths[] = {5};
  AttentionProblem problem =
      singleHead(1, 1, d, 5, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  const double sinks[heads] = {0.5, std::nan(""), -1.0};
  problem.sinks = sinks;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t h = 0; h < heads; ++h) {
    EXPECT_EQ(std::isnan(lse[h]), h == 1) << "head " << h;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_EQ(std::isnan(output[h * d + k]), h == 1) << "head " << h;
  }
}
