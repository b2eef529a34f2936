//===- EmulatorErrorTest.cpp - Every fault fdemu reports, provoked --------===//
//
// Each test runs a kernel with one planted bug in a fresh context (a fault
// is sticky in its context, as on a GPU) and checks the CUresult of the
// synchronizing call and the report cuGetErrorString returns: kernel, PTX
// line, instruction, block, thread, and for global memory the address and
// the nearest allocation. Load-time failures check the JIT log. Each fault
// has a twin without the bug where that shows the check is not simply
// always on (the race without and with bar.sync).
//
//===----------------------------------------------------------------------===//

#include "EmulatorErrorTest.h"

#include <utility>

using namespace flashdecode::emutest;
using testing::HasSubstr;

namespace {

/// out[global id] = 1 (store) or out[global id] = in[global id] (load).
const char *kIndexedAccessPtx = R"(
.visible .entry indexed(.param .u64 in, .param .u64 out)
{
  .reg .b32 %t, %block, %size, %v;
  .reg .b64 %in, %out, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %block, %ctaid.x;
  mov.u32 %size, %ntid.x;
  mad.lo.u32 %t, %block, %size, %t;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %in, [in];
  cvta.to.global.u64 %in, %in;
  add.s64 %in, %in, %offset;
  ld.global.u32 %v, [%in];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %v;
  ret;
}
)";

TEST_F(EmulatorError, OutOfBoundsGlobalStore) {
  std::string ptx = std::string(kPtxHeader) + kIndexedAccessPtx;
  CUfunction kernel = getKernel(ptx, "indexed");
  // 64 threads, room for 60 results: block 1, thread 28 stores first
  // past the end.
  CUdeviceptr in = upload(std::vector<uint32_t>(64, 7));
  CUdeviceptr out = allocate(60 * 4);
  KernelArguments arguments(in, out);
  std::vector<void *> parameters = arguments.pointers();
  // The launch succeeds; the fault shows at the next synchronizing call
  // and every later one.
  ASSERT_EQ(driver->cuLaunchKernel(kernel, 2, 1, 1, 32, 1, 1, 0, nullptr,
                                   parameters.data(), nullptr),
            kSuccess);
  EXPECT_EQ(driver->cuCtxSynchronize(), kIllegalAddress);
  EXPECT_EQ(driver->cuCtxSynchronize(), kIllegalAddress);
  CUdeviceptr more = 0;
  EXPECT_EQ(driver->cuMemAlloc_v2(&more, 16), kIllegalAddress);
  std::string report = errorString(kIllegalAddress);
  expectLocated(report, "indexed", ptx, "st.global.u32 [%out], %v;", "1, 0, 0",
                "28, 0, 0");
  EXPECT_THAT(report, HasSubstr(hex(out + 240)));
  EXPECT_THAT(report, HasSubstr("nearest allocation [" + hex(out) + ", " +
                                hex(out + 240) + ")"));
  EXPECT_THAT(report, HasSubstr("0 bytes past its end"));
}

TEST_F(EmulatorError, OutOfBoundsGlobalLoad) {
  std::string ptx = std::string(kPtxHeader) + kIndexedAccessPtx;
  CUfunction kernel = getKernel(ptx, "indexed");
  CUdeviceptr in = upload(std::vector<uint32_t>(40, 7));
  CUdeviceptr out = allocate(64 * 4);
  EXPECT_EQ(launch(kernel, {2}, {32}, KernelArguments(in, out)),
            kIllegalAddress);
  std::string report = errorString(kIllegalAddress);
  expectLocated(report, "indexed", ptx, "ld.global.u32 %v, [%in];", "1, 0, 0",
                "8, 0, 0");
  EXPECT_THAT(report, HasSubstr(hex(in + 160)));
  EXPECT_THAT(report, HasSubstr("nearest allocation [" + hex(in)));
}

