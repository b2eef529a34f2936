//===- KernelPlanTest.cpp - The partial kernel's schedule -----------------===//
//
// planKernel's choices for the kernels the project ships: form, tiles, launch
// bounds, held q fragments, workgroup memory and the fused merge's split cap;
// and that the split planner's workload is the schedule's. PTXAssemblyTest
// checks every matrix configuration's schedule against ptxas.
//
//===----------------------------------------------------------------------===//

#include "fd/Planning/KernelPlan.h"
#include "fd/Planning/SplitPlanner.h"

#include <gtest/gtest.h>

using namespace flashdecode;

namespace {

KernelProblem makeProblem(int64_t headDim, int64_t groupSize,
                          int64_t queryLength = 1, int64_t elementBytes = 2) {
  KernelProblem problem;
  problem.headDim = headDim;
  problem.groupSize = groupSize;
  problem.queryLength = queryLength;
  problem.queryElementBytes = elementBytes;
  problem.cacheElementBytes = elementBytes;
  return problem;
}

const Chip &sm80() { return *findChip("sm_80"); }
const Chip &sm90() { return *findChip("sm_90"); }

TEST(KernelPlan, LlamaHeadsGoToTensorCoresAtFourBlocksPerSM) {
  KernelSchedule schedule = planKernel(makeProblem(128, 4), sm90());
  EXPECT_TRUE(schedule.usesTensorCores());
  EXPECT_EQ(schedule.getRowsPerTile(), 4);
  EXPECT_EQ(schedule.getNumRowTiles(), 1);
  EXPECT_EQ(schedule.getTokensPerStep(), 32);
  EXPECT_EQ(schedule.minBlocksPerSM, 4);
  EXPECT_EQ(schedule.getRegisterBudget(sm90()), 128);
  EXPECT_EQ(schedule.heldQuerySteps, 2);
  EXPECT_EQ(schedule.keyValueStages, 2);
}

TEST(KernelPlan, TightKernelsLaunchThreeBlocksAndHoldAllOfQ) {
  KernelProblem paged = makeProblem(128, 4);
  paged.features.paged = true;
  KernelProblem alibi = makeProblem(128, 4);
  alibi.alibi = true;
  KernelProblem windowCapped = makeProblem(64, 1, 8);
  windowCapped.features.window = windowCapped.features.softCap = true;
  KernelProblem maskedRows = makeProblem(128, 2, 4);
  maskedRows.features.queryLens = true;
  for (const KernelProblem &problem :
       {paged, alibi, windowCapped, maskedRows, makeProblem(128, 32)}) {
    KernelSchedule schedule = planKernel(problem, sm90());
    ASSERT_TRUE(schedule.usesTensorCores());
    EXPECT_EQ(schedule.minBlocksPerSM, 3) << problem.getRowsPerKVHead();
    EXPECT_EQ(schedule.getRegisterBudget(sm90()), 168);
    EXPECT_EQ(schedule.heldQuerySteps, problem.headDim / 16);
  }
  // Masked rows at D = 64 fit four blocks.
  KernelProblem maskedNarrow = makeProblem(64, 2, 4);
  maskedNarrow.features.queryLens = true;
  EXPECT_EQ(planKernel(maskedNarrow, sm90()).minBlocksPerSM, 4);
}

TEST(KernelPlan, HopperHoldsAllOfQAtHeadDim64) {
  EXPECT_EQ(planKernel(makeProblem(64, 4), sm90()).heldQuerySteps, 4);
  EXPECT_EQ(planKernel(makeProblem(64, 4), sm80()).heldQuerySteps, 2);
  EXPECT_EQ(planKernel(makeProblem(128, 4), sm90()).heldQuerySteps, 2);
}

TEST(KernelPlan, MQATilesAreBlocksOfSixteenRows) {
  KernelSchedule schedule = planKernel(makeProblem(128, 32), sm90());
  EXPECT_EQ(schedule.getRowsPerTile(), 16);
  EXPECT_EQ(schedule.getNumRowTiles(), 2);
}

TEST(KernelPlan, CUDACoreKernelsHaveNoLaunchBounds) {
  // f32 at D = 128: 14 registers a row; 32 rows are 3 tiles of 11 within
  // the budget of a tile loop (154 / 14).
  KernelSchedule f32 = planKernel(makeProblem(128, 32, 1, 4), sm90());
  EXPECT_FALSE(f32.usesTensorCores());
  EXPECT_EQ(f32.getRowsPerTile(), 11);
  EXPECT_EQ(f32.getNumRowTiles(), 3);
  EXPECT_EQ(f32.getTokensPerStep(), 4);
  EXPECT_EQ(f32.minBlocksPerSM, 0);
  EXPECT_EQ(f32.getRegisterBudget(sm90()), 255);
  EXPECT_EQ(f32.heldQuerySteps, 0);
  EXPECT_EQ(f32.keyValueStages, 0);
  // One row (MHA) and D = 256 stay on CUDA cores in f16 too.
  EXPECT_FALSE(planKernel(makeProblem(128, 1), sm90()).usesTensorCores());
  EXPECT_FALSE(planKernel(makeProblem(256, 4), sm90()).usesTensorCores());
}

TEST(KernelPlan, WorkgroupMemoryOfACUDACoreTile) {
  // 11 f32 rows of D = 128: the query tile, four warps' accumulators and
  // their max and sum.
  KernelSchedule schedule = planKernel(makeProblem(128, 32, 1, 4), sm90());
  std::vector<WorkgroupBuffer> buffers = schedule.getWorkgroupBuffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[kQueryBuffer].shape, (std::vector<int64_t>{11, 128}));
  EXPECT_EQ(buffers[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{4, 11, 128}));
  EXPECT_EQ(buffers[kWarpMaxSumBuffer].shape, (std::vector<int64_t>{4, 11, 2}));
  EXPECT_EQ(schedule.getSharedMemoryBytes(), (11 * 128 * 5 + 4 * 11 * 2) * 4);
}

