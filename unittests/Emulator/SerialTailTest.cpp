//===- SerialTailTest.cpp - Fences, global atomics and the serial tail ----===//
//
// What the latency model makes of the synchronization of a "last block
// merges" kernel: a memory fence (membar, fence) holds every later
// instruction of its warp back a global-load latency; a CTA's serial tail
// is its cycles after the issue of its last global atomic (atom or red on
// global memory, not on shared), 0 without one, and a launch's is the
// longest of its CTAs' (a max, where latencies add up); the performance
// model adds the tail to the kernel's time after the max of its other
// terms. Then the pattern itself on fdemu's thread pool: every CTA writes,
// counts with an acq_rel atomic, and the CTA that counts last reads every
// CTA's write.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include "fd/Emulator/PerformanceModel.h"

#include <algorithm>

using namespace flashdecode::emutest;
using flashdecode::emu::getGpuModel;
using flashdecode::emu::LatencyModel;

namespace {

class EmulatorSerialTail : public EmulatorTest {
protected:
  /// The model fdemu runs with (FDEMU_GPU, as libfdemu.so reads it).
  const LatencyModel &model = getGpuModel().latencyModel;
};

/// Two independent adds of one warp with `fence` (an instruction, or
/// nothing) between them, then `after` more independent adds.
std::string fencedKernel(const std::string &fence, int after = 0) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry fenced()
{
  .reg .b32 %t, %a, %b<8>;
  mov.u32 %t, %tid.x;
  add.u32 %a, %t, 1;
)" + fence + "\n  add.u32 %b0, %t, 2;\n";
  for (int i = 1; i <= after; ++i)
    ptx += "  add.u32 %b" + std::to_string(i) + ", %t, " +
           std::to_string(i + 2) + ";\n";
  return ptx + "  ret;\n}\n";
}

TEST_F(EmulatorSerialTail, AFenceHoldsTheNextInstructionBackAGlobalLoad) {
  auto cycles = [&](const std::string &fence, int after = 0) {
    CUfunction kernel = getKernel(fencedKernel(fence, after), "fenced");
    FdemuCounters counters =
        launchCounted(kernel, {1}, {32}, KernelArguments());
    EXPECT_EQ(counters.totalLatency.ctas, 1u);
    EXPECT_EQ(counters.totalLatency.serialTailCycles, 0u) << fence;
    return counters.totalLatency.latencyCycles;
  };
  // Without a fence: the adds at 0 and 1, ret at 2.
  uint64_t plain = cycles("");
  EXPECT_EQ(plain, 2u);
  for (const char *fence : {"  membar.gl;", "  fence.acq_rel.gpu;"}) {
    // The fence issues at 1 (after the first add: it is ordered like a
    // branch); the next add, independent of everything, a global-load
    // latency after it; ret the cycle after.
    EXPECT_EQ(cycles(fence), 1 + model.globalLoad + 1) << fence;
    EXPECT_EQ(cycles(fence) - plain, model.globalLoad) << fence;
    // Every later instruction waits for it, none more than once: three
    // more adds follow the first one cycle apart.
    EXPECT_EQ(cycles(fence, 3), 1 + model.globalLoad + 3 + 1) << fence;
  }
}

/// One warp counts on the u32 at `counter` with `atomic` (atom, whose
/// result is %x, or red); the CTA `longCta` then runs `chain` adds, each on
/// the previous one's result and the first on the atomic's; the others
/// exit. With `shared` the atomic's address is the CTA's shared word.
std::string tailKernel(const std::string &atomic, int chain, int longCta = 0,
                       bool shared = false) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry tail(.param .u64 counter)
{
  .shared .align 4 .b32 word;
  .reg .pred %p;
  .reg .b32 %c, %x, %s;
  .reg .b64 %a;
  ld.param.u64 %a, [counter];
  mov.u32 %c, %ctaid.x;
  setp.ne.u32 %p, %c, )" +
                    std::to_string(longCta) + ";\n";
  if (shared)
    ptx += "  mov.u32 %s, word;\n  st.shared.u32 [%s], 0;\n";
  ptx += "  " + atomic + ";\n  @%p bra DONE;\n";
  for (int i = 0; i < chain; ++i)
    ptx += "  add.u32 %x, %x, 1;\n";
  return ptx + "DONE:\n  ret;\n}\n";
}

