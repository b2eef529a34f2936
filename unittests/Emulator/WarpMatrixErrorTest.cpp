//===- WarpMatrixErrorTest.cpp - Faults of mma, ldmatrix and cp.async ----===//
//
// What .aligned forbids, each a launch failure naming the instruction and
// the lanes: a warp that diverged around mma.sync (the other lanes exit,
// or wait at another mma.sync), a short last warp at ldmatrix, a guard
// that differs between lanes. cp.async's faults read like a load's, naming
// the operand: misaligned and out-of-bounds source, destination outside
// shared memory; and a copy in flight across bar.sync races with another
// warp's read of its destination, where waiting before the barrier does
// not. Last, the forms fdemu refuses at load time.
//
//===----------------------------------------------------------------------===//

#include "EmulatorErrorTest.h"

using namespace flashdecode::emutest;
using testing::HasSubstr;

namespace {

constexpr const char *kMma =
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%d0, %d1, %d2, %d3}, "
    "{%a, %a, %a, %a}, {%a, %a}, {%d0, %d1, %d2, %d3};";

/// A kernel of `threads` threads whose lanes with `condition` (on %t, the
/// thread) branch to SKIP; `body` follows, then SKIP.
std::string divergentKernel(const std::string &condition,
                            const std::string &body,
                            const std::string &skipped = "") {
  return std::string(kPtxHeader) + R"(
.visible .entry diverged()
{
  .shared .align 16 .b8 smem[1024];
  .reg .pred %p;
  .reg .b32 %t, %a, %address, %d<4>, %r<4>;
  mov.u32 %t, %tid.x;
  mov.b32 %a, 0;
  mov.b32 %d0, 0;
  mov.b32 %d1, 0;
  mov.b32 %d2, 0;
  mov.b32 %d3, 0;
  mov.u32 %address, smem;
  mad.lo.u32 %address, %t, 16, %address;
  st.shared.v4.b32 [%address], {%a, %a, %a, %a};
  setp.)" +
         condition +
         R"(;
  @%p bra SKIP;
)" + body +
         R"(
  ret;
SKIP:
)" + skipped +
         R"(
  ret;
}
)";
}

TEST_F(EmulatorError, MmaInAWarpWhoseOtherLanesExit) {
  std::string ptx = divergentKernel("ge.u32 %p, %t, 16", kMma);
  CUfunction kernel = getKernel(ptx, "diverged");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "diverged", ptx, "mma.sync.aligned", "0, 0, 0",
                "0, 0, 0");
  EXPECT_THAT(report, HasSubstr("mma.sync.aligned needs all 32 lanes"));
  EXPECT_THAT(report, HasSubstr("lanes 0xffff0000 exited without executing"));
}

TEST_F(EmulatorError, MmaOnTwoPathsOfADivergedWarp) {
  std::string ptx = divergentKernel("lt.u32 %p, %t, 8", kMma, kMma);
  CUfunction kernel = getKernel(ptx, "diverged");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  EXPECT_THAT(report, HasSubstr("deadlock"));
  EXPECT_THAT(report, HasSubstr("the warp diverged before this .aligned"));
  EXPECT_THAT(report, HasSubstr("mma.sync.aligned"));
}

TEST_F(EmulatorError, LdmatrixInAShortWarp) {
  std::string load =
      "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [%address];";
  std::string ptx = divergentKernel("ge.u32 %p, %t, 64", load);
  CUfunction kernel = getKernel(ptx, "diverged");
  // 48 threads: warp 1 has lanes 0 to 15.
  EXPECT_EQ(launch(kernel, {1}, {48}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "diverged", ptx, "ldmatrix.sync", "0, 0, 0",
                "32, 0, 0");
  EXPECT_THAT(report, HasSubstr("ldmatrix.sync.aligned needs all 32 lanes"));
  EXPECT_THAT(report, HasSubstr("warp 1 has only lanes 0x0000ffff"));
  // With whole warps the same kernel runs (in a fresh context: a fault is
  // sticky).
  ASSERT_EQ(driver->cuCtxDestroy_v2(context), kSuccess);
  ASSERT_EQ(driver->cuCtxCreate_v2(&context, 0, 0), kSuccess);
  kernel = getKernel(ptx, "diverged");
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {64}, KernelArguments()));
}

