//===- Executor.h - Run one kernel launch on the CPU ------------*- C++ -*-===//
//
// A launch runs every CTA (independent CTAs on a thread pool); a CTA runs
// its warps one after another until each is blocked at a barrier or done,
// then releases the barrier. A warp executes SIMT: the lanes at the lowest
// PC step together under an active mask; lanes reaching a .sync warp
// instruction wait there until every non-exited lane of its member mask
// arrives (sm_70+ independent thread scheduling), the whole warp for the
// .aligned mma.sync and ldmatrix. Every access is checked (bounds,
// alignment, initialization, shared-memory races) and counted, and every
// warp keeps a clock of when its instructions would issue on a GPU
// (LatencyModel.h).
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_EXECUTOR_H
#define FD_EMULATOR_EXECUTOR_H

#include "fd/Emulator/LatencyModel.h"
#include "fd/Emulator/Memory.h"
#include "fd/Emulator/Program.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace flashdecode::emu {

/// What the SM's units do: warp instructions by counter class, shared
/// wavefronts, global sectors.
struct WorkCounts {
  std::array<uint64_t, static_cast<size_t>(InstructionClass::Count)>
      warpInstructions{};
  /// Shared-memory wavefronts (one per bank-conflict-free pass).
  uint64_t sharedWavefronts = 0;
  /// wgmma.mma_async executed per warp (in warpInstructions' TensorCore
  /// class too), and their work in m16n8k16 steps (N / 8 a warp).
  uint64_t warpgroupMmas = 0, warpgroupMmaSteps = 0;
  /// 32-byte sectors of global memory touched per warp instruction.
  uint64_t globalLoadSectors = 0, globalStoreSectors = 0;
  /// 32-byte sectors of other CTAs' shared memory (.shared::cluster)
  /// touched per warp instruction: bytes over the SM-to-SM network.
  uint64_t distributedSharedSectors = 0;

  WorkCounts &operator+=(const WorkCounts &other);
  WorkCounts &operator-=(const WorkCounts &other);
  uint64_t totalWarpInstructions() const;
};

/// Work of one SM (or one launch) by counter class, and its latencies.
struct ClassCounts : WorkCounts {
  /// CTAs run, and the sum of their latencies: a CTA's is the latest clock
  /// of its warps at exit, the time it takes alone on an SM.
  uint64_t ctas = 0, latencyCycles = 0;
  /// The longest of the CTAs' serial tails (Timeline::getSerialTailCycles):
  /// a max, not a sum, when counts are added.
  uint64_t serialTailCycles = 0;
  /// The work the CTAs did in their serial tails, after their last global
  /// atomic in fdemu's order (warps take turns between barriers: exact
  /// where barriers separate the atomic from the work before and after it,
  /// as in a fused merge): in the counts above too, so that the model can
  /// charge it to the tail alone. A sum when counts are added.
  WorkCounts serialTail;
  /// CTAs that executed griddepcontrol.launch_dependents: when it is all of
  /// them, a dependent grid may launch before this one ends.
  uint64_t triggeredCtas = 0;

  ClassCounts &operator+=(const ClassCounts &other);
};

struct LaunchCounters {
  ClassCounts total;
  /// Per SM, CTAs assigned round-robin (CTA i on SM i mod numSMs); in a
  /// launch with clusters, each cluster on the SMs of one GPC
  /// (LaunchRequest::smsPerGpc).
  std::vector<ClassCounts> perSM;
  uint64_t threadInstructions = 0;
  uint64_t globalLoadBytes = 0, globalStoreBytes = 0;
  uint64_t sharedBankConflicts = 0;
  /// The distinct 32-byte sectors the launch's loads touched: what DRAM
  /// serves (total.globalLoadSectors counts a sector again per warp
  /// instruction; the repeats are L2 hits in the model).
  uint64_t dramLoadSectors = 0;
  uint64_t ctas = 0, threadsPerCta = 0;
  /// CTAs one SM holds at once (getResidentCtasPerSM), from the registers
  /// per thread ptxas reported, or kAssumedRegistersPerThread when
  /// `registersAssumed`.
  unsigned residentCtasPerSM = 1, registersPerThread = 0;
  bool registersAssumed = true;
};

/// CUDA_ERROR_INVALID_CLUSTER_SIZE: a cluster the launch cannot have; the
/// most CTAs a cluster has (with the non-portable opt-in, sm_90).
constexpr int kInvalidClusterSize = 912;
constexpr uint32_t kMaxClusterCtas = 16;

struct LaunchRequest {
  const Kernel *kernel = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicSharedBytes = 0;
  /// The parameter buffer in the kernel's .param layout.
  std::vector<uint8_t> parameters;
  unsigned numSMs = 132;
  /// CTAs per cluster in x, y, z ({1, 1, 1}: no clusters), and whether the
  /// launch named them (%is_explicit_cluster).
  uint32_t cluster[3] = {1, 1, 1};
  bool explicitCluster = false;
  /// The SMs of each GPC, in order (GpuModel::smsPerGpc): a cluster's CTAs
  /// run on the SMs of one GPC. Empty: one GPC of numSMs.
  std::vector<unsigned> smsPerGpc;
  unsigned workerThreads = 0; // 0: hardware concurrency
  /// The emulated GPU's latencies and SM resources (GpuModel).
  LatencyModel latencyModel;
  SmResources smResources;
  unsigned registersPerThread = kAssumedRegistersPerThread;
  bool registersAssumed = true;
  /// Products mma.sync adds to its accumulator in one fused sum
  /// (GpuModel::mmaProductsPerSum).
  unsigned mmaProductsPerSum = 16;
  /// Launched with programmatic stream serialization: the kernel may run
  /// beside the one before it on the stream, so a global access before
  /// griddepcontrol.wait is reported (it could race with that kernel).
  bool programmatic = false;
  /// FDEMU_TRACE_CTA: the CTA (linear, x fastest) whose issued instructions
  /// are written to `traceStream`, one line each with its warp and issue
  /// cycle (the latency model's timeline); -1: none.
  int64_t traceCta = -1;
  std::FILE *traceStream = nullptr;
  /// FDEMU_COVERAGE: one entry per instruction of the kernel, to which the
  /// launch ORs kReachedGuardTrue when some lane executed it with its guard
  /// true (bra: took it) and kReachedGuardFalse when some lane reached it
  /// with its guard false (bra: fell through); null: not recorded.
  std::vector<uint8_t> *coverage = nullptr;
};

constexpr uint8_t kReachedGuardTrue = 1;
constexpr uint8_t kReachedGuardFalse = 2;

struct LaunchResult {
  /// A CUresult: 0, or the error a GPU would give (700 illegal address,
  /// 716 misaligned address, 719 launch failed for the checks a GPU does
  /// not make).
  int error = 0;
  /// What went wrong: kernel, PTX line, instruction, block, thread, address.
  std::string report;
  LaunchCounters counters;
};

LaunchResult executeLaunch(const LaunchRequest &request, DeviceMemory &memory);

/// Load-time check: an empty string, or "PTX line N: <instruction> is not
/// implemented (...)" for a form the executor cannot run exactly.
std::string checkImplemented(const Kernel &kernel);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_EXECUTOR_H
