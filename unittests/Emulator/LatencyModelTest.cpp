//===- LatencyModelTest.cpp - fdemu's latency model and residency ---------===//
//
// The warp timelines behind the performance model's latency term, on
// generated kernels run through libfdemu.so: a dependent chain takes a
// latency per instruction where independent instructions take a cycle; a
// pointer chase pays the load latency per load where independent loads
// overlap, a CTA's rereads an L2 hit's, and a warp keeps at most its bytes
// of loads in flight; a load's latency is hidden by independent work up to
// the load lead, and an instruction waiting for it holds back only the
// instructions a window later; divergent paths issue one after the other;
// bar.sync releases every warp after the last arrival; fp8 conversions count
// and wait as conversions; an mma's accumulators are ready a tensor-core
// latency after it, a cp.async's data at the wait a global load's latency after
// the copy. Then the residency limits (a pure function), ptxas's register count
// as the driver reports it, and the latency term of the model;
// FDEMU_TRACE_CTA's trace of one CTA.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include "fd/Emulator/PerformanceModel.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

using namespace flashdecode::emutest;
using flashdecode::emu::getGpuModel;
using flashdecode::emu::getResidentCtasPerSM;
using flashdecode::emu::LatencyModel;
using flashdecode::emu::SmResources;

namespace {

constexpr int kNumRegsAttribute = 4; // CU_FUNC_ATTRIBUTE_NUM_REGS

class EmulatorLatency : public EmulatorTest {
protected:
  /// The model fdemu runs with (FDEMU_GPU, as libfdemu.so reads it).
  const LatencyModel &model = getGpuModel().latencyModel;

