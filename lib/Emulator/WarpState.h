//===- WarpState.h - The state a CTA's warps execute on ---------*- C++ -*-===//
//
// Internal to the executor: registers structure-of-arrays (register r of
// lane l at r * 32 + l, raw bits), per-lane program counters and states,
// the warp's clock, the CTA's shared memory with its shadows, and the
// counters.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_WARPSTATE_H
#define FD_EMULATOR_WARPSTATE_H

#include "SectorFootprint.h"
#include "Timeline.h"

#include "fd/Emulator/Executor.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace flashdecode::emu {

constexpr int kWarpSize = 32;

/// An execution error: the CUresult and the report (without the location,
/// which the executor adds).
struct ExecutionError {
  int code;
  std::string message;
  /// The lane that faulted, or -1 for the warp as a whole.
  int lane = -1;
};

constexpr int kIllegalAddress = 700;
constexpr int kMisalignedAddress = 716;
constexpr int kLaunchFailed = 719;
constexpr int kIllegalInstruction = 715;

enum class LaneState : uint8_t {
  Running,
  WaitingWarpSync,
  WaitingBarrier,
  /// At barrier.cluster.wait until the phase it arrived in completes.
  WaitingCluster,
  Exited
};

struct CtaState;

/// A cp.async of one lane that has not landed: the bytes it read when it
/// issued (zero-filled past src-size), where they go, and its group (the
/// lane's count of committed groups when it issued).
struct PendingCopy {
  uint32_t sharedOffset = 0;
  uint32_t group = 0;
  /// The barrier epoch it issued in: it may land any time from then on.
  uint32_t issueEpoch = 0;
  uint8_t lane = 0, bytes = 0;
  uint8_t data[16] = {};
};

/// A wgmma.mma_async that no wgmma.wait_group has retired: its group (the
/// warp's count of committed groups when it issued) and the 16-byte chunks
/// of shared memory it read (offsets, and their bytes then, 16 each).
struct PendingWarpgroupMma {
  const Instruction *inst = nullptr;
  uint32_t group = 0;
  std::vector<uint32_t> sharedOffsets;
  std::vector<uint8_t> sharedBytes;
};

/// What a pending wgmma.mma_async leaves other instructions of its warp to
/// do with a register (WarpState::registerLocks).
constexpr uint8_t kRegisterFree = 0, kRegisterNoWrites = 1,
                  kRegisterNoAccess = 2;

struct WarpState {
  CtaState *cta = nullptr;
  uint32_t index = 0;
  std::vector<uint64_t> registers;
  uint32_t pc[kWarpSize] = {};
  LaneState state[kWarpSize] = {};
  /// Lanes in state Running; lanes that exist (the last warp may be short).
  uint32_t runningMask = 0, existingMask = 0, exitedMask = 0;
  /// All running lanes are at `commonPc` (their pc[] entries are stale).
  bool converged = true;
  uint32_t commonPc = 0;
  /// Lanes that may access global memory: all of them, but in a
  /// programmatic launch only those past griddepcontrol.wait.
  uint32_t waitedMask = ~0u;
  /// Per-thread local memory, localBytes per lane.
  std::vector<uint8_t> local;
  /// When its instructions would issue on a GPU.
  WarpTiming timing;
  /// cp.async copies not yet completed by a wait, in issue order, and per
  /// lane the groups cp.async.commit_group has closed.
  std::vector<PendingCopy> pendingCopies;
  uint32_t committedGroups[kWarpSize] = {};
  /// wgmma: the pending wgmma.mma_async in issue order, the groups
  /// wgmma.commit_group has closed, whether a wgmma.fence came since the
  /// warp started or last waited, and per register its lock while any is
  /// pending (empty until the first).
  std::vector<PendingWarpgroupMma> pendingWarpgroupMmas;
  uint32_t committedWarpgroupGroups = 0;
  bool warpgroupFenced = false;
  std::vector<uint8_t> registerLocks;
  /// Per lane, its barrier.cluster.arrive and barrier.cluster.wait so far:
  /// a lane arrives once a phase, then waits.
  uint32_t clusterArrivals[kWarpSize] = {};
  uint32_t clusterWaits[kWarpSize] = {};

