//===- MemoryAccess.cpp - Loads, stores and atomics with every check -----===//
//
// A GPU's faults (illegal and misaligned addresses) and what
// compute-sanitizer would find (reads of memory nothing wrote, shared-memory
// races between warps in one barrier interval) are errors here on every
// launch. Global accesses also count requested bytes and the distinct
// 32-byte sectors each warp instruction touches; shared accesses count
// wavefronts (bank-conflict passes).
//
//===----------------------------------------------------------------------===//

#include "MemoryAccess.h"

#include "FloatFormats.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace flashdecode::emu {
namespace {

std::mutex globalAtomicMutex;

uint64_t atomicResult(const Instruction &inst, uint64_t old, uint64_t operand,
                      uint64_t compare) {
  unsigned bytes = getTypeSize(inst.type);
  switch (inst.atomicOp) {
  case AtomicOp::Add:
    if (inst.type == Type::F32)
      return floatToBits(bitsToFloat(old) + bitsToFloat(operand));
    if (inst.type == Type::F64)
      return doubleToBits(bitsToDouble(old) + bitsToDouble(operand));
    return truncateTo(old + operand, bytes);
  case AtomicOp::Min:
  case AtomicOp::Max: {
    bool isMax = inst.atomicOp == AtomicOp::Max;
    if (inst.type == Type::F32) {
      float x = bitsToFloat(old), y = bitsToFloat(operand);
      return floatToBits(isMax ? std::max(x, y) : std::min(x, y));
    }
    if (isSigned(inst.type)) {
      int64_t x = signExtend(old, bytes), y = signExtend(operand, bytes);
      return truncateTo(isMax ? std::max(x, y) : std::min(x, y), bytes);
    }
    uint64_t x = truncateTo(old, bytes), y = truncateTo(operand, bytes);
    return isMax ? std::max(x, y) : std::min(x, y);
  }
  case AtomicOp::Exch:
    return operand;
  case AtomicOp::Cas:
    return truncateTo(old, bytes) == truncateTo(operand, bytes) ? compare : old;
  case AtomicOp::And:
    return old & operand;
  case AtomicOp::Or:
    return old | operand;
  case AtomicOp::Xor:
    return old ^ operand;
  case AtomicOp::Inc:
    return truncateTo(old, 4) >= truncateTo(operand, 4) ? 0 : old + 1;
  case AtomicOp::Dec:
    return (truncateTo(old, 4) == 0 ||
            truncateTo(old, 4) > truncateTo(operand, 4))
               ? operand
               : old - 1;
  }
  return old;
}

/// Whether `lane` arrived at the cluster barrier and has not waited: its
/// accesses may fall in the phase under way or in the next (its arrive
/// released only what came before it).
bool waitsForClusterPhase(const WarpState &warp, int lane) {
  return warp.clusterArrivals[lane] > warp.clusterWaits[lane];
}

/// A cluster-racecheck record: the last phase an access may fall in, and
/// (the top bit) whether it may fall in the phase before too.
constexpr uint32_t kSpansTwoPhases = 0x80000000u;

/// A .shared::cluster address of another CTA of the cluster (mapa's form).
Target resolveInCluster(WarpState &warp, int lane, uint64_t address,
                        unsigned bytes) {
  CtaState &cta = *warp.cta;
  uint64_t rank = (address >> kClusterRankShift) - 1;
  uint64_t offset = address & ((uint64_t(1) << kClusterRankShift) - 1);
  if (rank >= cta.cluster->size())
    throw ExecutionError{kIllegalAddress,
                         "shared::cluster access at " + hexAddress(address) +
                             ", which is not an address mapa gives in a "
                             "cluster of " +
                             std::to_string(cta.cluster->size()) + " CTAs",
                         lane};
  CtaState &owner = (*cta.cluster)[rank];
  if (offset + bytes > owner.sharedBytes)
    throw ExecutionError{
        kIllegalAddress,
        "shared::cluster access of " + std::to_string(bytes) +
            " bytes at offset " + std::to_string(offset) + " of CTA rank " +
            std::to_string(rank) + " is outside its " +
            std::to_string(owner.sharedBytes) + " bytes of shared memory",
        lane};
  if (owner.exited)
    throw ExecutionError{
        kLaunchFailed,
        "shared::cluster access to CTA rank " + std::to_string(rank) +
            " of the cluster, which has exited: its shared memory is gone (a "
            "CTA must not exit while others of its cluster may access its "
            "shared memory; end with barrier.cluster.arrive and wait)",
        lane};
  owner.lastRemoteAccessEpoch =
      owner.clusterEpoch + (waitsForClusterPhase(warp, lane) ? 1 : 0);
  owner.lastRemoteAccessor = cta.clusterRank;
  return {StateSpace::SharedCluster, owner.shared.data() + offset, nullptr,
          offset, &owner};
}

/// Racecheck between CTAs of a cluster: accesses of one shared byte by
/// threads of two CTAs (its owner's included) race unless a phase of the
/// cluster barrier separates them, and so do two warps of one CTA reaching
/// into another's memory unless a bar.sync of theirs does too. `thread` is
/// the accessor's thread in the cluster (rank * threads per CTA + thread),
/// `barrierEpoch` its CTA's.
void checkClusterAccess(CtaState &owner, uint64_t byte, bool isWrite,
                        uint32_t thread, uint32_t threadsPerCta, int lane,
                        bool spansTwoPhases, uint32_t barrierEpoch) {
  // The phases this access may fall in, [first, last], and whether a
  // recorded one's overlap them.
  uint32_t first = owner.clusterEpoch, last = first + (spansTwoPhases ? 1 : 0);
  uint32_t record = last | (spansTwoPhases ? kSpansTwoPhases : 0);
  auto overlaps = [&](uint32_t recorded) {
    uint32_t recordedLast = recorded & ~kSpansTwoPhases;
    uint32_t recordedFirst =
        recordedLast - ((recorded & kSpansTwoPhases) ? 1 : 0);
    return recordedLast != 0 && recordedFirst <= last && first <= recordedLast;
  };
  uint32_t rank = thread / threadsPerCta;
  // Another CTA's thread, or one of another warp of the accessing CTA in
  // the same bar.sync interval of that CTA (two warps of a CTA reaching
  // into a third's memory: the owner's own accesses are checked as any
  // shared access).
  auto otherCta = [&](uint16_t other, uint32_t otherBarrierEpoch) {
    if (other == kSeveralCtas || other / threadsPerCta != rank)
      return true;
    return rank != owner.clusterRank && otherBarrierEpoch == barrierEpoch &&
           other / kWarpSize != thread / kWarpSize;
  };
  auto race = [&](const char *kind, uint16_t other) {
    return ExecutionError{
        kLaunchFailed,
        std::string("racecheck: ") + kind + " hazard on shared byte " +
            std::to_string(byte) + " of CTA rank " +
            std::to_string(owner.clusterRank) + " between thread " +
            std::to_string(thread % threadsPerCta) + " of CTA rank " +
            std::to_string(rank) +
            (other == kSeveralCtas
                 ? std::string(" and threads of several CTAs")
                 : " and thread " + std::to_string(other % threadsPerCta) +
                       " of CTA rank " +
                       std::to_string(other / threadsPerCta)) +
            " of the cluster with no barrier.cluster in between",
        lane};
  };
  if (overlaps(owner.clusterWriteEpoch[byte]) &&
      otherCta(owner.clusterWriter[byte], owner.clusterWriteBarrier[byte]))
    throw race(isWrite ? "write-after-write" : "read-after-write",
               owner.clusterWriter[byte]);
  if (isWrite) {
    if (overlaps(owner.clusterReadEpoch[byte]) &&
        otherCta(owner.clusterReader[byte], owner.clusterReadBarrier[byte]))
      throw race("write-after-read", owner.clusterReader[byte]);
    owner.clusterWriteEpoch[byte] = record;
    owner.clusterWriter[byte] = static_cast<uint16_t>(thread);
    owner.clusterWriteBarrier[byte] = barrierEpoch;
    return;
  }
  if (overlaps(owner.clusterReadEpoch[byte]) &&
      otherCta(owner.clusterReader[byte], owner.clusterReadBarrier[byte]))
    owner.clusterReader[byte] = kSeveralCtas;
  else
    owner.clusterReader[byte] = static_cast<uint16_t>(thread);
  owner.clusterReadEpoch[byte] = record;
  owner.clusterReadBarrier[byte] = barrierEpoch;
}

} // namespace

