//===- TensorTermTest.cpp - The performance model's tensor-core term ------===//
//
// modelLaunch's tensor term on hand-made counts: mma.sync at
// tensor_per_clock, wgmma.mma_async by its m16n8k16 steps at
// warpgroup_tensor_per_clock (twice mma.sync's rate on the H200, the dense
// peak), the two added when a launch has both; wgmma instructions are not
// charged again as mma.sync.
//
//===----------------------------------------------------------------------===//

#include "fd/Emulator/Executor.h"
#include "fd/Emulator/PerformanceModel.h"

#include <gtest/gtest.h>

namespace {

using flashdecode::emu::GpuModel;
using flashdecode::emu::InstructionClass;
using flashdecode::emu::LaunchCounters;
using flashdecode::emu::modelLaunch;

constexpr size_t kTensor = static_cast<size_t>(InstructionClass::TensorCore);

/// One SM with one CTA of negligible latency and `mmas` mma.sync plus
/// `wgmmas` wgmma.mma_async of `steps` steps each.
LaunchCounters tensorCounters(uint64_t mmas, uint64_t wgmmas, uint64_t steps) {
  LaunchCounters counters;
  counters.perSM.resize(1);
  auto &sm = counters.perSM[0];
  sm.ctas = 1;
  sm.latencyCycles = 1;
  sm.warpInstructions[kTensor] = mmas + wgmmas;
  sm.warpgroupMmas = wgmmas;
  sm.warpgroupMmaSteps = wgmmas * steps;
  counters.total = sm;
  counters.residentCtasPerSM = 1;
  return counters;
}

TEST(EmulatorTensorTerm, WarpgroupStepsRunAtTwiceMmaSyncsRate) {
  const GpuModel &gpu = *flashdecode::emu::findGpuModel("h200");
  ASSERT_DOUBLE_EQ(gpu.warpgroupTensorPerClock, 2 * gpu.tensorPerClock);
  double cycle = 1 / (gpu.clockGHz * 1e3);
  // 100,000 mma.sync: 200,000 cycles.
  auto time = modelLaunch(tensorCounters(100'000, 0, 0), gpu);
  EXPECT_EQ(time.bound, "tensor");
  EXPECT_DOUBLE_EQ(time.microseconds, 100'000 / gpu.tensorPerClock * cycle);
  // The same multiply-adds as 3,125 m64n256k16 a warp (32 steps each):
  // half the cycles.
  time = modelLaunch(tensorCounters(0, 3'125, 32), gpu);
  EXPECT_EQ(time.bound, "tensor");
  EXPECT_DOUBLE_EQ(time.microseconds,
                   100'000 / gpu.warpgroupTensorPerClock * cycle);
  // Both: the sum.
  time = modelLaunch(tensorCounters(100'000, 3'125, 32), gpu);
  EXPECT_DOUBLE_EQ(time.microseconds, (100'000 / gpu.tensorPerClock +
                                       100'000 / gpu.warpgroupTensorPerClock) *
                                          cycle);
}

} // namespace
