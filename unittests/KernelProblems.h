//===- KernelProblems.h - Problems for the planning tests ------*- C++ -*-===//

#ifndef FD_UNITTESTS_KERNELPROBLEMS_H
#define FD_UNITTESTS_KERNELPROBLEMS_H

#include "fd/Planning/KernelPlan.h"

#include <cstdint>

namespace flashdecode::test {

/// A problem of `groupSize` query heads per KV head at `headDim`, the
/// queries' and the cache's elements `elementBytes` wide.
inline KernelProblem makeProblem(int64_t headDim, int64_t groupSize,
                                 int64_t queryLength = 1,
                                 int64_t elementBytes = 2) {
  KernelProblem problem;
  problem.headDim = headDim;
  problem.groupSize = groupSize;
  problem.queryLength = queryLength;
  problem.queryElementBytes = elementBytes;
  problem.cacheElementBytes = elementBytes;
  return problem;
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_KERNELPROBLEMS_H