  /// The latency of one CTA of `threads` threads running `ptx`'s `name`.
  uint64_t ctaCycles(const std::string &ptx, const char *name,
                     KernelArguments arguments, unsigned threads = 32) {
    CUfunction kernel = getKernel(ptx, name);
    FdemuCounters counters =
        launchCounted(kernel, {1}, {threads}, std::move(arguments));
    EXPECT_EQ(counters.totalLatency.ctas, 1u);
    return counters.totalLatency.latencyCycles;
  }
};

/// `count` f32 fmas: each reads the previous one's result (`dependent`) or
/// only %f0.
std::string fmaKernel(int count, bool dependent) {
  std::string ptx =
      std::string(kPtxHeader) + ".visible .entry fmas()\n{\n  .reg .f32 %f<" +
      std::to_string(count + 1) + ">;\n  mov.f32 %f0, 0f3F800000;\n";
  for (int i = 1; i <= count; ++i) {
    std::string source = "%f" + std::to_string(dependent ? i - 1 : 0);
    ptx += "  fma.rn.f32 %f" + std::to_string(i) + ", " + source + ", " +
           source + ", " + source + ";\n";
  }
  return ptx + "  ret;\n}\n";
}

TEST_F(EmulatorLatency, DependentChainTakesTheLatencyPerInstruction) {
  // 64 more instructions: 64 latencies more in a chain, 64 cycles more
  // when independent (one issue per cycle).
  uint64_t chain = ctaCycles(fmaKernel(64, true), "fmas", KernelArguments());
  uint64_t longerChain =
      ctaCycles(fmaKernel(128, true), "fmas", KernelArguments());
  uint64_t independent =
      ctaCycles(fmaKernel(64, false), "fmas", KernelArguments());
  uint64_t moreIndependent =
      ctaCycles(fmaKernel(128, false), "fmas", KernelArguments());
  EXPECT_EQ(longerChain - chain, 64u * model.alu);
  EXPECT_EQ(moreIndependent - independent, 64u);
  // The first fma issues at cycle 0, the last at 63 latencies later; ret
  // one cycle after it.
  EXPECT_EQ(chain, 63u * model.alu + 1);
  EXPECT_EQ(independent, 64u);
}

TEST_F(EmulatorLatency, Float8ConversionsAreConversions) {
  // A chain of fp8 -> f16x2 conversions (the movs between them are
  // renames): each is a conversion-class instruction with a conversion's
  // latency, as cvt between f32 and f16 is.
  std::string ptx = std::string(kPtxHeader) +
                    ".visible .entry fp8()\n{\n  .reg .b16 %h<2>;\n"
                    "  .reg .b32 %r;\n  mov.b16 %h0, 0x3838;\n";
  for (int i = 0; i < 16; ++i)
    ptx += std::string("  cvt.rn.") + (i % 2 ? "relu." : "") + "f16x2." +
           (i % 4 < 2 ? "e4m3x2" : "e5m2x2") +
           " %r, %h0;\n  mov.b32 {%h0, %h1}, %r;\n";
  ptx += "  add.u32 %r, %r, 1;\n  ret;\n}\n";
  CUfunction kernel = getKernel(ptx, "fp8");
  FdemuCounters counters = launchCounted(kernel, {1}, {32}, KernelArguments());
  constexpr int kConversion = 2;
  EXPECT_EQ(counters.total.warpInstructions[kConversion], 16u);
  // The first conversion issues at 0, each of the others and the add a
  // conversion latency after the one before; ret the cycle after the add.
  EXPECT_EQ(counters.totalLatency.latencyCycles, 16u * model.conversion + 1);
}

TEST_F(EmulatorLatency, TraceWritesOneCtasIssueCycles) {
  // FDEMU_TRACE_CTA=1: CTA 1 of a launch of two writes a line per
  // instruction its two warps issue, with the cycle the chain above gives
  // it; CTA 0 writes none.
  CUfunction kernel = getKernel(fmaKernel(4, true), "fmas");
  std::fflush(stderr);
  int savedStderr = dup(2);
  std::FILE *captured = std::tmpfile();
  ASSERT_NE(captured, nullptr);
  dup2(fileno(captured), 2);
  setenv("FDEMU_TRACE_CTA", "1", 1);
  launchCounted(kernel, {2}, {64}, KernelArguments());
  unsetenv("FDEMU_TRACE_CTA");
  std::fflush(stderr);
  dup2(savedStderr, 2);
  close(savedStderr);
  std::rewind(captured);
  char line[512];
  std::vector<std::string> lines;
  while (std::fgets(line, sizeof(line), captured))
    lines.push_back(line);
  std::fclose(captured);
  // mov, four fmas and ret per warp.
  ASSERT_EQ(lines.size(), 12u);
  std::vector<uint64_t> fmaCycles[2];
  for (const std::string &text : lines) {
    unsigned long long cta, warp, cycle, wavefronts;
    unsigned ptxLine;
    char instruction[256];
    ASSERT_EQ(std::sscanf(text.c_str(),
                          "fdemu trace: fmas cta %llu warp %llu cycle %llu "
                          "line %u: %255[^\n]",
                          &cta, &warp, &cycle, &ptxLine, instruction),
              5)
        << text;
    EXPECT_EQ(cta, 1u) << text;
    ASSERT_LT(warp, 2u) << text;
    std::string rest = instruction;
    ASSERT_EQ(std::sscanf(rest.substr(rest.rfind(" wavefronts ")).c_str(),
                          " wavefronts %llu", &wavefronts),
              1)
        << text;
    EXPECT_EQ(wavefronts, 0u) << text;
    if (rest.rfind("fma.rn.f32", 0) == 0)
      fmaCycles[warp].push_back(cycle);
  }
  for (const std::vector<uint64_t> &cycles : fmaCycles)
    EXPECT_EQ(cycles, (std::vector<uint64_t>{0, model.alu, 2 * model.alu,
                                             3 * model.alu}));
}

/// Eight loads of 8-byte words from [in]: each address the previous load's
/// value (`chase`), or in + 8 * i.
std::string loadKernel(bool chase) {
  std::string ptx = std::string(kPtxHeader) +
                    ".visible .entry loads(.param .u64 in)\n{\n"
                    "  .reg .b64 %a<10>;\n  ld.param.u64 %a0, [in];\n";
  for (int i = 1; i <= 8; ++i)
    ptx += "  ld.global.u64 %a" + std::to_string(i) + ", [%a" +
           (chase ? std::to_string(i - 1) + "]"
                  : "0+" + std::to_string(8 * (i - 1)) + "]") +
           ";\n";
  ptx += "  add.s64 %a9, %a8, %a1;\n";
  return ptx + "  ret;\n}\n";
}

TEST_F(EmulatorLatency, LoadsInFlightOverlapAndAChasePaysEachLatency) {
  // words[i] holds the address of words[i + 1].
  CUdeviceptr words = allocate(9 * 8);
  std::vector<uint64_t> next(9);
  for (int i = 0; i < 9; ++i)
    next[i] = words + 8 * (i + 1);
  ASSERT_EQ(driver->cuMemcpyHtoD_v2(words, next.data(), 9 * 8), kSuccess);
  uint64_t chase = ctaCycles(loadKernel(true), "loads", KernelArguments(words));
  uint64_t overlapped =
      ctaCycles(loadKernel(false), "loads", KernelArguments(words));
  // The parameter is ready after an ALU latency; then eight loads one
  // after another, or issued on consecutive cycles; the add, then ret. The
  // eight words are two sectors: the first load of each comes from DRAM,
  // the other three of each read what the CTA loaded before (an L2 hit).
  unsigned hit = model.l2Hit ? model.l2Hit : model.globalLoad;
  EXPECT_EQ(chase, model.alu + 2u * model.globalLoad + 6u * hit + 1);
  if (model.warpBytesInFlight == 0 || model.warpBytesInFlight >= 8 * 32) {
    EXPECT_EQ(overlapped,
              std::max(model.alu + 7 + hit, model.alu + model.globalLoad) + 1);
  }
}

TEST_F(EmulatorLatency, AWarpKeepsAtMostItsBytesInFlight) {
  // The eight independent loads fetch a sector each. Under a cap of C
  // sectors (warpBytesInFlight; ctest runs this also with FDEMU_MODEL=
  // warp_bytes_in_flight=64, two sectors) load k waits for load k - C to
  // complete; without one (or C >= 8) they issue on consecutive cycles.
  // Loads 0 and 4 start a sector (DRAM); the others reread it (L2 hits,
  // done sooner).
  CUdeviceptr words = upload(std::vector<uint64_t>(9, 0));
  uint64_t cycles =
      ctaCycles(loadKernel(false), "loads", KernelArguments(words));
  uint64_t cap = (model.warpBytesInFlight + 31) / 32;
  unsigned hit = model.l2Hit ? model.l2Hit : model.globalLoad;
  std::vector<uint64_t> done;
  uint64_t issue = 0;
  for (uint64_t k = 0; k < 8; ++k) {
    issue = k ? issue + 1 : model.alu;
    auto pending = [&] {
      return std::count_if(done.begin(), done.end(),
                           [&](uint64_t end) { return end > issue; });
    };
    while (cap && static_cast<uint64_t>(pending()) >= cap) {
      uint64_t next = ~uint64_t(0);
      for (uint64_t end : done)
        if (end > issue)
          next = std::min(next, end);
      issue = next;
    }
    done.push_back(issue + (k % 4 ? hit : model.globalLoad));
  }
  // The add reads load 7's and load 0's results.
  EXPECT_EQ(cycles, std::max(done[7], done[0]) + 1)
      << "warpBytesInFlight " << model.warpBytesInFlight;
  if (cap == 2) {
    EXPECT_GT(cycles, model.alu + 7 + 2u * model.globalLoad + 1);
  }
}

/// A load, `filler` independent adds and the load's use, after the adds or
/// (`useFirst`) before them.
std::string hiddenLoadKernel(int filler, bool useFirst = false) {
  std::string use = "  add.s64 %use, %v, 1;\n";
  std::string ptx = std::string(kPtxHeader) +
                    ".visible .entry hidden(.param .u64 in)\n{\n"
                    "  .reg .b64 %a, %v, %use, %f<" +
                    std::to_string(filler + 1) +
                    ">;\n  ld.param.u64 %a, [in];\n  ld.global.u64 %v, [%a];\n";
  if (useFirst)
    ptx += use;
  for (int i = 1; i <= filler; ++i)
    ptx += "  add.s64 %f" + std::to_string(i) + ", %a, " + std::to_string(i) +
           ";\n";
  return ptx + (useFirst ? "" : use) + "  ret;\n}\n";
}

TEST_F(EmulatorLatency, IndependentWorkHidesALoadUpToTheLoadLead) {
  CUdeviceptr word = upload(std::vector<uint64_t>{7});
  // The load issues when the parameter is ready (alu); the fillers follow
  // one per cycle; ret issues a cycle after the use. With fewer fillers
  // than the lead, the use waits for the load: the fillers are free.
  for (int filler : {1, 16}) {
    if (filler >= static_cast<int>(model.loadLead))
      continue;
    EXPECT_EQ(
        ctaCycles(hiddenLoadKernel(filler), "hidden", KernelArguments(word)),
        model.alu + model.globalLoad + 1)
        << filler << " fillers";
  }
  // With more, the load counts as issued with the filler `loadLead` before
  // the use: every filler before that one adds a cycle.
  int filler = static_cast<int>(model.loadLead) + 500;
  EXPECT_EQ(
      ctaCycles(hiddenLoadKernel(filler), "hidden", KernelArguments(word)),
      model.alu + (filler - model.loadLead + 1) + model.globalLoad + 1);
}

/// Lanes below `split` run one block of 100 independent adds, the others
/// another.
std::string branchKernel(int split) {
  std::string adds;
  for (int i = 1; i <= 100; ++i)
    adds += "  add.s32 %r" + std::to_string(i) + ", %t, " + std::to_string(i) +
            ";\n";
  return std::string(kPtxHeader) + R"(
.visible .entry branches()
{
  .reg .pred %p;
  .reg .b32 %t, %r<101>;
  mov.u32 %t, %tid.x;
  setp.lt.u32 %p, %t, )" +
         std::to_string(split) + R"(;
  @%p bra TAKEN;
)" + adds +
         R"(
  bra.uni JOIN;
TAKEN:
)" + adds +
         R"(
