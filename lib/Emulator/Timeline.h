//===- Timeline.h - When a warp's instructions would issue ------*- C++ -*-===//
//
// Internal to the executor: the latency model of LatencyModel.h. Each warp
// has, per register, the cycle its value is ready (one value for the whole
// warp: its lanes issue together). An instruction issues at the first free
// cycle at or after the ready cycles of its sources (guard and address
// registers included), after every instruction `window` or more before it,
// and after the last branch or barrier; its destinations are ready
// `latency` cycles later. A load does not stall the warp until its result
// is read, so loads issued close together are in flight together. A global
// load whose first use is further ahead than `loadLead` instructions counts
// as issued at the instruction `loadLead` before that use. PTX moves are
// register renames that ptxas removes: they neither issue nor wait, and
// their destinations are ready when their sources are. A cp.async's data
// is ready a global-load latency after it issues; cp.async.wait_group
// issues once the groups it completes are ready (their use), and it and
// cp.async.commit_group are fences. wgmma.mma_async's accumulators are
// ready for a chained wgmma when its multiply-adds are done (N / 2 cycles);
// wgmma.wait_group issues a tensor-core latency after that for the groups
// it retires, and it and wgmma.commit_group are fences. barrier.cluster's
// arrive and wait are fences; a phase completes a cluster-barrier latency
// after the cluster's last arrival, and a wait issues no sooner.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_TIMELINE_H
#define FD_EMULATOR_TIMELINE_H

#include "fd/Emulator/LatencyModel.h"
#include "fd/Emulator/Program.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace flashdecode::emu {

struct WarpState;

/// A warp's timeline.
struct WarpTiming {
  /// The latest cycle an instruction issued; nothing issues before `fence`
  /// (the last branch or barrier).
  uint64_t clock = 0, fence = 0;
  /// The latest issue of the instructions that left the window.
  uint64_t floor = 0;
  /// Per register, the cycle its value is ready, and for a global load's
  /// result the latency it had (DRAM or an L2 hit; loadLead places it).
  std::vector<uint64_t> ready;
  std::vector<uint32_t> loadLatency;
  /// Issue cycles of the last `window` instructions, a ring at `slot`.
  std::vector<uint64_t> recent;
  size_t slot = 0;
  /// One bit per cycle in [busyBase, busyBase + kBusyCycles): an
  /// instruction issued then. Far more than the cycles a window of
  /// instructions spans unless it chains many loads.
  static constexpr uint64_t kBusyCycles = 256 * 64;
  uint64_t busyBase = 0;
  std::array<uint64_t, kBusyCycles / 64> busy{};
  /// cp.async: when the copies of the open group, and of each committed
  /// group not yet waited for (oldest first), are in shared memory.
  uint64_t openCopiesReady = 0;
  std::vector<uint64_t> committedCopiesReady;
  /// wgmma.mma_async: the same for its groups (wgmma.commit_group).
  uint64_t openMmasReady = 0;
  std::vector<uint64_t> committedMmasReady;
  /// The issue of the warp's last executed global atomic, if any.
  std::optional<uint64_t> lastGlobalAtomic;
  /// Global loads and copies in flight: when each completes, and its
  /// 32-byte sectors (warpBytesInFlight).
  std::vector<std::pair<uint64_t, uint64_t>> loadsInFlight;
  uint64_t sectorsInFlight = 0;
};

class Timeline {
public:
  /// Decodes each instruction's registers and latency, and where global
  /// loads are placed, once per launch.
  Timeline(const Kernel &kernel, const LatencyModel &model);

  /// A warp starts at cycle 0 with every register ready.
  void start(WarpTiming &timing) const;