TEST_F(EmulatorError, GuardThatDiffersBetweenLanesOfAnAlignedInstruction) {
  std::string load =
      "@%p ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [%address];";
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry guarded()
{
  .shared .align 16 .b8 smem[512];
  .reg .pred %p;
  .reg .b32 %t, %address, %r0;
  mov.u32 %t, %tid.x;
  mov.u32 %address, smem;
  mad.lo.u32 %address, %t, 16, %address;
  st.shared.v4.b32 [%address], {%t, %t, %t, %t};
  setp.lt.u32 %p, %t, 8;
  )" + load + R"(
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "guarded");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "guarded", ptx, load, "0, 0, 0", "0, 0, 0");
  EXPECT_THAT(report, HasSubstr("true in lanes 0x000000ff and false in lanes "
                                "0xffffff00"));
}

/// Thread t copies 16 bytes from source + `offset` + 16 t to shared byte
/// `destination` + 16 t and waits.
std::string copyKernel(int offset, int destination) {
  return std::string(kPtxHeader) + R"(
.visible .entry copy(.param .u64 source)
{
  .shared .align 16 .b8 smem[512];
  .reg .b32 %t, %slot;
  .reg .b64 %source, %offset;
  mov.u32 %t, %tid.x;
  ld.param.u64 %source, [source];
  cvta.to.global.u64 %source, %source;
  mul.wide.u32 %offset, %t, 16;
  add.s64 %source, %source, %offset;
  mov.u32 %slot, smem;
  mad.lo.u32 %slot, %t, 16, %slot;
  cp.async.cg.shared.global [%slot+)" +
         std::to_string(destination) + "], [%source+" + std::to_string(offset) +
         R"(], 16;
  cp.async.wait_all;
  ret;
}
)";
}

TEST_F(EmulatorError, AsyncCopyFaultsNameTheOperand) {
  struct Case {
    int offset, destination;
    CUresult error;
    const char *thread;
  };
  // Misaligned and past the end: source, then destination.
  Case cases[] = {{4, 0, kMisalignedAddress, "0, 0, 0"},
                  {16, 0, kIllegalAddress, "31, 0, 0"},
                  {0, 8, kMisalignedAddress, "0, 0, 0"},
                  {0, 16, kIllegalAddress, "31, 0, 0"}};
  for (const Case &fault : cases) {
    // A fault is sticky: each case in a fresh context.
    ASSERT_EQ(driver->cuCtxDestroy_v2(context), kSuccess);
    ASSERT_EQ(driver->cuCtxCreate_v2(&context, 0, 0), kSuccess);
    CUdeviceptr source = upload(std::vector<uint8_t>(32 * 16, 1));
    std::string messages[] = {
        "cp.async source: misaligned 16-byte copy from " + hex(source + 4) +
            " (needs 16-byte alignment)",
        "cp.async source: 16-byte access at " + hex(source + 32 * 16) +
            " is outside every allocation",
        "cp.async destination: misaligned 16-byte access at 0x8",
        "cp.async destination: shared memory access of 16 bytes at offset "
        "512 is outside the CTA's 512 bytes"};
    const std::string &message = messages[&fault - cases];
    SCOPED_TRACE(message);
    std::string ptx = copyKernel(fault.offset, fault.destination);
    CUfunction kernel = getKernel(ptx, "copy");
    EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments(source)), fault.error);
    std::string report = errorString(fault.error);
    expectLocated(report, "copy", ptx, "cp.async.cg", "0, 0, 0", fault.thread);
    EXPECT_THAT(report, HasSubstr(message));
  }
}