JOIN:
  ret;
}
)";
}

TEST_F(EmulatorLatency, AStalledInstructionHoldsBackTheInstructionsAWindowOn) {
  CUdeviceptr word = upload(std::vector<uint64_t>{7});
  // The use waits for the load; of the adds after it, the first window - 1
  // issue before it (ptxas would have scheduled them there), the others
  // after it, one per cycle; ret follows the last.
  int window = static_cast<int>(model.window);
  uint64_t stalled = model.alu + model.globalLoad;
  EXPECT_EQ(ctaCycles(hiddenLoadKernel(window - 1, true), "hidden",
                      KernelArguments(word)),
            stalled + 1);
  int filler = window + 300;
  EXPECT_EQ(ctaCycles(hiddenLoadKernel(filler, true), "hidden",
                      KernelArguments(word)),
            stalled + (filler - (window - 1)) + 1);
}

TEST_F(EmulatorLatency, DivergentPathsIssueOneAfterTheOther) {
  uint64_t uniform = ctaCycles(branchKernel(32), "branches", KernelArguments());
  uint64_t divergent =
      ctaCycles(branchKernel(16), "branches", KernelArguments());
  // Both blocks, and the branch that ends the first.
  EXPECT_EQ(divergent - uniform, 100u + 1);
}

TEST_F(EmulatorLatency, BarrierReleasesEveryWarpAfterTheLastArrival) {
  // Warp 0 runs a chain before the barrier, warp 1 one after it: the CTA
  // takes both chains and the barrier, not the longer of the two.
  std::string chain;
  for (int i = 0; i < 100; ++i)
    chain += "  fma.rn.f32 %x, %x, %x, %x;\n";
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry barrier()
{
  .reg .pred %first;
  .reg .b32 %t;
  .reg .f32 %x;
  mov.u32 %t, %tid.x;
  mov.f32 %x, 0f3F800000;
  setp.lt.u32 %first, %t, 32;
  @!%first bra ARRIVE;
)" + chain + R"(
ARRIVE:
  bar.sync 0;
  @%first bra DONE;
)" + chain + R"(
DONE:
  ret;
}
)";
  uint64_t cycles = ctaCycles(ptx, "barrier", KernelArguments(), 64);
  uint64_t chains = 2 * 100 * model.alu + model.barrier;
  EXPECT_GE(cycles, chains);
  EXPECT_LE(cycles, chains + 3 * model.alu);
}

