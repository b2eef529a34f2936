//===- Executor.cpp - Run one kernel launch on the CPU --------------------===//

#include "fd/Emulator/Executor.h"

#include "CtaRunner.h"
#include "Opcodes.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace flashdecode::emu {

WorkCounts &WorkCounts::operator+=(const WorkCounts &other) {
  for (size_t i = 0; i < warpInstructions.size(); ++i)
    warpInstructions[i] += other.warpInstructions[i];
  sharedWavefronts += other.sharedWavefronts;
  warpgroupMmas += other.warpgroupMmas;
  warpgroupMmaSteps += other.warpgroupMmaSteps;
  globalLoadSectors += other.globalLoadSectors;
  globalStoreSectors += other.globalStoreSectors;
  distributedSharedSectors += other.distributedSharedSectors;
  return *this;
}

WorkCounts &WorkCounts::operator-=(const WorkCounts &other) {
  for (size_t i = 0; i < warpInstructions.size(); ++i)
    warpInstructions[i] -= other.warpInstructions[i];
  sharedWavefronts -= other.sharedWavefronts;
  warpgroupMmas -= other.warpgroupMmas;
  warpgroupMmaSteps -= other.warpgroupMmaSteps;
  globalLoadSectors -= other.globalLoadSectors;
  globalStoreSectors -= other.globalStoreSectors;
  distributedSharedSectors -= other.distributedSharedSectors;
  return *this;
}

ClassCounts &ClassCounts::operator+=(const ClassCounts &other) {
  WorkCounts::operator+=(other);
  ctas += other.ctas;
  latencyCycles += other.latencyCycles;
  serialTailCycles = std::max(serialTailCycles, other.serialTailCycles);
  serialTail += other.serialTail;
  triggeredCtas += other.triggeredCtas;
  return *this;
}

uint64_t WorkCounts::totalWarpInstructions() const {
  uint64_t total = 0;
  for (uint64_t count : warpInstructions)
    total += count;
  return total;
}

ClusterPlacement::ClusterPlacement(const LaunchRequest &request,
                                   unsigned residentCtasPerSM)
    : numSMs(request.numSMs), clusterCtas(CtaRunner::getClusterCtas(request)) {
  if (clusterCtas == 1)
    return;
  std::vector<unsigned> gpcs = request.smsPerGpc;
  if (gpcs.empty())
    gpcs.push_back(numSMs);
  // A GPC holds floor(its CTA slots / cluster size) clusters, each CTA on
  // the next SM in turn; slots are taken GPC by GPC in turn.
  std::vector<std::vector<std::vector<uint32_t>>> perGpc(gpcs.size());
  uint32_t firstSM = 0;
  for (size_t g = 0; g < gpcs.size(); ++g) {
    uint64_t ctaSlots = uint64_t(gpcs[g]) * residentCtasPerSM;
    for (uint64_t slot = 0; slot < ctaSlots / clusterCtas; ++slot) {
      std::vector<uint32_t> sms;
      for (uint32_t rank = 0; rank < clusterCtas; ++rank)
        sms.push_back(firstSM + (slot * clusterCtas + rank) % gpcs[g]);
      perGpc[g].push_back(std::move(sms));
    }
    firstSM += gpcs[g];
  }
  for (size_t slot = 0;; ++slot) {
    size_t before = slots.size();
    for (auto &gpc : perGpc)
      if (slot < gpc.size())
        slots.push_back(gpc[slot]);
    if (slots.size() == before)
      break;
  }
  if (slots.empty())
    error = "a cluster of " + std::to_string(clusterCtas) +
            " CTAs does not fit in one GPC (the largest has " +
            std::to_string(*std::max_element(gpcs.begin(), gpcs.end())) +
            " SMs, each holding " + std::to_string(residentCtasPerSM) +
            " of these CTAs at once)";
}

uint32_t ClusterPlacement::getSM(uint64_t cluster, uint32_t rank,
                                 uint64_t linearCta) const {
  if (clusterCtas == 1)
    return static_cast<uint32_t>(linearCta % numSMs);
  return slots[cluster % slots.size()][rank];
}

