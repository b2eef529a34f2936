//===- ProgrammaticLaunchTest.cpp - griddepcontrol and cuLaunchKernelEx ---===//
//
// Programmatic dependent launch on fdemu: griddepcontrol.wait and
// launch_dependents load for sm_90 only; cuLaunchKernelEx takes the
// programmatic stream serialization attribute (and refuses attributes it
// does not emulate); in such a launch a global access before the wait is
// reported, as it could race with the kernel before; launches count the
// CTAs that let dependents launch; the model's trigger time and the stream
// clock overlap a programmatic launch with the kernel before it, and
// fdemu's streams keep that clock (read through events).
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include "fd/Emulator/PerformanceModel.h"

using namespace flashdecode::emutest;
namespace rt = flashdecode::rt;
using flashdecode::emu::findGpuModel;
using flashdecode::emu::getGpuModel;
using flashdecode::emu::GpuModel;
using flashdecode::emu::LaunchCounters;
using flashdecode::emu::ModeledTime;
using flashdecode::emu::modelLaunch;
using flashdecode::emu::scheduleKernel;
using flashdecode::emu::scheduleSubmission;
using flashdecode::emu::scheduleTransfer;
using flashdecode::emu::StreamClock;

namespace {

constexpr CUresult kNotSupported = 801;

/// out[i] = in[i] + 1 for thread i of block (x, 0, 0) of 64 threads; `before`
/// runs first, `between` after the load, `trigger` before the store.
std::string copyKernel(const std::string &before, const std::string &between,
                       const std::string &trigger = "",
                       const std::string &target = "sm_90") {
  return ".version 8.0\n.target " + target + "\n.address_size 64\n" + R"(
.visible .entry copy(.param .u64 in, .param .u64 out)
{
  .reg .pred %first;
  .reg .b32 %t, %c, %v;
  .reg .b64 %i, %o, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %c, %ctaid.x;
  setp.eq.u32 %first, %c, 0;
  mad.lo.u32 %t, %c, 64, %t;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %i, [in];
  ld.param.u64 %o, [out];
  add.u64 %i, %i, %offset;
  add.u64 %o, %o, %offset;
)" + before +
         "\n  ld.global.u32 %v, [%i];\n" + between +
         "\n  add.u32 %v, %v, 1;\n" + trigger +
         "\n  st.global.u32 [%o], %v;\n  ret;\n}\n";
}

class EmulatorProgrammaticLaunch : public EmulatorTest {
protected:
  /// Launches `kernel` over `blocks` blocks of 64 threads with cuLaunchKernelEx
  /// on `stream`, programmatic or not (or with `attribute` instead), and
  /// returns the launch's result, else the synchronizing call's.
  CUresult launchEx(CUfunction kernel, unsigned blocks, CUdeviceptr in,
                    CUdeviceptr out, bool programmatic,
                    rt::CUstream stream = nullptr, int attribute = -1) {
    rt::CUlaunchAttribute attributes[1];
    attributes[0].id =
        attribute >= 0 ? attribute
                       : rt::kLaunchAttributeProgrammaticStreamSerialization;
    attributes[0].value.programmaticStreamSerializationAllowed = 1;
    rt::CUlaunchConfig config;
    config.gridDimX = blocks;
    config.blockDimX = 64;
    config.hStream = stream;
    config.attrs = attributes;
    config.numAttrs = programmatic || attribute >= 0 ? 1 : 0;
    KernelArguments arguments(in, out);
    std::vector<void *> parameters = arguments.pointers();
    if (CUresult result = driver->cuLaunchKernelEx(&config, kernel,
                                                   parameters.data(), nullptr))
      return result;
    return driver->cuCtxSynchronize();
  }

