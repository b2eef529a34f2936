//===- PerformanceModel.cpp - Counters into a modeled time ----------------===//

#include "fd/Emulator/PerformanceModel.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace flashdecode::emu {

/// Latencies in SM cycles from published microbenchmarks where there are
/// some; the schedule window, load lead and a warp's bytes in flight fitted
/// to the H200's measured times of the 0.2.2 and tc1 runs
/// (bench/calibrate_model.sh; 0.2.6 and 0.2.7 are held out to validate
/// them). docs/Emulator.md has the sources and says which are assumed.
static LatencyModel makeLatencyModel() {
  LatencyModel model;
  model.alu = 4;
  model.conversion = 6;
  model.specialFunction = 18;
  model.shuffle = 24;
  model.sharedLoad = 30;
  model.globalLoad = 600;
  model.l2Hit = 260;
  model.barrier = 20;
  model.tensorCore = 32;
  model.distributedShared = 200;
  model.clusterBarrier = 400;
  model.window = 128;
  model.loadLead = 64;
  model.warpBytesInFlight = 1024;
  return model;
}

static GpuModel makeH200() {
  GpuModel gpu;
  gpu.name = "H200";
  gpu.deviceName = "fdemu (emulated H200)";
  gpu.computeMajor = 9;
  gpu.computeMinor = 0;
  gpu.numSMs = 132;
  // Assumed: 8 GPCs, two with 9 TPCs and six with 8 (132 SMs of the 144 a
  // full GH100 has; which TPCs are fused off varies between chips).
  gpu.smsPerGpc = {18, 18, 16, 16, 16, 16, 16, 16};
  gpu.clockGHz = 1.98;
  // The device copy of every H200 run (fd-bench's pct_copy_bw): 4.22-4.24
  // TB/s; the datasheet's 4.8 is the roofline's.
  gpu.dramBytesPerSecond = 4.22e12;
  gpu.peakDramBytesPerSecond = 4.8e12;
  gpu.memoryBytes = size_t(141) << 30;
  gpu.l2Bytes = 50 << 20;
  gpu.floatPerClock = 4; // 128 FP32 lanes
  // mma.sync reaches about half of Hopper's dense f16 peak (wgmma reaches
  // it): 1024 multiply-adds per SM per clock, an m16n8k16 every 2 clocks.
  gpu.tensorPerClock = 0.5;
  gpu.mmaProductsPerSum = 16;
  // wgmma at the dense peak: 2048 multiply-adds per SM per clock, an
  // m16n8k16's work every clock (assumed from the datasheet, not measured).
  gpu.warpgroupTensorPerClock = 1;
  gpu.latencyModel = makeLatencyModel();
  gpu.smResources.sharedBytes = 228 * 1024;
  return gpu;
}

static GpuModel makeA100() {
  GpuModel gpu;
  gpu.name = "A100";
  gpu.deviceName = "fdemu (emulated A100)";
  gpu.computeMajor = 8;
  gpu.computeMinor = 0;
  gpu.numSMs = 108;
  gpu.clockGHz = 1.41;
  // Assumed: the datasheet's 2.039 TB/s at the H200's measured copy
  // fraction (4.22 / 4.8); no A100 has been measured.
  gpu.dramBytesPerSecond = 2.039e12 * 4.22 / 4.8;
  gpu.peakDramBytesPerSecond = 2.039e12;
  gpu.memoryBusBits = 5120;
  gpu.memoryBytes = size_t(80) << 30;
  gpu.l2Bytes = 40 << 20;
  gpu.floatPerClock = 2; // 64 FP32 lanes
  // 312 dense f16 TFLOPS at 1.41 GHz on 108 SMs: 1024 multiply-adds per SM
  // per clock, an m16n8k16 (2048) every 2 clocks.
  gpu.tensorPerClock = 0.5;
  gpu.mmaProductsPerSum = 8;
  // The H200's constants: fdemu has not been calibrated on an A100.
  gpu.latencyModel = makeLatencyModel();
  gpu.smResources.sharedBytes = 164 * 1024;
  return gpu;
}

const GpuModel *findGpuModel(const std::string &name) {
  static const GpuModel h200 = makeH200(), a100 = makeA100();
  if (name == "h200" || name == "H200")
    return &h200;
  if (name == "a100" || name == "A100")
    return &a100;
  return nullptr;
}

namespace {
struct SelectedModel {
  GpuModel gpu;
  std::string error;
};
} // namespace

static const SelectedModel &getSelectedModel() {
  static const SelectedModel selected = [] {
    SelectedModel result{*findGpuModel("h200"), ""};
    const char *name = std::getenv("FDEMU_GPU");
    if (name && *name) {
      if (const GpuModel *found = findGpuModel(name))
        result.gpu = *found;
      else
        result.error = std::string("FDEMU_GPU='") + name +
                       "' is not an emulated GPU: h200 or a100";
    }
    const char *overrides = std::getenv("FDEMU_MODEL");
    if (result.error.empty() && overrides) {
      GpuModel changed = result.gpu;
      result.error = applyModelOverrides(changed, overrides);
      if (result.error.empty())
        result.gpu = changed;
    }
    return result;
  }();
  return selected;
}

const GpuModel &getGpuModel() { return getSelectedModel().gpu; }

const std::string &getGpuModelError() { return getSelectedModel().error; }