  /// Instruction `pc` issues. `executed`: some lane ran it (when its guard
  /// was false everywhere no result is pending). `extraCycles` lengthen its
  /// latency (shared-memory wavefronts past the first). `loadSectors`: the
  /// global sectors a load or cp.async fetched; `reread`: the CTA had
  /// loaded all of them before (an L2 hit: l2HitLatency). Returns the cycle
  /// it issued (a rename: when its sources are ready).
  uint64_t issue(WarpTiming &timing, uint32_t pc, bool executed,
                 uint64_t extraCycles, uint64_t loadSectors,
                 bool reread) const {
    const Entry &entry = entries[pc];
    const uint32_t *reg = registers.data() + entry.first;
    uint64_t ready = 0;
    for (unsigned i = 0; i < entry.numSources; ++i)
      ready = std::max(ready, timing.ready[reg[i]]);
    reg += entry.numSources;
    if (entry.rename) {
      for (unsigned i = 0; i < entry.numDestinations; ++i)
        timing.ready[reg[i]] = ready;
      return ready;
    }
    // The instruction `window` back leaves the window: nothing later may
    // issue before it or anything that left before it.
    timing.floor = std::max(timing.floor, timing.recent[timing.slot]);
    uint64_t earliest = std::max({ready, timing.fence, timing.floor});
    if (entry.fence)
      earliest = std::max(earliest, timing.clock + 1);
    if (entry.asyncCopy == AsyncCopy::Commit ||
        entry.asyncCopy == AsyncCopy::WaitAll) {
      timing.committedCopiesReady.push_back(timing.openCopiesReady);
      timing.openCopiesReady = 0;
    }
    if (entry.asyncCopy >= AsyncCopy::Wait)
      earliest = std::max(earliest, completeGroups(timing.committedCopiesReady,
                                                   entry.keepGroups));
    if (entry.warpgroup == Warpgroup::Commit) {
      timing.committedMmasReady.push_back(timing.openMmasReady);
      timing.openMmasReady = 0;
    }
    if (entry.warpgroup == Warpgroup::Wait)
      earliest = std::max(earliest, completeGroups(timing.committedMmasReady,
                                                   entry.keepGroups));
    // Only loads into registers: ptxas's register allocation is what limits
    // them. A cp.async lands in shared memory, outside that limit.
    bool capped = entry.globalLoad && loadSectors && maxSectorsInFlight;
    if (capped)
      earliest = std::max(earliest, makeRoom(timing, earliest, loadSectors));
    uint64_t start = takeCycle(timing, earliest);
    uint32_t loadLatency =
        reread && l2HitLatency ? l2HitLatency : globalLoadLatency;
    if (capped) {
      timing.loadsInFlight.push_back({start + loadLatency, loadSectors});
      timing.sectorsInFlight += loadSectors;
    }
    if (entry.asyncCopy == AsyncCopy::Copy && executed)
      timing.openCopiesReady =
          std::max(timing.openCopiesReady, start + loadLatency);
    if (entry.warpgroup == Warpgroup::Mma && executed)
      timing.openMmasReady =
          std::max(timing.openMmasReady, start + entry.warpgroupCompletion);
    if (entry.globalAtomic && executed)
      timing.lastGlobalAtomic = start;
    timing.recent[timing.slot] = start;
    if (++timing.slot == timing.recent.size())
      timing.slot = 0;
    timing.clock = std::max(timing.clock, start);
    if (entry.fence)
      timing.fence = start + entry.fenceLatency;
    uint32_t latency = entry.globalLoad ? loadLatency : entry.latency;
    if (executed)
      for (unsigned i = 0; i < entry.numDestinations; ++i) {
        timing.ready[reg[i]] = start + latency + extraCycles;
        if (entry.globalLoad)
          timing.loadLatency[reg[i]] = loadLatency;
      }
    reg += entry.numDestinations;
    for (unsigned i = 0; i < entry.numPlacedLoads; ++i)
      timing.ready[reg[i]] =
          std::max(timing.ready[reg[i]], start + timing.loadLatency[reg[i]]);
    return start;
  }

  /// Whether a load's latency depends on its CTA having loaded its sectors
  /// before (issue's `reread`).
  bool tellsRereadsApart() const { return l2HitLatency != 0; }
  /// A released bar.sync: every warp with live lanes issues next after the
  /// last one's arrival plus the barrier's latency.
  void releaseBarrier(std::vector<WarpState> &warps) const;
  /// A completed phase of the cluster barrier whose last arrival issued at
  /// `latestArrival`: when its waiting warps may go on.
  uint64_t releaseClusterBarrier(uint64_t latestArrival) const {
    return latestArrival + clusterBarrierLatency;
  }
  /// Nothing of the warp issues before `cycle` (a barrier it waited at).
  static void waitUntil(WarpTiming &timing, uint64_t cycle) {
    timing.fence = std::max(timing.fence, cycle);
    timing.clock = std::max(timing.clock, cycle);
  }