TEST_F(EmulatorError, FaultIsGoneInAFreshContext) {
  std::string ptx = std::string(kPtxHeader) + kIndexedAccessPtx;
  CUfunction kernel = getKernel(ptx, "indexed");
  CUdeviceptr in = upload(std::vector<uint32_t>(64, 7));
  EXPECT_EQ(launch(kernel, {2}, {32}, KernelArguments(in, allocate(4))),
            kIllegalAddress);
  ASSERT_EQ(driver->cuCtxDestroy_v2(context), kSuccess);
  ASSERT_EQ(driver->cuCtxCreate_v2(&context, 0, 0), kSuccess);
  kernel = getKernel(ptx, "indexed");
  CUdeviceptr out = allocate(64 * 4);
  EXPECT_TRUE(launchSucceeds(kernel, {2}, {32}, KernelArguments(in, out)));
  EXPECT_EQ(download<uint32_t>(out, 64), std::vector<uint32_t>(64, 7));
}

TEST_F(EmulatorError, ReportLocatesTheThreadIn3D) {
  // Only thread (1, 2, 1) of block (1, 2, 0) stores past the end.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry located(.param .u64 out)
{
  .reg .pred %p;
  .reg .b32 %x, %y, %z, %bx, %by;
  .reg .b64 %out;
  mov.u32 %x, %tid.x;
  mov.u32 %y, %tid.y;
  mov.u32 %z, %tid.z;
  mov.u32 %bx, %ctaid.x;
  mov.u32 %by, %ctaid.y;
  setp.eq.u32 %p, %x, 1;
  setp.eq.and.u32 %p, %y, 2, %p;
  setp.eq.and.u32 %p, %z, 1, %p;
  setp.eq.and.u32 %p, %bx, 1, %p;
  setp.eq.and.u32 %p, %by, 2, %p;
  @!%p bra DONE;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  st.global.u32 [%out+64], %x;
DONE:
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "located");
  CUdeviceptr out = allocate(64);
  EXPECT_EQ(launch(kernel, {2, 3, 1}, {4, 3, 2}, KernelArguments(out)),
            kIllegalAddress);
  std::string report = errorString(kIllegalAddress);
  expectLocated(report, "located", ptx, "st.global.u32 [%out+64], %x;",
                "1, 2, 0", "1, 2, 1");
  EXPECT_THAT(report, HasSubstr(hex(out + 64)));
}

TEST_F(EmulatorError, MisalignedVectorLoad) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry misaligned(.param .u64 in, .param .u64 out)
{
  .reg .b32 %x, %y, %z, %w;
  .reg .b64 %in, %out;
  ld.param.u64 %in, [in];
  cvta.to.global.u64 %in, %in;
  ld.global.v4.f32 {%x, %y, %z, %w}, [%in+4];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  st.global.v4.f32 [%out], {%x, %y, %z, %w};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "misaligned");
  CUdeviceptr in = upload(std::vector<float>(16, 1.0f));
  EXPECT_EQ(launch(kernel, {1}, {1}, KernelArguments(in, allocate(64))),
            kMisalignedAddress);
  std::string report = errorString(kMisalignedAddress);
  expectLocated(report, "misaligned", ptx, "ld.global.v4.f32", "0, 0, 0",
                "0, 0, 0");
  EXPECT_THAT(report, HasSubstr(hex(in + 4)));
  EXPECT_THAT(report, HasSubstr("16-byte alignment"));
}

TEST_F(EmulatorError, SharedOutOfBounds) {
  // A static array of 32 words; thread 32 of a 40-thread block writes
  // past it.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry sharedOverrun()
{
  .shared .align 4 .b32 words[32];
  .reg .b32 %t, %base, %address;
  mov.u32 %t, %tid.x;
  mov.u32 %base, words;
  mad.lo.u32 %address, %t, 4, %base;
  st.shared.u32 [%address], %t;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "sharedOverrun");
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {32}, KernelArguments()));
  EXPECT_EQ(launch(kernel, {1}, {40}, KernelArguments()), kIllegalAddress);
  std::string report = errorString(kIllegalAddress);
  expectLocated(report, "sharedOverrun", ptx, "st.shared.u32", "0, 0, 0",
                "32, 0, 0");
  EXPECT_THAT(report, HasSubstr("offset 128"));
  EXPECT_THAT(report, HasSubstr("128 bytes of shared memory"));
}

