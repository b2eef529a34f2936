//===- ReferenceKVShardTest.cpp - The yardstick's sharded caches ----------===//
//
// flashdecode::reference with one rank's share of the keys (shardWorld,
// shardInterleave, shardRank): by hand on averages of known values, one
// rank of one is the whole cache, and the ranks' (output, lse) merged by
// log-sum-exp are the whole cache's with causal query tokens, a window,
// ALiBi and per-sequence query lengths.
//
//===----------------------------------------------------------------------===//

#include "ReferenceProblems.h"

#include "fd/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace flashdecode::reference;
using flashdecode::test::fillNormal;
using flashdecode::test::singleHead;

namespace {

TEST(ReferenceKVShard, AveragesTheRanksKeysAlone) {
  // Zero queries: every score 0, so a row is the mean of its keys' values.
  // Values j + 1 over 7 keys, two ranks of two tokens: rank 0 holds keys
  // 0, 1, 4, 5, rank 1 keys 2, 3, 6. Lq = 2: token 0 (p = 5) sees 0..5,
  // token 1 (p = 6) 0..6.
  constexpr int64_t d = 1, queryLength = 2, maxLength = 7;
  std::vector<double> query(queryLength * d, 0.0), keys(maxLength * d, 0.25),
      values(maxLength * d);
  for (int64_t j = 0; j < maxLength; ++j)
    values[j] = double(j + 1);
  int32_t lengths[] = {7};
  AttentionProblem problem =
      singleHead(1, queryLength, d, maxLength, query, keys, values, lengths);
  problem.shardWorld = 2;
  problem.shardInterleave = 2;
  const double expected[2][2] = {{(1 + 2 + 5 + 6) / 4.0, (1 + 2 + 5 + 6) / 4.0},
                                 {(3 + 4) / 2.0, (3 + 4 + 7) / 3.0}};
  const double keysSeen[2][2] = {{4, 4}, {2, 3}};
  for (int64_t rank = 0; rank < 2; ++rank) {
    problem.shardRank = rank;
    std::vector<double> output, lse;
    attention(problem, output, lse);
    for (int64_t t = 0; t < queryLength; ++t) {
      EXPECT_DOUBLE_EQ(output[t], expected[rank][t]) << rank << " " << t;
      EXPECT_DOUBLE_EQ(lse[t], std::log(keysSeen[rank][t]));
    }
  }
  // Rank 1 holds none of a 2-key sequence: zeros and -inf.
  lengths[0] = 2;
  problem.queryLength = 1;
  problem.shardRank = 1;
  std::vector<double> output, lse;
  attention(problem, output, lse);
  EXPECT_EQ(output[0], 0.0);
  EXPECT_EQ(lse[0], -std::numeric_limits<double>::infinity());
}

TEST(ReferenceKVShard, MergedRanksAreTheWholeCache) {
  constexpr int64_t batch = 3, queryLength = 3, heads = 2, d = 4,
                    maxLength = 41;
  std::vector<double> query(batch * queryLength * heads * d),
      keys(batch * maxLength * d), values(batch * maxLength * d);
  fillNormal(7, {&query, &keys, &values});
  int32_t lengths[] = {41, 2, 23};
  int32_t queryLengths[] = {3, 1, 2};
  const double slopes[heads] = {0.25, 0.0625};
  AttentionProblem problem = singleHead(batch, queryLength, d, maxLength, query,
                                        keys, values, lengths);
  problem.numQueryHeads = heads;
  problem.windowLeft = 17;
  problem.alibiSlopes = slopes;
  problem.queryLengths = queryLengths;
  std::vector<double> whole, wholeLse;
  attention(problem, whole, wholeLse);
  const int64_t rows = batch * queryLength * heads;
  for (auto [world, interleave] :
       {std::pair<int64_t, int64_t>{1, 1}, {3, 1}, {2, 5}, {4, 3}}) {
    problem.shardWorld = world;
    problem.shardInterleave = interleave;
    std::vector<double> merged(rows * d, 0.0), weight(rows, 0.0);
    std::vector<double> top(rows, -std::numeric_limits<double>::infinity());
    std::vector<std::vector<double>> outputs(world), lses(world);
    for (int64_t rank = 0; rank < world; ++rank) {
      problem.shardRank = rank;
      attention(problem, outputs[rank], lses[rank]);
      for (int64_t row = 0; row < rows; ++row)
        top[row] = std::max(top[row], lses[rank][row]);
    }
    for (int64_t rank = 0; rank < world; ++rank)
      for (int64_t row = 0; row < rows; ++row) {
        if (std::isinf(lses[rank][row]))
          continue;
        double w = std::exp(lses[rank][row] - top[row]);
        weight[row] += w;
        for (int64_t k = 0; k < d; ++k)
          merged[row * d + k] += w * outputs[rank][row * d + k];
      }
    for (int64_t row = 0; row < rows; ++row) {
      if (std::isinf(wholeLse[row])) {
        EXPECT_EQ(weight[row], 0.0) << "row " << row;
        continue;
      }
      EXPECT_NEAR(top[row] + std::log(weight[row]), wholeLse[row], 1e-12)
          << "world " << world << " row " << row;
      for (int64_t k = 0; k < d; ++k)
        EXPECT_NEAR(merged[row * d + k] / weight[row], whole[row * d + k],
                    1e-12)
            << "world " << world << " row " << row;
    }
  }
}

} // namespace
