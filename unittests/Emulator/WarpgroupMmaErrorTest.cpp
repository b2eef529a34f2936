//===- WarpgroupMmaErrorTest.cpp - What wgmma's asynchrony forbids
//---------===//
//
// Each a launch failure that names the rule and the wgmma.mma_async's PTX
// line: no wgmma.fence before it; an accumulator read, or an A fragment
// register written, before wgmma.wait_group retires it; a wgmma on
// accumulators that overlap a pending one's without being the same (a
// chain is allowed); shared memory it read changing before the wait; a
// warp exiting with one pending; a CTA that is not whole warpgroups. Then
// what ptxas refuses at load time: wgmma outside sm_90a, shapes and
// immediates outside the ISA's.
//
//===----------------------------------------------------------------------===//

#include "EmulatorErrorTest.h"

using namespace flashdecode::emutest;
using testing::HasSubstr;

namespace {

/// m64n8k16 (4 accumulators) with A from registers (%a0-%a3) or shared
/// memory, B at smem + 4096; `afterMma` runs before the commit and wait,
/// `afterWait` after them.
struct Hooks {
  std::string beforeMma = "wgmma.fence.sync.aligned;";
  std::string accumulators = "{%d0, %d1, %d2, %d3}";
  std::string afterMma, afterWait;
  bool registersA = true;
  bool commitAndWait = true;
  std::string target = "sm_90a";
  std::string mmaForm = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16";
  std::string scaleA = "1";
};

std::string wgmmaKernel(const Hooks &h) {
  std::string a = h.registersA ? "{%a0, %a1, %a2, %a3}" : "%descA";
  return ".version 8.0\n.target " + h.target + R"(
.address_size 64
.visible .entry wgmma_error()
{
  .shared .align 1024 .b8 smem[8192];
  .reg .pred %p;
  .reg .b32 %t, %address, %zero, %a<4>, %d<8>, %x;
  .reg .b64 %descA, %descB;
  mov.u32 %t, %tid.x;
  mov.b32 %zero, 0;
  mov.u32 %address, smem;
  mad.lo.u32 %address, %t, 16, %address;
  setp.lt.u32 %p, %t, 128;
  @%p st.shared.v4.b32 [%address], {%zero, %zero, %zero, %zero};
  @%p st.shared.v4.b32 [%address+2048], {%zero, %zero, %zero, %zero};
  @%p st.shared.v4.b32 [%address+4096], {%zero, %zero, %zero, %zero};
  @%p st.shared.v4.b32 [%address+6144], {%zero, %zero, %zero, %zero};
  bar.sync 0;
  mov.b32 %a0, 0;
  mov.b32 %a1, 0;
  mov.b32 %a2, 0;
  mov.b32 %a3, 0;
  mov.b32 %d0, 0;
  mov.b32 %d1, 0;
  mov.b32 %d2, 0;
  mov.b32 %d3, 0;
  mov.b32 %d4, 0;
  mov.b32 %d5, 0;
  mov.b32 %d6, 0;
  mov.b32 %d7, 0;
  mov.b64 %descA, 0x0000000800000008;
  mov.b64 %descB, 0x0000000800080100;
  )" + h.beforeMma +
         R"(
  {
  .reg .pred p;
  setp.ne.b32 p, 1, 0;
  )" + h.mmaForm +
         " " + h.accumulators + ", " + a + ", %descB, p, " + h.scaleA +
         ", 1, " + (h.registersA ? "" : "0, ") + R"(0;
  }
  )" + h.afterMma +
         "\n" +
         (h.commitAndWait ? "  wgmma.commit_group.sync.aligned;\n"
                            "  wgmma.wait_group.sync.aligned 0;\n"
                          : "") +
         h.afterWait + R"(
  ret;
}
)";
}

class EmulatorWarpgroupMmaError : public EmulatorError {
protected:
  /// Launches the kernel `h` gives with `threads` threads and returns
  /// fdemu's report, expecting a launch failure.
  std::string failure(const Hooks &h, unsigned threads = 128) {
    CUfunction kernel = getKernel(wgmmaKernel(h), "wgmma_error");
    if (!kernel)
      return "";
    EXPECT_EQ(launch(kernel, {1}, {threads}, KernelArguments()), kLaunchFailed);
    return errorString(kLaunchFailed);
  }
  /// The JIT log of loading the kernel `h` gives, expecting a refusal.
  std::string refusal(const Hooks &h) {
    LoadResult loaded = tryLoad(wgmmaKernel(h));
    EXPECT_NE(loaded.result, kSuccess);
    return loaded.log;
  }
};

TEST_F(EmulatorWarpgroupMmaError, WellFormedKernelsRun) {
  for (bool registersA : {true, false}) {
    Hooks h;
    h.registersA = registersA;
    // A second chained wgmma, and one on other accumulators in flight.
    h.afterMma = "  {\n  .reg .pred p;\n  setp.ne.b32 p, 1, 0;\n  " +
                 h.mmaForm +
                 " {%d4, %d5, %d6, %d7}, {%a0, %a1, %a2, %a3}, "
                 "%descB, p, 1, 1, 0;\n  }";
    h.afterWait = "  add.f32 %x, %d0, %d4;";
    CUfunction kernel = getKernel(wgmmaKernel(h), "wgmma_error");
    EXPECT_TRUE(launchSucceeds(kernel, {1}, {256}, KernelArguments()));
  }
}