TEST_F(EmulatorLatency, MmaResultsAreReadyATensorLatencyLater) {
  // The second mma accumulates onto the first's result.
  std::string mma = "  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                    "{%d0, %d1, %d2, %d3}, {%a, %a, %a, %a}, {%a, %a}, "
                    "{%d0, %d1, %d2, %d3};\n";
  std::string ptx = std::string(kPtxHeader) +
                    ".visible .entry mmas()\n{\n  .reg .b32 %a, %d<4>;\n"
                    "  mov.b32 %a, 0;\n  mov.b32 %d0, 0;\n  mov.b32 %d1, 0;\n"
                    "  mov.b32 %d2, 0;\n  mov.b32 %d3, 0;\n" +
                    mma + mma + "  add.f32 %d0, %d0, %d1;\n  ret;\n}\n";
  CUfunction kernel = getKernel(ptx, "mmas");
  FdemuCounters counters = launchCounted(kernel, {1}, {32}, KernelArguments());
  constexpr int kTensor = 11;
  EXPECT_EQ(counters.total.warpInstructions[kTensor], 2u);
  // Each mma waits for the previous one's accumulators; then the add, ret.
  EXPECT_EQ(counters.totalLatency.latencyCycles, 2u * model.tensorCore + 1);
}

/// A store to shared memory, a 4-byte cp.async over it, committed, then
/// cp.async.wait_group `keep` and a read of the destination.
std::string copyWaitKernel(unsigned keep) {
  return std::string(kPtxHeader) + R"(
.visible .entry copyWait(.param .u64 in)
{
  .shared .align 4 .b8 smem[4];
  .reg .b32 %s, %v;
  .reg .b64 %a;
  ld.param.u64 %a, [in];
  mov.u32 %s, smem;
  st.shared.u32 [%s], 0;
  cp.async.ca.shared.global [%s], [%a], 4;
  cp.async.commit_group;
  cp.async.wait_group )" +
         std::to_string(keep) + R"(;
  ld.shared.u32 %v, [%s];
  add.u32 %v, %v, 1;
  ret;
}
)";
}

