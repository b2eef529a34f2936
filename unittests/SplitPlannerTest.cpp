//===- SplitPlannerTest.cpp - The automatic split choice ------------------===//
//
// The wave model alone (no workload), the checks of the planner's inputs
// and workloads, and a plan's description; SplitPlannerWorkloadTest has the
// planner with the kernel's work known.
//
//===----------------------------------------------------------------------===//

#include "SplitWorkloads.h"

#include "fd/Planning/SplitPlanner.h"
#include "fd/Planning/WorkspaceLayout.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace flashdecode;
using flashdecode::test::getCudaCoreWorkload;
using flashdecode::test::getWorkload;

namespace {

TEST(SplitPlanner, LlamaDecodeFillsOneWave) {
  // B=1, Hkv=8, L=32k: 8 blocks unsplit; a wave is 4 blocks on each of 132
  // SMs (528); 63 splits make 504 blocks, the fewest within 5 % of the best.
  SplitPlan plan = planNumSplits(1, 8, 32768);
  EXPECT_EQ(plan.numSplits, 63);
  EXPECT_EQ(plan.blocks, 504);
  EXPECT_EQ(plan.waves, 1);
  EXPECT_NEAR(plan.waveEfficiency, 504.0 / 528.0, 1e-12);
  EXPECT_EQ(plan.chunkLength, 521);
}

TEST(SplitPlanner, OneBlockPerSMIsTheClassicWave) {
  // With blocks-per-sm=1 a wave is one block per SM: 16 splits, 128 blocks.
  SplitPlannerOptions options;
  options.blocksPerSM = 1;
  SplitPlan plan = planNumSplits(1, 8, 32768, options);
  EXPECT_EQ(plan.numSplits, 16);
  EXPECT_EQ(plan.blocks, 128);
  EXPECT_NEAR(plan.waveEfficiency, 128.0 / 132.0, 1e-12);
}

TEST(SplitPlanner, FullGridIsNotSplit) {
  // 16 * 32 = 512 blocks already fill a wave of 528; splitting only adds
  // merges. 128 * 8 = 1024 blocks make two nearly full waves.
  EXPECT_EQ(planNumSplits(16, 32, 131072).numSplits, 1);
  EXPECT_EQ(planNumSplits(128, 8, 4096).numSplits, 1);
}

TEST(SplitPlanner, SplitsAGridThatSpillsIntoASecondWave) {
  // 540 blocks: one full wave of 528 and 12 blocks in a second.
  // FlashAttention-2 keeps this unsplit (work >= 0.8 * SMs); the wave model
  // splits it.
  SplitPlan unsplit = evaluateSplits(540, 1, 32768, 1);
  EXPECT_EQ(unsplit.waves, 2);
  SplitPlan plan = planNumSplits(540, 1, 32768);
  EXPECT_GT(plan.numSplits, 1);
  EXPECT_LT(plan.modeledCost, unsplit.modeledCost);
  EXPECT_GE(plan.waveEfficiency, 0.85);
}

TEST(SplitPlanner, ShortContextRespectsTheMinimumChunk) {
  SplitPlannerOptions options;
  options.minChunkLength = 256;
  SplitPlan plan = planNumSplits(1, 1, 1000, options);
  EXPECT_EQ(plan.numSplits, 3); // 1000 / 256 candidates at most
  EXPECT_GE(plan.chunkLength, 256);
  EXPECT_EQ(planNumSplits(1, 8, 100).numSplits, 1);
  EXPECT_EQ(planNumSplits(1, 8, 0).numSplits, 1);
}

TEST(SplitPlanner, RespectsTheSplitCap) {
  SplitPlannerOptions options;
  options.maxSplits = 8;
  EXPECT_EQ(planNumSplits(1, 1, 1 << 20, options).numSplits, 8);
}

TEST(SplitPlanner, FollowsTheSMCount) {
  // An A100 (108 SMs) and an H200 (132) get different grids for B=1, Hkv=8.
  SplitPlannerOptions a100;
  a100.smCount = 108;
  SplitPlan plan = planNumSplits(1, 8, 32768, a100);
  EXPECT_LE(plan.blocks, 4 * 108);
  EXPECT_GE(plan.waveEfficiency, 0.85);
  EXPECT_NE(plan.numSplits, planNumSplits(1, 8, 32768).numSplits);
}

class SplitPlannerInvariants : public testing::TestWithParam<bool> {};

TEST_P(SplitPlannerInvariants, OverTheReferenceTable) {
  SplitPlannerOptions options;
  for (int64_t batch : {1, 4, 16, 64, 128})
    for (int64_t kvHeads : {1, 8, 32})
      for (int64_t length : {512, 4096, 32768, 131072}) {
        SCOPED_TRACE(testing::Message()
                     << "B=" << batch << " Hkv=" << kvHeads << " L=" << length);
        SplitWorkload workload =
            GetParam() ? getWorkload(kvHeads) : SplitWorkload();
        SplitPlan plan =
            planNumSplits(batch, kvHeads, length, options, workload);
        EXPECT_GE(plan.numSplits, 1);
        EXPECT_LE(plan.numSplits, options.maxSplits);
        if (plan.numSplits > 1) {
          EXPECT_GE(plan.chunkLength, options.minChunkLength);
        }
        // No split count the planner may pick is modeled as more than 5 %
        // faster than its choice.
        for (int64_t splits = 1;
             splits <= std::min<int64_t>(options.maxSplits,
                                         length / options.minChunkLength);
             ++splits)
          EXPECT_GE(
              evaluateSplits(batch, kvHeads, length, splits, options, workload)
                      .modeledCost *
                  options.timeTolerance,
              plan.modeledCost);
        // A pure function: asking again gives the same answer.
        EXPECT_EQ(
            planNumSplits(batch, kvHeads, length, options, workload).numSplits,
            plan.numSplits);
      }
}

INSTANTIATE_TEST_SUITE_P(WaveModelAndWorkload, SplitPlannerInvariants,
                         testing::Bool());

TEST(SplitPlanner, ValidatesTheWorkload) {
  EXPECT_EQ(validateSplitWorkload({}), "");
  EXPECT_EQ(validateSplitWorkload(getWorkload(8)), "");
  SplitWorkload workload = getWorkload(8);
  workload.rowsPerKVHead = 0;
  EXPECT_EQ(validateSplitWorkload(workload, '_'),
            "rows_per_kv_head must be >= 1, got 0");
  workload = getWorkload(8, 3);
  EXPECT_EQ(
      validateSplitWorkload(workload),
      "kv-element-bytes must be 1 (fp8), 2 (f16, bf16) or 4 (f32), got 3");
  workload = getWorkload(8);
  workload.tokensPerStep = 0;
  EXPECT_EQ(validateSplitWorkload(workload),
            "tokens-per-step must be >= 1, got 0");
  workload = getWorkload(8);
  workload.rowsPerTile = 0;
  EXPECT_EQ(validateSplitWorkload(workload),
            "rows-per-tile must be >= 1, got 0");
  workload = getWorkload(8);
  workload.queryElementBytes = 1;
  EXPECT_EQ(validateSplitWorkload(workload, '_'),
            "query_element_bytes must be 2 (f16, bf16) or 4 (f32), got 1");
}

TEST(SplitPlanner, ValidatesItsInputs) {
  SplitPlannerOptions options;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options), "");
  EXPECT_EQ(validateSplitPlannerInputs(0, 8, 4096, options),
            "batch must be >= 1, got 0");
  EXPECT_EQ(validateSplitPlannerInputs(1, 0, 4096, options),
            "num-kv-heads must be >= 1, got 0");
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, -1, options),
            "max-len must be >= 0, got -1");
  options.smCount = 0;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options),
            "sm-count must be >= 1, got 0");
  options.smCount = 132;
  options.blocksPerSM = 0;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options),
            "blocks-per-sm must be >= 1, got 0");
  options.blocksPerSM = 4;
  options.blockMergeBytesPerTokenTime = 0;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options, '_'),
            "block_merge_bytes_per_token_time must be >= 1, got 0");
  options.blockMergeBytesPerTokenTime = 3072;
  options.tensorCoreKeysPerTokenTime = 0;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options),
            "tensor-core-keys-per-token-time must be >= 1, got 0");
  options.tensorCoreKeysPerTokenTime = 7;
  options.smBytesInFlight = -1;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options),
            "sm-bytes-in-flight must be >= 1, got -1");
  options.smBytesInFlight = 19456;
  options.splitValueSMBytesPerTokenTime = 0;
  EXPECT_EQ(validateSplitPlannerInputs(1, 8, 4096, options),
            "split-value-sm-bytes-per-token-time must be >= 1, got 0");
}