TEST_F(EmulatorError, DynamicSharedOutOfBounds) {
  std::string ptx = std::string(kPtxHeader) + R"(
.extern .shared .align 16 .b8 dynamicBytes[];

.visible .entry dynamicOverrun()
{
  .reg .b32 %t, %base, %address;
  mov.u32 %t, %tid.x;
  mov.u32 %base, dynamicBytes;
  mad.lo.u32 %address, %t, 4, %base;
  st.shared.u32 [%address], %t;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "dynamicOverrun");
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {64}, KernelArguments(), 256));
  EXPECT_EQ(launch(kernel, {1}, {64}, KernelArguments(), 128), kIllegalAddress);
  expectLocated(errorString(kIllegalAddress), "dynamicOverrun", ptx,
                "st.shared.u32", "0, 0, 0", "32, 0, 0");
}

TEST_F(EmulatorError, DynamicSharedPast48KBNeedsTheOptIn) {
  // As on a GPU: a block of more than 48 KB in all (16 KB of it static) is
  // CUDA_ERROR_INVALID_VALUE (1) until
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8) allows the dynamic
  // bytes, which beside the static ones stay within the block's most.
  std::string ptx = std::string(kPtxHeader) + R"(
.shared .align 16 .b8 fixed[16384];
.extern .shared .align 16 .b8 dynamicBytes[];

.visible .entry large()
{
  .reg .b32 %t, %address;
  mov.u32 %t, %tid.x;
  mov.u32 %address, fixed;
  st.shared.u32 [%address], %t;
  mov.u32 %address, dynamicBytes;
  st.shared.u32 [%address], %t;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "large");
  constexpr CUresult kInvalidValue = 1;
  constexpr int kMaxDynamicShared = 8;
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {1}, KernelArguments(), 32 * 1024));
  EXPECT_EQ(launch(kernel, {1}, {1}, KernelArguments(), 32 * 1024 + 16),
            kInvalidValue);
  EXPECT_EQ(driver->cuFuncSetAttribute(kernel, kMaxDynamicShared,
                                       232448 - 16384 + 16),
            kInvalidValue);
  EXPECT_EQ(driver->cuFuncSetAttribute(kernel, kMaxDynamicShared, 64 * 1024),
            kSuccess);
  EXPECT_TRUE(launchSucceeds(kernel, {1}, {1}, KernelArguments(), 64 * 1024));
  EXPECT_EQ(launch(kernel, {1}, {1}, KernelArguments(), 64 * 1024 + 16),
            kInvalidValue);
}

TEST_F(EmulatorError, UninitializedGlobalRead) {
  std::string ptx = std::string(kPtxHeader) + kIndexedAccessPtx;
  CUfunction kernel = getKernel(ptx, "indexed");
  // Only the first 40 words of the input were ever written.
  CUdeviceptr in = allocate(64 * 4);
  std::vector<uint32_t> written(40, 1);
  ASSERT_EQ(driver->cuMemcpyHtoD_v2(in, written.data(), 40 * 4), kSuccess);
  EXPECT_EQ(launch(kernel, {2}, {32}, KernelArguments(in, allocate(64 * 4))),
            kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "indexed", ptx, "ld.global.u32 %v, [%in];", "1, 0, 0",
                "8, 0, 0");
  EXPECT_THAT(report, HasSubstr("initcheck"));
  EXPECT_THAT(report, HasSubstr(hex(in + 160)));
}

