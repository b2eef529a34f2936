//===- Emulated.cpp - fd-bench on fdemu: modeled times --------------------===//

#include "Emulated.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

using namespace flashdecode::rt;

namespace flashdecode::bench {

std::unique_ptr<Emulator> Emulator::detect() {
  std::string name = getDriverLibraryName();
  // fdrt has loaded it already (RTLD_LOCAL): this is the same handle.
  void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!library)
    library = dlopen(name.c_str(), RTLD_NOW);
  if (!library || !dlsym(library, "fdemuModelTime"))
    return nullptr;
  std::unique_ptr<Emulator> emulator(new Emulator);
  auto find = [&](auto &member, const char *symbol) {
    member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(
        dlsym(library, symbol));
    if (!member)
      throw std::runtime_error(name + " has fdemuModelTime but lacks " +
                               symbol + ": an older fdemu");
  };
  find(emulator->recordLaunches, "fdemuRecordLaunches");
  find(emulator->launchCount, "fdemuLaunchCount");
  find(emulator->getLaunchCounters, "fdemuGetLaunchCounters");
  find(emulator->modelTime, "fdemuModelTime");
  find(emulator->scheduleLaunch, "fdemuScheduleLaunch");
  find(emulator->scheduleSubmission, "fdemuScheduleSubmission");
  void (*getModelConstants)(double *, double *, double *) = nullptr;
  find(getModelConstants, "fdemuGetModelConstants");
  getModelConstants(nullptr, nullptr, &emulator->dramBytesPerSecond);
  return emulator;
}

std::vector<FdemuCounters>
Emulator::runAt(const Device &device, CUstream stream, const DecodePlan &plan,
                DeviceBuffer &lengths, int64_t sequences, int64_t liveLength) {
  const DriverApi &driver = device.getDriverApi();
  std::vector<int32_t> live(sequences, static_cast<int32_t>(liveLength));
  lengths.upload(live.data(), live.size() * sizeof(int32_t));
  recordLaunches(1);
  auto start = std::chrono::steady_clock::now();
  plan.launch(stream); // fdemu runs a launch when it is enqueued
  check(driver, driver.cuStreamSynchronize(stream), "running the kernels");
  interpreterSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::vector<FdemuCounters> counters(launchCount());
  for (size_t i = 0; i < counters.size(); ++i) {
    if (getLaunchCounters(static_cast<int>(i), &counters[i]))
      throw std::runtime_error("fdemu: no counters for launch " +
                               std::to_string(i));
    threadInstructions += counters[i].threadInstructions;
  }
  recordLaunches(0);
  return counters;
}