  std::vector<uint32_t> randomWords(size_t count) {
    std::vector<uint32_t> words(count);
    for (uint32_t &word : words)
      word = static_cast<uint32_t>(random() >> 8);
    return words;
  }
};

TEST_F(EmulatorProgrammaticLaunch, GridDependencyControlNeedsSm90) {
  LoadResult old =
      tryLoad(copyKernel("  griddepcontrol.wait;", "", "", /*target=*/"sm_80"));
  EXPECT_EQ(old.result, kInvalidPtx);
  EXPECT_NE(old.log.find("griddepcontrol"), std::string::npos) << old.log;
  EXPECT_NE(old.log.find("sm_90"), std::string::npos) << old.log;
  LoadResult unknown = tryLoad(copyKernel("  griddepcontrol.sync;", ""));
  EXPECT_EQ(unknown.result, kInvalidPtx);
  EXPECT_NE(unknown.log.find("griddepcontrol.launch_dependents"),
            std::string::npos)
      << unknown.log;
  EXPECT_EQ(tryLoad(copyKernel("  griddepcontrol.wait;", "",
                               "  griddepcontrol.launch_dependents;"))
                .result,
            kSuccess);
}

TEST_F(EmulatorProgrammaticLaunch, AGlobalAccessBeforeTheWaitIsReported) {
  std::vector<uint32_t> input = randomWords(128);
  CUdeviceptr in = upload(input), out = allocate(input.size() * 4);
  CUfunction early =
      getKernel(copyKernel("", "  griddepcontrol.wait;"), "copy");
  // In order, the kernel before has ended: nothing to race with.
  ASSERT_EQ(launchEx(early, 2, in, out, /*programmatic=*/false), kSuccess);
  EXPECT_EQ(launch(early, {2}, {64}, KernelArguments(in, out)), kSuccess);
  std::vector<uint32_t> expected = input;
  for (uint32_t &word : expected)
    ++word;
  EXPECT_EQ(download<uint32_t>(out, input.size()), expected);
  // A programmatic launch of the same kernel loads before it waits.
  ASSERT_EQ(launchEx(early, 2, in, out, /*programmatic=*/true), kLaunchFailed);
  std::string report = errorString(kLaunchFailed);
  EXPECT_NE(report.find("before griddepcontrol.wait"), std::string::npos)
      << report;
  EXPECT_NE(report.find("programmatic stream serialization"), std::string::npos)
      << report;
}

TEST_F(EmulatorProgrammaticLaunch, AKernelThatWaitsFirstRunsProgrammatically) {
  std::vector<uint32_t> input = randomWords(192);
  CUdeviceptr in = upload(input), out = allocate(input.size() * 4);
  CUfunction waits =
      getKernel(copyKernel("  griddepcontrol.wait;", "",
                           "  griddepcontrol.launch_dependents;"),
                "copy");
  ASSERT_EQ(launchEx(waits, 3, in, out, /*programmatic=*/true), kSuccess);
  std::vector<uint32_t> expected = input;
  for (uint32_t &word : expected)
    ++word;
  EXPECT_EQ(download<uint32_t>(out, input.size()), expected);
}

TEST_F(EmulatorProgrammaticLaunch, OtherLaunchAttributesAreRefused) {
  CUdeviceptr in = upload(randomWords(64)), out = allocate(64 * 4);
  CUfunction kernel = getKernel(copyKernel("", ""), "copy");
  // CU_LAUNCH_ATTRIBUTE_COOPERATIVE (2): not emulated.
  EXPECT_EQ(launchEx(kernel, 1, in, out, false, nullptr, /*attribute=*/2),
            kNotSupported);
  rt::CUlaunchConfig config;
  config.numAttrs = 1; // and no attributes
  EXPECT_EQ(driver->cuLaunchKernelEx(&config, kernel, nullptr, nullptr), 1);
  EXPECT_EQ(driver->cuLaunchKernelEx(nullptr, kernel, nullptr, nullptr), 1);
}

TEST_F(EmulatorProgrammaticLaunch, LaunchesCountTheCtasThatTriggered) {
  CUdeviceptr in = upload(randomWords(256)), out = allocate(256 * 4);
  auto triggered = [&](const std::string &trigger) {
    CUfunction kernel = getKernel(copyKernel("", "", trigger), "copy");
    FdemuCounters counters =
        launchCounted(kernel, {4}, {64}, KernelArguments(in, out));
    EXPECT_EQ(counters.totalLatency.ctas, 4u);
    return counters.totalLatency.triggeredCtas;
  };
  EXPECT_EQ(triggered(""), 0u);
  EXPECT_EQ(triggered("  griddepcontrol.launch_dependents;"), 4u);
  // One thread of a CTA is enough; only block 0's threads trigger here.
  EXPECT_EQ(triggered("  @%first griddepcontrol.launch_dependents;"), 1u);
}

/// A launch whose CTAs, `perSM` on one SM and `residentCtasPerSM` at a
/// time, are latency-bound at 1 us each, `triggered` of them triggering.
LaunchCounters latencyBound(uint64_t perSM, uint64_t triggered,
                            const GpuModel &gpu) {
  LaunchCounters counters;
  counters.perSM.resize(2);
  counters.perSM[0].ctas = perSM;
  counters.residentCtasPerSM = 4;
  counters.perSM[0].latencyCycles =
      static_cast<uint64_t>(perSM * gpu.clockGHz * 1e3);
  counters.total = counters.perSM[0];
  counters.total.triggeredCtas = triggered;
  return counters;
}

TEST(ProgrammaticLaunchModel, DependentsLaunchWhenTheLastWaveStarts) {
  const GpuModel &gpu = getGpuModel();
  // One wave of four CTAs: 1 us, every CTA triggers at its start.
  ModeledTime oneWave = modelLaunch(latencyBound(4, 4, gpu), gpu);
  EXPECT_NEAR(oneWave.microseconds, 1.0, 1e-9);
  EXPECT_NEAR(oneWave.triggerMicroseconds, 0.0, 1e-9);
  // Three waves (ten CTAs, four at a time, whole waves: 3 us): the last
  // starts after two.
  ModeledTime threeWaves = modelLaunch(latencyBound(10, 10, gpu), gpu);
  EXPECT_NEAR(threeWaves.microseconds, 3.0, 1e-9);
  EXPECT_NEAR(threeWaves.triggerMicroseconds, 3.0 * 2 / 3, 1e-9);
  // A CTA that never triggers releases its dependents when it exits.
  ModeledTime partly = modelLaunch(latencyBound(4, 3, gpu), gpu);
  EXPECT_NEAR(partly.triggerMicroseconds, partly.microseconds, 1e-12);
}

TEST(ProgrammaticLaunchModel, AProgrammaticLaunchOverlapsTheKernelBefore) {
  const GpuModel &gpu = *findGpuModel("h200");
  double resume = gpu.latencyModel.globalLoad / (gpu.clockGHz * 1e3);
  ModeledTime primary;
  primary.microseconds = 10;
  primary.triggerMicroseconds = 0;
  ModeledTime secondary;
  secondary.microseconds = 0.5;
  // In order: each kernel's overhead after the work before it.
  StreamClock serial;
  scheduleKernel(serial, primary, 1.0, false, gpu);
  scheduleKernel(serial, secondary, 1.0, false, gpu);
  EXPECT_DOUBLE_EQ(serial.now, 1 + 10 + 1 + 0.5);
  // Programmatic: the secondary's overhead passes during the primary; it
  // resumes a global-memory latency after the primary ends.
  StreamClock overlapped;
  scheduleKernel(overlapped, primary, 1.0, true, gpu);
  EXPECT_DOUBLE_EQ(overlapped.now, 11.0); // nothing before it to overlap
  EXPECT_DOUBLE_EQ(overlapped.dependentsFrom, 1.0);
  scheduleKernel(overlapped, secondary, 1.0, true, gpu);
  EXPECT_DOUBLE_EQ(overlapped.now, 11 + resume + 0.5);
  // The overhead is hidden only as far as the primary runs after its
  // trigger: a primary of 0.2 us leaves most of a 3 us overhead.
  ModeledTime brief;
  brief.microseconds = 0.2;
  StreamClock shortPrimary;
  scheduleKernel(shortPrimary, brief, 3.0, false, gpu);
  scheduleKernel(shortPrimary, secondary, 3.0, true, gpu);
  EXPECT_DOUBLE_EQ(shortPrimary.now, 3 + 3 + 0.5);
  // A primary that triggers late (its last wave) hides less.
  ModeledTime late = primary;
  late.triggerMicroseconds = 9.5;
  StreamClock lateClock;
  scheduleKernel(lateClock, late, 1.0, false, gpu);
  scheduleKernel(lateClock, secondary, 1.0, true, gpu);
  EXPECT_DOUBLE_EQ(lateClock.now, 1 + 9.5 + 1 + 0.5);
  // A copy between them ends the overlap.
  StreamClock copied;
  scheduleKernel(copied, primary, 1.0, false, gpu);
  scheduleTransfer(copied, 2.0);
  scheduleKernel(copied, secondary, 1.0, true, gpu);
  EXPECT_DOUBLE_EQ(copied.now, 1 + 10 + 2 + 1 + 0.5);
  // An A100 (sm_80) has no programmatic dependent launch.
  StreamClock a100;
  scheduleKernel(a100, primary, 1.0, false, *findGpuModel("a100"));
  scheduleKernel(a100, secondary, 1.0, true, *findGpuModel("a100"));
  EXPECT_DOUBLE_EQ(a100.now, serial.now);
}

TEST_F(EmulatorProgrammaticLaunch, StreamsKeepTheOverlappedClock) {
  std::vector<uint32_t> input = randomWords(64);
  CUdeviceptr in = upload(input), middle = allocate(64 * 4),
              out = allocate(64 * 4);
  CUfunction kernel =
      getKernel(copyKernel("  griddepcontrol.wait;", "",
                           "  griddepcontrol.launch_dependents;"),
                "copy");
  // Two kernels on one stream between events, the second reading the
  // first's output; the stream's time against fdemuScheduleLaunch's.
  auto elapsedMicroseconds = [&](bool programmatic,
                                 std::vector<FdemuCounters> &launches) {
    rt::CUstream stream = nullptr;
    rt::CUevent start = nullptr, end = nullptr;
    EXPECT_EQ(driver->cuStreamCreate(&stream, 0), kSuccess);
    EXPECT_EQ(driver->cuEventCreate(&start, 0), kSuccess);
    EXPECT_EQ(driver->cuEventCreate(&end, 0), kSuccess);
    EXPECT_EQ(driver->cuEventRecord(start, stream), kSuccess);
    driver->fdemuRecordLaunches(1);
    EXPECT_EQ(launchEx(kernel, 1, in, middle, false, stream), kSuccess);
    EXPECT_EQ(launchEx(kernel, 1, middle, out, programmatic, stream), kSuccess);
    launches.resize(2);
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(driver->fdemuGetLaunchCounters(i, &launches[i]), 0);
    driver->fdemuRecordLaunches(0);
    EXPECT_EQ(driver->cuEventRecord(end, stream), kSuccess);
    float milliseconds = 0;
    EXPECT_EQ(driver->cuEventElapsedTime(&milliseconds, start, end), kSuccess);
    driver->cuEventDestroy_v2(start);
    driver->cuEventDestroy_v2(end);
    driver->cuStreamDestroy_v2(stream);
    return 1e3 * milliseconds;
  };
  std::vector<FdemuCounters> launches;
  for (bool programmatic : {false, true}) {
    double elapsed = elapsedMicroseconds(programmatic, launches);
    FdemuStreamClock clock{0, 0};
    ASSERT_EQ(driver->fdemuScheduleLaunch(&clock, &launches[0], 0, 0), 0);
    ASSERT_EQ(
        driver->fdemuScheduleLaunch(&clock, &launches[1], 0, programmatic), 0);
    EXPECT_NEAR(elapsed, clock.now, 1e-3) << programmatic;
  }
  // The second launch's overhead passed during the first kernel's run.
  double serial = elapsedMicroseconds(false, launches);
  double overlapped = elapsedMicroseconds(true, launches);
  EXPECT_LT(overlapped, serial);
  std::vector<uint32_t> expected = input;
  for (uint32_t &word : expected)
    word += 2;
  EXPECT_EQ(download<uint32_t>(out, input.size()), expected);
}

TEST_F(EmulatorProgrammaticLaunch, AGraphReplayStartsAfterTheWorkBeforeIt) {
  CUdeviceptr in = upload(randomWords(64)), middle = allocate(64 * 4),
              out = allocate(64 * 4);
  CUfunction kernel =
      getKernel(copyKernel("  griddepcontrol.wait;", "",
                           "  griddepcontrol.launch_dependents;"),
                "copy");
  rt::CUstream stream = nullptr;
  ASSERT_EQ(driver->cuStreamCreate(&stream, 0), kSuccess);
  ASSERT_EQ(driver->cuStreamBeginCapture_v2(stream, 0), kSuccess);
  EXPECT_EQ(launchEx(kernel, 1, in, middle, true, stream), kSuccess);
  EXPECT_EQ(launchEx(kernel, 1, middle, out, true, stream), kSuccess);
  rt::CUgraph graph = nullptr;
  rt::CUgraphExec exec = nullptr;
  ASSERT_EQ(driver->cuStreamEndCapture(stream, &graph), kSuccess);
  ASSERT_EQ(driver->cuGraphInstantiateWithFlags(&exec, graph, 0), kSuccess);
  rt::CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(driver->cuEventCreate(&start, 0), kSuccess);
  ASSERT_EQ(driver->cuEventCreate(&end, 0), kSuccess);
  EXPECT_EQ(driver->cuEventRecord(start, stream), kSuccess);
  driver->fdemuRecordLaunches(1);
  EXPECT_EQ(driver->cuGraphLaunch(exec, stream), kSuccess);
  EXPECT_EQ(driver->cuGraphLaunch(exec, stream), kSuccess);
  EXPECT_EQ(driver->cuEventRecord(end, stream), kSuccess);
  std::vector<FdemuCounters> launches(4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(driver->fdemuGetLaunchCounters(i, &launches[i]), 0);
  driver->fdemuRecordLaunches(0);
  float milliseconds = 0;
  EXPECT_EQ(driver->cuEventElapsedTime(&milliseconds, start, end), kSuccess);
  // Within a replay the second node overlaps the first; the second
  // replay's first node waits for the first replay's end.
  FdemuStreamClock clock{0, 0};
  for (int i = 0; i < 4; ++i) {
    if (i == 2)
      clock.dependentsFrom = clock.now;
    ASSERT_EQ(driver->fdemuScheduleLaunch(&clock, &launches[i], 1, 1), 0);
  }
  EXPECT_NEAR(1e3 * milliseconds, clock.now, 1e-3);
  FdemuStreamClock chained{0, 0};
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(driver->fdemuScheduleLaunch(&chained, &launches[i], 1, 1), 0);
  EXPECT_GT(clock.now, chained.now);
  driver->cuEventDestroy_v2(start);
  driver->cuEventDestroy_v2(end);
  driver->cuGraphExecDestroy(exec);
  driver->cuGraphDestroy(graph);
  driver->cuStreamDestroy_v2(stream);
}

TEST(StreamClockModel, ASubmissionDelaysAnIdleStreamsFirstKernel) {
  // The submission latency comes once, before the first kernel; the
  // kernels behind it pay only their launch overheads.
  const GpuModel &gpu = *findGpuModel("h200");
  ModeledTime kernel;
  kernel.microseconds = 5;
  StreamClock clock;
  scheduleSubmission(clock, gpu);
  EXPECT_DOUBLE_EQ(clock.now, gpu.submissionMicroseconds);
  EXPECT_DOUBLE_EQ(clock.dependentsFrom, gpu.submissionMicroseconds);
  scheduleKernel(clock, kernel, gpu.eagerLaunchMicroseconds, false, gpu);
  scheduleKernel(clock, kernel, gpu.eagerLaunchMicroseconds, false, gpu);
  EXPECT_DOUBLE_EQ(clock.now, gpu.submissionMicroseconds +
                                  2 * (gpu.eagerLaunchMicroseconds + 5));
  EXPECT_GT(gpu.submissionMicroseconds, 0);
}

} // namespace
