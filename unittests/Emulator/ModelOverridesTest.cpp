//===- ModelOverridesTest.cpp - FDEMU_MODEL's names and values ------------===//
//
// applyModelOverrides on a copy of the H200 model: the named constants it
// sets, and the message for a name it does not know or a value it cannot
// take (the text cuInit fails with when FDEMU_MODEL holds it).
//
//===----------------------------------------------------------------------===//

#include "fd/Emulator/PerformanceModel.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(EmulatorModelOverrides, SetNamedConstantsAndRejectOthers) {
  flashdecode::emu::GpuModel gpu = *flashdecode::emu::findGpuModel("h200");
  EXPECT_EQ(flashdecode::emu::applyModelOverrides(
                gpu, "dram_bytes_per_second=4e12,global_load=700,"
                     "warp_bytes_in_flight=2048,graph_node_us=1.5"),
            "");
  EXPECT_DOUBLE_EQ(gpu.dramBytesPerSecond, 4e12);
  EXPECT_EQ(gpu.latencyModel.globalLoad, 700u);
  EXPECT_EQ(gpu.latencyModel.warpBytesInFlight, 2048u);
  EXPECT_DOUBLE_EQ(gpu.graphNodeMicroseconds, 1.5);
  const std::pair<const char *, const char *> rejected[] = {
      {"dram=4e12", "is not NAME=VALUE with a NAME of clock_ghz,"},
      {"global_load", "is not NAME=VALUE"},
      {"global_load=12.5", "must be a whole number >= 0"},
      {"window=0", "must be a whole number of instructions >= 1"},
      {"dram_bytes_per_second=-1", "must be a positive number"},
      {"dram_bytes_per_second=4e12x", "must be a positive number"},
      {"clock_ghz=", "must be a positive number"}};
  for (auto [spec, message] : rejected)
    EXPECT_NE(flashdecode::emu::applyModelOverrides(gpu, spec).find(message),
              std::string::npos)
        << spec << ": " << flashdecode::emu::applyModelOverrides(gpu, spec);
}

} // namespace
