//===- KernelFormTest.cpp - Which partial kernel a problem gets -----------===//
//
// planKernel's form over fp8 caches: tensor cores that multiply in f16
// (f16 queries; bf16 with per-tensor scales) take MHA's one row a head on
// sm_90, whose fp8 pairs decode in one instruction, and D = 256 with values
// of its own on every chip; bf16 queries over per-token scales, 16-bit
// caches and sm_80's one-row heads keep the CUDA cores (bench/RESULTS.md,
// 2026-12-06 (sixth), has the modeled times behind each). Then the
// warpgroup tile: MLA's 64 rows a KV head or more on sm_90a, with its
// dynamic shared memory's regions, and the problems it leaves to the
// split-value tile.
//
//===----------------------------------------------------------------------===//

#include "KernelProblems.h"

#include "fd/Planning/KernelPlan.h"

#include <gtest/gtest.h>

using namespace flashdecode;
using flashdecode::test::makeProblem;

namespace {

const Chip &sm80() { return *findChip("sm_80"); }
const Chip &sm90() { return *findChip("sm_90"); }
const Chip &sm90a() { return *findChip("sm_90a"); }

/// MLA's absorbed decode: D 576 over a latent cache whose first 512
/// columns are the values, `rows` query rows per KV head, bf16.
KernelProblem latent(int64_t rows) {
  KernelProblem problem = makeProblem(576, rows);
  problem.valueHeadDim = 512;
  problem.valuesFromKeys = true;
  problem.bfloat16Queries = true;
  return problem;
}

/// `groupSize` heads at `headDim` over an fp8 cache.
KernelProblem overFloat8(int64_t headDim, int64_t groupSize, bool bfloat16,
                         bool tokenScales) {
  KernelProblem problem = makeProblem(headDim, groupSize);
  problem.cacheElementBytes = 1;
  problem.bfloat16Queries = bfloat16;
  problem.float8TokenScales = tokenScales;
  return problem;
}

TEST(KernelForm, TensorCoresMultiplyInHalfUnlessBFloat16MeetsTokenScales) {
  EXPECT_TRUE(multipliesFloat8InHalf(/*bfloat16Queries=*/false, false));
  EXPECT_TRUE(multipliesFloat8InHalf(false, /*float8TokenScales=*/true));
  EXPECT_TRUE(multipliesFloat8InHalf(true, false));
  EXPECT_FALSE(multipliesFloat8InHalf(true, true));
  EXPECT_TRUE(overFloat8(128, 1, true, false).multipliesFloat8InHalf());
  EXPECT_FALSE(overFloat8(128, 1, true, true).multipliesFloat8InHalf());
  // Not an fp8 cache, or f32 queries: nothing is multiplied in f16 for it.
  EXPECT_FALSE(makeProblem(128, 1).multipliesFloat8InHalf());
  KernelProblem f32 = overFloat8(128, 1, false, false);
  f32.queryElementBytes = 4;
  EXPECT_FALSE(f32.multipliesFloat8InHalf());
}

TEST(KernelForm, OneRowHeadsOverFloat8TakeTensorCoresOnHopper) {
  for (bool bfloat16 : {false, true}) {
    KernelSchedule schedule =
        planKernel(overFloat8(128, 1, bfloat16, false), sm90());
    EXPECT_TRUE(schedule.usesTensorCores()) << bfloat16;
    EXPECT_FALSE(schedule.layout.splitsValues);
    EXPECT_EQ(schedule.getRowsPerTile(), 1);
    EXPECT_TRUE(planKernel(overFloat8(64, 1, bfloat16, false), sm90())
                    .usesTensorCores());
  }
  // f16 queries over per-token scales still multiply in f16.
  EXPECT_TRUE(
      planKernel(overFloat8(128, 1, false, true), sm90()).usesTensorCores());
}

TEST(KernelForm, OneRowHeadsKeepCudaCoresWhereTheDecodeCostsMore) {
  // bf16 pairs (per-token scales), sm_80's bit operations, 16-bit caches
  // and f32 queries.
  EXPECT_FALSE(
      planKernel(overFloat8(128, 1, true, true), sm90()).usesTensorCores());
  EXPECT_FALSE(
      planKernel(overFloat8(128, 1, false, false), sm80()).usesTensorCores());
  EXPECT_FALSE(planKernel(makeProblem(128, 1), sm90()).usesTensorCores());
  KernelProblem f32 = overFloat8(128, 1, false, false);
  f32.queryElementBytes = 4;
  EXPECT_FALSE(planKernel(f32, sm90()).usesTensorCores());
}

TEST(KernelForm, HeadDim256OverFloat8TakesTheSplitValueTile) {
  for (const Chip *chip : {&sm80(), &sm90()}) {
    KernelSchedule schedule =
        planKernel(overFloat8(256, 2, true, false), *chip);
    EXPECT_TRUE(schedule.usesTensorCores()) << chip->name;
    EXPECT_TRUE(schedule.layout.splitsValues) << chip->name;
  }
  // 16-bit caches and bf16 pairs stream as fast on CUDA cores.
  EXPECT_FALSE(planKernel(makeProblem(256, 2), sm90()).usesTensorCores());
  EXPECT_FALSE(
      planKernel(overFloat8(256, 2, true, true), sm90()).usesTensorCores());
}

TEST(KernelForm, LatentTilesOf64RowsTakeWgmmaOnSm90a) {
  for (int64_t rows : {64, 80, 128}) {
    KernelSchedule schedule = planKernel(latent(rows), sm90a());
    ASSERT_TRUE(schedule.usesWarpgroupTile()) << rows;
    EXPECT_EQ(getKernelFormName(schedule.form), "warpgroup_tensor_cores");
    EXPECT_EQ(schedule.threads, 256);
    EXPECT_EQ(schedule.getRowsPerTile(), 64);
    EXPECT_EQ(schedule.getNumRowTiles(), (rows + 63) / 64);
    EXPECT_EQ(schedule.getTokensPerStep(), 32);
    EXPECT_EQ(schedule.minBlocksPerSM, 1);
    EXPECT_EQ(schedule.getResidentBlocks(sm90a()), 1);
    EXPECT_TRUE(
        getReasonScheduleInvalid(latent(rows), schedule.getChoice()).empty())
        << rows;
    // q (64 x 1152 bytes), four stages of 32 latent rows and P (4 x 64 x
    // 16) from a 1024-byte boundary: 1 KB more than they take.
    KernelSchedule::WarpgroupRegions regions = schedule.getWarpgroupRegions();
    EXPECT_EQ(schedule.keyValueStages, 4);
    EXPECT_EQ(regions.query, 0);
    EXPECT_EQ(regions.stages, 64 * 1152);
    EXPECT_EQ(regions.probabilities, 64 * 1152 + 4 * 32 * 1152);
    EXPECT_EQ(regions.end, regions.probabilities + 4 * 64 * 16);
    EXPECT_EQ(schedule.getDynamicSharedMemoryBytes(), regions.end + 1024);
    EXPECT_LE(schedule.getSharedMemoryBytes(),
              sm90a().maxSharedMemoryBytesPerBlock);
    // Static: only the warpgroups' exchange of row maxima and sums.
    EXPECT_EQ(schedule.getSharedMemoryBytes() -
                  schedule.getDynamicSharedMemoryBytes(),
              2 * 64 * 2 * 4);
  }
}

TEST(KernelForm, WarpgroupTileLeavesTheRestToTheSplitValueTile) {
  // Fewer rows than a tile, sm_90 (no wgmma), an fp8 latent cache, values
  // of their own, f32 queries.
  KernelSchedule fewRows = planKernel(latent(16), sm90a());
  EXPECT_FALSE(fewRows.usesWarpgroupTile());
  EXPECT_TRUE(fewRows.layout.splitsValues);
  EXPECT_FALSE(planKernel(latent(128), sm90()).usesWarpgroupTile());
  KernelProblem float8 = latent(128);
  float8.cacheElementBytes = 1;
  EXPECT_FALSE(planKernel(float8, sm90a()).usesWarpgroupTile());
  KernelProblem apart = makeProblem(512, 64);
  EXPECT_FALSE(planKernel(apart, sm90a()).usesWarpgroupTile());
  KernelProblem f32 = latent(128);
  f32.queryElementBytes = f32.cacheElementBytes = 4;
  EXPECT_FALSE(planKernel(f32, sm90a()).usesWarpgroupTile());
  // Each says why, when written by hand.
  ScheduleChoice warpgroup = planKernel(latent(128), sm90a()).getChoice();
  EXPECT_NE(getReasonScheduleInvalid(float8, warpgroup)
                .find("needs f16 or bf16 queries and cache"),
            std::string::npos);
  EXPECT_NE(getReasonScheduleInvalid(apart, warpgroup)
                .find("values that are the key cache's first D_v columns"),
            std::string::npos);
  KernelProblem narrowValues = latent(128);
  narrowValues.valueHeadDim = 96;
  EXPECT_NE(getReasonScheduleInvalid(narrowValues, warpgroup)
                .find("a value head dim that is a multiple of 128 up to 512"),
            std::string::npos);
}

} // namespace
