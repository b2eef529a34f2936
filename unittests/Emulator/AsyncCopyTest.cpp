//===- AsyncCopyTest.cpp - fdemu's cp.async and its groups ----------------===//
//
// A copy lands only when a wait of its thread covers its group: each test
// reads the destination before the wait (the old bytes) and after it (the
// copied ones), for every copy size, both cache modes and the ::cta
// spelling; wait_group 1 completes the older of two groups only, wait_all
// the open group too; src-size zero-fills the rest and a src-size of 0
// reads nothing. A thread that exits before waiting leaves the destination
// as it was. The faults (misaligned and out-of-bounds source, destination
// outside shared memory) and the race of a copy in flight across bar.sync
// are in EmulatorErrorTest.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

using namespace flashdecode::emutest;

namespace {

constexpr unsigned kLanes = 32;

/// A kernel of one warp: %t is the thread, %source points at
/// source + 16 t, %slot at the thread's first 16 of 64 bytes of shared
/// memory, %out at out + 64 t; `body` follows.
std::string copyKernel(const std::string &body) {
  return std::string(kPtxHeader) + R"(
.visible .entry copies(.param .u64 source, .param .u64 out,
                       .param .u32 sourceSize)
{
  .shared .align 16 .b8 smem[2048];
  .reg .b32 %t, %slot, %size, %x<4>;
  .reg .b64 %source, %out, %offset;
  mov.u32 %t, %tid.x;
  ld.param.u64 %source, [source];
  cvta.to.global.u64 %source, %source;
  mul.wide.u32 %offset, %t, 16;
  add.s64 %source, %source, %offset;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 64;
  add.s64 %out, %out, %offset;
  ld.param.u32 %size, [sourceSize];
  mov.u32 %slot, smem;
  mad.lo.u32 %slot, %t, 64, %slot;
  mov.b32 %x0, -1;
  st.shared.v4.b32 [%slot], {%x0, %x0, %x0, %x0};
  st.shared.v4.b32 [%slot+16], {%x0, %x0, %x0, %x0};
)" + body +
         R"(
  ret;
}
)";
}

/// Stores the 16 shared bytes at [%slot + `from`] to [%out + `to`].
std::string save(unsigned from, unsigned to) {
  return "  ld.shared.v4.b32 {%x0, %x1, %x2, %x3}, [%slot+" +
         std::to_string(from) + "];\n  st.global.v4.b32 [%out+" +
         std::to_string(to) + "], {%x0, %x1, %x2, %x3};\n";
}

class EmulatorAsyncCopy : public EmulatorTest {
protected:
  /// Runs `body` with 16 random source bytes per thread; returns the 64
  /// bytes each thread saved, and the source in `source`.
  std::vector<uint8_t> run(const std::string &body,
                           std::vector<uint8_t> &source,
                           uint32_t sourceSize = 16) {
    source.resize(kLanes * 16);
    for (uint8_t &byte : source)
      byte = static_cast<uint8_t>(random());
    CUfunction kernel = getKernel(copyKernel(body), "copies");
    CUdeviceptr out = upload(std::vector<uint8_t>(kLanes * 64, 0));
    EXPECT_TRUE(
        launchSucceeds(kernel, {1}, {kLanes},
                       KernelArguments(upload(source), out, sourceSize)));
    return download<uint8_t>(out, kLanes * 64);
  }

  /// Expects `bytes` of thread t's save at `at` to be the source's first
  /// `copied` bytes, zeros up to `size`, then the old 0xff.
  void expectSaved(const std::vector<uint8_t> &saved,
                   const std::vector<uint8_t> &source, unsigned at,
                   unsigned copied, unsigned size, const char *what) {
    for (unsigned t = 0; t < kLanes; ++t)
      for (unsigned i = 0; i < 16; ++i) {
        uint8_t expected = i < copied ? source[16 * t + i]
                           : i < size ? 0
                                      : 0xff;
        ASSERT_EQ(saved[64 * t + at + i], expected)
            << what << ": thread " << t << ", byte " << i;
      }
  }
};

TEST_F(EmulatorAsyncCopy, DataLandsAtTheWaitNotBefore) {
  const char *forms[] = {"ca.shared.global", "cg.shared.global",
                         "ca.shared::cta.global", "cg.shared.global.L2::128B"};
  for (const char *form : forms)
    for (unsigned size : {4u, 8u, 16u}) {
      if (std::string(form).substr(0, 2) == "cg" && size != 16)
        continue;
      SCOPED_TRACE(std::string(form) + ", " + std::to_string(size));
      std::vector<uint8_t> source;
      std::vector<uint8_t> saved =
          run("  cp.async." + std::string(form) + " [%slot], [%source], " +
                  std::to_string(size) + ";\n  cp.async.commit_group;\n" +
                  save(0, 0) + "  cp.async.wait_group 0;\n" + save(0, 16),
              source);
      expectSaved(saved, source, 0, 0, 0, "before the wait");
      expectSaved(saved, source, 16, size, size, "after the wait");
    }
}

