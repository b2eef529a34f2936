//===- ReferenceProblems.h - Small reference problems ----------*- C++ -*-===//
//
// Helpers of the hand-computable flashdecode::reference tests
// (ReferenceTest.cpp, ReferenceAlibiTest.cpp, ReferenceQueryLensTest.cpp): a
// one-KV-head AttentionProblem and seeded normal inputs.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_REFERENCEPROBLEMS_H
#define FD_UNITTESTS_REFERENCEPROBLEMS_H

#include "fd/Reference/Reference.h"

#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace flashdecode::test {

/// A one-KV-head problem over `keys` and `values` ([B, Lmax, 1, D] rows of
/// D doubles), scale 1.
inline reference::AttentionProblem
singleHead(int64_t batch, int64_t queryLength, int64_t headDim,
           int64_t maxLength, const std::vector<double> &query,
           const std::vector<double> &keys, const std::vector<double> &values,
           const int32_t *lengths) {
  reference::AttentionProblem problem;
  problem.batch = batch;
  problem.queryLength = queryLength;
  problem.numQueryHeads = 1;
  problem.numKVHeads = 1;
  problem.headDim = headDim;
  problem.maxLength = maxLength;
  problem.scale = 1.0;
  problem.query = query.data();
  problem.keyCache = keys.data();
  problem.valueCache = values.data();
  problem.lengths = lengths;
  return problem;
}

/// Standard normal values from seed `seed` in every element of `vectors`.
inline void fillNormal(unsigned seed,
                       std::initializer_list<std::vector<double> *> vectors) {
  std::mt19937 random(seed);
  std::normal_distribution<double> normal;
  for (std::vector<double> *x : vectors)
    for (double &value : *x)
      value = normal(random);
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_REFERENCEPROBLEMS_H