Timing Emulator::model(const Device &device, CUstream stream,
                       const KernelBundle &bundle, int64_t batch,
                       int64_t length, int64_t tokensPerSplit) {
  const Manifest &manifest = bundle.manifest;
  Timing timing;
  timing.modeled = true;
  // Every split's chunk in the short runs is congruent to the full length's
  // chunk c = ceil(length / S) modulo t. When t is a whole number of the
  // partial kernel's loop steps, a block then runs k * (t / step) + the same
  // tail iterations, so each counter is exactly linear in S * chunk, also
  // when c is no whole number of steps. The target S * c counts the last
  // split as full: S * c - length < S positions too many. A chunk's
  // cluster of C blocks shares its steps, so t grows C-fold: each block's
  // share then grows by t, not by a step or two of a pipeline still
  // filling (Kimi K2 on sm_90a, 8 blocks a chunk: 21.02 us a layer
  // extrapolated from shares 16 keys apart, 13.32 from 64 and from 128).
  int64_t splits = manifest.numSplits;
  tokensPerSplit *= manifest.clusterCtas;
  int64_t chunk = (length + splits - 1) / splits;
  int64_t target = splits * chunk;
  if (tokensPerSplit) {
    int64_t shortChunk = tokensPerSplit + chunk % tokensPerSplit;
    timing.shortLength = splits * shortChunk;
    timing.longLength = splits * (shortChunk + tokensPerSplit);
  }
  // A sliding window's kernels read at most W keys per sequence whatever
  // the length: interpreted at the full length, they cost what the window
  // does (the counts are not linear in the length).
  if (!tokensPerSplit || timing.longLength >= target || manifest.windowLeft)
    timing.shortLength = timing.longLength = target = length;

  // The partial kernel reads positions [0, live length) of each sequence
  // and uses max_len only to clamp the lengths and as the batch stride
  // (dense) or block-table row length (paged) (docs/KernelABI.md). Bound to
  // caches of `capacity` >= every live length, it executes the same
  // instructions and touches as many 32-byte sectors (rows stay sector
  // aligned) as with caches of `length` positions, so the full-length cache
  // is never allocated; fdemu's bounds and initcheck would catch a read past
  // what is allocated and filled.
  int64_t capacity = timing.longLength;
  if (manifest.pageSize)
    capacity = (capacity + manifest.pageSize - 1) / manifest.pageSize *
               manifest.pageSize;
  // Top-k lists: the block table's rows are lists of K slots, of which the
  // two runs' lengths count the first.
  if (manifest.topK) {
    if (capacity > manifest.topK)
      throw std::runtime_error(
          "top-k lists of " + std::to_string(manifest.topK) +
          " slots: a length of at most " + std::to_string(manifest.topK) +
          " (the shape's), got " + std::to_string(capacity));
    capacity = manifest.topK;
  }
  const DriverApi &driver = device.getDriverApi();
  const int64_t queryRows =
      batch * manifest.queryLength * manifest.numQueryHeads;
  // A shared prefix is one sequence of the caches, which every query
  // sequence continues.
  const int64_t sequences = manifest.sharedPrefix ? 1 : batch;
  CacheSizes sizes =
      CacheSizes::of(manifest, sequences * capacity * manifest.numKVHeads);
  size_t cacheElements = sizes.keys;
  const int64_t elementBytes = manifest.getCacheElementBytes();
  DeviceBuffer query(device, queryRows * manifest.headDim * 2),
      output(device, queryRows * manifest.valueHeadDim * 2),
      keys(device, sizes.keys * elementBytes),
      lengths(device, sequences * sizeof(int32_t));
  std::unique_ptr<DeviceBuffer> values;
  if (sizes.values)
    values =
        std::make_unique<DeviceBuffer>(device, sizes.values * elementBytes);
  FillType cacheType = getCacheFillType(manifest);
  fillRandom(driver, stream, query, 2.0, random, nullptr,
             getQueryFillType(manifest));
  fillRandom(driver, stream, keys, 1.0, random, nullptr, cacheType);
  if (values)
    fillRandom(driver, stream, *values, 1.0, random, nullptr, cacheType);
  // fp8 caches: their scales, of the caches' shape without the head dim
  // when per token and head (so the capacity's too).
  CacheScales scales =
      CacheScales::make(device, stream, manifest, cacheElements, random);
  DecodeBuffers buffers{query.getAddress(),
                        keys.getAddress(),
                        values ? values->getAddress() : 0,
                        lengths.getAddress(),
                        output.getAddress(),
                        0,
                        batch,
                        capacity};
  scales.bind(buffers);
  std::unique_ptr<DeviceBuffer> lse, table;
  // Every query sequence's suffix empty: its queries sit at the prefix's
  // end, seeing all of it (the suffixes' own tokens are another call's).
  std::unique_ptr<DeviceBuffer> suffixes;
  if (manifest.sharedPrefix) {
    suffixes = std::make_unique<DeviceBuffer>(device, batch * sizeof(int32_t));
    std::vector<int32_t> none(batch, 0);
    suffixes->upload(none.data(), none.size() * sizeof(int32_t));
    buffers.suffixLens = suffixes->getAddress();
  }
  if (manifest.withLse) {
    lse = std::make_unique<DeviceBuffer>(
        device, batch * manifest.queryLength * manifest.numQueryHeads * 4);
    buffers.lse = lse->getAddress();
  }
  if (manifest.pageSize) {
    // Every sequence's pages scattered over the pool, as fd-bench's paged
    // runs on a GPU have them.
    std::vector<int32_t> pages(sequences * capacity / manifest.pageSize);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), random);
    table =
        std::make_unique<DeviceBuffer>(device, pages.size() * sizeof(int32_t));
    table->upload(pages.data(), pages.size() * sizeof(int32_t));
    buffers.blockTable = table->getAddress();
    buffers.numPages = static_cast<int64_t>(pages.size());
  }
  DecodePlan plan(device, bundle, buffers);

  std::vector<FdemuCounters> shortRun =
      runAt(device, stream, plan, lengths, sequences, timing.shortLength);
  std::vector<FdemuCounters> longRun =
      timing.longLength == timing.shortLength
          ? shortRun
          : runAt(device, stream, plan, lengths, sequences, timing.longLength);
  if (shortRun.size() != manifest.kernels.size() ||
      longRun.size() != shortRun.size())
    throw std::runtime_error("fdemu logged " + std::to_string(shortRun.size()) +
                             " and " + std::to_string(longRun.size()) +
                             " launches for a call of " +
                             std::to_string(manifest.kernels.size()));
  // The partial kernel launches first (docs/KernelABI.md): its counts'
  // growth per token and KV head, all sequences together.
  if (timing.longLength != timing.shortLength) {
    double tokenHeads =
        static_cast<double>(timing.longLength - timing.shortLength) *
        static_cast<double>(sequences * manifest.numKVHeads);
    for (int c = 0; c < FDEMU_NUM_CLASSES; ++c)
      timing.partialInstructionMix.push_back(
          (static_cast<double>(longRun[0].total.warpInstructions[c]) -
           static_cast<double>(shortRun[0].total.warpInstructions[c])) /
          tokenHeads);
  }
  std::vector<FdemuCounters> modeled;
  double longest = -1;
  timing.dramLoadBytes = 0;
  for (size_t i = 0; i < shortRun.size(); ++i) {
    modeled.push_back(extrapolate(shortRun[i], timing.shortLength, longRun[i],
                                  timing.longLength, target));
    timing.dramLoadBytes += 32.0 * modeled.back().dramLoadSectors;
    double microseconds = 0;
    const char *bound = nullptr;
    if (modelTime(&modeled.back(), &microseconds, &bound))
      throw std::runtime_error("fdemu: no modeled time for " +
                               manifest.kernels[i].name);
    timing.kernelTimes.push_back(
        {manifest.kernels[i].name, microseconds, bound ? bound : "?"});
    if (microseconds > longest) {
      longest = microseconds;
      timing.bound = bound ? bound : "?";
    }
  }
  // The call and the steps on fdemu's stream clock, as a GPU runs them: a
  // kernel the plan launches programmatically (the manifest's
  // programmatic_launch, unless FD_PROGRAMMATIC_LAUNCH=0) overlaps its
  // launch with the kernel before it, in the call and across layers.
  // Each timed from an idle stream, as the GPU measurements are.
  auto schedule = [&](int calls, bool fromGraph) {
    FdemuStreamClock clock{0, 0};
    if (scheduleSubmission(&clock))
      throw std::runtime_error("fdemu: could not schedule a submission");
    for (int call = 0; call < calls; ++call)
      for (size_t i = 0; i < modeled.size(); ++i)
        if (scheduleLaunch(&clock, &modeled[i], fromGraph,
                           plan.isProgrammatic(i)))
          throw std::runtime_error("fdemu: could not schedule " +
                                   manifest.kernels[i].name);
    return clock.now;
  };
  timing.microseconds = schedule(1, false);
  timing.eagerStepMicroseconds = schedule(kLayers, false);
  timing.graphStepMicroseconds = schedule(kLayers, true);
  return timing;
}