  uint64_t &reg(uint32_t index, int lane) {
    return registers[static_cast<size_t>(index) * kWarpSize + lane];
  }
  uint32_t threadIndex(int lane) const { return index * kWarpSize + lane; }
};

struct CtaState {
  const LaunchRequest *request = nullptr;
  const Kernel *kernel = nullptr;
  DeviceMemory *memory = nullptr;
  uint32_t ctaid[3] = {};
  /// Its index in the grid (x fastest) and the SM it runs on.
  uint64_t linear = 0;
  uint32_t sm = 0;
  uint32_t sharedBytes = 0;
  std::vector<uint8_t> shared;
  /// Shadows per shared byte: written since the CTA started; the barrier
  /// epoch and thread of the last write and of the last read (racecheck).
  std::vector<uint8_t> sharedWritten;
  std::vector<uint32_t> lastWriteEpoch, lastReadEpoch;
  std::vector<uint16_t> lastWriter, lastReader;
  uint32_t barrierEpoch = 1;
  /// Whether a thread executed griddepcontrol.launch_dependents.
  bool triggeredDependents = false;
  /// The CTA's work when its last global atomic so far executed: what
  /// follows is its serial tail's.
  std::optional<WorkCounts> workAtLastGlobalAtomic;
  std::vector<WarpState> warps;
  ClassCounts counts;
  uint64_t threadInstructions = 0;
  uint64_t globalLoadBytes = 0, globalStoreBytes = 0;
  uint64_t sharedBankConflicts = 0;
  /// The global sectors loaded, over all the CTAs this state has run.
  SectorFootprint loadFootprint;
  /// The global sectors this CTA has loaded, and whether the last global
  /// load (or cp.async) read only such sectors: an L2 hit for the latency
  /// model, as the CTA's own earlier read brought them into L2.
  std::unordered_set<uint64_t> sectorsLoadedByCta;
  bool lastLoadReread = false;
  /// Whether the latency model tells rereads apart (an L2 hit's latency is
  /// set): the set above is kept only then.
  bool tracksRereads = false;
  /// The allocation the last global access found (no allocation changes
  /// during a launch; reset per CTA).
  Allocation *lastAllocation = nullptr;
  /// Its cluster (the CTAs CtaRunner runs together, this one among them at
  /// `clusterRank`) and the cluster barrier's completed phases plus 1: the
  /// epoch of cross-CTA shared-memory accesses. A launch without clusters
  /// has clusters of one CTA.
  std::vector<CtaState> *cluster = nullptr;
  uint32_t clusterRank = 0;
  uint32_t clusterEpoch = 1;
  /// Racecheck of accesses from different CTAs of the cluster (kept only in
  /// clusters of two or more): per shared byte, the cluster epoch, the
  /// thread (rank * threads per CTA + thread; kSeveralCtas for readers of
  /// several CTAs) and that thread's CTA's barrier epoch of its last write
  /// and last read.
  std::vector<uint32_t> clusterWriteEpoch, clusterReadEpoch;
  std::vector<uint16_t> clusterWriter, clusterReader;
  std::vector<uint32_t> clusterWriteBarrier, clusterReadBarrier;
  /// Every thread has exited: its shared memory is gone for the cluster.
  bool exited = false;
  /// The last cluster epoch an access by another CTA to its shared memory
  /// may fall in (0: none; the next, for an access between the accessor's
  /// arrive and wait), and that CTA's rank: the CTA must not exit before a
  /// later phase (nothing would keep it from exiting before the access).
  uint32_t lastRemoteAccessEpoch = 0, lastRemoteAccessor = 0;
};

constexpr uint16_t kSeveralCtas = 0xFFFF;

/// A .shared::cluster address: a CTA's own .shared::cta addresses stand for
/// its own memory; mapa gives (rank + 1) << kClusterRankShift | offset.
constexpr unsigned kClusterRankShift = 24;

/// A lane mask as errors print it: 0x and 8 hex digits.
inline std::string hexLaneMask(uint32_t mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", mask);
  return text;
}

/// An address as errors print it: 0x and its hex digits.
inline std::string hexAddress(uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(address));
  return text;
}

/// Operand reads and register writes, masked to the instruction's width.
inline uint64_t readOperand(WarpState &warp, const Operand &operand, int lane) {
  if (operand.kind == Operand::Kind::Register) {
    uint64_t value = warp.reg(operand.registers[0], lane);
    return operand.negated ? !value : value;
  }
  return operand.value;
}

