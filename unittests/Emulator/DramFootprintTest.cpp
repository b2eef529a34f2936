//===- DramFootprintTest.cpp - What the model reads from DRAM -------------===//
//
// The performance model charges DRAM for the distinct 32-byte sectors a
// launch loads, once each (a sector read again is an L2 hit: the query every
// split reads, the scales the KV heads of one token share, a chunk several
// row tiles stream), and for every sector stored. The per-instruction sector
// counts (what an SM moves to and from L2) still count every read.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include "fd/Emulator/PerformanceModel.h"

using namespace flashdecode::emutest;

namespace {

class EmulatorDramFootprint : public EmulatorTest {};

/// Every thread loads word `tid.x` of `in` `reads` times (the loads'
/// results summed so none is dead) and stores the sum to word `ctaid.x *
/// 32 + tid.x` of `out`.
std::string rereadKernel(int reads) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry reread(.param .u64 in, .param .u64 out)
{
  .reg .b32 %t, %c, %sum, %word<8>, %slot;
  .reg .b64 %in, %out, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %c, %ctaid.x;
  ld.param.u64 %in, [in];
  ld.param.u64 %out, [out];
  mul.wide.u32 %offset, %t, 4;
  add.s64 %in, %in, %offset;
  mov.u32 %sum, 0;
)";
  for (int i = 0; i < reads; ++i)
    ptx += "  ld.global.u32 %word" + std::to_string(i) +
           ", [%in];\n  add.u32 %sum, %sum, %word" + std::to_string(i) + ";\n";
  return ptx + R"(  mad.lo.u32 %slot, %c, 32, %t;
  mul.wide.u32 %offset, %slot, 4;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %sum;
  ret;
}
)";
}

TEST_F(EmulatorDramFootprint, ASectorIsReadFromDramOncePerLaunch) {
  CUfunction once = getKernel(rereadKernel(1), "reread");
  CUfunction thrice = getKernel(rereadKernel(3), "reread");
  std::vector<uint32_t> in(32, 7);
  for (auto [kernel, reads] : {std::pair{once, 1u}, std::pair{thrice, 3u}})
    for (unsigned ctas : {1u, 5u}) {
      SCOPED_TRACE(testing::Message()
                   << reads << " reads, " << ctas << " CTAs");
      FdemuCounters counters =
          launchCounted(kernel, {ctas}, {32},
                        KernelArguments(upload(in), allocate(ctas * 128)));
      // Each load instruction of a warp touches the 128 bytes' 4 sectors;
      // DRAM serves them once, whatever the reads and CTAs.
      EXPECT_EQ(counters.total.globalLoadSectors, 4u * reads * ctas);
      EXPECT_EQ(counters.dramLoadSectors, 4u);
      EXPECT_EQ(counters.total.globalStoreSectors, 4u * ctas);
    }
}

TEST_F(EmulatorDramFootprint, DisjointReadsAddUp) {
  // Two warps of one CTA read words 0-63: 8 distinct sectors.
  CUfunction kernel = getKernel(rereadKernel(2), "reread");
  std::vector<uint32_t> in(64, 3);
  FdemuCounters counters = launchCounted(
      kernel, {1}, {64}, KernelArguments(upload(in), allocate(64 * 4)));
  EXPECT_EQ(counters.total.globalLoadSectors, 2u * 8);
  EXPECT_EQ(counters.dramLoadSectors, 8u);
}

TEST(EmulatorDramTerm, ChargesDistinctLoadsAndEveryStore) {
  const flashdecode::emu::GpuModel &gpu =
      *flashdecode::emu::findGpuModel("h200");
  flashdecode::emu::LaunchCounters counters;
  counters.perSM.resize(1);
  // 8 G sector reads of 1 G distinct sectors, 0.5 G sectors stored: DRAM
  // moves 1.5 G sectors (48 GB), not 8.5 G.
  counters.total.globalLoadSectors = 8'000'000'000;
  counters.dramLoadSectors = 1'000'000'000;
  counters.total.globalStoreSectors = 500'000'000;
  flashdecode::emu::ModeledTime time =
      flashdecode::emu::modelLaunch(counters, gpu);
  EXPECT_EQ(time.bound, "dram");
  EXPECT_DOUBLE_EQ(time.dramBytes, 48e9);
  EXPECT_DOUBLE_EQ(time.microseconds, 48e9 / gpu.dramBytesPerSecond * 1e6);
}

} // namespace