FdemuCounters extrapolate(const FdemuCounters &shortCounters,
                          int64_t shortLength,
                          const FdemuCounters &longCounters, int64_t longLength,
                          int64_t length) {
  if (longLength == shortLength)
    return longCounters;
  double slope = static_cast<double>(length - shortLength) /
                 static_cast<double>(longLength - shortLength);
  auto line = [&](uint64_t atShort, uint64_t atLong) -> uint64_t {
    double value =
        atShort +
        (static_cast<double>(atLong) - static_cast<double>(atShort)) * slope;
    return value <= 0 ? 0 : static_cast<uint64_t>(std::llround(value));
  };
  auto classes = [&](const FdemuClassCounts &atShort,
                     const FdemuClassCounts &atLong, FdemuClassCounts &to) {
    for (int c = 0; c < FDEMU_NUM_CLASSES; ++c)
      to.warpInstructions[c] =
          line(atShort.warpInstructions[c], atLong.warpInstructions[c]);
    to.sharedWavefronts =
        line(atShort.sharedWavefronts, atLong.sharedWavefronts);
    to.globalLoadSectors =
        line(atShort.globalLoadSectors, atLong.globalLoadSectors);
    to.globalStoreSectors =
        line(atShort.globalStoreSectors, atLong.globalStoreSectors);
    to.warpgroupMmas = line(atShort.warpgroupMmas, atLong.warpgroupMmas);
    to.warpgroupMmaSteps =
        line(atShort.warpgroupMmaSteps, atLong.warpgroupMmaSteps);
    to.distributedSharedSectors =
        line(atShort.distributedSharedSectors, atLong.distributedSharedSectors);
  };
  auto latency = [&](const FdemuLatencyCounts &atShort,
                     const FdemuLatencyCounts &atLong, FdemuLatencyCounts &to) {
    to.ctas = line(atShort.ctas, atLong.ctas);
    to.latencyCycles = line(atShort.latencyCycles, atLong.latencyCycles);
    to.serialTailCycles =
        line(atShort.serialTailCycles, atLong.serialTailCycles);
    to.triggeredCtas = line(atShort.triggeredCtas, atLong.triggeredCtas);
    classes(atShort.serialTail, atLong.serialTail, to.serialTail);
  };
  FdemuCounters result;
  std::memset(&result, 0, sizeof(result));
  classes(shortCounters.total, longCounters.total, result.total);
  latency(shortCounters.totalLatency, longCounters.totalLatency,
          result.totalLatency);
  result.numSMs = longCounters.numSMs;
  for (unsigned sm = 0; sm < result.numSMs; ++sm) {
    classes(shortCounters.perSM[sm], longCounters.perSM[sm], result.perSM[sm]);
    latency(shortCounters.perSMLatency[sm], longCounters.perSMLatency[sm],
            result.perSMLatency[sm]);
  }
  result.threadInstructions =
      line(shortCounters.threadInstructions, longCounters.threadInstructions);
  result.globalLoadBytes =
      line(shortCounters.globalLoadBytes, longCounters.globalLoadBytes);
  result.globalStoreBytes =
      line(shortCounters.globalStoreBytes, longCounters.globalStoreBytes);
  result.sharedBankConflicts =
      line(shortCounters.sharedBankConflicts, longCounters.sharedBankConflicts);
  result.dramLoadSectors =
      line(shortCounters.dramLoadSectors, longCounters.dramLoadSectors);
  // Properties of the launch, not of the length.
  result.residentCtasPerSM = longCounters.residentCtasPerSM;
  result.registersPerThread = longCounters.registersPerThread;
  result.registersAssumed = longCounters.registersAssumed;
  return result;
}

} // namespace flashdecode::bench