TEST_F(EmulatorError, UninitializedSharedRead) {
  // Lane 5 reads the word of lane 6, which skipped its store.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry sharedUnwritten(.param .u64 out)
{
  .shared .align 4 .b32 words[32];
  .reg .pred %skip;
  .reg .b32 %t, %next, %base, %address, %v;
  .reg .b64 %out, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %base, words;
  mad.lo.u32 %address, %t, 4, %base;
  setp.eq.u32 %skip, %t, 6;
  @!%skip st.shared.u32 [%address], %t;
  bar.sync 0;
  add.u32 %next, %t, 1;
  and.b32 %next, %next, 31;
  mad.lo.u32 %address, %next, 4, %base;
  ld.shared.u32 %v, [%address];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 4;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %v;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "sharedUnwritten");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments(allocate(128))),
            kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "sharedUnwritten", ptx, "ld.shared.u32", "0, 0, 0",
                "5, 0, 0");
  EXPECT_THAT(report, HasSubstr("initcheck"));
  EXPECT_THAT(report, HasSubstr("byte 24"));
}

/// Warp 0 writes a word per lane, warp 1 reads them; BARRIER is replaced by
/// a bar.sync or by nothing.
std::string racePtx(bool withBarrier) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry race(.param .u64 out)
{
  .shared .align 4 .b32 words[32];
  .reg .pred %writer;
  .reg .b32 %t, %lane, %base, %address, %v;
  .reg .b64 %out, %offset;
  mov.u32 %t, %tid.x;
  and.b32 %lane, %t, 31;
  mov.u32 %base, words;
  mad.lo.u32 %address, %lane, 4, %base;
  setp.lt.u32 %writer, %t, 32;
  @%writer st.shared.u32 [%address], %t;
  BARRIER
  @%writer bra DONE;
  ld.shared.u32 %v, [%address];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %lane, 4;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %v;
DONE:
  ret;
}
)";
  ptx.replace(ptx.find("BARRIER"), 7, withBarrier ? "bar.sync 0;" : "");
  return ptx;
}

TEST_F(EmulatorError, SharedRaceBetweenWarps) {
  std::string ptx = racePtx(false);
  CUfunction kernel = getKernel(ptx, "race");
  EXPECT_EQ(launch(kernel, {1}, {64}, KernelArguments(allocate(128))),
            kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "race", ptx, "ld.shared.u32", "0, 0, 0", "32, 0, 0");
  EXPECT_THAT(report, HasSubstr("racecheck"));
  EXPECT_THAT(report, HasSubstr("read-after-write"));
  EXPECT_THAT(report, HasSubstr("between thread 32 and thread 0"));
}

TEST_F(EmulatorError, SharedExchangeWithBarrierPasses) {
  CUfunction kernel = getKernel(racePtx(true), "race");
  CUdeviceptr out = allocate(128);
  ASSERT_TRUE(launchSucceeds(kernel, {1}, {64}, KernelArguments(out)));
  std::vector<uint32_t> got = download<uint32_t>(out, 32);
  for (uint32_t lane = 0; lane < 32; ++lane)
    EXPECT_EQ(got[lane], lane);
}

TEST_F(EmulatorError, BarrierDeadlockAtAShuffle) {
  // Lane 0 waits at a full-warp shuffle for lanes that wait at bar.sync:
  // a GPU hangs.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry deadlock()
{
  .reg .pred %first;
  .reg .b32 %t, %r;
  mov.u32 %t, %tid.x;
  setp.eq.u32 %first, %t, 0;
  @!%first bra BARRIER;
  shfl.sync.idx.b32 %r, %t, 0, 31, -1;
BARRIER:
  bar.sync 0;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "deadlock");
  EXPECT_EQ(launch(kernel, {1}, {64}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "deadlock", ptx, "shfl.sync.idx.b32", "0, 0, 0",
                "0, 0, 0");
  EXPECT_THAT(report, HasSubstr("deadlock"));
  EXPECT_THAT(report, HasSubstr("bar.sync"));
}

TEST_F(EmulatorError, ShuffleMaskNamesAnExitedLane) {
  // Lanes 16-31 exit; lanes 0-15 shuffle across the halves with a full
  // member mask, reading lanes that are gone.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry exitedSource(.param .u64 out)
{
  .reg .pred %upper;
  .reg .b32 %t, %r;
  .reg .b64 %out, %offset;
  mov.u32 %t, %tid.x;
  setp.ge.u32 %upper, %t, 16;
  @%upper exit;
  shfl.sync.bfly.b32 %r, %t, 16, 31, 0xffffffff;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 4;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %r;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "exitedSource");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments(allocate(128))),
            kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "exitedSource", ptx, "shfl.sync.bfly.b32", "0, 0, 0",
                "0, 0, 0");
  EXPECT_THAT(report, HasSubstr("reads lane 16, which has exited"));
}

