//===- DriverCounters.cpp - libfdemu.so: fdemu's own entry points -------===//
//
// What tools that know they run on fdemu call beside the driver API
// (Emulator.h): the log of launches' counters, the performance model over
// counters (a kernel's time, a stream's clock past it) and its constants.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <algorithm>
#include <cstring>

using namespace flashdecode::rt;
using namespace flashdecode::emu;

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

/// Copies the work counts between the executor's WorkCounts and the C
/// API's FdemuClassCounts, either way: the same fields by the same names.
template <typename From, typename To> void copyWork(const From &from, To &to) {
  for (int i = 0; i < FDEMU_NUM_CLASSES; ++i)
    to.warpInstructions[i] = from.warpInstructions[i];
  to.sharedWavefronts = from.sharedWavefronts;
  to.globalLoadSectors = from.globalLoadSectors;
  to.globalStoreSectors = from.globalStoreSectors;
  to.warpgroupMmas = from.warpgroupMmas;
  to.warpgroupMmaSteps = from.warpgroupMmaSteps;
  to.distributedSharedSectors = from.distributedSharedSectors;
}

void toCounters(const ClassCounts &from, FdemuClassCounts &to,
                FdemuLatencyCounts &toLatency) {
  copyWork(from, to);
  toLatency.ctas = from.ctas;
  toLatency.latencyCycles = from.latencyCycles;
  toLatency.serialTailCycles = from.serialTailCycles;
  toLatency.triggeredCtas = from.triggeredCtas;
  copyWork(from.serialTail, toLatency.serialTail);
}

void fromCounters(const FdemuClassCounts &from,
                  const FdemuLatencyCounts &fromLatency, ClassCounts &to) {
  copyWork(from, to);
  to.ctas = fromLatency.ctas;
  to.latencyCycles = fromLatency.latencyCycles;
  to.serialTailCycles = fromLatency.serialTailCycles;
  to.triggeredCtas = fromLatency.triggeredCtas;
  copyWork(fromLatency.serialTail, to.serialTail);
}

/// The launch counters the model reads, from their C form.
LaunchCounters fromCounters(const FdemuCounters &counters) {
  LaunchCounters launch;
  fromCounters(counters.total, counters.totalLatency, launch.total);
  launch.perSM.resize(std::min<unsigned>(counters.numSMs, FDEMU_MAX_SMS));
  for (size_t sm = 0; sm < launch.perSM.size(); ++sm)
    fromCounters(counters.perSM[sm], counters.perSMLatency[sm],
                 launch.perSM[sm]);
  launch.dramLoadSectors = counters.dramLoadSectors;
  launch.residentCtasPerSM = counters.residentCtasPerSM;
  launch.registersPerThread = counters.registersPerThread;
  launch.registersAssumed = counters.registersAssumed != 0;
  return launch;
}

static_assert(FDEMU_NUM_CLASSES == static_cast<int>(InstructionClass::Count),
              "Emulator.h's class count must match InstructionClass");

} // namespace

#define FDEMU_API extern "C" __attribute__((visibility("default")))

FDEMU_API void fdemuRecordLaunches(int enable) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  driver.recordLaunches = enable != 0;
  driver.launchLog.clear();
}

FDEMU_API int fdemuLaunchCount(void) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  return static_cast<int>(driver.launchLog.size());
}

FDEMU_API int fdemuGetLaunchCounters(int index, FdemuCounters *counters) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (!counters || index < 0 ||
      static_cast<size_t>(index) >= driver.launchLog.size())
    return kInvalidValue;
  const LaunchCounters &launch = driver.launchLog[index];
  std::memset(counters, 0, sizeof(*counters));
  toCounters(launch.total, counters->total, counters->totalLatency);
  counters->numSMs = static_cast<unsigned>(
      std::min<size_t>(launch.perSM.size(), FDEMU_MAX_SMS));
  for (unsigned sm = 0; sm < counters->numSMs; ++sm)
    toCounters(launch.perSM[sm], counters->perSM[sm],
               counters->perSMLatency[sm]);
  counters->threadInstructions = launch.threadInstructions;
  counters->globalLoadBytes = launch.globalLoadBytes;
  counters->globalStoreBytes = launch.globalStoreBytes;
  counters->sharedBankConflicts = launch.sharedBankConflicts;
  counters->dramLoadSectors = launch.dramLoadSectors;
  counters->residentCtasPerSM = launch.residentCtasPerSM;
  counters->registersPerThread = launch.registersPerThread;
  counters->registersAssumed = launch.registersAssumed;
  return 0;
}

FDEMU_API int fdemuModelTime(const FdemuCounters *counters,
                             double *microseconds, const char **bound) {
  if (!counters || !microseconds)
    return kInvalidValue;
  ModeledTime time = modelLaunch(fromCounters(*counters), getGpuModel());
  *microseconds = time.microseconds;
  if (bound) {
    static const char *names[] = {
        "issue", "fp32",   "sfu",          "conversion", "shuffle", "int",
        "ld/st", "shared", "sm-bandwidth", "latency",    "dram",    "tensor"};
    *bound = "issue";
    for (const char *name : names)
      if (time.bound == name)
        *bound = name;
  }
  return 0;
}

FDEMU_API int fdemuScheduleLaunch(FdemuStreamClock *clock,
                                  const FdemuCounters *counters, int fromGraph,
                                  int programmatic) {
  if (!clock || !counters)
    return kInvalidValue;
  const GpuModel &gpu = getGpuModel();
  StreamClock stream{clock->now, clock->dependentsFrom};
  scheduleKernel(stream, modelLaunch(fromCounters(*counters), gpu),
                 fromGraph ? gpu.graphNodeMicroseconds
                           : gpu.eagerLaunchMicroseconds,
                 programmatic != 0, gpu);
  clock->now = stream.now;
  clock->dependentsFrom = stream.dependentsFrom;
  return 0;
}

FDEMU_API int fdemuScheduleSubmission(FdemuStreamClock *clock) {
  if (!clock)
    return kInvalidValue;
  StreamClock stream{clock->now, clock->dependentsFrom};
  scheduleSubmission(stream, getGpuModel());
  clock->now = stream.now;
  clock->dependentsFrom = stream.dependentsFrom;
  return 0;
}

FDEMU_API void fdemuGetModelConstants(double *eagerLaunchMicroseconds,
                                      double *graphNodeMicroseconds,
                                      double *dramBytesPerSecond) {
  const GpuModel &gpu = getGpuModel();
  if (eagerLaunchMicroseconds)
    *eagerLaunchMicroseconds = gpu.eagerLaunchMicroseconds;
  if (graphNodeMicroseconds)
    *graphNodeMicroseconds = gpu.graphNodeMicroseconds;
  if (dramBytesPerSecond)
    *dramBytesPerSecond = gpu.dramBytesPerSecond;
}
