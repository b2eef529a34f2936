//===- ReferenceQueryLensTest.cpp - The yardstick's query lengths ---------===//
//
// flashdecode::reference with per-sequence query lengths: sequence b's last
// n = clamp(queryLengths[b], 0, Lq) tokens are its queries, token t at
// position len - n + t (the causal rule, the window and ALiBi use it);
// the rows of tokens t >= n are zeros with lse -inf, sinks or not. Hand-
// computable cases, and exact agreement with the problem of n query tokens.
//
//===----------------------------------------------------------------------===//

#include "ReferenceProblems.h"

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace flashdecode::reference;
using flashdecode::test::fillNormal;
using flashdecode::test::singleHead;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

TEST(ReferenceQueryLens, PositionsCountFromTheLastQuery) {
  // One head, D = 1, zero queries (every score 0), key j of value 2^j,
  // Lq = 3 over 4 keys with n = 2: token 0 at p = 2 averages keys 0..2
  // (7/3), token 1 at p = 3 keys 0..3 (15/4); token 2 is padding. With
  // W = 2: keys 1, 2 (3) and 2, 3 (6). With ALiBi of slope log 2, key j
  // weighs 2^(j - p): 5.25 / 1.75 = 3 and 10.625 / 1.875 = 17/3.
  constexpr int64_t queryLength = 3, maxLength = 4;
  std::vector<double> query(queryLength, 0.0), keys(maxLength, 1.0),
      values = {1.0, 2.0, 4.0, 8.0};
  int32_t lengths[] = {4}, queryLengths[] = {2};
  AttentionProblem problem =
      singleHead(1, queryLength, 1, maxLength, query, keys, values, lengths);
  problem.queryLengths = queryLengths;
  std::vector<double> output, lse;
  auto expectRows = [&](double first, double second, double firstLse,
                        double secondLse) {
    attention(problem, output, lse);
    EXPECT_NEAR(output[0], first, 1e-12);
    EXPECT_NEAR(output[1], second, 1e-12);
    EXPECT_EQ(output[2], 0.0);
    EXPECT_NEAR(lse[0], firstLse, 1e-12);
    EXPECT_NEAR(lse[1], secondLse, 1e-12);
    EXPECT_EQ(lse[2], -kInf);
  };
  expectRows(7.0 / 3.0, 15.0 / 4.0, std::log(3.0), std::log(4.0));
  problem.windowLeft = 2;
  expectRows(3.0, 6.0, std::log(2.0), std::log(2.0));
  problem.windowLeft = 0;
  const double slopes[] = {std::log(2.0)};
  problem.alibiSlopes = slopes;
  expectRows(3.0, 17.0 / 3.0, std::log(1.75), std::log(1.875));
}