TEST_F(EmulatorSerialTail, TheTailIsTheCyclesAfterTheLastGlobalAtomic) {
  constexpr int kChain = 50;
  CUdeviceptr counter = upload(std::vector<uint32_t>{0});
  CUfunction kernel =
      getKernel(tailKernel("atom.global.add.u32 %x, [%a], 1", kChain), "tail");
  FdemuCounters counters =
      launchCounted(kernel, {1}, {32}, KernelArguments(counter));
  // The parameter load issues at 0, the setp at 1; the atomic when its
  // address is ready (alu), the branch after the setp's result. The first
  // add waits for the atomic's result (a global load's latency after it),
  // each other add for the one before; ret issues the cycle after the
  // last.
  uint64_t atomicIssue = model.alu;
  uint64_t tail = model.globalLoad + (kChain - 1) * model.alu + 1;
  // The tail is not in the latency the SM's CTAs share: it runs after them.
  EXPECT_EQ(counters.totalLatency.latencyCycles, atomicIssue);
  EXPECT_EQ(counters.totalLatency.serialTailCycles, tail);
  EXPECT_EQ(counters.perSMLatency[0].serialTailCycles, tail);
  EXPECT_EQ(download<uint32_t>(counter, 1)[0], 32u);

  // red has no result to wait for: the tail is the branch and ret.
  kernel = getKernel(tailKernel("red.global.add.u32 [%a], 1", 0), "tail");
  counters = launchCounted(kernel, {1}, {32}, KernelArguments(counter));
  EXPECT_EQ(counters.totalLatency.latencyCycles, atomicIssue);
  EXPECT_EQ(counters.totalLatency.serialTailCycles, 2u);
  EXPECT_EQ(download<uint32_t>(counter, 1)[0], 64u);
}

TEST_F(EmulatorSerialTail, NoGlobalAtomicNoTail) {
  CUdeviceptr counter = upload(std::vector<uint32_t>{0});
  // The same chain after a global store, and after an atomic on shared
  // memory: no tail, whatever follows.
  const std::pair<const char *, bool> kernels[] = {
      {"st.global.u32 [%a], %c", false},
      {"atom.shared.add.u32 %x, [%s], 1", true}};
  for (auto [instruction, shared] : kernels) {
    CUfunction kernel =
        getKernel(tailKernel(instruction, 50, 0, shared), "tail");
    FdemuCounters counters =
        launchCounted(kernel, {1}, {32}, KernelArguments(counter));
    EXPECT_GT(counters.totalLatency.latencyCycles, 50u * model.alu)
        << instruction;
    EXPECT_EQ(counters.totalLatency.serialTailCycles, 0u) << instruction;
  }
}

TEST_F(EmulatorSerialTail, ALaunchsTailIsTheLongestOfItsCtas) {
  constexpr int kChain = 50;
  constexpr unsigned kCtas = 4;
  CUdeviceptr counter = upload(std::vector<uint32_t>{0});
  // CTA 1 runs the chain after the atomic; CTAs 0, 2 and 3 exit after it
  // (the branch and ret: a tail of 2).
  CUfunction kernel = getKernel(
      tailKernel("atom.global.add.u32 %x, [%a], 1", kChain, 1), "tail");
  FdemuCounters counters =
      launchCounted(kernel, {kCtas}, {32}, KernelArguments(counter));
  ASSERT_GE(counters.numSMs, kCtas);
  uint64_t atomicIssue = model.alu;
  uint64_t longTail = model.globalLoad + (kChain - 1) * model.alu + 1;
  uint64_t shortTail = 2;
  EXPECT_EQ(counters.totalLatency.ctas, kCtas);
  // Latencies (without the tails) add up over the CTAs; tails do not.
  EXPECT_EQ(counters.totalLatency.latencyCycles, kCtas * atomicIssue);
  EXPECT_EQ(counters.totalLatency.serialTailCycles, longTail);
  // CTA i runs on SM i.
  for (unsigned cta = 0; cta < kCtas; ++cta)
    EXPECT_EQ(counters.perSMLatency[cta].serialTailCycles,
              cta == 1 ? longTail : shortTail)
        << "CTA " << cta;
  EXPECT_EQ(download<uint32_t>(counter, 1)[0], kCtas * 32);
}

/// One SM running one CTA of `latencyCycles`, four resident at most.
flashdecode::emu::LaunchCounters oneCtaCounters(uint64_t latencyCycles) {
  flashdecode::emu::LaunchCounters counters;
  counters.perSM.resize(1);
  counters.perSM[0].ctas = 1;
  counters.perSM[0].latencyCycles = latencyCycles;
  counters.residentCtasPerSM = 4;
  return counters;
}

