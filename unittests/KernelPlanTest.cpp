//===- KernelPlanTest.cpp - The partial kernel's schedule -----------------===//
//
// planKernel's choices for the kernels the project ships: form, tiles, launch
// bounds, held q fragments, workgroup memory and the fused merge's split cap;
// and that the split planner's workload is the schedule's. PTXAssemblyTest
// checks every matrix configuration's schedule against ptxas;
// ScheduleChoiceTest, schedules written by hand.
//
//===----------------------------------------------------------------------===//

#include "KernelProblems.h"

#include "fd/Planning/KernelPlan.h"
#include "fd/Planning/SplitPlanner.h"

#include <gtest/gtest.h>

using namespace flashdecode;
using flashdecode::test::makeProblem;

namespace {

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

TEST(KernelPlan, RowStateAtHeadDim128TakesThreeBlocksAndAllOfQ) {
  // Page lookups, ALiBi slopes or masked rows (a causal window, query
  // lengths) do not fit four blocks at D = 128, not even with no k-step of
  // q held; three blocks hold all eight. So does a full 16-row tile (MQA),
  // which would rather hold q than take a fourth block.
  KernelProblem paged = makeProblem(128, 4);
  paged.features.paged = true;
  KernelProblem alibi = makeProblem(128, 4);
  alibi.alibi = true;
  KernelProblem window = makeProblem(128, 1, 8);
  window.features.window = window.features.softCap = true;
  KernelProblem maskedRows = makeProblem(128, 2, 4);
  maskedRows.features.queryLens = true;
  for (const Chip *chip : {&sm80(), &sm90()})
    for (const KernelProblem &problem :
         {paged, alibi, window, maskedRows, makeProblem(128, 32)}) {
      KernelSchedule schedule = planKernel(problem, *chip);
      ASSERT_TRUE(schedule.usesTensorCores());
      EXPECT_EQ(schedule.minBlocksPerSM, 3) << problem.getRowsPerKVHead();
      EXPECT_EQ(schedule.getRegisterBudget(*chip), 168);
      EXPECT_EQ(schedule.heldQuerySteps, 8);
      EXPECT_LE(schedule.getRegisterDemand(problem), 168);
    }
  // A window over one query token masks no row: four blocks.
  KernelProblem decodeWindow = makeProblem(128, 4);
  decodeWindow.features.window = true;
  EXPECT_EQ(planKernel(decodeWindow, sm90()).minBlocksPerSM, 4);
}

TEST(KernelPlan, HeadDim64HoldsAllOfQAtFourBlocks) {
  // D = 64: all four k-steps of q and any row state fit 128 registers
  // (ptxas 13.0 takes 106 to 122), on every chip.
  KernelProblem everything = makeProblem(64, 2, 8);
  everything.features = {true, true, true, true};
  everything.alibi = true;
  for (const Chip *chip : {&sm80(), &sm90()})
    for (const KernelProblem &problem : {makeProblem(64, 4), everything}) {
      KernelSchedule schedule = planKernel(problem, *chip);
      ASSERT_TRUE(schedule.usesTensorCores());
      EXPECT_EQ(schedule.minBlocksPerSM, 4) << chip->name;
      EXPECT_EQ(schedule.heldQuerySteps, 4) << chip->name;
    }
  // D = 128 with no row state keeps four blocks and holds the k-steps their
  // 128 registers leave: (128 - 120) / 4.
  KernelSchedule llama = planKernel(makeProblem(128, 4), sm80());
  EXPECT_EQ(llama.minBlocksPerSM, 4);
  EXPECT_EQ(llama.heldQuerySteps, 2);
  KernelSchedule none = llama;
  none.heldQuerySteps = 0;
  EXPECT_EQ(none.getRegisterDemand(makeProblem(128, 4)), 120);
}

TEST(KernelPlan, MQATilesAreBlocksOfSixteenRows) {
  KernelSchedule schedule = planKernel(makeProblem(128, 32), sm90());
  EXPECT_EQ(schedule.getRowsPerTile(), 16);
  EXPECT_EQ(schedule.getNumRowTiles(), 2);
}

TEST(KernelPlan, ASharedPrefixTilesTheRowsOfSeveralSequences) {
  // Llama-3-8B's group of 4: four sequences fill a 16-row tensor-core
  // tile, one block per four along the batch.
  KernelProblem llama = makeProblem(128, 4);
  llama.sharedPrefix = true;
  EXPECT_EQ(llama.getRequestsPerBlock(), 4);
  EXPECT_EQ(llama.getTokensPerBlock(), 4);
  EXPECT_EQ(llama.getRowsPerKVHead(), 16);
  EXPECT_EQ(llama.getBlockBatch(63), 16);
  EXPECT_EQ(llama.getBlockBatch(64), 16);
  KernelSchedule schedule = planKernel(llama, sm90());
  EXPECT_TRUE(schedule.usesTensorCores());
  EXPECT_EQ(schedule.getRowsPerTile(), 16);
  EXPECT_EQ(schedule.getNumRowTiles(), 1);
  // The rows see keys of their own positions.
  EXPECT_TRUE(schedule.layout.causal);
  // Lq = 4 at a group of 2: two sequences; MQA's 32 rows: one, in two
  // tiles, as without a prefix; without one, a sequence a block.
  KernelProblem speculative = makeProblem(64, 2, 4);
  speculative.sharedPrefix = true;
  EXPECT_EQ(speculative.getRequestsPerBlock(), 2);
  KernelProblem mqa = makeProblem(128, 32);
  mqa.sharedPrefix = true;
  EXPECT_EQ(mqa.getRequestsPerBlock(), 1);
  EXPECT_EQ(planKernel(mqa, sm90()).getNumRowTiles(), 2);
  EXPECT_EQ(makeProblem(128, 4).getRequestsPerBlock(), 1);
  EXPECT_EQ(makeProblem(128, 4).getBlockBatch(63), 63);
  // f32 on CUDA cores: the same four sequences, in the tiles registers
  // allow.
  KernelProblem f32 = makeProblem(128, 4, 1, 4);
  f32.sharedPrefix = true;
  KernelSchedule cudaCores = planKernel(f32, sm90());
  EXPECT_FALSE(cudaCores.usesTensorCores());
  EXPECT_EQ(cudaCores.layout.rows, 16);
}

TEST(KernelPlan, CUDACoreTilesTakeTheFewestTilesPerResidentBlock) {
  // f32 at D = 128: 14 registers a row, at most 11 rows a tile (154 / 14 in
  // the budget of a tile loop). Demand rows x 14 + 42 for 32 rows: 3 tiles
  // of 11 (196 registers: 2 blocks, 1.5 tiles a block), 4 of 8 (154: 3
  // blocks, 1.33), 5 of 7 (140: 3, 1.67), 6 of 6 (126: 4, 1.5).
  KernelSchedule f32 = planKernel(makeProblem(128, 32, 1, 4), sm90());
  EXPECT_FALSE(f32.usesTensorCores());
  EXPECT_EQ(f32.getRowsPerTile(), 8);
  EXPECT_EQ(f32.getNumRowTiles(), 4);
  EXPECT_EQ(f32.getTokensPerStep(), 4);
  EXPECT_EQ(f32.getRegisterDemand(makeProblem(128, 32, 1, 4)), 8 * 14 + 42);
  EXPECT_EQ(f32.minBlocksPerSM, 3);
  EXPECT_EQ(f32.getRegisterBudget(sm90()), 168);
  EXPECT_EQ(f32.getResidentBlocks(sm90()), 3);
  EXPECT_EQ(f32.heldQuerySteps, 0);
  EXPECT_EQ(f32.keyValueStages, 0);
  // 11 rows: one tile of 196 registers (2 blocks, 0.5 a block) against 2 of
  // 6 (126: 4 blocks, 0.5): equal, the one with more blocks.
  KernelSchedule eleven = planKernel(makeProblem(128, 11, 1, 4), sm90());
  EXPECT_EQ(eleven.getRowsPerTile(), 6);
  EXPECT_EQ(eleven.getNumRowTiles(), 2);
  EXPECT_EQ(eleven.minBlocksPerSM, 4);
  // 7 rows: one tile of 140 registers, three blocks' 168 (0.33 a block;
  // 2 tiles of 4 at 4 blocks are 0.5).
  KernelSchedule seven = planKernel(makeProblem(128, 7, 1, 4), sm90());
  EXPECT_EQ(seven.getRowsPerTile(), 7);
  EXPECT_EQ(seven.getNumRowTiles(), 1);
  EXPECT_EQ(seven.getRegisterDemand(makeProblem(128, 7, 1, 4)), 140);
  EXPECT_EQ(seven.minBlocksPerSM, 3);
  EXPECT_EQ(seven.getRegisterBudget(sm90()), 168);
  // A paged fp8 cache's decoding and page lookups take 14 more.
  KernelProblem pagedFloat8 = makeProblem(128, 7);
  pagedFloat8.cacheElementBytes = 1;
  KernelProblem denseFloat8 = pagedFloat8;
  pagedFloat8.features.paged = true;
  ScheduleChoice cudaCores{KernelForm::CudaCores, 7, 1, 128, 0, 0, 0};
  KernelSchedule float8Tile = getKernelSchedule(denseFloat8, cudaCores);
  EXPECT_EQ(float8Tile.getRegisterDemand(pagedFloat8),
            float8Tile.getRegisterDemand(denseFloat8) + 14);
  // One row (MHA) and D = 256 stay on CUDA cores in f16 too; one row fits
  // the planner's four blocks, and no more are promised.
  KernelSchedule mha = planKernel(makeProblem(128, 1), sm90());
  EXPECT_FALSE(mha.usesTensorCores());
  EXPECT_LE(mha.getRegisterDemand(makeProblem(128, 1)), 128);
  EXPECT_EQ(mha.minBlocksPerSM, kPlannedBlocksPerSM);
  EXPECT_FALSE(planKernel(makeProblem(256, 4), sm90()).usesTensorCores());
}

TEST(KernelPlan, WorkgroupMemoryOfACUDACoreTile) {
  // 8 f32 rows of D = 128: the query tile, four warps' accumulators and
  // their max and sum.
  KernelSchedule schedule = planKernel(makeProblem(128, 32, 1, 4), sm90());
  std::vector<WorkgroupBuffer> buffers = schedule.getWorkgroupBuffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[kQueryBuffer].shape, (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(buffers[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{4, 8, 128}));
  EXPECT_EQ(buffers[kWarpMaxSumBuffer].shape, (std::vector<int64_t>{4, 8, 2}));
  EXPECT_EQ(schedule.getSharedMemoryBytes(), (8 * 128 * 5 + 4 * 8 * 2) * 4);
}

TEST(KernelPlan, WideHeadsTakeTheSplitValueTile) {
  // MLA's latent cache: 576-wide keys, the first 512 columns the values.
  // The four warps share a step's 8 keys: each holds 9 of q's 36 k-steps
  // and 16 output tiles (128 value dims), the 16 heads one tile. A stage is
  // 8 rows of 576 bf16 and 32 bytes of padding: four fit beside the score
  // exchange in 48 KB, in the place of one published state of 19 rows.
  KernelProblem latent = makeProblem(576, 16);
  latent.valueHeadDim = 512;
  latent.valuesFromKeys = true;
  KernelSchedule schedule = planKernel(latent, sm90());
  EXPECT_TRUE(schedule.usesTensorCores());
  EXPECT_TRUE(schedule.layout.splitsValues);
  EXPECT_EQ(schedule.getTokensPerStep(), 8);
  EXPECT_EQ(schedule.layout.stageRowBytes, 576 * 2 + 32);
  EXPECT_EQ(schedule.getRowsPerTile(), 16);
  EXPECT_EQ(schedule.getNumRowTiles(), 1);
  EXPECT_EQ(schedule.keyValueStages, 4);
  EXPECT_EQ(schedule.heldQuerySteps, 9);
  EXPECT_EQ(schedule.getPublishedWarpStates(), 1);
  // 4 + 64 accumulators + 36 held q words + 12: 116, and 40 beside: three
  // blocks' 168 registers.
  EXPECT_EQ(schedule.getLeastLoopRegisters(), 116);
  EXPECT_EQ(schedule.minBlocksPerSM, 3);
  std::vector<WorkgroupBuffer> buffers = schedule.getWorkgroupBuffers();
  EXPECT_EQ(buffers[kQueryBuffer].shape, (std::vector<int64_t>{4, 32, 4}));
  EXPECT_EQ(buffers[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{1, 19, 512}));
  EXPECT_EQ(buffers[kWarpMaxSumBuffer].shape, (std::vector<int64_t>{1, 16, 2}));
  EXPECT_LE(schedule.getSharedMemoryBytes(), kMaxStaticSharedMemoryBytes);
  // q's 16 rows of 576 bf16 and 16 bytes lie at the end of the buffer the
  // 4 stages take (19 rows of 2 KB; from byte 38912 - 16 x 1168 = 20224, in
  // stage 2): steps 0 and 1 are copied while the warps read it.
  EXPECT_EQ(schedule.layout.queryStageRowBytes, 576 * 2 + 16);
  EXPECT_EQ(schedule.getAccumulatorRows(), 19);
  EXPECT_EQ(schedule.getQueryStageOffset(), 20224);
  EXPECT_EQ(schedule.getQueryStageOffset() / schedule.layout.stageBytes(), 2);
  // 128 heads: 8 tiles of 16. Gemma 4's 512 with values of their own: two
  // stages of 8 rows of 2 x 512.
  latent.groupSize = 128;
  EXPECT_EQ(planKernel(latent, sm90()).getNumRowTiles(), 8);
  KernelSchedule gemma = planKernel(makeProblem(512, 8), sm90());
  EXPECT_TRUE(gemma.layout.splitsValues);
  EXPECT_EQ(gemma.keyValueStages, 2);
  EXPECT_EQ(gemma.getRowsPerTile(), 8);
  // Its q (16 rows of 1040 bytes) lies in the second stage, at the end of
  // the stages' 17 rows of 2 KB; the buffer holds it whatever the stages
  // (at least q's bytes).
  EXPECT_EQ(gemma.getQueryStageOffset(), 17 * 2048 - 16 * 1040);
  EXPECT_EQ(gemma.getQueryStageOffset() / gemma.layout.stageBytes(), 1);
  std::vector<WorkgroupBuffer> gemmaBuffers = gemma.getWorkgroupBuffers();
  EXPECT_GE(gemmaBuffers[kWarpAccumulatorsBuffer].getBytes(),
            gemma.getQueryStageOffset() + 16 * 1040);
  // An fp8 latent row: 576 bytes, its per-token scale at 576, rows 656
  // bytes (16 apart modulo 128).
  KernelProblem float8 = latent;
  float8.cacheElementBytes = 1;
  KernelSchedule float8Schedule = planKernel(float8, sm90());
  EXPECT_TRUE(float8Schedule.layout.splitsValues);
  EXPECT_EQ(float8Schedule.layout.stageScaleOffset, 576);
  EXPECT_EQ(float8Schedule.layout.stageRowBytes, 656);
  // Its 4 stages (21 KB) and q (18.3 KB) each fit the 16 accumulator rows
  // (32 KB): q at their end leaves stages 0 and 1 free to be copied while
  // the warps read it (at the stages' end it began in stage 0).
  EXPECT_EQ(float8Schedule.getAccumulatorRows(), 16);
  EXPECT_EQ(float8Schedule.getQueryStageOffset(), 32768 - 16 * 1168);
  EXPECT_EQ(float8Schedule.getQueryStageOffset() /
                float8Schedule.layout.stageBytes(),
            2);
  // What the tile does not take stays on CUDA cores: f32, D = 256 with
  // values of its own (as fast there), a single row.
  EXPECT_FALSE(
      planKernel(makeProblem(576, 16, 1, 4), sm90()).usesTensorCores());
  EXPECT_FALSE(planKernel(makeProblem(256, 8), sm90()).usesTensorCores());
  KernelProblem oneRow = makeProblem(512, 1);
  EXPECT_FALSE(planKernel(oneRow, sm90()).usesTensorCores());
  // f32 rows of 512 would take 5 rows by registers (35 each), but 5 rows of
  // query and accumulators are 51 KB, over the 48 KB a block declares.
  KernelProblem wideProblem = makeProblem(512, 8, 1, 4);
  KernelSchedule wide = planKernel(wideProblem, sm90());
  EXPECT_EQ(wide.layout.registersPerRow(), 35);
  EXPECT_LE(wide.getRowsPerTile(), 4);
  EXPECT_LE(wide.getSharedMemoryBytes(), kMaxStaticSharedMemoryBytes);
  ScheduleChoice fiveRows = wide.getChoice();
  fiveRows.rowsPerTile = 5;
  fiveRows.rowTiles = 2;
  fiveRows.minBlocksPerSM = 0;
  std::string fiveRowsReason = getReasonScheduleInvalid(wideProblem, fiveRows);
  EXPECT_NE(fiveRowsReason.find("workgroup memory is"), std::string::npos)
      << fiveRowsReason;
  // Values wider than the keys: the lanes follow the wider row.
  KernelProblem apart = makeProblem(64, 8);
  apart.valueHeadDim = 264;
  KernelSchedule apartSchedule = planKernel(apart, sm80());
  EXPECT_FALSE(apartSchedule.usesTensorCores());
  EXPECT_EQ(apartSchedule.layout.lanesPerToken, 32);
  EXPECT_TRUE(apartSchedule.layout.hasIdleLanes());
  EXPECT_TRUE(apartSchedule.layout.hasIdleValueLanes());
  EXPECT_EQ(apartSchedule.getWorkgroupBuffers()[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{4, apartSchedule.getRowsPerTile(), 264}));
}

TEST(KernelPlan, SplitValueTilesTakeWholeWarpShares) {
  ScheduleChoice tensorCores{KernelForm::TensorCores, 8, 1, 128, 4, 0, 2};
  KernelProblem apart = makeProblem(128, 8);
  EXPECT_EQ(getReasonScheduleInvalid(apart, tensorCores), "");
  EXPECT_FALSE(getKernelSchedule(apart, tensorCores).layout.splitsValues);
  // Values apart from the keys take the split-value tile: a warp's quarter
  // of D_v is whole output tiles read in 8-byte pieces.
  apart.valueHeadDim = 64;
  EXPECT_EQ(getReasonScheduleInvalid(apart, tensorCores),
            "form = tensor_cores needs a head dim of 64 or 128 with values of "
            "their own at it, or else (warps splitting the value dims) a value "
            "head dim that is a multiple of 128 up to 512, got 64");
  EXPECT_FALSE(planKernel(apart, sm90()).usesTensorCores());
  KernelProblem shared = makeProblem(128, 8);
  shared.valuesFromKeys = true;
  EXPECT_EQ(getReasonScheduleInvalid(shared, tensorCores),
            "held_query_steps = 0: expected 2 (each warp of a split-value tile "
            "holds its quarter of q's 16-wide k-steps at head dim 128)");
  tensorCores.heldQuerySteps = 2;
  EXPECT_EQ(getReasonScheduleInvalid(shared, tensorCores), "");
  EXPECT_TRUE(planKernel(shared, sm90()).layout.splitsValues);
  KernelProblem narrow = makeProblem(96, 8);
  narrow.valuesFromKeys = true;
  narrow.valueHeadDim = 64;
  EXPECT_EQ(getReasonScheduleInvalid(narrow, tensorCores),
            "form = tensor_cores needs a head dim of 64 or 128 with values of "
            "their own at it, or else (warps splitting the value dims) a head "
            "dim that is a multiple of 64 up to 576, got 96");
  KernelProblem wideCache = makeProblem(512, 8);
  wideCache.cacheElementBytes = 4;
  tensorCores.heldQuerySteps = 8;
  EXPECT_EQ(getReasonScheduleInvalid(wideCache, tensorCores),
            "form = tensor_cores needs a head dim of 64 or 128 with values of "
            "their own at it, or else (warps splitting the value dims) an f16, "
            "bf16 or fp8 cache, got an f32 cache");
  wideCache.cacheElementBytes = 1;
  EXPECT_EQ(getReasonScheduleInvalid(wideCache, tensorCores), "");
}

TEST(KernelPlan, ALatentTokenIsReadOnce) {
  KernelProblem latent = makeProblem(576, 16);
  latent.valueHeadDim = 512;
  latent.valuesFromKeys = true;
  SplitWorkload workload =
      getSplitWorkload(latent, planKernel(latent, sm90()), sm90());
  EXPECT_EQ(workload.getTokenBytes(), 576 * 2);
  EXPECT_EQ(workload.getPartialBytes(), 16 * (512 + 1) * 4);
  latent.valuesFromKeys = false;
  workload = getSplitWorkload(latent, planKernel(latent, sm90()), sm90());
  EXPECT_EQ(workload.getTokenBytes(), (576 + 512) * 2);
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
  // buffer of their own, over the static limit: at most 24 splits there
  // (fd-compile's FUSED-BAD message).
  KernelSchedule llama = planKernel(makeProblem(128, 4), sm90());
  EXPECT_EQ(llama.getWorkgroupBuffers(64).size(), 3u);
  KernelSchedule wide = planKernel(makeProblem(256, 32, 8, 4), sm90());
  std::vector<WorkgroupBuffer> buffers = wide.getWorkgroupBuffers(128);
  ASSERT_EQ(buffers.size(), 4u);
  EXPECT_EQ(buffers[kMergeWeightsBuffer].getNumElements(), 256 * 128);
  EXPECT_GT(wide.getSharedMemoryBytes(128), kMaxStaticSharedMemoryBytes);
  EXPECT_EQ(wide.getMostFusedMergeSplits(), 24);
  EXPECT_LE(wide.getSharedMemoryBytes(24), kMaxStaticSharedMemoryBytes);
  EXPECT_GT(wide.getSharedMemoryBytes(28), kMaxStaticSharedMemoryBytes);
}

TEST(KernelPlan, TheSplitPlannersWorkloadIsTheSchedules) {
  KernelProblem problem = makeProblem(128, 32);
  problem.cacheElementBytes = 1;
  KernelSchedule schedule = planKernel(problem, sm90());
  SplitWorkload workload = getSplitWorkload(problem, schedule, sm90(), true);
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
  // The form and the stages are the schedule's too: written by hand, CUDA
  // cores where the planner takes tensor cores, or three stages (two steps
  // of keys in flight, not one).
  EXPECT_TRUE(workload.usesTensorCores());
  EXPECT_EQ(workload.keyValueStages, 2);
  ScheduleChoice choice = schedule.getChoice();
  choice.keyValueStages = 3;
  SplitWorkload staged = getSplitWorkload(
      problem, getKernelSchedule(problem, choice), sm90(), false);
  EXPECT_DOUBLE_EQ(staged.getStepBytes(), 2 * workload.getStepBytes());
  choice = ScheduleChoice();
  choice.rowsPerTile = 4;
  choice.rowTiles = 8;
  SplitWorkload cudaCores = getSplitWorkload(
      problem, getKernelSchedule(problem, choice), sm90(), false);
  EXPECT_FALSE(cudaCores.usesTensorCores());
  EXPECT_EQ(cudaCores.getRowTiles(), 8);
}

TEST(KernelPlan, SharedMemoryBoundsTheResidentBlocks) {
  // A D = 128 tensor-core block declares 36,992 bytes: sm_86 and sm_89
  // (100 KiB an SM, 1 KiB more reserved a block) hold 2, sm_80 (164 KiB)
  // and sm_90 (228 KiB) the launch bounds' 4.
  KernelProblem llama = makeProblem(128, 4);
  for (const char *name : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const Chip &chip = *findChip(name);
    KernelSchedule schedule = planKernel(llama, chip);
    ASSERT_EQ(schedule.getSharedMemoryBytes(), 36992) << name;
    bool small = chip.sharedMemoryBytesPerSM == 100 * 1024;
    EXPECT_EQ(schedule.getResidentBlocks(chip), small ? 2 : 4) << name;
    EXPECT_EQ(getSplitWorkload(llama, schedule, chip).blocksPerSM,
              small ? 2 : 4)
        << name;
  }
  // D = 64 blocks (18,560 bytes) fit the launch bounds everywhere; a
  // block without launch bounds (a hand-written schedule's choice) is
  // bounded by the SM's warps (16 blocks of 4) or its shared memory.
  KernelProblem small = makeProblem(64, 4);
  EXPECT_EQ(planKernel(small, *findChip("sm_86"))
                .getResidentBlocks(*findChip("sm_86")),
            4);
  KernelProblem mha = makeProblem(128, 1);
  ScheduleChoice unbounded = planKernel(mha, sm90()).getChoice();
  unbounded.minBlocksPerSM = 0;
  EXPECT_EQ(getKernelSchedule(mha, unbounded).getResidentBlocks(sm90()), 16);
  KernelProblem wide = makeProblem(256, 8, 1, 4);
  KernelSchedule f32 = planKernel(wide, sm90());
  EXPECT_EQ(f32.getResidentBlocks(*findChip("sm_86")),
            100 * 1024 / (f32.getSharedMemoryBytes() + 1024));
}

TEST(KernelPlan, EveryPlannedScheduleIsValidAndRoundTrips) {
  // Every problem the dialect accepts, on every chip: what planKernel
  // chooses passes the verifier's rules (fd-split-kv attaches it) and
  // survives its text form (the manifest, fd-compile --schedule).
  int checked = 0;
  for (const Chip &chip : getChips())
    for (int64_t bytes : {2, 4})
      for (int64_t headDim = 32; headDim <= 256; headDim += 8)
        for (int64_t groupSize : {1, 2, 4, 6, 8, 16, 32, 64})
          for (int64_t queryLength : {1, 3, 8})
            for (int features = 0; features < 4; ++features) {
              KernelProblem problem =
                  makeProblem(headDim, groupSize, queryLength, bytes);
              problem.cacheElementBytes = features == 3 ? 1 : bytes;
              problem.alibi = features == 1;
              problem.features.paged = features >= 2;
              problem.features.window = problem.features.softCap =
                  features == 2;
              KernelSchedule schedule = planKernel(problem, chip);
              ScheduleChoice choice = schedule.getChoice();
              ASSERT_EQ(getReasonScheduleInvalid(problem, choice), "")
                  << chip.name << " D=" << headDim << " group=" << groupSize
                  << " Lq=" << queryLength << " bytes=" << bytes
                  << " features=" << features;
              std::string error;
              std::optional<ScheduleChoice> parsed =
                  parseScheduleChoice(formatScheduleChoice(choice), error);
              ASSERT_TRUE(parsed) << error;
              EXPECT_EQ(*parsed, choice);
              // The schedule rebuilt from its choice is the planned one.
              KernelSchedule rebuilt = getKernelSchedule(problem, choice);
              EXPECT_EQ(rebuilt.getSharedMemoryBytes(),
                        schedule.getSharedMemoryBytes());
              EXPECT_EQ(rebuilt.getTokensPerStep(),
                        schedule.getTokensPerStep());
              ++checked;
            }
  EXPECT_EQ(checked, 5 * 2 * 29 * 8 * 3 * 4);
}

TEST(KernelPlan, EveryWideOrApartScheduleIsValid) {
  // Key dims to 576 with values of 512 (or the key dim below it) apart, or
  // read from the keys, and values of 264 over narrow keys.
  int checked = 0;
  for (const Chip &chip : getChips())
    for (int64_t bytes : {1, 2, 4})
      for (int64_t headDim = 32; headDim <= 576; headDim += 8)
        for (int values = 0; values < 3; ++values)
          for (int64_t groupSize : {1, 16, 128})
            for (int64_t queryLength : {1, 2}) {
              KernelProblem problem = makeProblem(
                  headDim, groupSize, queryLength, bytes == 1 ? 2 : bytes);
              problem.cacheElementBytes = bytes;
              problem.valueHeadDim =
                  values == 2 ? 264 : std::min<int64_t>(headDim, 512);
              problem.valuesFromKeys = values == 1;
              problem.features.paged = queryLength == 2;
              KernelSchedule schedule = planKernel(problem, chip);
              ASSERT_EQ(getReasonScheduleInvalid(problem, schedule.getChoice()),
                        "")
                  << chip.name << " D=" << headDim
                  << " D_v=" << problem.valueHeadDim << " values=" << values
                  << " group=" << groupSize << " Lq=" << queryLength
                  << " bytes=" << bytes;
              // Static memory within its limit; the warpgroup tile's
              // dynamic memory within the chip's.
              EXPECT_LE(schedule.getSharedMemoryBytes() -
                            schedule.getDynamicSharedMemoryBytes(),
                        kMaxStaticSharedMemoryBytes);
              EXPECT_LE(schedule.getSharedMemoryBytes(),
                        std::max<int64_t>(chip.maxSharedMemoryBytesPerBlock,
                                          kMaxStaticSharedMemoryBytes));
              ++checked;
            }
  EXPECT_EQ(checked, 5 * 3 * 69 * 3 * 3 * 2);
}

} // namespace