Target resolve(StateSpace space, WarpState &warp, int lane, uint64_t address,
               unsigned bytes, unsigned alignment) {
  CtaState &cta = *warp.cta;
  if (space == StateSpace::Generic) {
    if (address - kSharedWindow < kWindowSize) {
      space = StateSpace::Shared;
      address -= kSharedWindow;
    } else if (address - kLocalWindow < kWindowSize) {
      space = StateSpace::Local;
      address -= kLocalWindow;
    } else {
      space = StateSpace::Global;
    }
  }
  if (address % alignment != 0)
    throw ExecutionError{kMisalignedAddress,
                         "misaligned " + std::to_string(bytes) +
                             "-byte access at " + hexAddress(address) +
                             " (needs " + std::to_string(alignment) +
                             "-byte alignment)",
                         lane};
  if (space == StateSpace::SharedCluster) {
    uint64_t rank = address >> kClusterRankShift;
    if (rank == 0 || rank - 1 == cta.clusterRank) {
      space = StateSpace::Shared;
      address &= (uint64_t(1) << kClusterRankShift) - 1;
    } else {
      return resolveInCluster(warp, lane, address, bytes);
    }
  }
  switch (space) {
  case StateSpace::Shared:
    if (address + bytes > cta.sharedBytes || address + bytes < address)
      throw ExecutionError{kIllegalAddress,
                           "shared memory access of " + std::to_string(bytes) +
                               " bytes at offset " + std::to_string(address) +
                               " is outside the CTA's " +
                               std::to_string(cta.sharedBytes) +
                               " bytes of shared memory",
                           lane};
    return {space, cta.shared.data() + address, nullptr, address};
  case StateSpace::Local: {
    uint32_t size = cta.kernel->localBytes;
    if (address + bytes > size)
      throw ExecutionError{kIllegalAddress,
                           "local memory access at offset " +
                               std::to_string(address) + " outside the " +
                               std::to_string(size) + " bytes per thread",
                           lane};
    return {space, warp.local.data() + size * lane + address, nullptr, address};
  }
  case StateSpace::Param: {
    const std::vector<uint8_t> &parameters = cta.request->parameters;
    if (address + bytes > parameters.size())
      throw ExecutionError{kIllegalAddress,
                           "parameter read at offset " +
                               std::to_string(address) +
                               " past the parameter buffer",
                           lane};
    return {space, const_cast<uint8_t *>(parameters.data()) + address, nullptr,
            address};
  }
  default: {
    if (!(warp.waitedMask >> lane & 1))
      throw ExecutionError{
          kLaunchFailed,
          "a " + std::to_string(bytes) + "-byte global access at " +
              hexAddress(address) +
              " before griddepcontrol.wait in a kernel launched with "
              "programmatic stream serialization: the kernel before it on "
              "the stream may still be writing",
          lane};
    // The lanes of a warp, and its instructions one after another, mostly
    // access one allocation: try the last one found before the search.
    Allocation *allocation = cta.lastAllocation;
    if (!allocation || !allocation->contains(address, bytes))
      allocation = cta.lastAllocation = cta.memory->find(address, bytes);
    if (!allocation)
      throw ExecutionError{kIllegalAddress,
                           std::to_string(bytes) + "-byte access at " +
                               hexAddress(address) +
                               " is outside every allocation: " +
                               cta.memory->describeNearest(address),
                           lane};
    uint64_t offset = address - allocation->base;
    return {StateSpace::Global, allocation->data.get() + offset, allocation,
            offset};
  }
  }
}

