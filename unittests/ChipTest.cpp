//===- ChipTest.cpp - The chip table against ptxas ------------------------===//
//
// The table's lookups, and each target's PTX ISA minimum and instruction
// features checked against the CUDA toolkit's ptxas, an independent source:
// a feature the table claims must assemble for the target at its minimum
// PTX ISA, a feature it denies must not. Skips the ptxas checks with a
// reason when ptxas is not installed.
//
//===----------------------------------------------------------------------===//

#include "fd/Planning/Chip.h"
#include "fd/TestSupport/Ptxas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

using namespace flashdecode;

namespace {

TEST(Chip, LooksUpEveryTargetByName) {
  for (const Chip &chip : getChips())
    EXPECT_EQ(findChip(chip.name), &chip);
  EXPECT_EQ(findChip("sm_70"), nullptr);
  EXPECT_EQ(findChip("sm_90 "), nullptr);
  EXPECT_EQ(findChip(""), nullptr);
  EXPECT_EQ(getDefaultChip().name, "sm_90");
  EXPECT_EQ(getDefaultChip().defaultSMCount, 132);
  EXPECT_EQ(getChipNameList(), "sm_80, sm_86, sm_89, sm_90 or sm_90a");
}

TEST(Chip, ChoosesTheNewestGenericTargetADeviceRuns) {
  // The runtime's table of examples is RuntimeTest's (Targets.*); here the
  // rule itself, over every capability from 7.0 to 12.9.
  for (int major = 7; major <= 12; ++major)
    for (int minor = 0; minor <= 9; ++minor) {
      SCOPED_TRACE(std::to_string(major) + "." + std::to_string(minor));
      const Chip *chosen = getChipForComputeCapability(major, minor);
      int runnable = 0;
      for (const Chip &chip : getChips())
        if (!chip.architectureSpecific && canRunOn(chip, major, minor)) {
          ++runnable;
          ASSERT_NE(chosen, nullptr);
          EXPECT_LE(chip.computeCapability, chosen->computeCapability);
        }
      EXPECT_EQ(chosen == nullptr, runnable == 0);
      if (chosen) {
        EXPECT_FALSE(chosen->architectureSpecific);
        EXPECT_TRUE(canRunOn(*chosen, major, minor));
      }
      EXPECT_EQ(chosen == nullptr, major < 8);
    }
}

TEST(Chip, ArchitectureSpecificTargetsRunOnTheirOwnGPUOnly) {
  const Chip &specific = *findChip("sm_90a");
  EXPECT_TRUE(canRunOn(specific, 9, 0));
  EXPECT_FALSE(canRunOn(specific, 10, 0));
  EXPECT_FALSE(canRunOn(specific, 8, 9));
  const Chip &generic = *findChip("sm_89");
  EXPECT_TRUE(canRunOn(generic, 8, 9));
  EXPECT_TRUE(canRunOn(generic, 9, 0));
  EXPECT_FALSE(canRunOn(generic, 8, 6));
}

TEST(Chip, LimitsAreConsistent) {
  for (const Chip &chip : getChips()) {
    SCOPED_TRACE(std::string(chip.name));
    EXPECT_LE(chip.maxSharedMemoryBytesPerBlock, chip.sharedMemoryBytesPerSM);
    EXPECT_LE(chip.maxRegistersPerBlock, chip.registersPerSM);
    EXPECT_GT(chip.defaultSMCount, 0);
    EXPECT_GT(chip.maxBlocksPerSM, 0);
    EXPECT_EQ(chip.name.substr(0, 3), "sm_");
  }
}

/// The PTX ISA versions, times ten, oldest first, up to CUDA 13.0's.
const int kPTXVersions[] = {60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76,
                            77, 78, 80, 81, 82, 83, 84, 85, 86, 87, 88, 90};

std::string probeKernel(int ptxVersion, std::string_view target,
                        const std::string &instructions) {
  return ".version " + std::to_string(ptxVersion / 10) + "." +
         std::to_string(ptxVersion % 10) + "\n.target " + std::string(target) +
         "\n.address_size 64\n.shared .align 16 .b8 buffer[16];\n"
         ".visible .entry probe()\n{\n"
         "  .reg .b16 %h<2>; .reg .b32 %r<8>; .reg .f32 %f<10>;"
         " .reg .b64 %rd<2>;\n  " +
         instructions + "\n  ret;\n}\n";
}

class ChipOnPtxas : public testing::Test {
protected:
  void SetUp() override {
    ptxas = findPtxas();
    if (!ptxas)
      GTEST_SKIP() << "ptxas not found (/usr/local/cuda/bin/ptxas or PATH)";
  }

  /// ptxas's log when it refuses the probe, "" when it assembles it.
  std::string refusal(int ptxVersion, const Chip &chip,
                      const std::string &instructions) {
    llvm::Expected<PtxasReport> report = assembleWithPtxas(
        *ptxas, probeKernel(ptxVersion, chip.name, instructions),
        std::string(chip.name));
    if (report)
      return "";
    std::string log = llvm::toString(report.takeError());
    return log.empty() ? "refused" : log;
  }

  std::optional<std::string> ptxas;
};

TEST_F(ChipOnPtxas, MinimumPTXVersionIsTheOneThatIntroducedTheTarget) {
  for (const Chip &chip : getChips()) {
    SCOPED_TRACE(std::string(chip.name));
    EXPECT_EQ(refusal(chip.minimumPTXVersion, chip, ""), "");
    const int *minimum =
        std::find(std::begin(kPTXVersions), std::end(kPTXVersions),
                  chip.minimumPTXVersion);
    ASSERT_NE(minimum, std::end(kPTXVersions));
    ASSERT_NE(minimum, std::begin(kPTXVersions));
    EXPECT_NE(refusal(minimum[-1], chip, "").find("does not support .target"),
              std::string::npos);
  }
}

TEST_F(ChipOnPtxas, FeaturesAssembleExactlyWhereTheTableHasThem) {
  struct Probe {
    const char *feature;
    bool Chip::*has;
    const char *instructions;
  };
  const Probe probes[] = {
      {"cp.async", &Chip::hasAsyncCopy,
       "cp.async.ca.shared.global [buffer], [%rd1], 16;\n"
       "  cp.async.wait_all;"},
      {"mma.sync m16n8k16", &Chip::hasMmaM16N8K16,
       "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
       "{%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, "
       "{%f4, %f5, %f6, %f7};"},
      {"griddepcontrol", &Chip::hasGridDependencyControl,
       "griddepcontrol.wait;"},
      {"fp8 conversions", &Chip::hasFloat8Conversions,
       "cvt.rn.f16x2.e4m3x2 %r1, %h1;"},
      {"wgmma", &Chip::hasWarpgroupMma, "wgmma.fence.sync.aligned;"},
  };
  for (const Chip &chip : getChips())
    for (const Probe &probe : probes) {
      SCOPED_TRACE(std::string(chip.name) + " " + probe.feature);
      std::string log =
          refusal(chip.minimumPTXVersion, chip, probe.instructions);
      if (chip.*probe.has)
        EXPECT_EQ(log, "");
      else
        EXPECT_NE(log, "");
    }
}

} // namespace
