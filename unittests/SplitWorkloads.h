//===- SplitWorkloads.h - The split planner tests' workloads ----*- C++ -*-===//
//-*-===//
//
// The reference table's heads as the split planner's workloads, for
// SplitPlannerTest (the wave model, validation) and SplitPlannerWorkloadTest
// (the planner with the kernel's work known).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_SPLITWORKLOADS_H
#define FD_UNITTESTS_SPLITWORKLOADS_H

#include "fd/Planning/SplitPlanner.h"

#include <cstdint>

namespace flashdecode::test {

/// Hq = 32 over `kvHeads`, D = 128, one query token, f16 queries,
/// `kvElementBytes` per cached element: the grouped heads (Hkv = 1, 8) on
/// tensor cores, MHA on CUDA cores.
inline SplitWorkload getWorkload(int64_t kvHeads, int64_t kvElementBytes = 2) {
  SplitWorkload workload;
  workload.rowsPerKVHead = 32 / kvHeads;
  workload.headDim = 128;
  workload.kvElementBytes = kvElementBytes;
  return workload;
}

/// The same heads with f32 queries and an f16 cache: the CUDA-core kernel
/// whatever the group, a token per token-time and 64 of overhead a block.
inline SplitWorkload getCudaCoreWorkload(int64_t kvHeads) {
  SplitWorkload workload = getWorkload(kvHeads);
  workload.queryElementBytes = 4;
  return workload;
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_SPLITWORKLOADS_H