TEST(ReferenceQueryLens, PaddingRowsAreEmptyEvenWithSinks) {
  // Two heads with sinks log 4 and -1, Lq = 3, D = 2. Sequence 0 (length
  // 2, n = 1): token 0 at p = 1 sees both keys; tokens 1, 2 are padding.
  // Sequence 1 (length 0, n = 2): tokens 0, 1 are queries without keys
  // (lse = the sink); token 2 is padding. Sequence 2 (n = -5): all padding.
  constexpr int64_t d = 2, heads = 2, queryLength = 3, maxLength = 2;
  std::vector<double> query(3 * queryLength * heads * d),
      keys(3 * maxLength * d), values(keys.size());
  fillNormal(41, {&query, &keys, &values});
  int32_t lengths[] = {2, 0, 2}, queryLengths[] = {1, 2, -5};
  const double sinks[heads] = {std::log(4.0), -1.0};
  AttentionProblem problem =
      singleHead(3, queryLength, d, maxLength, query, keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.sinks = sinks;
  problem.queryLengths = queryLengths;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  const int64_t queries[] = {1, 2, 0};
  for (int64_t row = 0; row < 3 * queryLength * heads; ++row) {
    int64_t b = row / (queryLength * heads), t = row / heads % queryLength;
    double sink = sinks[row % heads];
    if (t >= queries[b])
      EXPECT_EQ(lse[row], -kInf) << "row " << row;
    else if (b == 1)
      EXPECT_EQ(lse[row], sink) << "row " << row;
    else // keys and the sink
      EXPECT_GT(lse[row], sink) << "row " << row;
    for (int64_t k = 0; k < d; ++k)
      if (b != 0 || t != 0)
        EXPECT_EQ(output[row * d + k], 0.0) << "row " << row << " dim " << k;
      else
        EXPECT_NE(output[row * d + k], 0.0) << "row " << row << " dim " << k;
  }
}

/// A random problem (Hq = 4 over Hkv = 2, D = 8, Lq = 4) with a window of 3,
/// a soft-cap, sinks and ALiBi, over lengths from 0 (no key) to full.
struct RandomProblem {
  static constexpr int64_t batch = 10, queryLength = 4, heads = 4, d = 8,
                           maxLength = 20;
  std::vector<double> query, keys, values;
  int32_t lengths[batch] = {0, 1, 2, 3, 5, 11, 20, 20, 19, 17};
  const double sinks[heads] = {0.5, -2.0, 3.0, -kInf};
  const double slopes[heads] = {0.5, 0.25, 0.0, 1.0};
  AttentionProblem problem;

  RandomProblem()
      : query(batch * queryLength * heads * d), keys(batch * maxLength * 2 * d),
        values(keys.size()) {
    fillNormal(43, {&query, &keys, &values});
    problem = singleHead(batch, queryLength, d, maxLength, query, keys, values,
                         lengths);
    problem.numQueryHeads = heads;
    problem.numKVHeads = 2;
    problem.scale = 0.4;
    problem.windowLeft = 3;
    problem.logitsSoftCap = 2.0;
    problem.sinks = sinks;
    problem.alibiSlopes = slopes;
  }
};

TEST(ReferenceQueryLens, ClampedEntriesAreZeroOrAllQueries) {
  // Lq, Lq + 5 and INT32_MAX: exactly the problem without query lengths;
  // 0, -3 and INT32_MIN: every row padding (zeros, lse -inf, not the sink).
  RandomProblem random;
  AttentionProblem &problem = random.problem;
  std::vector<double> plain, plainLse, output, lse;
  attention(problem, plain, plainLse);
  for (int32_t entry : {4, 9, kInt32Max}) {
    std::vector<int32_t> queryLengths(random.batch, entry);
    problem.queryLengths = queryLengths.data();
    attention(problem, output, lse);
    EXPECT_EQ(output, plain) << "entry " << entry;
    EXPECT_EQ(lse, plainLse) << "entry " << entry;
  }
  for (int32_t entry : {0, -3, kInt32Min}) {
    std::vector<int32_t> queryLengths(random.batch, entry);
    problem.queryLengths = queryLengths.data();
    attention(problem, output, lse);
    EXPECT_EQ(output, std::vector<double>(plain.size(), 0.0))
        << "entry " << entry;
    EXPECT_EQ(lse, std::vector<double>(plainLse.size(), -kInf))
        << "entry " << entry;
  }
}

TEST(ReferenceQueryLens, RowsAreThoseOfTheProblemOfTheirQueries) {
  // Sequence b has n = b % 5 queries: its rows t < n are exactly those of
  // the problem with Lq = n whose queries are its first n tokens' (the same
  // positions len - n + t); the others are padding.
  RandomProblem random;
  AttentionProblem &problem = random.problem;
  const int64_t queryLength = random.queryLength, heads = random.heads,
                d = random.d;
  std::vector<int32_t> queryLengths(random.batch);
  for (int64_t b = 0; b < random.batch; ++b)
    queryLengths[b] = b % 5;
  problem.queryLengths = queryLengths.data();
  std::vector<double> output, lse;
  attention(problem, output, lse);
  for (int64_t n = 1; n <= queryLength; ++n) {
    std::vector<double> query(random.batch * n * heads * d);
    for (int64_t b = 0; b < random.batch; ++b)
      std::copy_n(&random.query[b * queryLength * heads * d], n * heads * d,
                  &query[b * n * heads * d]);
    AttentionProblem first = problem;
    first.queryLength = n;
    first.queryLengths = nullptr;
    first.query = query.data();
    std::vector<double> expected, expectedLse;
    attention(first, expected, expectedLse);
    for (int64_t b = 0; b < random.batch; ++b) {
      if (queryLengths[b] != n)
        continue;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t row = (b * queryLength + t) * heads + h;
          int64_t firstRow = (b * n + t) * heads + h;
          EXPECT_EQ(lse[row], expectedLse[firstRow]) << "row " << row;
          for (int64_t k = 0; k < d; ++k)
            EXPECT_EQ(output[row * d + k], expected[firstRow * d + k])
                << "row " << row << " dim " << k;
        }
    }
  }
  for (int64_t row = 0; row < random.batch * queryLength * heads; ++row) {
    int64_t b = row / (queryLength * heads), t = row / heads % queryLength;
    if (t < queryLengths[b])
      continue;
    EXPECT_EQ(lse[row], -kInf) << "row " << row;
    for (int64_t k = 0; k < d; ++k)
      EXPECT_EQ(output[row * d + k], 0.0) << "row " << row << " dim " << k;
  }
}

} // namespace