TEST(KernelPlan, TensorCoreStagesTakeTheAccumulatorsPlace) {
  // Two stages of 128 lanes x 8 16-byte slots (D = 128) are 32 KB: 16 rows
  // of the warps' accumulators, more than the tile's 4.
  KernelSchedule schedule = planKernel(makeProblem(128, 4), sm90());
  std::vector<WorkgroupBuffer> buffers = schedule.getWorkgroupBuffers();
  EXPECT_TRUE(buffers[kQueryBuffer].integer);
  EXPECT_EQ(buffers[kQueryBuffer].shape, (std::vector<int64_t>{8, 32, 4}));
  EXPECT_EQ(buffers[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{4, 16, 128}));
}

TEST(KernelPlan, FusedMergeWeights) {
  EXPECT_EQ(getMergeWeightsPerRow(1), 4);
  EXPECT_EQ(getMergeWeightsPerRow(4), 4);
  EXPECT_EQ(getMergeWeightsPerRow(5), 8);
  // 4 rows' weights fit in the accumulators; 256 rows of 128 splits need a
  // buffer of their own, over the static limit: at most 28 splits there
  // (fd-compile's FUSED-BAD message).
  KernelSchedule llama = planKernel(makeProblem(128, 4), sm90());
  EXPECT_EQ(llama.getWorkgroupBuffers(64).size(), 3u);
  KernelSchedule wide = planKernel(makeProblem(256, 32, 8, 4), sm90());
  std::vector<WorkgroupBuffer> buffers = wide.getWorkgroupBuffers(128);
  ASSERT_EQ(buffers.size(), 4u);
  EXPECT_EQ(buffers[kMergeWeightsBuffer].getNumElements(), 256 * 128);
  EXPECT_GT(wide.getSharedMemoryBytes(128), kMaxStaticSharedMemoryBytes);
  EXPECT_EQ(wide.getMostFusedMergeSplits(), 28);
  EXPECT_LE(wide.getSharedMemoryBytes(28), kMaxStaticSharedMemoryBytes);
  EXPECT_GT(wide.getSharedMemoryBytes(32), kMaxStaticSharedMemoryBytes);
}

TEST(KernelPlan, TheSplitPlannersWorkloadIsTheSchedules) {
  KernelProblem problem = makeProblem(128, 32);
  problem.cacheElementBytes = 1;
  KernelSchedule schedule = planKernel(problem, sm90());
  SplitWorkload workload = getSplitWorkload(problem, schedule, true);
  EXPECT_EQ(workload.rowsPerKVHead, 32);
  EXPECT_EQ(workload.headDim, 128);
  EXPECT_EQ(workload.kvElementBytes, 1);
  EXPECT_EQ(workload.queryElementBytes, 2);
  EXPECT_EQ(workload.rowsPerTile, 16);
  EXPECT_EQ(workload.tokensPerStep, 32);
  EXPECT_EQ(workload.blocksPerSM, 3);
  EXPECT_TRUE(workload.fusedMerge);
  // The wave holds three blocks per SM of the four the options allow.
  SplitPlan plan = evaluateSplits(1, 1, 32768, 147, {}, workload);
  EXPECT_EQ(plan.blocks, 294);
  EXPECT_DOUBLE_EQ(plan.waveEfficiency, 294.0 / (132 * 3));
  SplitPlannerOptions onePerSM;
  onePerSM.blocksPerSM = 1;
  EXPECT_EQ(evaluateSplits(1, 1, 32768, 147, onePerSM, workload).waves, 3);
}

} // namespace
