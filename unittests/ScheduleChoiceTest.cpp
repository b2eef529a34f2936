//===- ScheduleChoiceTest.cpp - Schedules written by hand -----------------===//
//
// A schedule written by hand (#fd.schedule, fd-compile --schedule): the
// layout it makes, its text form and the messages for one that is malformed
// or cannot work. KernelPlanTest checks the planner's own schedules.
//
//===----------------------------------------------------------------------===//

#include "KernelProblems.h"

#include "fd/Planning/KernelPlan.h"

#include <gtest/gtest.h>

using namespace flashdecode;
using flashdecode::test::makeProblem;

namespace {

TEST(ScheduleChoice, AHandWrittenScheduleSetsTheLayout) {
  KernelProblem problem = makeProblem(64, 16);
  ScheduleChoice choice;
  choice.form = KernelForm::TensorCores;
  choice.rowsPerTile = 8;
  choice.rowTiles = 2;
  choice.minBlocksPerSM = 3;
  choice.heldQuerySteps = 2;
  choice.keyValueStages = 3;
  ASSERT_EQ(getReasonScheduleInvalid(problem, choice), "");
  KernelSchedule schedule = getKernelSchedule(problem, choice);
  EXPECT_TRUE(schedule.layout.tensorCores);
  EXPECT_EQ(schedule.getRowsPerTile(), 8);
  EXPECT_EQ(schedule.getNumRowTiles(), 2);
  EXPECT_EQ(schedule.getTokensPerStep(), 32);
  // Three stages of 8 KiB take 24 of the accumulators' 1 KiB rows.
  EXPECT_EQ(schedule.getWorkgroupBuffers()[kWarpAccumulatorsBuffer].shape,
            (std::vector<int64_t>{4, 24, 64}));
  EXPECT_EQ(schedule.getChoice(), choice);
  // The same rows on CUDA cores: the layout's vectors, no stages.
  choice = ScheduleChoice();
  choice.rowsPerTile = 4;
  choice.rowTiles = 4;
  schedule = getKernelSchedule(problem, choice);
  EXPECT_FALSE(schedule.layout.tensorCores);
  EXPECT_EQ(schedule.layout.lanesPerToken, 8);
  EXPECT_EQ(schedule.getTokensPerStep(), 16);
}

TEST(ScheduleChoice, ClusterCtasIsSpelledOnlyWhenNotOne) {
  std::string error;
  std::optional<ScheduleChoice> choice = parseScheduleChoice(
      "cluster_ctas = 4, form = cuda_cores, rows_per_tile = 8, row_tiles = 1, "
      "threads = 128",
      error);
  ASSERT_TRUE(choice) << error;
  EXPECT_EQ(choice->clusterCtas, 4);
  EXPECT_EQ(formatScheduleChoice(*choice),
            "form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = "
            "128, min_blocks_per_sm = 0, held_query_steps = 0, stages = 0, "
            "cluster_ctas = 4");
  std::vector<std::string> names;
  forEachScheduleField(
      *choice, [&](const char *name, int64_t) { names.push_back(name); });
  EXPECT_EQ(names.back(), "cluster_ctas");
  // Left out, it is 1, and the text is what it was before the field.
  choice->clusterCtas = 1;
  EXPECT_EQ(formatScheduleChoice(*choice),
            "form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = "
            "128, min_blocks_per_sm = 0, held_query_steps = 0, stages = 0");
  EXPECT_EQ(parseScheduleChoice(formatScheduleChoice(*choice), error), choice);
  // Its range and the forms that take it.
  KernelProblem problem = makeProblem(128, 8);
  choice->clusterCtas = 8;
  EXPECT_EQ(getReasonScheduleInvalid(problem, *choice), "");
  EXPECT_EQ(getKernelSchedule(problem, *choice).clusterCtas, 8);
  EXPECT_EQ(getKernelSchedule(problem, *choice).getChoice(), *choice);
  choice->clusterCtas = 0;
  EXPECT_EQ(getReasonScheduleInvalid(problem, *choice),
            "cluster_ctas = 0 is out of range: 1 to 8 blocks a chunk (a "
            "portable thread block cluster)");
}

TEST(ScheduleChoice, ScheduleTextNamesWhatIsWrong) {
  std::string error;
  std::optional<ScheduleChoice> choice = parseScheduleChoice(
      "#fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 2, "
      "threads = 128, stages = 3>",
      error);
  ASSERT_TRUE(choice) << error;
  EXPECT_EQ(choice->keyValueStages, 3);
  EXPECT_EQ(choice->minBlocksPerSM, 0);
  EXPECT_EQ(formatScheduleChoice(*choice),
            "form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = "
            "128, min_blocks_per_sm = 0, held_query_steps = 0, stages = 3");
  auto failure = [&](const char *text) {
    std::string message;
    EXPECT_FALSE(parseScheduleChoice(text, message)) << text;
    return message;
  };
  EXPECT_EQ(failure("form=cuda_cores,rows_per_tile=1,row_tiles=1"),
            "the schedule has no threads: it needs form, rows_per_tile, "
            "row_tiles and threads (min_blocks_per_sm, held_query_steps and "
            "stages default to 0)");
  EXPECT_EQ(failure("form=wgmma,rows_per_tile=1,row_tiles=1,threads=128"),
            "form = wgmma is not a kernel form: expected cuda_cores or "
            "tensor_cores");
  EXPECT_EQ(failure("form=cuda_cores,rows=1"),
            "unknown schedule field 'rows': expected form, rows_per_tile, "
            "row_tiles, threads, min_blocks_per_sm, held_query_steps, stages, "
            "cluster_ctas");
  EXPECT_EQ(failure("form=cuda_cores,threads=12x"),
            "threads = 12x is not an integer");
  EXPECT_EQ(failure("form=cuda_cores,threads=128,threads=128"),
            "schedule field 'threads' is given twice");
  EXPECT_EQ(failure("form cuda_cores"),
            "'form cuda_cores' is not 'name = value'");
  EXPECT_EQ(failure("form=cuda_cores,rows_per_tile=1,row_tiles=1,threads=128,"),
            "the schedule has an empty field (a comma too many?)");
  EXPECT_EQ(failure("  "), "the schedule is empty: it needs form, "
                           "rows_per_tile, row_tiles and threads");
  EXPECT_EQ(failure("form=cuda_cores,threads=99999999999999999999"),
            "threads = 99999999999999999999 is out of range");
  EXPECT_EQ(failure("#fd.schedule<form=cuda_cores"),
            "a schedule that opens with '#fd.schedule<' must close with '>'");
}

TEST(ScheduleChoice, HugeHandWrittenFieldsAreRefusedNotWrapped) {
  // Fields far past any limit are refused before the sizes they multiply
  // into could overflow.
  KernelProblem problem = makeProblem(128, 16);
  ScheduleChoice choice;
  choice.form = KernelForm::TensorCores;
  choice.rowsPerTile = 16;
  choice.keyValueStages = int64_t(1) << 50;
  EXPECT_EQ(getReasonScheduleInvalid(problem, choice),
            "stages = 1125899906842624: stages of 16384 bytes take more than "
            "the 49152 bytes a block declares statically");
  choice.keyValueStages = 2;
  choice.rowTiles = int64_t(1) << 60;
  EXPECT_EQ(getReasonScheduleInvalid(problem, choice),
            "row_tiles = 1152921504606846976 leaves a tile without rows: 16 "
            "rows in tiles of 16 take 1");
  choice = ScheduleChoice();
  choice.rowsPerTile = int64_t(1) << 60;
  EXPECT_EQ(getReasonScheduleInvalid(problem, choice),
            "rows_per_tile = 1152921504606846976 is out of range: 1 to 16 "
            "(the 16 query rows of a KV head)");
  choice.rowsPerTile = 16;
  choice.minBlocksPerSM = -1;
  EXPECT_EQ(getReasonScheduleInvalid(problem, choice),
            "min_blocks_per_sm = -1 is out of range: 0 (no launch bounds) to "
            "12 blocks of 128 threads (what sm_86 holds per SM)");
}

} // namespace