TEST_F(EmulatorWarpgroupMmaError, MmaWithoutFence) {
  Hooks h;
  h.beforeMma = "";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("wgmma.mma_async without a wgmma.fence"));
  expectLocated(report, "wgmma_error", wgmmaKernel(h), "wgmma.mma_async",
                "0, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorWarpgroupMmaError, EachCtaNeedsItsOwnFence) {
  // Block 0 fences before its wgmma, block 1 does not; block 0 ends with
  // a fence: block 1's warps (fdemu reuses block 0's) start unfenced all
  // the same.
  Hooks h;
  h.beforeMma = "mov.u32 %x, %ctaid.x;\n  setp.eq.u32 %p, %x, 0;\n"
                "  @%p wgmma.fence.sync.aligned;";
  h.afterWait = "  wgmma.fence.sync.aligned;";
  CUfunction kernel = getKernel(wgmmaKernel(h), "wgmma_error");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(launch(kernel, {2}, {128}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  EXPECT_THAT(report, HasSubstr("wgmma.mma_async without a wgmma.fence"));
  EXPECT_THAT(report, HasSubstr("block (1, 0, 0)"));
}

TEST_F(EmulatorWarpgroupMmaError, AccumulatorReadBeforeWait) {
  Hooks h;
  h.afterMma = "  add.f32 %x, %d2, %d2;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("reads an accumulator register of the "
                                "wgmma.mma_async at PTX line " +
                                std::to_string(lineOf(wgmmaKernel(h),
                                                      "wgmma.mma_async"))));
  EXPECT_THAT(report, HasSubstr("add.f32 %x, %d2, %d2"));
}

TEST_F(EmulatorWarpgroupMmaError, FragmentWrittenBeforeWait) {
  Hooks h;
  h.afterMma = "  mov.b32 %a1, 7;";
  EXPECT_THAT(failure(h), HasSubstr("writes an A fragment register"));
}

TEST_F(EmulatorWarpgroupMmaError, FragmentReadBeforeWaitIsAllowed) {
  Hooks h;
  h.afterMma = "  add.u32 %x, %a1, %a1;";
  CUfunction kernel = getKernel(wgmmaKernel(h), "wgmma_error");
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {128}, KernelArguments()));
}

TEST_F(EmulatorWarpgroupMmaError, OverlappingAccumulatorsBeforeWait) {
  Hooks h;
  h.afterMma = "  {\n  .reg .pred p;\n  setp.ne.b32 p, 1, 0;\n  " + h.mmaForm +
               " {%d2, %d3, %d4, %d5}, {%a0, %a1, %a2, %a3}, %descB, p, 1, "
               "1, 0;\n  }";
  EXPECT_THAT(failure(h), HasSubstr("writes an accumulator register"));
}

TEST_F(EmulatorWarpgroupMmaError, SharedOperandChangedBeforeWait) {
  Hooks h;
  h.afterMma = "  mov.b32 %x, 7;\n  setp.eq.u32 %p, %t, 0;\n"
               "  @%p st.shared.u32 [smem+4100], %x;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("changed before wgmma.wait_group retired it"));
  EXPECT_THAT(report, HasSubstr("shared memory at 0x1000"));
}

TEST_F(EmulatorWarpgroupMmaError, ExitWithMmaPending) {
  Hooks h;
  h.commitAndWait = false;
  EXPECT_THAT(failure(h), HasSubstr("exits with the wgmma.mma_async"));
}

TEST_F(EmulatorWarpgroupMmaError, ExitWithGroupCommittedNotWaited) {
  Hooks h;
  h.commitAndWait = false;
  h.afterMma = "  wgmma.commit_group.sync.aligned;";
  EXPECT_THAT(failure(h), HasSubstr("no wgmma.wait_group retired it"));
}

TEST_F(EmulatorWarpgroupMmaError, CtaOfThreeWarps) {
  EXPECT_THAT(failure(Hooks(), 96),
              HasSubstr("needs a whole warpgroup (4 warps of 32 threads)"));
}

TEST_F(EmulatorWarpgroupMmaError, CtaOfOneWarpgroupAndAWarp) {
  // Warps 0-3 run it; warp 4 is alone in its warpgroup.
  EXPECT_THAT(failure(Hooks(), 160),
              HasSubstr("warp 4's warpgroup is cut short by the CTA's 160"));
}

TEST_F(EmulatorWarpgroupMmaError, LoadTimeRefusals) {
  Hooks h;
  h.target = "sm_90";
  EXPECT_THAT(refusal(h), HasSubstr("requires .target sm_90a"));
  h = Hooks();
  h.mmaForm = "wgmma.mma_async.sync.aligned.m64n12k16.f32.bf16.bf16";
  EXPECT_THAT(refusal(h), HasSubstr("N a multiple of 8 up to 256"));
  h = Hooks();
  h.mmaForm = "wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16";
  EXPECT_THAT(refusal(h), HasSubstr("unsupported form"));
  h = Hooks();
  h.scaleA = "2";
  EXPECT_THAT(refusal(h), HasSubstr("imm-scale-a must be 1 or -1"));
  h = Hooks();
  h.accumulators = "{%d0, %d1}";
  EXPECT_THAT(refusal(h), HasSubstr("takes a vector of 4 accumulator"));
  h = Hooks();
  h.afterMma = "  wgmma.wait_group.sync.aligned 256;";
  EXPECT_THAT(refusal(h), HasSubstr("leave pending (0 to 255)"));
}

} // namespace