TEST_F(EmulatorAsyncCopy, WaitGroupOneCompletesOnlyTheOlderGroup) {
  std::vector<uint8_t> source;
  std::vector<uint8_t> saved =
      run("  cp.async.cg.shared.global [%slot], [%source], 16;\n"
          "  cp.async.commit_group;\n"
          "  cp.async.cg.shared.global [%slot+16], [%source], 16;\n"
          "  cp.async.commit_group;\n"
          "  cp.async.wait_group 1;\n" +
              save(0, 0) + save(16, 16) + "  cp.async.wait_group 0;\n" +
              save(16, 32),
          source);
  expectSaved(saved, source, 0, 16, 16, "older group after wait_group 1");
  expectSaved(saved, source, 16, 0, 0, "newer group after wait_group 1");
  expectSaved(saved, source, 32, 16, 16, "newer group after wait_group 0");
}

TEST_F(EmulatorAsyncCopy, WaitGroupLeavesTheOpenGroupWaitAllDoesNot) {
  std::vector<uint8_t> source;
  std::vector<uint8_t> saved =
      run("  cp.async.ca.shared.global [%slot], [%source], 16;\n"
          "  cp.async.wait_group 0;\n" +
              save(0, 0) + "  cp.async.wait_all;\n" + save(0, 16),
          source);
  expectSaved(saved, source, 0, 0, 0, "uncommitted after wait_group 0");
  expectSaved(saved, source, 16, 16, 16, "after wait_all");
}

TEST_F(EmulatorAsyncCopy, SourceSizeZeroFillsTheRest) {
  for (uint32_t sourceSize : {0u, 5u, 16u}) {
    SCOPED_TRACE(sourceSize);
    std::vector<uint8_t> source;
    std::vector<uint8_t> saved =
        run("  cp.async.cg.shared.global [%slot], [%source], 16, %size;\n"
            "  cp.async.wait_all;\n" +
                save(0, 0),
            source, sourceSize);
    expectSaved(saved, source, 0, sourceSize, 16, "after the wait");
  }
  // With src-size 0 the source is not read: past every allocation is fine.
  std::vector<uint8_t> source;
  std::vector<uint8_t> saved =
      run("  add.s64 %source, %source, 4096;\n"
          "  cp.async.cg.shared.global [%slot], [%source], 16, 0;\n"
          "  cp.async.wait_all;\n" +
              save(0, 0),
          source);
  expectSaved(saved, source, 0, 0, 16, "src-size 0 past the allocation");
}

TEST_F(EmulatorAsyncCopy, CopiesOfAThreadThatExitsNeverLand) {
  // Odd threads copy into their even neighbour's slot and exit; after
  // bar.sync the even ones find their slot as it was.
  std::vector<uint8_t> source;
  std::vector<uint8_t> saved =
      run("  .reg .pred %odd;\n  .reg .b32 %bit;\n"
          "  and.b32 %bit, %t, 1;\n  setp.ne.u32 %odd, %bit, 0;\n"
          "  @%odd cp.async.cg.shared.global [%slot+-64], [%source], 16;\n"
          "  @%odd cp.async.commit_group;\n  @%odd exit;\n"
          "  bar.sync 0;\n" +
              save(0, 0),
          source);
  for (unsigned t = 0; t < kLanes; t += 2)
    for (unsigned i = 0; i < 16; ++i)
      ASSERT_EQ(saved[64 * t + i], 0xff) << "thread " << t << ", byte " << i;
}

TEST_F(EmulatorAsyncCopy, CountedAsGlobalLoadsThatTheWaitUses) {
  CUfunction kernel = getKernel(
      copyKernel("  cp.async.cg.shared.global [%slot], [%source], 16;\n"
                 "  cp.async.commit_group;\n  cp.async.wait_group 0;\n" +
                 save(0, 0)),
      "copies");
  std::vector<uint8_t> source(kLanes * 16, 1);
  FdemuCounters counters = launchCounted(
      kernel, {1}, {kLanes},
      KernelArguments(upload(source), allocate(kLanes * 64), 16u));
  constexpr int kGlobalLoad = 5, kBarrier = 9;
  // The copy is the kernel's only global load: 512 bytes in 16 sectors;
  // commit_group and wait_group are its barriers.
  EXPECT_EQ(counters.total.warpInstructions[kGlobalLoad], 1u);
  EXPECT_EQ(counters.globalLoadBytes, kLanes * 16u);
  EXPECT_EQ(counters.total.globalLoadSectors, kLanes * 16u / 32);
  EXPECT_EQ(counters.dramLoadSectors, kLanes * 16u / 32);
  EXPECT_EQ(counters.total.warpInstructions[kBarrier], 2u);
}

} // namespace