LaunchResult executeLaunch(const LaunchRequest &request, DeviceMemory &memory) {
  LaunchResult result;
  const Kernel &kernel = *request.kernel;
  uint64_t threads =
      uint64_t(request.block[0]) * request.block[1] * request.block[2];
  uint64_t ctas = uint64_t(request.grid[0]) * request.grid[1] * request.grid[2];
  uint32_t limit =
      kernel.maxThreads ? std::min<uint32_t>(kernel.maxThreads, 1024) : 1024;
  if (threads == 0 || threads > limit || ctas == 0) {
    result.error = 1; // CUDA_ERROR_INVALID_VALUE
    result.report = "fdemu: kernel " + kernel.name + ": a block of " +
                    std::to_string(threads) + " threads and a grid of " +
                    std::to_string(ctas) + " blocks: blocks must have 1 to " +
                    std::to_string(limit) +
                    " threads and grids at least one block";
    return result;
  }
  // What the driver checked (setCluster) holds here too, whoever builds the
  // request: whole clusters of 1 to 16 CTAs, GPCs within the SMs.
  const uint32_t *cluster = request.cluster;
  uint64_t clusterCtas = uint64_t(cluster[0]) * cluster[1] * cluster[2];
  uint64_t gpcSMs = 0;
  for (unsigned sms : request.smsPerGpc)
    gpcSMs += sms;
  bool wholeClusters = clusterCtas >= 1 && clusterCtas <= kMaxClusterCtas;
  for (int i = 0; i < 3 && wholeClusters; ++i)
    wholeClusters = request.grid[i] % cluster[i] == 0;
  if (!wholeClusters || gpcSMs > request.numSMs) {
    result.error = kInvalidClusterSize;
    result.report =
        "fdemu: kernel " + kernel.name + ": clusters of " +
        std::to_string(cluster[0]) + " x " + std::to_string(cluster[1]) +
        " x " + std::to_string(cluster[2]) + " CTAs over the grid and " +
        std::to_string(gpcSMs) +
        " SMs in GPCs: clusters must divide the grid, hold 1 to " +
        std::to_string(kMaxClusterCtas) + " CTAs and lie in the GPU's SMs";
    return result;
  }
  LaunchCounters &counters = result.counters;
  counters.perSM.resize(request.numSMs);
  counters.ctas = ctas;
  counters.threadsPerCta = threads;
  counters.registersPerThread = request.registersPerThread;
  counters.registersAssumed = request.registersAssumed;
  counters.residentCtasPerSM = getResidentCtasPerSM(
      request.smResources, threads, CtaRunner::getSharedBytes(request),
      request.registersPerThread);
  Timeline timeline(kernel, request.latencyModel);
  ClusterPlacement placement(request, counters.residentCtasPerSM);
  if (!placement.error.empty()) {
    result.error = kInvalidClusterSize;
    result.report = "fdemu: kernel " + kernel.name + ": " + placement.error;
    return result;
  }
  uint64_t clusters = ctas / CtaRunner::getClusterCtas(request);

  unsigned workers = request.workerThreads
                         ? request.workerThreads
                         : std::thread::hardware_concurrency();
  workers = static_cast<unsigned>(std::max<uint64_t>(
      1, std::min<uint64_t>(workers ? workers : 1, clusters)));
  std::atomic<uint64_t> nextCluster{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  SectorFootprint loadFootprint;
  auto work = [&] {
    CtaRunner runner(request, memory, timeline);
    std::vector<ClassCounts> perSM(request.numSMs);
    ClassCounts total;
    for (uint64_t cluster; !stop && (cluster = nextCluster++) < clusters;) {
      try {
        runner.run(cluster, placement);
      } catch (const LocatedError &error) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!result.error) {
          result.error = error.code;
          result.report = error.report;
        }
        stop = true;
      }
      for (CtaState &cta : runner.ctas) {
        perSM[cta.sm] += cta.counts;
        total += cta.counts;
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    counters.total += total;
    for (unsigned sm = 0; sm < request.numSMs; ++sm)
      counters.perSM[sm] += perSM[sm];
    for (CtaState &cta : runner.ctas) {
      counters.threadInstructions += cta.threadInstructions;
      counters.globalLoadBytes += cta.globalLoadBytes;
      counters.globalStoreBytes += cta.globalStoreBytes;
      counters.sharedBankConflicts += cta.sharedBankConflicts;
      loadFootprint.merge(cta.loadFootprint);
    }
    for (size_t i = 0; i < runner.coverage.size(); ++i)
      (*request.coverage)[i] |= runner.coverage[i];
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < workers; ++i)
    pool.emplace_back(work);
  work();
  for (std::thread &thread : pool)
    thread.join();
  counters.dramLoadSectors = loadFootprint.countDistinct();
  return result;
}

std::string checkImplemented(const Kernel &kernel) {
  for (const Instruction &inst : kernel.code) {
    std::string missing;
    switch (inst.opcode) {
    case Opcode::Ld:
    case Opcode::St:
    case Opcode::Atom:
    case Opcode::Red:
    case Opcode::Cvta:
      missing = checkMemoryImplemented(inst);
      break;
    case Opcode::Mma:
    case Opcode::Ldmatrix:
      missing = checkTensorCoreImplemented(inst);
      break;
    case Opcode::CpAsync:
    case Opcode::CpAsyncCommit:
    case Opcode::CpAsyncWait:
    case Opcode::CpAsyncWaitAll:
      missing = checkAsyncCopyImplemented(inst);
      break;
    case Opcode::WarpgroupMma:
    case Opcode::WarpgroupFence:
    case Opcode::WarpgroupCommit:
    case Opcode::WarpgroupWait:
      missing = checkWarpgroupImplemented(inst);
      break;
    case Opcode::ClusterArrive:
    case Opcode::ClusterWait:
    case Opcode::Mapa:
      missing = checkClusterImplemented(inst);
      break;
    default:
      missing = checkArithmeticImplemented(inst);
    }
    if (!missing.empty())
      return "PTX line " + std::to_string(inst.line) + ": '" + inst.text +
             "' is not implemented by fdemu (" + missing + ")";
  }
  return "";
}

} // namespace flashdecode::emu