void checkAndRecord(const Target &target, unsigned bytes, Access access,
                    WarpState &warp, int lane, uint64_t address,
                    uint32_t sinceEpoch) {
  bool isWrite = access == Access::Write;
  CtaState &cta = *warp.cta;
  if (target.space == StateSpace::Global) {
    uint8_t *initialized = target.allocation->initialized.get() + target.offset;
    if (!isWrite)
      if (const void *unwritten = std::memchr(initialized, 0, bytes)) {
        unsigned i = static_cast<const uint8_t *>(unwritten) - initialized;
        throw ExecutionError{
            kLaunchFailed,
            "initcheck: " + std::to_string(bytes) + "-byte load at " +
                hexAddress(address) + " reads byte " +
                std::to_string(target.offset + i) + " of the allocation at " +
                hexAddress(target.allocation->base) + " (" +
                std::to_string(target.allocation->size) +
                " bytes), which nothing has written since cuMemAlloc",
            lane};
      }
    if (access != Access::Read)
      std::memset(initialized, 1, bytes);
    return;
  }
  uint32_t threadsPerCta =
      cta.request->block[0] * cta.request->block[1] * cta.request->block[2];
  uint32_t clusterThread =
      cta.clusterRank * threadsPerCta + warp.threadIndex(lane);
  if (target.space == StateSpace::SharedCluster) {
    CtaState &owner = *target.owner;
    for (unsigned i = 0; i < bytes; ++i) {
      uint64_t byte = target.offset + i;
      if (!isWrite && !owner.sharedWritten[byte])
        throw ExecutionError{
            kLaunchFailed,
            std::string("initcheck: shared::cluster ") +
                (access == Access::Atomic ? "atomic on" : "load reads") +
                " byte " + std::to_string(byte) + " of CTA rank " +
                std::to_string(owner.clusterRank) +
                ", which no thread of the cluster wrote",
            lane};
      if (access == Access::Atomic)
        continue;
      checkClusterAccess(owner, byte, isWrite, clusterThread, threadsPerCta,
                         lane, waitsForClusterPhase(warp, lane),
                         cta.barrierEpoch);
      if (isWrite)
        owner.sharedWritten[byte] = 1;
    }
    return;
  }
  if (target.space != StateSpace::Shared)
    return;
  if (!cta.clusterWriteEpoch.empty() && access != Access::Atomic)
    for (unsigned i = 0; i < bytes; ++i)
      checkClusterAccess(cta, target.offset + i, isWrite, clusterThread,
                         threadsPerCta, lane, waitsForClusterPhase(warp, lane),
                         cta.barrierEpoch);
  uint16_t thread = warp.threadIndex(lane);
  uint32_t epoch = cta.barrierEpoch;
  uint32_t from = sinceEpoch ? sinceEpoch : epoch;
  auto otherWarp = [&](uint16_t other) {
    return other == 0xFFFF || other / kWarpSize != thread / kWarpSize;
  };
  auto race = [&](const char *kind, uint16_t other, uint64_t byte) {
    return ExecutionError{
        kLaunchFailed,
        std::string("racecheck: ") + kind + " hazard on shared byte " +
            std::to_string(byte) + " between thread " + std::to_string(thread) +
            (other == 0xFFFF ? std::string(" and threads of several warps")
                             : " and thread " + std::to_string(other)) +
            (from < epoch ? " while the cp.async writing it was in flight "
                            "(bar.sync does not complete a cp.async; its "
                            "thread's cp.async.wait_group does)"
                          : " with no bar.sync in between"),
        lane};
  };
  for (unsigned i = 0; i < bytes; ++i) {
    uint64_t byte = target.offset + i;
    if (access == Access::Atomic) {
      if (!cta.sharedWritten[byte])
        throw ExecutionError{kLaunchFailed,
                             "initcheck: shared-memory atomic on byte " +
                                 std::to_string(byte) +
                                 ", which no thread of this CTA wrote",
                             lane};
      continue;
    }
    if (isWrite) {
      if (cta.lastWriteEpoch[byte] >= from && otherWarp(cta.lastWriter[byte]))
        throw race("write-after-write", cta.lastWriter[byte], byte);
      if (cta.lastReadEpoch[byte] >= from && otherWarp(cta.lastReader[byte]))
        throw race("write-after-read", cta.lastReader[byte], byte);
      cta.lastWriteEpoch[byte] = epoch;
      cta.lastWriter[byte] = thread;
      cta.sharedWritten[byte] = 1;
    } else {
      if (!cta.sharedWritten[byte])
        throw ExecutionError{kLaunchFailed,
                             "initcheck: shared-memory load reads byte " +
                                 std::to_string(byte) +
                                 ", which no thread of this CTA wrote",
                             lane};
      if (cta.lastWriteEpoch[byte] == epoch && otherWarp(cta.lastWriter[byte]))
        throw race("read-after-write", cta.lastWriter[byte], byte);
      if (cta.lastReadEpoch[byte] == epoch &&
          cta.lastReader[byte] / kWarpSize != thread / kWarpSize)
        cta.lastReader[byte] = 0xFFFF;
      else
        cta.lastReader[byte] = thread;
      cta.lastReadEpoch[byte] = epoch;
    }
  }
}