TEST(EmulatorSerialTailTerm, TheTailIsAddedAfterTheOtherTerms) {
  const flashdecode::emu::GpuModel &gpu =
      *flashdecode::emu::findGpuModel("h200");
  double cycleMicroseconds = 1 / (gpu.clockGHz * 1e3);
  flashdecode::emu::LaunchCounters counters = oneCtaCounters(1'000'000);
  flashdecode::emu::ModeledTime before =
      flashdecode::emu::modelLaunch(counters, gpu);
  EXPECT_EQ(before.bound, "latency");
  EXPECT_DOUBLE_EQ(before.microseconds, 1e6 * cycleMicroseconds);

  constexpr uint64_t kTail = 396'000; // 200 us at 1.98 GHz
  counters.perSM[0].serialTailCycles = kTail;
  counters.total.serialTailCycles = kTail;
  flashdecode::emu::ModeledTime time =
      flashdecode::emu::modelLaunch(counters, gpu);
  // The bound is still the term that set the time before the tail.
  EXPECT_EQ(time.bound, "latency");
  EXPECT_DOUBLE_EQ(time.microseconds,
                   before.microseconds + kTail / (gpu.clockGHz * 1e3));
  EXPECT_NEAR(time.microseconds - before.microseconds, 200.0, 1e-9);

  // DRAM-bound: DRAM's time, then the tail.
  counters.dramLoadSectors = 1'000'000'000; // 32 GB
  time = flashdecode::emu::modelLaunch(counters, gpu);
  EXPECT_EQ(time.bound, "dram");
  EXPECT_DOUBLE_EQ(time.microseconds, 32e9 / gpu.dramBytesPerSecond * 1e6 +
                                          kTail / (gpu.clockGHz * 1e3));
}

TEST(EmulatorSerialTailTerm, TheTailsWorkIsChargedToTheTailOnce) {
  const flashdecode::emu::GpuModel &gpu =
      *flashdecode::emu::findGpuModel("h200");
  double cycleMicroseconds = 1 / (gpu.clockGHz * 1e3);
  flashdecode::emu::LaunchCounters counters = oneCtaCounters(1'000);
  // 10M sectors on the SM, 8M of them after its CTA's last global atomic:
  // the SM's bandwidth term takes the 2M before, the tail the 8M after (at
  // the SM's bandwidth, longer than its 1,000 cycles of latencies).
  constexpr uint64_t kSectors = 10'000'000, kTailSectors = 8'000'000;
  counters.perSM[0].globalLoadSectors = kSectors;
  counters.perSM[0].serialTail.globalLoadSectors = kTailSectors;
  counters.perSM[0].serialTailCycles = 1'000;
  counters.total = counters.perSM[0];
  flashdecode::emu::ModeledTime time =
      flashdecode::emu::modelLaunch(counters, gpu);
  EXPECT_EQ(time.bound, "sm-bandwidth");
  double before = 32.0 * (kSectors - kTailSectors) / gpu.smBytesPerClock;
  double tail = 32.0 * kTailSectors / gpu.smBytesPerClock;
  EXPECT_DOUBLE_EQ(time.microseconds, (before + tail) * cycleMicroseconds);
  // A tail whose latencies take longer than its sectors: its cycles.
  counters.perSM[0].serialTailCycles = counters.total.serialTailCycles =
      100'000'000;
  time = flashdecode::emu::modelLaunch(counters, gpu);
  EXPECT_DOUBLE_EQ(time.microseconds, (before + 1e8) * cycleMicroseconds);
}

/// Thread 0 of each CTA writes base + blockIdx to out[blockIdx], then
/// counts the CTA on `counter` (acq_rel at GPU scope); the CTA that counts
/// last (sees nctaid - 1) sums out[0, nctaid) into `result` and sets the
/// counter back to 0.
constexpr const char *kLastBlockKernel = R"(
.visible .entry lastBlock(.param .u64 out, .param .u64 counter,
                          .param .u64 result, .param .u32 base)
{
  .reg .pred %p;
  .reg .b32 %t, %c, %n, %v, %old, %last, %i, %sum;
  .reg .b64 %out, %counter, %result, %address, %offset;
  mov.u32 %t, %tid.x;
  setp.ne.u32 %p, %t, 0;
  @%p bra DONE;
  ld.param.u64 %out, [out];
  ld.param.u64 %counter, [counter];
  ld.param.u64 %result, [result];
  ld.param.u32 %v, [base];
  mov.u32 %c, %ctaid.x;
  mov.u32 %n, %nctaid.x;
  add.u32 %v, %v, %c;
  mul.wide.u32 %offset, %c, 4;
  add.s64 %address, %out, %offset;
  st.global.u32 [%address], %v;
  atom.acq_rel.gpu.global.add.u32 %old, [%counter], 1;
  sub.u32 %last, %n, 1;
  setp.ne.u32 %p, %old, %last;
  @%p bra DONE;
  mov.u32 %sum, 0;
  mov.u32 %i, 0;
  mov.u64 %address, %out;
LOOP:
  ld.global.u32 %v, [%address];
  add.u32 %sum, %sum, %v;
  add.s64 %address, %address, 4;
  add.u32 %i, %i, 1;
  setp.lt.u32 %p, %i, %n;
  @%p bra LOOP;
  st.global.u32 [%result], %sum;
  st.global.u32 [%counter], 0;
DONE:
  ret;
}
)";