TEST(WorkspaceLayout, PartialsThenLogSumExpsThenCounters) {
  // B * Lq * Hq * S * (D_v + 1) * 4: the outputs [B, Lq, Hq, S, D_v], then
  // the log-sum-exps [B, Lq, Hq, S].
  WorkspaceLayout single = WorkspaceLayout::get(1, 32, 8, 16, 128, false);
  EXPECT_EQ(single.getBytes(1), 32 * 16 * 129 * 4);
  EXPECT_EQ(single.getPartialLseOffset(1), 32 * 16 * 128 * 4);
  EXPECT_EQ(single.getMergeCounterBytes(7), 0);
  WorkspaceLayout fused = WorkspaceLayout::get(2, 8, 2, 5, 64, true);
  EXPECT_EQ(fused.getBytes(3), 3 * 2 * 8 * 5 * 65 * 4);
  EXPECT_EQ(fused.getPartialLseOffset(3), 3 * 2 * 8 * 5 * 64 * 4);
  EXPECT_EQ(fused.getBytesPerSequence(), 2 * 8 * 5 * 65 * 4);
  // One int32 counter per (sequence, KV head).
  EXPECT_EQ(fused.getMergeCounterBytes(3), 3 * 2 * 4);
}

TEST(SplitPlanner, DescribesAPlan) {
  EXPECT_EQ(describeSplitPlan(planNumSplits(1, 8, 32768)),
            "splits=63 blocks=504 waves=1 wave-efficiency=0.95 chunk=521");
}

} // namespace
