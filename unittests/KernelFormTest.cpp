//===- KernelFormTest.cpp - Which partial kernel a problem gets -----------===//
//
// planKernel's form over fp8 caches: tensor cores that multiply in f16
// (f16 queries; bf16 with per-tensor scales) take MHA's one row a head on
// sm_90, whose fp8 pairs decode in one instruction, and D = 256 with values
// of its own on every chip; bf16 queries over per-token scales, 16-bit
// caches and sm_80's one-row heads keep the CUDA cores (bench/RESULTS.md,
// 2026-12-06 (sixth), has the modeled times behind each).
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

} // namespace