TEST_F(EmulatorSerialTail, TheLastBlockSeesEveryBlocksWrite) {
  constexpr uint32_t kCtas = 64;
  CUfunction kernel =
      getKernel(std::string(kPtxHeader) + kLastBlockKernel, "lastBlock");
  CUdeviceptr out = allocate(kCtas * 4);
  CUdeviceptr counter = upload(std::vector<uint32_t>{0});
  CUdeviceptr result = upload(std::vector<uint32_t>{0});
  for (uint32_t launch = 0; launch < 5; ++launch) {
    // A base of its own per launch: a read of an earlier launch's write
    // gives a wrong sum.
    uint32_t base = 1000 * (launch + 1);
    FdemuCounters counters = launchCounted(
        kernel, {kCtas}, {64}, KernelArguments(out, counter, result, base));
    EXPECT_EQ(download<uint32_t>(result, 1)[0],
              kCtas * base + kCtas * (kCtas - 1) / 2)
        << "launch " << launch;
    EXPECT_EQ(download<uint32_t>(counter, 1)[0], 0u) << "launch " << launch;
    // The last CTA waited for the atomic's result, then for each of the
    // loop's loads before the next: at least the atomic's and kCtas loads'
    // latencies after the atomic, the first word of each sector from DRAM,
    // the other seven rereads (L2 hits). The others only waited for the
    // result (CTA i runs on SM i). The launch's tail is the last CTA's.
    ASSERT_GE(counters.numSMs, kCtas);
    uint64_t hit = model.l2Hit ? model.l2Hit : model.globalLoad;
    uint64_t lastTail = (1 + kCtas / 8) * uint64_t(model.globalLoad) +
                        (kCtas - kCtas / 8) * hit;
    unsigned longTails = 0;
    uint64_t longest = 0;
    for (uint32_t cta = 0; cta < kCtas; ++cta) {
      uint64_t tail = counters.perSMLatency[cta].serialTailCycles;
      EXPECT_GT(tail, model.globalLoad) << "CTA " << cta;
      longTails += tail >= lastTail;
      EXPECT_TRUE(tail >= lastTail || tail < 2 * model.globalLoad)
          << "CTA " << cta << ": a tail of " << tail;
      longest = std::max(longest, tail);
    }
    EXPECT_EQ(longTails, 1u) << "launch " << launch;
    EXPECT_EQ(counters.totalLatency.serialTailCycles, longest)
        << "launch " << launch;
    // The last CTA's tail loads every block's word (a sector each: one
    // lane) and stores the sum and the counter's reset, six instructions a
    // word; the others' tails touch nothing. The tail's work is what runs
    // after the atomic in fdemu's order, where warps take turns between
    // barriers: warp 1 (no thread 0: it only exits, 4 instructions) runs
    // after warp 0's atomic and counts, beside warp 0's 4 (sub, setp,
    // branch, ret).
    const FdemuClassCounts &launchTail = counters.totalLatency.serialTail;
    EXPECT_EQ(launchTail.globalLoadSectors, kCtas) << "launch " << launch;
    EXPECT_EQ(launchTail.globalStoreSectors, 2u) << "launch " << launch;
    for (uint32_t cta = 0; cta < kCtas; ++cta) {
      const FdemuLatencyCounts &sm = counters.perSMLatency[cta];
      bool last = sm.serialTailCycles == longest;
      EXPECT_EQ(sm.serialTail.globalLoadSectors +
                    sm.serialTail.globalStoreSectors,
                last ? kCtas + 2 : 0u)
          << "CTA " << cta;
      uint64_t instructions = 0;
      for (uint64_t count : sm.serialTail.warpInstructions)
        instructions += count;
      if (last)
        EXPECT_GT(instructions, 6u * kCtas) << "CTA " << cta;
      else
        EXPECT_EQ(instructions, 8u) << "CTA " << cta;
    }
  }
}

} // namespace
