//===- ReferenceAlibiTest.cpp - The yardstick's ALiBi ---------------------===//
//
// flashdecode::reference with ALiBi slopes on hand-computable cases: the bias
// slope * (j - p) per query token's own position p, after the scale and the
// soft-cap; slopes of 0 are no ALiBi, huge ones leave each token its key.
//
//===----------------------------------------------------------------------===//

#include "ReferenceProblems.h"

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace flashdecode::reference;
using flashdecode::test::fillNormal;
using flashdecode::test::singleHead;

namespace {

TEST(ReferenceAlibi, WeighsKeysByDistance) {
  // One KV head, D = 2, zero queries (every score 0), values 1, 2, 4 (and
  // 10 times that): the weights are e^{s (j - p)} alone. Lq = 2 over 3 keys
  // with s = log 2: token 0 (p = 1) sees keys 0, 1 at distances -1, 0
  // (weights 1/3, 2/3), token 1 (p = 2) keys 0, 1, 2 at -2, -1, 0 (1/7,
  // 2/7, 4/7). Head 1 has slope 0: plain averages.
  constexpr int64_t d = 2, heads = 2, queryLength = 2, maxLength = 3;
  std::vector<double> query(queryLength * heads * d, 0.0),
      keys(maxLength * d, 0.5), values(maxLength * d);
  for (int64_t j = 0; j < maxLength; ++j) {
    values[j * d] = double(1 << j);
    values[j * d + 1] = 10.0 * (1 << j);
  }
  int32_t lengths[] = {3};
  const double slopes[heads] = {std::log(2.0), 0.0};
  AttentionProblem problem =
      singleHead(1, queryLength, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.alibiSlopes = slopes;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  // Rows [t, h]: (0, 0), (0, 1), (1, 0), (1, 1).
  const double expected[4] = {5.0 / 3.0, 1.5, 3.0, 7.0 / 3.0};
  const double expectedLse[4] = {std::log(1.5), std::log(2.0), std::log(1.75),
                                 std::log(3.0)};
  for (int64_t row = 0; row < 4; ++row) {
    EXPECT_NEAR(output[row * d], expected[row], 1e-12) << "row " << row;
    EXPECT_NEAR(output[row * d + 1], 10.0 * expected[row], 1e-11)
        << "row " << row;
    EXPECT_NEAR(lse[row], expectedLse[row], 1e-12) << "row " << row;
  }
}

TEST(ReferenceAlibi, ComesAfterTheScaleAndTheSoftCap) {
  // Two keys of raw scores x0 = 4 and x1 = 0, scale 1/2, cap 2, slope 1,
  // one query at p = 1: scores 2 tanh(1) - 1 and 0 (a bias before the cap
  // would be capped too; before the scale, halved). Weights
  // e^{x0' - s}, e^{x1'}.
  constexpr int64_t d = 1;
  std::vector<double> query = {1.0}, keys = {4.0, 0.0}, values = {3.0, -5.0};
  int32_t lengths[] = {2};
  const double slopes[] = {1.0};
  AttentionProblem problem =
      singleHead(1, 1, d, 2, query, keys, values, lengths);
  problem.scale = 0.5;
  problem.logitsSoftCap = 2.0;
  problem.alibiSlopes = slopes;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  double w0 = std::exp(2.0 * std::tanh(1.0) - 1.0), w1 = 1.0;
  EXPECT_NEAR(output[0], (3.0 * w0 - 5.0 * w1) / (w0 + w1), 1e-12);
  EXPECT_NEAR(lse[0], std::log(w0 + w1), 1e-12);
}

TEST(ReferenceAlibi, OfZeroIsNoAlibiAndLargeSlopesKeepTheLastKey) {
  // Random inputs, Hq = 4 over Hkv = 2, Lq = 3 with a window of 5: slopes
  // of 0 give exactly the plain result; slopes of 1000 leave the weight to
  // each token's own key (distance 0), lse = its score.
  constexpr int64_t d = 8, maxLength = 12, queryLength = 3, heads = 4;
  std::vector<double> query(2 * queryLength * heads * d),
      keys(2 * maxLength * 2 * d), values(keys.size());
  fillNormal(37, {&query, &keys, &values});
  int32_t lengths[] = {12, 2};
  AttentionProblem problem =
      singleHead(2, queryLength, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.numKVHeads = 2;
  problem.windowLeft = 5;
  problem.scale = 0.3;
  std::vector<double> plain, plainLse, output, lse;
  attention(problem, plain, plainLse);
  std::vector<double> slopes(heads, 0.0);
  problem.alibiSlopes = slopes.data();
  attention(problem, output, lse);
  EXPECT_EQ(output, plain);
  EXPECT_EQ(lse, plainLse);
  std::fill(slopes.begin(), slopes.end(), 1000.0);
  attention(problem, output, lse);
  for (int64_t row = 0; row < 2 * queryLength * heads; ++row) {
    int64_t b = row / (queryLength * heads), t = row / heads % queryLength;
    int64_t h = row % heads, p = lengths[b] - queryLength + t;
    if (p < 0) {
      EXPECT_TRUE(std::isinf(lse[row]) && lse[row] < 0) << "row " << row;
      continue;
    }
    // NHD: key p of KV head h / 2.
    const double *key = &keys[((b * maxLength + p) * 2 + h / 2) * d];
    const double *value = &values[((b * maxLength + p) * 2 + h / 2) * d];
    double score = 0.0;
    for (int64_t k = 0; k < d; ++k)
      score += query[row * d + k] * key[k];
    EXPECT_NEAR(lse[row], 0.3 * score, 1e-9) << "row " << row;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_NEAR(output[row * d + k], value[k], 1e-9) << "row " << row;
  }
}

} // namespace