/// Warp 1 writes smem[0, 512); after a barrier warp 0 copies into it
/// (waiting before or after the next barrier), after which warp 1 reads it.
std::string copyInFlightKernel(bool waitBeforeBarrier) {
  std::string wait = "  @%first cp.async.wait_all;\n";
  return std::string(kPtxHeader) + R"(
.visible .entry inFlight(.param .u64 source)
{
  .shared .align 16 .b8 smem[512];
  .reg .pred %first;
  .reg .b32 %t, %slot, %v;
  .reg .b64 %source, %offset;
  mov.u32 %t, %tid.x;
  setp.lt.u32 %first, %t, 32;
  and.b32 %v, %t, 31;
  ld.param.u64 %source, [source];
  cvta.to.global.u64 %source, %source;
  mul.wide.u32 %offset, %v, 16;
  add.s64 %source, %source, %offset;
  mov.u32 %slot, smem;
  mad.lo.u32 %slot, %v, 16, %slot;
  @!%first st.shared.u32 [%slot], %v;
  bar.sync 0;
  @%first cp.async.cg.shared.global [%slot], [%source], 16;
)" + (waitBeforeBarrier ? wait : "") +
         "  bar.sync 0;\n  @!%first ld.shared.u32 %v, [%slot];\n" +
         "  bar.sync 0;\n" + (waitBeforeBarrier ? "" : wait) + "  ret;\n}\n";
}

TEST_F(EmulatorError, AsyncCopyInFlightAcrossABarrierRaces) {
  std::string ptx = copyInFlightKernel(false);
  CUfunction kernel = getKernel(ptx, "inFlight");
  CUdeviceptr source = upload(std::vector<uint8_t>(32 * 16, 1));
  EXPECT_EQ(launch(kernel, {1}, {64}, KernelArguments(source)), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "inFlight", ptx, "@%first cp.async.wait_all", "0, 0, 0",
                "0, 0, 0");
  EXPECT_THAT(report, HasSubstr("the cp.async this wait completes: racecheck: "
                                "write-after-read hazard on shared byte 0"));
  EXPECT_THAT(report, HasSubstr("while the cp.async writing it was in flight"));
}

TEST_F(EmulatorError, AsyncCopyWaitedForBeforeTheBarrierPasses) {
  CUfunction kernel = getKernel(copyInFlightKernel(true), "inFlight");
  CUdeviceptr source = upload(std::vector<uint8_t>(32 * 16, 1));
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {64}, KernelArguments(source)));
}

/// A kernel whose line 9 (of the module) is `instruction`.
std::string kernelWith(const std::string &instruction) {
  return std::string(kPtxHeader) +
         ".visible .entry broken()\n{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd;\n"
         "  .reg .pred %p<2>;\n"
         "  " +
         instruction + "\n  ret;\n}\n";
}

TEST_F(EmulatorError, UnimplementedMatrixAndCopyFormsFailToLoad) {
  struct Case {
    std::string instruction, message;
  };
  Case cases[] = {
      {"mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%r0, %r1}, {%r0, "
       "%r1, %r2, %r3}, {%r4, %r5}, {%r0, %r1};",
       "fdemu implements mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32."
       "{f16.f16,bf16.bf16}.f32"},
      {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0, %r1, %r2, "
       "%r3}, {%r0, %r1}, {%r4, %r5}, {%r0, %r1, %r2, %r3};",
       "takes register vectors of 4, 4, 2 and 4 elements"},
      {"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r0, %r1}, [%r4];",
       "ldmatrix .x4 takes a vector of 4 registers"},
      {"ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r0}, [%r4];",
       "fdemu implements ldmatrix.sync.aligned.m8n8.{x1,x2,x4}"},
      {"cp.async.cg.shared.global [%r0], [%rd], 8;",
       "cp.async.cg copies 16 bytes only"},
      {"cp.async.ca.shared.global [%r0], [%rd], 12;",
       "cp.async copies 4, 8 or 16 bytes"},
      {"cp.async.bulk.shared::cluster.global [%r0], [%rd], 16;",
       "fdemu implements cp.async.{ca,cg}.shared{::cta}.global"},
      {"cp.async.ca.shared.global [%r0], [%rd], 16, %p1;",
       "cp.async with an ignore-src predicate is not supported"}};
  for (const Case &form : cases) {
    SCOPED_TRACE(form.instruction);
    LoadResult loaded = tryLoad(kernelWith(form.instruction));
    EXPECT_EQ(loaded.result, kInvalidPtx);
    EXPECT_THAT(loaded.log, HasSubstr("PTX line 9"));
    EXPECT_THAT(loaded.log, HasSubstr(form.message));
  }
}

} // namespace