TEST_F(EmulatorLatency, AsyncCopyWaitIsTheUseOfTheCopy) {
  CUdeviceptr word = upload(std::vector<uint32_t>{7});
  // The copy issues when its address is ready (alu); waiting for its group
  // takes a global load's latency from there, then the shared load, its
  // use and ret follow.
  EXPECT_EQ(ctaCycles(copyWaitKernel(0), "copyWait", KernelArguments(word)),
            model.alu + model.globalLoad + 1 + model.sharedLoad + 1);
  // wait_group 1 leaves the only group in flight: the copy, commit, wait
  // and read issue one after another.
  EXPECT_EQ(ctaCycles(copyWaitKernel(1), "copyWait", KernelArguments(word)),
            model.alu + 3 + model.sharedLoad + 1);
}

TEST(EmulatorResidency, TheTightestLimitSetsTheCtasPerSM) {
  SmResources h200; // 228 KB of shared memory
  SmResources a100;
  a100.sharedBytes = 164 * 1024;
  // Registers: 64K / (128 * 128) = 4; 248 and 249 (rounded to 256) both 2.
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 10368, 128), 4u);
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 20736, 248), 2u);
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 18144, 249), 2u);
  // 48 registers: 10 (not the 64 shared memory or 16 threads allow).
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 2592, 48), 10u);
  // Threads: 2048 / 1024.
  EXPECT_EQ(getResidentCtasPerSM(h200, 1024, 0, 16), 2u);
  // The CTA limit.
  EXPECT_EQ(getResidentCtasPerSM(h200, 32, 0, 16), 32u);
  // A partial warp takes a whole one: 33 threads, 2 warps of 256.
  EXPECT_EQ(getResidentCtasPerSM(h200, 33, 0, 255), 4u);
  // Shared memory, with 1 KB reserved per CTA: 228 KB / 101 KB and
  // 164 KB / 101 KB.
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 100 * 1024, 32), 2u);
  EXPECT_EQ(getResidentCtasPerSM(a100, 128, 100 * 1024, 32), 1u);
  // A CTA that fits nowhere still counts as one.
  EXPECT_EQ(getResidentCtasPerSM(h200, 128, 1 << 20, 32), 1u);
}

