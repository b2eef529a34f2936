//===- CtaBarriers.cpp - The barriers of a cluster's CTAs -----------------===//
//
// CtaRunner's barriers: a CTA's bar.sync, released once every live thread
// of the CTA waits at it; the cluster barrier (barrier.cluster.arrive /
// wait), whose phase completes once every live thread of the cluster
// arrived (a thread arrives once a phase, then waits); and the report of
// what a GPU would hang on when neither can be released.
//
//===----------------------------------------------------------------------===//

#include "CtaRunner.h"

#include <algorithm>

namespace flashdecode::emu {

void CtaRunner::arriveAtCluster(const Instruction &inst, WarpState &warp,
                                uint32_t active) {
  forEachLane(active, [&](int lane) {
    if (warp.clusterArrivals[lane] != warp.clusterWaits[lane])
      throw ExecutionError{kLaunchFailed,
                           "barrier.cluster.arrive twice without a "
                           "barrier.cluster.wait in between (a thread "
                           "arrives once a phase, then waits)",
                           lane};
    ++warp.clusterArrivals[lane];
  });
}

void CtaRunner::waitAtCluster(const Instruction &inst, WarpState &warp,
                              uint32_t pc, uint32_t active) {
  uint32_t blocked = 0;
  uint64_t done = 0;
  forEachLane(active, [&](int lane) {
    if (warp.clusterArrivals[lane] != warp.clusterWaits[lane] + 1)
      throw ExecutionError{kLaunchFailed,
                           "barrier.cluster.wait without a "
                           "barrier.cluster.arrive before it (a thread "
                           "arrives once a phase, then waits)",
                           lane};
    uint32_t phase = warp.clusterWaits[lane]++;
    if (phase < clusterPhases)
      done = std::max(done, clusterPhaseDone[phase]);
    else
      blocked |= 1u << lane;
  });
  Timeline::waitUntil(warp.timing, done);
  if (active != blocked)
    setPc(warp, active & ~blocked, pc + 1);
  if (blocked)
    leave(warp, blocked, LaneState::WaitingCluster, pc);
}

bool CtaRunner::completeClusterPhase() {
  bool anyLive = false;
  for (CtaState &cta : ctas)
    for (WarpState &warp : cta.warps) {
      bool behind = false;
      forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
        anyLive = true;
        behind |= warp.clusterArrivals[lane] <= clusterPhases;
      });
      if (behind)
        return false;
    }
  if (!anyLive)
    return false;
  uint64_t done = timeline.releaseClusterBarrier(latestClusterArrival);
  clusterPhaseDone.push_back(done);
  ++clusterPhases;
  latestClusterArrival = 0;
  for (CtaState &cta : ctas) {
    // The barrier's release and acquire order every access of the cluster
    // before it with every one after: CTA-local ones too.
    ++cta.clusterEpoch;
    ++cta.barrierEpoch;
    for (WarpState &warp : cta.warps) {
      uint32_t waiting = 0;
      forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
        if (warp.state[lane] == LaneState::WaitingCluster &&
            warp.clusterWaits[lane] == clusterPhases) {
          warp.state[lane] = LaneState::Running;
          ++warp.pc[lane];
          waiting |= 1u << lane;
        }
      });
      if (!waiting)
        continue;
      warp.runningMask |= waiting;
      warp.converged = false;
      Timeline::waitUntil(warp.timing, done);
    }
  }
  return true;
}

CtaRunner::BarrierState CtaRunner::releaseBarrier(CtaState &cta) {
  uint32_t live = 0, atBarrier = 0;
  for (WarpState &warp : cta.warps)
    forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
      ++live;
      atBarrier += warp.state[lane] == LaneState::WaitingBarrier;
    });
  if (live == 0)
    return BarrierState::Exited;
  if (atBarrier != live)
    return BarrierState::Waiting;
  for (WarpState &warp : cta.warps) {
    forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
      warp.state[lane] = LaneState::Running;
      ++warp.pc[lane];
    });
    warp.runningMask = warp.existingMask & ~warp.exitedMask;
    warp.converged = false;
  }
  timeline.releaseBarrier(cta.warps);
  ++cta.barrierEpoch;
  return BarrierState::Released;
}

void CtaRunner::reportDeadlock() {
  // Name a thread waiting at a .sync warp instruction for lanes that are
  // elsewhere, or else one at a barrier.
  for (CtaState &cta : ctas) {
    uint32_t live = 0, atBarrier = 0;
    for (WarpState &warp : cta.warps)
      forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
        ++live;
        atBarrier += warp.state[lane] == LaneState::WaitingBarrier;
      });
    for (WarpState &warp : cta.warps)
      forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
        if (warp.state[lane] != LaneState::WaitingWarpSync)
          return;
        const Instruction &inst = kernel.code[warp.pc[lane]];
        uint32_t members = getMemberMask(inst, warp, lane);
        uint32_t here = 0;
        forEachLane(warp.existingMask, [&](int other) {
          if (warp.state[other] == LaneState::WaitingWarpSync &&
              warp.pc[other] == warp.pc[lane])
            here |= 1u << other;
        });
        fail({kLaunchFailed,
              "deadlock: lane " + std::to_string(lane) + " of warp " +
                  std::to_string(warp.index) +
                  " waits at a .sync warp instruction for lanes " +
                  hexLaneMask(members & ~warp.exitedMask & ~here) +
                  " (member mask " + hexLaneMask(members) +
                  ") that are elsewhere (" + std::to_string(atBarrier) +
                  " of " + std::to_string(live) +
                  " live threads wait at bar.sync)" +
                  (isAlignedCollective(inst)
                       ? "; the warp diverged before this .aligned "
                         "instruction, which all 32 lanes must execute "
                         "together (undefined on a GPU)"
                       : "; a GPU would hang"),
              lane},
             warp, inst, 1u << lane);
      });
  }
  for (CtaState &cta : ctas)
    for (WarpState &warp : cta.warps)
      forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
        if (warp.state[lane] == LaneState::WaitingCluster)
          fail({kLaunchFailed,
                "deadlock: this thread waits at barrier.cluster.wait for "
                "threads of the cluster that neither arrive nor exit (CTA "
                "barriers and the cluster barrier wait on each other); a "
                "GPU would hang",
                lane},
               warp, kernel.code[warp.pc[lane]], 1u << lane);
      });
  fail({kLaunchFailed, "deadlock"}, ctas[0].warps[0], kernel.code[0], 1);
}

} // namespace flashdecode::emu