  /// A finished CTA's latency: the latest issue of its warps.
  static uint64_t getCtaCycles(const std::vector<WarpState> &warps);
  /// A finished CTA's cycles after its last global atomic (0 without one):
  /// work that waited on other CTAs' counts, as the block that counts last
  /// does, and so runs after them (PerformanceModel.h).
  static uint64_t getSerialTailCycles(const std::vector<WarpState> &warps);

private:
  enum class AsyncCopy : uint8_t { None, Copy, Commit, Wait, WaitAll };
  enum class Warpgroup : uint8_t { None, Mma, Commit, Wait };

  struct Entry {
    /// Into `registers`: the sources, the destinations, then the results
    /// of global loads placed at this instruction (loadLead).
    uint32_t first = 0;
    uint16_t numSources = 0, numDestinations = 0, numPlacedLoads = 0;
    bool rename = false;
    /// Branches, barriers, exits: issue after every earlier instruction,
    /// and every later one issues after them.
    bool fence = false;
    AsyncCopy asyncCopy = AsyncCopy::None;
    Warpgroup warpgroup = Warpgroup::None;
    /// wgmma.mma_async: from its issue until wait_group may retire it.
    uint32_t warpgroupCompletion = 0;
    /// A memory fence (membar, fence): what it delays every later
    /// instruction by.
    uint32_t fenceLatency = 0;
    /// atom or red on global memory; a global load (ld, not atom).
    bool globalAtomic = false, globalLoad = false;
    /// cp.async.wait_group, wgmma.wait_group: the newest committed groups
    /// it leaves pending.
    uint32_t keepGroups = 0;
    uint32_t latency = 0;
  };

  /// The cycle the committed groups (cp.async or wgmma) but the newest
  /// `keep` are complete; they are waited for.
  static uint64_t completeGroups(std::vector<uint64_t> &groups, uint32_t keep) {
    size_t done = groups.size() > keep ? groups.size() - keep : 0;
    uint64_t ready = 0;
    for (size_t i = 0; i < done; ++i)
      ready = std::max(ready, groups[i]);
    groups.erase(groups.begin(), groups.begin() + done);
    return ready;
  }

  /// The first cycle from `cycle` on at which `sectors` more fit in the
  /// warp's loads in flight: the loads complete by then leave.
  uint64_t makeRoom(WarpTiming &timing, uint64_t cycle,
                    uint64_t sectors) const {
    auto &loads = timing.loadsInFlight;
    for (;;) {
      for (size_t i = 0; i < loads.size();)
        if (loads[i].first <= cycle) {
          timing.sectorsInFlight -= loads[i].second;
          loads[i] = loads.back();
          loads.pop_back();
        } else {
          ++i;
        }
      if (loads.empty() ||
          timing.sectorsInFlight + sectors <= maxSectorsInFlight)
        return cycle;
      uint64_t next = loads.front().first;
      for (const auto &load : loads)
        next = std::min(next, load.first);
      cycle = next;
    }
  }
  /// The first cycle from `cycle` on with no instruction issued; takes it.
  /// A cycle before the busy window is forgotten and taken as free.
  static uint64_t takeCycle(WarpTiming &timing, uint64_t cycle) {
    if (cycle < timing.busyBase)
      return cycle;
    for (;;) {
      if (cycle >= timing.busyBase + WarpTiming::kBusyCycles)
        slideBusy(timing, cycle);
      uint64_t &word = timing.busy[cycle / 64 % timing.busy.size()];
      uint64_t free = ~word >> (cycle % 64);
      if (free) {
        cycle += __builtin_ctzll(free);
        word |= uint64_t(1) << (cycle % 64);
        return cycle;
      }
      cycle = (cycle | 63) + 1;
    }
  }
  /// Moves the busy window so that it holds `cycle`, forgetting the oldest.
  static void slideBusy(WarpTiming &timing, uint64_t cycle);

  std::vector<Entry> entries;
  std::vector<uint32_t> registers;
  size_t numRegisters = 0, window = 1;
  unsigned globalLoadLatency = 0, barrierLatency = 0, l2HitLatency = 0;
  unsigned clusterBarrierLatency = 0;
  /// warpBytesInFlight in sectors (0: no limit).
  uint64_t maxSectorsInFlight = 0;
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_TIMELINE_H
