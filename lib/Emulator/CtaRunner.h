//===- CtaRunner.h - Run a launch's clusters one at a time ------*- C++ -*-===//
//
// Internal to the executor: runs one cluster of a launch at a time on the
// calling thread (a launch without clusters has clusters of one CTA). The
// warps of its CTAs take turns: each runs until it exits or waits (at a
// barrier, the cluster barrier or a .sync warp instruction); a CTA's
// barrier is released once every live thread of the CTA waits at it, a
// phase of the cluster barrier once every live thread of the cluster
// arrived. Each CTA's counts, latency and serial tail (the work after its
// last global atomic) are left in `ctas` for executeLaunch to add up per
// SM. The barriers are CtaBarriers.cpp's.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_CTARUNNER_H
#define FD_EMULATOR_CTARUNNER_H

#include "Timeline.h"
#include "WarpState.h"

#include "fd/Emulator/Executor.h"

#include <string>

namespace flashdecode::emu {

/// An error with its location, ready to report.
struct LocatedError {
  int code;
  std::string report;
};

/// Where each cluster's CTAs run: the SM of each (round-robin without
/// clusters; with them, each cluster on SMs of one GPC, the clusters that
/// fit at once taking turns).
class ClusterPlacement {
public:
  /// `error` is set when one cluster does not fit in any GPC.
  ClusterPlacement(const LaunchRequest &request, unsigned residentCtasPerSM);
  uint32_t getSM(uint64_t cluster, uint32_t rank, uint64_t linearCta) const;
  std::string error;

private:
  unsigned numSMs;
  uint32_t clusterCtas;
  /// Per cluster slot (clusters resident at once), its SM per rank.
  std::vector<std::vector<uint32_t>> slots;
};

/// Runs the clusters of one launch, one at a time, on the calling thread.
class CtaRunner {
public:
  CtaRunner(const LaunchRequest &request, DeviceMemory &memory,
            const Timeline &timeline);

  /// Runs cluster `index` (clusters in the grid's order, x fastest; its
  /// CTAs by rank, x fastest); throws LocatedError.
  void run(uint64_t index, const ClusterPlacement &placement);

  /// A CTA's shared memory: the static variables, then the dynamic bytes.
  static uint32_t getSharedBytes(const LaunchRequest &request);
  /// The CTAs of a cluster (1 without clusters).
  static uint32_t getClusterCtas(const LaunchRequest &request);

  /// The cluster's CTAs by rank.
  std::vector<CtaState> ctas;
  /// The CTAs' coverage of the kernel's instructions (LaunchRequest::coverage),
  /// when the launch records it; empty otherwise.
  std::vector<uint8_t> coverage;

private:
  void startCta(CtaState &cta, uint64_t clusterIndex, uint32_t rank,
                const ClusterPlacement &placement);
  void startWarp(CtaState &cta, WarpState &warp, uint32_t index);

  /// All running lanes leave the converged state: their pcs are explicit.
  static void materialize(WarpState &warp);

  static void setPc(WarpState &warp, uint32_t lanes, uint32_t pc);

  static void leave(WarpState &warp, uint32_t lanes, LaneState state,
                    uint32_t pc);

  [[noreturn]] void fail(const ExecutionError &error, const WarpState &warp,
                         const Instruction &inst, uint32_t mask);

  void runWarp(WarpState &warp);

  void execute(const Instruction &inst, WarpState &warp, uint32_t pc,
               uint32_t mask, uint32_t active);

  /// The lanes of `active` wait at the .sync instruction at `pc` until it
  /// can complete.
  void arriveAtWarpSync(const Instruction &inst, WarpState &warp, uint32_t pc,
                        uint32_t active);

  /// Runs the .sync instruction at `pc` for the lanes waiting there once
  /// every non-exited lane of each one's member mask is among them.
  void completeWarpSync(WarpState &warp, uint32_t pc);

  /// Lanes exited: lanes waiting at a .sync instruction for them may go on.
  void completeWarpSyncsAfterExit(WarpState &warp);

  /// barrier.cluster.arrive and barrier.cluster.wait for the lanes of
  /// `active`.
  void arriveAtCluster(const Instruction &inst, WarpState &warp,
                       uint32_t active);
  void waitAtCluster(const Instruction &inst, WarpState &warp, uint32_t pc,
                     uint32_t active);

  enum class BarrierState { Released, Waiting, Exited };
  /// Releases `cta`'s barrier when every live thread of it waits there.
  BarrierState releaseBarrier(CtaState &cta);
  /// Completes the cluster barrier's phase when every live thread of the
  /// cluster arrived; whether it did.
  bool completeClusterPhase();
  /// No warp can run and no barrier can be released: reports what a GPU
  /// would hang on.
  [[noreturn]] void reportDeadlock();

  const LaunchRequest &request;
  const Kernel &kernel;
  const Timeline &timeline;
  uint32_t threads = 0;
  /// The cluster barrier: phases completed, when the last one did (the
  /// latency model), and the latest arrival in the phase under way.
  uint32_t clusterPhases = 0;
  std::vector<uint64_t> clusterPhaseDone;
  uint64_t latestClusterArrival = 0;
  bool tracing = false;
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_CTARUNNER_H