void executeMemory(const Instruction &inst, WarpState &warp, uint32_t mask) {
  CtaState &cta = *warp.cta;
  if (inst.opcode == Opcode::Cvta) {
    uint64_t window = inst.space == StateSpace::Shared  ? kSharedWindow
                      : inst.space == StateSpace::Local ? kLocalWindow
                                                        : 0;
    forEachLane(mask, [&](int lane) {
      uint64_t value = readOperand(warp, inst.operands[1], lane);
      uint64_t converted = inst.toSpace ? value - window : value + window;
      warp.reg(inst.operands[0].registers[0], lane) =
          truncateTo(converted, getTypeSize(inst.type));
    });
    return;
  }
  bool isLoad = inst.opcode == Opcode::Ld;
  bool isAtomic = inst.opcode == Opcode::Atom || inst.opcode == Opcode::Red;
  const Operand &addressOperand =
      inst.operands[isLoad || inst.opcode == Opcode::Atom ? 1 : 0];
  const Operand &data = inst.operands[isLoad                        ? 0
                                      : inst.opcode == Opcode::Atom ? 2
                                                                    : 1];
  unsigned element = getTypeSize(inst.type);
  unsigned bytes = element * inst.vectorWidth;
  AccessCounter counter, remoteCounter;
  bool countShared = false, countGlobal = false, countRemote = false;
  std::unique_lock<std::mutex> atomicLock(globalAtomicMutex, std::defer_lock);
  // A cluster's CTAs run on one thread: only global atomics need the lock.
  if (isAtomic && inst.space != StateSpace::Shared &&
      inst.space != StateSpace::SharedCluster)
    atomicLock.lock();

  forEachLane(mask, [&](int lane) {
    uint64_t address = (addressOperand.registers[0] != kNoRegister
                            ? warp.reg(addressOperand.registers[0], lane)
                            : 0) +
                       addressOperand.value;
    Target target = resolve(inst.space, warp, lane, address, bytes, bytes);
    if (target.space == StateSpace::Global) {
      countGlobal = true;
      counter.addGlobal(address, bytes);
    } else if (target.space == StateSpace::Shared) {
      countShared = true;
      counter.sharedAddresses[lane] = static_cast<uint32_t>(target.offset);
      counter.sharedLaneMask |= 1u << lane;
    } else if (target.space == StateSpace::SharedCluster) {
      countRemote = true;
      remoteCounter.addGlobal(address, bytes);
    }
    if (isAtomic) {
      checkAndRecord(target, bytes, Access::Atomic, warp, lane, address);
      uint64_t old = loadValue(target.bytes, bytes);
      uint64_t updated =
          atomicResult(inst, old, readOperand(warp, data, lane),
                       inst.atomicOp == AtomicOp::Cas
                           ? readOperand(warp, inst.operands[3], lane)
                           : 0);
      storeValue(target.bytes, updated, bytes);
      if (inst.opcode == Opcode::Atom &&
          inst.operands[0].registers[0] != kNoRegister)
        warp.reg(inst.operands[0].registers[0], lane) = old;
      return;
    }
    checkAndRecord(target, bytes, isLoad ? Access::Read : Access::Write, warp,
                   lane, address);
    for (unsigned i = 0; i < inst.vectorWidth; ++i) {
      uint32_t reg = data.kind == Operand::Kind::Vector ? data.registers[i]
                                                        : data.registers[0];
      uint8_t *bytesAt = target.bytes + i * element;
      if (isLoad) {
        uint64_t value = loadValue(bytesAt, element);
        if (reg != kNoRegister)
          warp.reg(reg, lane) =
              isSigned(inst.type)
                  ? static_cast<uint64_t>(signExtend(value, element))
                  : value;
      } else {
        uint64_t value = 0;
        if (data.kind == Operand::Kind::Immediate)
          value = data.value;
        else if (reg != kNoRegister)
          value = warp.reg(reg, lane);
        else // an immediate element of a vector
          value = data.elementValues[i];
        storeValue(bytesAt, value, element);
      }
    }
  });

  unsigned active = __builtin_popcount(mask);
  if (countGlobal) {
    uint64_t sectors =
        isLoad ? counter.distinctLoadSectors(cta) : counter.distinctSectors();
    if (isLoad) {
      cta.counts.globalLoadSectors += sectors;
      cta.globalLoadBytes += uint64_t(active) * bytes;
    } else {
      cta.counts.globalStoreSectors += sectors;
      cta.globalStoreBytes += uint64_t(active) * bytes;
    }
    if (isAtomic)
      cta.workAtLastGlobalAtomic = static_cast<const WorkCounts &>(cta.counts);
  }
  if (countShared)
    cta.counts.sharedWavefronts +=
        counter.wavefronts(bytes, cta.sharedBankConflicts);
  if (countRemote)
    cta.counts.distributedSharedSectors += remoteCounter.distinctSectors();
}

std::string checkMemoryImplemented(const Instruction &inst) {
  if (inst.opcode == Opcode::Cvta)
    return inst.space == StateSpace::Param || inst.space == StateSpace::Const ||
                   inst.space == StateSpace::SharedCluster
               ? "cvta of .param/.const/.shared::cluster"
               : "";
  if (inst.space == StateSpace::Const)
    return "the .const state space";
  bool isAtomic = inst.opcode == Opcode::Atom || inst.opcode == Opcode::Red;
  if (isAtomic && inst.vectorWidth != 1)
    return "vector atomics";
  if (isAtomic && (inst.type == Type::F16 || inst.type == Type::BF16 ||
                   inst.type == Type::F16x2 || inst.type == Type::BF16x2))
    return "16-bit float atomics";
  if (isAtomic && inst.type == Type::F64 && inst.atomicOp != AtomicOp::Add)
    return "f64 atomics other than add";
  if (getTypeSize(inst.type) == 0)
    return "a memory access without a type";
  return "";
}

} // namespace flashdecode::emu