TEST_F(EmulatorError, Trap) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry trapping()
{
  .reg .pred %last;
  .reg .b32 %t;
  mov.u32 %t, %tid.x;
  setp.eq.u32 %last, %t, 31;
  @%last trap;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "trapping");
  EXPECT_EQ(launch(kernel, {1}, {32}, KernelArguments()), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  expectLocated(report, "trapping", ptx, "@%last trap", "0, 0, 0", "31, 0, 0");
  EXPECT_THAT(report, HasSubstr("trap"));
}

/// A kernel whose line 7 (of the module) is `instruction`.
std::string kernelWithLine(const std::string &instruction) {
  return std::string(kPtxHeader) +
         ".visible .entry broken()\n"
         "{\n"
         "  .reg .b32 %r<4>;\n" +
         "  " + instruction + "\n" + "  ret;\n}\n";
}

TEST_F(EmulatorError, UnknownOpcodeFailsToLoad) {
  LoadResult loaded = tryLoad(kernelWithLine("frobnicate.b32 %r1, %r2;"));
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("PTX line 7"));
  EXPECT_THAT(loaded.log, HasSubstr("frobnicate"));
}

TEST_F(EmulatorError, UnsupportedModifierFailsToLoad) {
  // Add with carry out: a modifier fdemu would otherwise ignore.
  LoadResult loaded = tryLoad(kernelWithLine("add.cc.u32 %r1, %r2, %r3;"));
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("PTX line 7"));
  EXPECT_THAT(loaded.log, HasSubstr("'.cc'"));
  // A form the executor cannot compute exactly.
  loaded = tryLoad(kernelWithLine("div.rz.f32 %r1, %r2, %r3;"));
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("PTX line 7"));
  EXPECT_THAT(loaded.log, HasSubstr("div.rz.f32"));
  EXPECT_THAT(loaded.log, HasSubstr("not implemented"));
}

/// A module for `version` and `target` whose line 7 is `instruction`.
std::string kernelForTarget(const std::string &version,
                            const std::string &target,
                            const std::string &instruction) {
  return ".version " + version + "\n.target " + target +
         "\n.address_size 64\n"
         ".visible .entry fp8()\n"
         "{\n"
         "  .reg .b16 %h; .reg .b32 %r<4>;\n"
         "  " +
         instruction + "\n  ret;\n}\n";
}