inline uint64_t truncateTo(uint64_t value, unsigned bytes) {
  return bytes >= 8 ? value : value & ((uint64_t(1) << (bytes * 8)) - 1);
}

inline int64_t signExtend(uint64_t value, unsigned bytes) {
  if (bytes >= 8)
    return static_cast<int64_t>(value);
  unsigned shift = 64 - bytes * 8;
  return static_cast<int64_t>(value << shift) >> shift;
}

/// Runs an arithmetic, logic, comparison, conversion or move instruction
/// for the lanes of `mask` (guard already applied). Returns false for
/// opcodes it does not handle.
bool executeArithmetic(const Instruction &inst, WarpState &warp, uint32_t mask);

/// ld/st/atom/red/cvta for the lanes of `mask`, with every check.
void executeMemory(const Instruction &inst, WarpState &warp, uint32_t mask);

/// cp.async, commit_group, wait_group, wait_all for the lanes of `mask`
/// (AsyncCopy.cpp).
void executeAsyncCopy(const Instruction &inst, WarpState &warp, uint32_t mask);
/// The lanes of `mask` exit: their copies that no wait completed are
/// dropped (they never land).
void dropAsyncCopies(WarpState &warp, uint32_t mask);

/// mma.sync, ldmatrix and the wgmma family: .aligned, so every lane of the
/// warp executes them together, as if their member mask were the whole
/// warp.
inline bool isAlignedCollective(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::Mma:
  case Opcode::Ldmatrix:
  case Opcode::WarpgroupMma:
  case Opcode::WarpgroupFence:
  case Opcode::WarpgroupCommit:
  case Opcode::WarpgroupWait:
    return true;
  default:
    return false;
  }
}

/// The member mask of a .sync warp instruction in `lane`.
inline uint32_t getMemberMask(const Instruction &inst, WarpState &warp,
                              int lane) {
  if (isAlignedCollective(inst))
    return ~0u;
  unsigned operand = inst.opcode == Opcode::Shfl   ? 4
                     : inst.opcode == Opcode::Vote ? 2
                                                   : 0;
  return static_cast<uint32_t>(readOperand(warp, inst.operands[operand], lane));
}

/// Runs the .sync warp instruction `inst` for the lanes of `arrived`, which
/// wait at it with every non-exited lane of their member masks
/// (WarpCollectives.cpp: shfl.sync, vote.sync, and after checking that the
/// whole warp is there, mma.sync and ldmatrix).
void executeWarpCollective(const Instruction &inst, WarpState &warp,
                           uint32_t arrived);
/// mma.sync and ldmatrix for all 32 lanes (TensorCore.cpp).
void executeMma(const Instruction &inst, WarpState &warp);
void executeLdmatrix(const Instruction &inst, WarpState &warp);
/// wgmma.mma_async, wgmma.fence, wgmma.commit_group and wgmma.wait_group
/// for all 32 lanes (WarpgroupMma.cpp).
void executeWarpgroup(const Instruction &inst, WarpState &warp);
/// Throws when `inst` accesses a register a pending wgmma.mma_async of the
/// warp holds (no-op while none is pending).
void checkWarpgroupRegisters(const Instruction &inst, WarpState &warp);
/// Throws when the warp has a pending wgmma.mma_async (it exits).
void checkNoPendingWarpgroupMma(const WarpState &warp);

/// mapa.shared::cluster for the lanes of `mask` (Cluster.cpp).
void executeMapa(const Instruction &inst, WarpState &warp, uint32_t mask);

/// Load-time checks of the families above.
std::string checkArithmeticImplemented(const Instruction &inst);
std::string checkMemoryImplemented(const Instruction &inst);
std::string checkTensorCoreImplemented(const Instruction &inst);
std::string checkAsyncCopyImplemented(const Instruction &inst);
std::string checkWarpgroupImplemented(const Instruction &inst);
std::string checkClusterImplemented(const Instruction &inst);

template <typename Body> inline void forEachLane(uint32_t mask, Body body) {
  while (mask) {
    int lane = __builtin_ctz(mask);
    mask &= mask - 1;
    body(lane);
  }
}

} // namespace flashdecode::emu

#endif // FD_EMULATOR_WARPSTATE_H