/// The SM cycles `work` takes at each unit's throughput: the longest, and
/// the unit.
static std::pair<double, const char *>
getThroughputCycles(const WorkCounts &work, const GpuModel &gpu) {
  using C = InstructionClass;
  auto count = [&](C kind) {
    return static_cast<double>(
        work.warpInstructions[static_cast<size_t>(kind)]);
  };
  double loadStore = count(C::GlobalLoad) + count(C::GlobalStore) +
                     count(C::SharedLoad) + count(C::SharedStore);
  // The SM-to-SM network's bytes count with L2's at the SM's port: an
  // assumption (docs/Emulator.md).
  double smBytes = 32.0 * static_cast<double>(work.globalLoadSectors +
                                              work.globalStoreSectors +
                                              work.distributedSharedSectors);
  std::pair<double, const char *> terms[] = {
      {work.totalWarpInstructions() / gpu.issuePerClock, "issue"},
      {count(C::FloatArithmetic) / gpu.floatPerClock, "fp32"},
      {count(C::SpecialFunction) / gpu.specialFunctionPerClock, "sfu"},
      {count(C::Conversion) / gpu.conversionPerClock, "conversion"},
      {count(C::Shuffle) / gpu.shufflePerClock, "shuffle"},
      {count(C::IntegerOther) / gpu.integerPerClock, "int"},
      {loadStore / gpu.loadStorePerClock, "ld/st"},
      {work.sharedWavefronts / gpu.sharedWavefrontsPerClock, "shared"},
      {(count(C::TensorCore) - static_cast<double>(work.warpgroupMmas)) /
               gpu.tensorPerClock +
           (gpu.warpgroupTensorPerClock > 0
                ? static_cast<double>(work.warpgroupMmaSteps) /
                      gpu.warpgroupTensorPerClock
                : 0),
       "tensor"},
      {smBytes / gpu.smBytesPerClock, "sm-bandwidth"}};
  std::pair<double, const char *> longest = {0.0, "issue"};
  for (const auto &term : terms)
    if (term.first > longest.first)
      longest = term;
  return longest;
}

ModeledTime modelLaunch(const LaunchCounters &counters, const GpuModel &gpu) {
  ModeledTime time;
  double worstCycles = 0;
  std::string worstBound = "issue";
  // Work after a CTA's last global atomic waited on the other CTAs (the
  // last block of a group to count merges): it runs after them, alone, as
  // long as its chain of latencies or its own work at the SM's throughput.
  // The SM's terms leave it out.
  double tailCycles = 0;
  for (const ClassCounts &sm : counters.perSM) {
    WorkCounts beforeTail = sm;
    beforeTail -= sm.serialTail;
    auto [cycles, bound] = getThroughputCycles(beforeTail, gpu);
    // The SM runs residentCtasPerSM of its CTAs at a time, each as long as
    // its own dependency chains take, in whole waves: a CTA is not split
    // over slots, so 4 CTAs in 3 slots take two CTAs' time, not 4/3.
    uint64_t slotsUsed = std::max<uint64_t>(
        1, std::min<uint64_t>(counters.residentCtasPerSM, sm.ctas));
    uint64_t smWaves =
        (std::max<uint64_t>(sm.ctas, 1) + slotsUsed - 1) / slotsUsed;
    double latency = sm.latencyCycles /
                     static_cast<double>(std::max<uint64_t>(sm.ctas, 1)) *
                     static_cast<double>(smWaves);
    if (latency > cycles) {
      cycles = latency;
      bound = "latency";
    }
    if (cycles > worstCycles) {
      worstCycles = cycles;
      worstBound = bound;
    }
    tailCycles = std::max({tailCycles, static_cast<double>(sm.serialTailCycles),
                           getThroughputCycles(sm.serialTail, gpu).first});
  }
  double smMicroseconds = worstCycles / (gpu.clockGHz * 1e3);
  // DRAM serves each sector the launch loads once (L2 keeps it for the
  // reads again) and every store.
  time.dramBytes =
      32.0 * (counters.dramLoadSectors + counters.total.globalStoreSectors);
  double dramMicroseconds = time.dramBytes / gpu.dramBytesPerSecond * 1e6;
  if (dramMicroseconds > smMicroseconds) {
    time.microseconds = dramMicroseconds;
    time.bound = "dram";
  } else {
    time.microseconds = smMicroseconds;
    time.bound = worstBound;
  }
  // The last CTA starts when its SM has run the waves before it.
  uint64_t slots = counters.residentCtasPerSM ? counters.residentCtasPerSM : 1;
  uint64_t waves = 1;
  for (const ClassCounts &sm : counters.perSM)
    waves = std::max<uint64_t>(waves, (sm.ctas + slots - 1) / slots);
  bool triggers = counters.total.ctas &&
                  counters.total.triggeredCtas == counters.total.ctas;
  time.triggerMicroseconds = time.microseconds *
                             static_cast<double>(waves - 1) /
                             static_cast<double>(waves);
  time.microseconds += tailCycles / (gpu.clockGHz * 1e3);
  if (!triggers)
    time.triggerMicroseconds = time.microseconds;
  return time;
}

void scheduleKernel(StreamClock &clock, const ModeledTime &time,
                    double overheadMicroseconds, bool programmatic,
                    const GpuModel &gpu) {
  double start = clock.now + overheadMicroseconds;
  if (programmatic && gpu.computeMajor >= 9) {
    double resume = gpu.latencyModel.globalLoad / (gpu.clockGHz * 1e3);
    start = std::max(clock.dependentsFrom + overheadMicroseconds,
                     clock.now + resume);
  }
  clock.now = start + time.microseconds;
  clock.dependentsFrom = start + time.triggerMicroseconds;
}

void scheduleSubmission(StreamClock &clock, const GpuModel &gpu) {
  clock.now += gpu.submissionMicroseconds;
  clock.dependentsFrom = clock.now;
}

void scheduleTransfer(StreamClock &clock, double microseconds) {
  clock.now += microseconds;
  clock.dependentsFrom = clock.now;
}

} // namespace flashdecode::emu
