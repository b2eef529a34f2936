//===- LatencyModel.h - Instruction latencies and SM residency --*- C++ -*-===//
//
// The inputs of the performance model's latency term. The executor keeps a
// timeline per warp: an instruction issues once its source registers are
// ready, one instruction per cycle, and its results are ready a latency
// later; the order is the PTX's, relaxed as ptxas's scheduler relaxes it
// (a window of reordering, loads placed ahead of their first use). How many
// CTAs an SM runs at once follows from the registers, threads and shared
// memory a CTA needs, as the CUDA occupancy calculator has it. The
// constants, their sources and which are fitted: docs/Emulator.md.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_LATENCYMODEL_H
#define FD_EMULATOR_LATENCYMODEL_H

#include <cstdint>

namespace flashdecode::emu {

struct LatencyModel {
  /// Cycles from an instruction's issue until its result can be read. All
  /// zero (the default) leaves one cycle per instruction.
  ///
  /// f32/f16 add, mul, fma, min/max; integer and logic; compares, selects;
  /// parameter loads (constant-bank operands).
  unsigned alu = 0;
  /// cvt to or from a float type.
  unsigned conversion = 0;
  /// ex2, lg2, rcp, sqrt, rsqrt, sin, cos, tanh, div of floats.
  unsigned specialFunction = 0;
  unsigned shuffle = 0;
  /// ld.shared with one wavefront; each further wavefront adds a cycle.
  unsigned sharedLoad = 0;
  /// ld.global (and generic, local): the DRAM latency under load.
  unsigned globalLoad = 0;
  /// A global load or cp.async whose sectors its CTA loaded before: an L2
  /// hit (0: as globalLoad).
  unsigned l2Hit = 0;
  /// bar.sync: from the last warp's arrival to every warp's next issue.
  unsigned barrier = 0;
  /// mma.sync: from its issue until its accumulators can be read.
  unsigned tensorCore = 0;
  /// ld.shared::cluster of another CTA's shared memory (over the SM-to-SM
  /// network; 0: as sharedLoad).
  unsigned distributedShared = 0;
  /// barrier.cluster: from the cluster's last arrival to its waiting
  /// warps' next issue (0: as barrier).
  unsigned clusterBarrier = 0;

  /// How far ptxas's schedule departs from the PTX order. An instruction
  /// may issue before up to `window - 1` earlier ones of its basic block
  /// (1: PTX order). A global load issues no sooner than the instruction
  /// `loadLead` before its first use (0: where the PTX has it), as ptxas
  /// keeps loads near their use to save registers.
  unsigned window = 1;
  unsigned loadLead = 0;
  /// Bytes of global loads into registers one warp keeps in flight at most:
  /// a load that would pass it issues once enough of the earlier ones have
  /// completed (Little's law per warp). cp.async copies, which land in
  /// shared memory, are not limited. 0: no limit.
  unsigned warpBytesInFlight = 0;
};

/// What one SM has for the CTAs it holds at once.
struct SmResources {
  unsigned maxCtas = 32;
  unsigned maxThreads = 2048;
  unsigned registers = 65536;
  /// Shared memory per SM, and what the driver reserves per CTA.
  unsigned sharedBytes = 228 * 1024;
  unsigned sharedBytesReservedPerCta = 1024;
};

/// Registers per thread fdemu assumes when ptxas cannot say.
constexpr unsigned kAssumedRegistersPerThread = 64;

/// CTAs of `threadsPerCta` threads, `sharedBytesPerCta` bytes of shared
/// memory and `registersPerThread` registers one SM holds at once: the
/// tightest of the CTA, thread, shared-memory and register limits
/// (registers allocated per warp, per thread in units of 8). At least 1.
unsigned getResidentCtasPerSM(const SmResources &sm, uint64_t threadsPerCta,
                              uint64_t sharedBytesPerCta,
                              unsigned registersPerThread);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_LATENCYMODEL_H