/// A kernel with a name of its own: ptxas's counts are cached per text.
std::string storeKernel(const std::string &name) {
  return std::string(kPtxHeader) + ".visible .entry " + name +
         R"((.param .u64 out)
{
  .reg .b32 %t;
  .reg .b64 %out, %offset;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %out, [out];
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %t;
  ret;
}
)";
}

TEST_F(EmulatorLatency, RegistersComeFromPtxas) {
  const char *configured = std::getenv("FDEMU_PTXAS");
  if (!(configured && *configured) &&
      access("/usr/local/cuda/bin/ptxas", X_OK) != 0)
    GTEST_SKIP() << "no ptxas at $FDEMU_PTXAS or /usr/local/cuda/bin";
  CUfunction kernel = getKernel(storeKernel("counted"), "counted");
  int registers = 0;
  ASSERT_EQ(driver->cuFuncGetAttribute(&registers, kNumRegsAttribute, kernel),
            kSuccess);
  EXPECT_GT(registers, 0);
  EXPECT_LE(registers, 255);
  CUdeviceptr out = allocate(256 * 4);
  FdemuCounters counters =
      launchCounted(kernel, {1}, {256}, KernelArguments(out));
  EXPECT_EQ(counters.registersAssumed, 0);
  EXPECT_EQ(counters.registersPerThread, static_cast<unsigned>(registers));
  EXPECT_EQ(counters.residentCtasPerSM,
            getResidentCtasPerSM(getGpuModel().smResources, 256, 0, registers));
}

TEST_F(EmulatorLatency, RegistersAreAssumedWithoutPtxas) {
  const char *configured = std::getenv("FDEMU_PTXAS");
  std::string saved = configured ? configured : "";
  setenv("FDEMU_PTXAS", "/nonexistent/ptxas", 1);
  CUfunction kernel = getKernel(storeKernel("assumed"), "assumed");
  if (configured)
    setenv("FDEMU_PTXAS", saved.c_str(), 1);
  else
    unsetenv("FDEMU_PTXAS");
  int registers = 0;
  ASSERT_EQ(driver->cuFuncGetAttribute(&registers, kNumRegsAttribute, kernel),
            kSuccess);
  EXPECT_EQ(registers,
            static_cast<int>(flashdecode::emu::kAssumedRegistersPerThread));
  CUdeviceptr out = allocate(256 * 4);
  FdemuCounters counters =
      launchCounted(kernel, {1}, {256}, KernelArguments(out));
  EXPECT_EQ(counters.registersAssumed, 1);
  EXPECT_EQ(counters.registersPerThread,
            flashdecode::emu::kAssumedRegistersPerThread);
}

TEST(EmulatorLatencyTerm, ResidentCtasShareTheSMsLatency) {
  const flashdecode::emu::GpuModel &gpu =
      *flashdecode::emu::findGpuModel("h200");
  flashdecode::emu::LaunchCounters counters;
  counters.perSM.resize(1);
  counters.perSM[0].latencyCycles = 1'000'000;
  counters.residentCtasPerSM = 4;
  double cycleMicroseconds = 1 / (gpu.clockGHz * 1e3);
  // One CTA: its whole latency. Eight CTAs (four resident at a time): a
  // quarter of their sum. Two: half. Five: two waves of a fifth each.
  const std::pair<int, double> cases[] = {
      {1, 1.0}, {8, 0.25}, {2, 0.5}, {5, 0.4}};
  for (auto [ctas, share] : cases) {
    counters.perSM[0].ctas = ctas;
    flashdecode::emu::ModeledTime time =
        flashdecode::emu::modelLaunch(counters, gpu);
    EXPECT_EQ(time.bound, "latency") << ctas << " CTAs";
    EXPECT_DOUBLE_EQ(time.microseconds, 1e6 * share * cycleMicroseconds)
        << ctas << " CTAs";
  }
}

} // namespace