TEST_F(EmulatorError, Float8ConversionNeedsSm89AndItsPtxVersion) {
  // As ptxas 13.0 refuses it: before sm_89; on sm_89 before PTX ISA 8.1;
  // on sm_90 before 7.8. The emulated GPU (an H200) does not matter.
  for (const char *form :
       {"cvt.rn.f16x2.e4m3x2 %r1, %h;", "cvt.rn.relu.f16x2.e5m2x2 %r1, %h;"}) {
    LoadResult loaded = tryLoad(kernelForTarget("8.1", "sm_80", form));
    EXPECT_EQ(loaded.result, kInvalidPtx) << form;
    EXPECT_THAT(loaded.log, HasSubstr("PTX line 7"));
    EXPECT_THAT(loaded.log, HasSubstr("requires .target sm_89 or higher"));
    loaded = tryLoad(kernelForTarget("8.0", "sm_89", form));
    EXPECT_EQ(loaded.result, kInvalidPtx) << form;
    EXPECT_THAT(loaded.log, HasSubstr("requires PTX ISA .version 8.1"));
    loaded = tryLoad(kernelForTarget("7.7", "sm_90", form));
    EXPECT_EQ(loaded.result, kInvalidPtx) << form;
    EXPECT_THAT(loaded.log, HasSubstr("requires PTX ISA .version 7.8"));
    for (auto [version, target] :
         {std::pair{"8.1", "sm_89"}, std::pair{"7.8", "sm_90"},
          std::pair{"8.0", "sm_90a"}})
      EXPECT_EQ(tryLoad(kernelForTarget(version, target, form)).result,
                kSuccess)
          << form << " on " << target << ", PTX ISA " << version;
  }
}

TEST_F(EmulatorError, UnimplementedFloat8AndLop3FormsFailToLoad) {
  // fdemu runs cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} and lop3.b32 with an
  // immediate table; the rest of those families is refused, never guessed.
  for (const char *form :
       {"cvt.f16x2.e4m3x2 %r1, %h;", "cvt.rz.f16x2.e5m2x2 %r1, %h;",
        "cvt.rn.satfinite.e4m3x2.f32 %h, %r1, %r2;",
        "cvt.rn.relu.f16.f32 %h, %r1;", "lop3.b32 %r1, %r2, %r3, %r0, %r1;"}) {
    LoadResult loaded = tryLoad(kernelForTarget("8.1", "sm_90", form));
    EXPECT_EQ(loaded.result, kInvalidPtx) << form;
    EXPECT_THAT(loaded.log, HasSubstr("PTX line 7")) << form;
    EXPECT_THAT(loaded.log, HasSubstr("not implemented")) << form;
  }
  LoadResult loaded =
      tryLoad(kernelForTarget("8.1", "sm_90", "add.e4m3x2 %h, %h, %h;"));
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("'.e4m3x2'"));
}

TEST_F(EmulatorError, DeviceFunctionsFailToLoad) {
  std::string ptx = std::string(kPtxHeader) + ".func helper()\n{\n  ret;\n}\n";
  LoadResult loaded = tryLoad(ptx);
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("PTX line 4"));
  EXPECT_THAT(loaded.log, HasSubstr(".func"));
}

TEST_F(EmulatorError, CubinAndGarbageImagesFailToLoad) {
  std::string cubin("\x7f"
                    "ELF\x02\x01\x01\x33\0\0\0\0\0\0\0\0",
                    16);
  LoadResult loaded = tryLoad(cubin);
  EXPECT_EQ(loaded.result, kInvalidImage);
  EXPECT_THAT(loaded.log, HasSubstr("cubin"));
  loaded = tryLoad("this is not PTX at all\n");
  EXPECT_EQ(loaded.result, kInvalidPtx);
  EXPECT_THAT(loaded.log, HasSubstr("PTX line 1"));
  std::string bytes;
  for (int i = 0; i < 256; ++i)
    bytes += static_cast<char>(1 + random() % 255);
  EXPECT_NE(tryLoad(bytes).result, kSuccess);
}

TEST_F(EmulatorError, EveryTruncationFailsToLoadCleanly) {
  // Cut anywhere, a module is refused with a log (or, cut after its last
  // kernel, loads): never a crash or a hang.
  std::string ptx = std::string(kPtxHeader) + kIndexedAccessPtx;
  for (size_t length = 0; length < ptx.size(); ++length) {
    LoadResult loaded = tryLoad(ptx.substr(0, length));
    if (loaded.result != kSuccess) {
      EXPECT_EQ(loaded.result, kInvalidPtx) << "cut at " << length;
      EXPECT_THAT(loaded.log, HasSubstr("PTX")) << "cut at " << length;
    }
  }
}

} // namespace
