//===- AsyncCopy.cpp - cp.async from global to shared memory -------------===//
//
// What LLVM's NVPTX backend emits for MLIR's nvgpu.device_async_copy,
// device_async_create_group and device_async_wait. A copy reads its source
// when it issues (with the bounds, alignment and initialization checks of a
// load) but lands in shared memory only when a wait of its thread covers
// its group: cp.async.commit_group closes the thread's open group,
// cp.async.wait_group N completes all but its N newest closed groups,
// cp.async.wait_all every group, the open one included. Until then a read
// of the destination sees the old bytes, as it may on a GPU, so a kernel
// that reads before it waits computes with stale data, or fails initcheck;
// the landing is a write of its thread that may have happened at any time
// since the copy issued, so racecheck flags another warp's access of the
// destination in between, across bar.sync too. Copies of a thread that
// exits before waiting never land.
//
//===----------------------------------------------------------------------===//

#include "MemoryAccess.h"
#include "Opcodes.h"

#include <algorithm>
#include <cstring>

namespace flashdecode::emu {
namespace {

/// Runs `access`, naming `what` in the error it throws.
template <typename Access> auto naming(const char *what, Access access) {
  try {
    return access();
  } catch (ExecutionError &error) {
    error.message = std::string(what) + ": " + error.message;
    throw;
  }
}

uint64_t addressOf(WarpState &warp, const Operand &operand, int lane) {
  return (operand.registers[0] != kNoRegister
              ? warp.reg(operand.registers[0], lane)
              : 0) +
         operand.value;
}

void issueCopies(const Instruction &inst, WarpState &warp, uint32_t mask) {
  CtaState &cta = *warp.cta;
  unsigned copySize = static_cast<unsigned>(inst.operands[2].value);
  bool hasSourceSize = inst.numOperands > (inst.cacheHint ? 4 : 3);
  AccessCounter counter;
  bool readGlobal = false;
  forEachLane(mask, [&](int lane) {
    uint64_t destination = addressOf(warp, inst.operands[0], lane);
    uint64_t source = addressOf(warp, inst.operands[1], lane);
    uint64_t sourceSize =
        hasSourceSize ? truncateTo(readOperand(warp, inst.operands[3], lane), 4)
                      : copySize;
    if (sourceSize > copySize)
      throw ExecutionError{kLaunchFailed,
                           "cp.async src-size " + std::to_string(sourceSize) +
                               " exceeds its cp-size " +
                               std::to_string(copySize) +
                               " (src-size must be at most cp-size)",
                           lane};
    Target to = naming("cp.async destination", [&] {
      return resolve(StateSpace::Shared, warp, lane, destination, copySize,
                     copySize);
    });
    if (source % copySize != 0)
      throw ExecutionError{kMisalignedAddress,
                           "cp.async source: misaligned " +
                               std::to_string(copySize) + "-byte copy from " +
                               hexAddress(source) + " (needs " +
                               std::to_string(copySize) + "-byte alignment)",
                           lane};
    PendingCopy copy;
    copy.sharedOffset = static_cast<uint32_t>(to.offset);
    copy.group = warp.committedGroups[lane];
    copy.issueEpoch = cta.barrierEpoch;
    copy.lane = static_cast<uint8_t>(lane);
    copy.bytes = static_cast<uint8_t>(copySize);
    // Bytes past src-size are zeros and are not read: a src-size of 0
    // reads nothing, wherever the source points.
    if (sourceSize) {
      naming("cp.async source", [&] {
        Target from = resolve(StateSpace::Global, warp, lane, source,
                              static_cast<unsigned>(sourceSize), 1);
        checkAndRecord(from, static_cast<unsigned>(sourceSize), Access::Read,
                       warp, lane, source);
        std::memcpy(copy.data, from.bytes, sourceSize);
      });
      counter.addGlobal(source, static_cast<unsigned>(sourceSize));
      cta.globalLoadBytes += sourceSize;
      readGlobal = true;
    }
    counter.sharedAddresses[lane] = copy.sharedOffset;
    counter.sharedLaneMask |= 1u << lane;
    warp.pendingCopies.push_back(copy);
  });
  if (readGlobal)
    cta.counts.globalLoadSectors += counter.distinctLoadSectors(cta);
  cta.counts.sharedWavefronts +=
      counter.wavefronts(copySize, cta.sharedBankConflicts);
}

/// Lands the copies of the lanes of `mask` in all but their `keep` newest
/// closed groups, in the order they issued.
void completeCopies(WarpState &warp, uint32_t mask, uint32_t keep) {
  CtaState &cta = *warp.cta;
  std::vector<PendingCopy> &pending = warp.pendingCopies;
  size_t kept = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    PendingCopy copy = pending[i];
    if (!(mask >> copy.lane & 1) ||
        copy.group + keep >= warp.committedGroups[copy.lane]) {
      pending[kept++] = copy;
      continue;
    }
    Target target{StateSpace::Shared, cta.shared.data() + copy.sharedOffset,
                  nullptr, copy.sharedOffset};
    naming("the cp.async this wait completes", [&] {
      checkAndRecord(target, copy.bytes, Access::Write, warp, copy.lane,
                     copy.sharedOffset, copy.issueEpoch);
    });
    std::memcpy(target.bytes, copy.data, copy.bytes);
  }
  pending.resize(kept);
}

} // namespace

std::string decodeAsyncCopyOpcode(const std::vector<std::string> &modifiers,
                                  Instruction &inst) {
  std::string form = "cp";
  for (const std::string &modifier : modifiers)
    form += "." + modifier;
  bool isAsync = !modifiers.empty() && modifiers[0] == "async";
  if (isAsync && modifiers.size() == 2) {
    const std::string &what = modifiers[1];
    inst.opcode = what == "commit_group" ? Opcode::CpAsyncCommit
                  : what == "wait_group" ? Opcode::CpAsyncWait
                  : what == "wait_all"   ? Opcode::CpAsyncWaitAll
                                         : Opcode::Nop;
    if (inst.opcode != Opcode::Nop)
      return "";
  }
  if (isAsync && modifiers.size() >= 4 &&
      (modifiers[1] == "ca" || modifiers[1] == "cg") &&
      (modifiers[2] == "shared" || modifiers[2] == "shared::cta") &&
      modifiers[3] == "global") {
    inst.opcode = Opcode::CpAsync;
    inst.space = StateSpace::Shared;
    inst.cacheGlobal = modifiers[1] == "cg";
    bool valid = true;
    for (size_t i = 4; i < modifiers.size(); ++i) {
      const std::string &hint = modifiers[i];
      if (hint == "L2::cache_hint")
        inst.cacheHint = true;
      else if (hint != "L2::64B" && hint != "L2::128B" && hint != "L2::256B")
        valid = false;
    }
    if (valid)
      return "";
  }
  return "unsupported form '" + form +
         "': fdemu implements cp.async.{ca,cg}.shared{::cta}.global with "
         "optional .L2::cache_hint and .L2::{64B,128B,256B}, "
         "cp.async.commit_group, cp.async.wait_group N and cp.async.wait_all";
}

std::string checkAsyncCopyImplemented(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWaitAll:
    return inst.numOperands == 0 ? "" : "it takes no operands";
  case Opcode::CpAsyncWait:
    return inst.numOperands == 1 &&
                   inst.operands[0].kind == Operand::Kind::Immediate
               ? ""
               : "cp.async.wait_group takes one integer constant";
  default:
    break;
  }
  unsigned fixed = inst.cacheHint ? 4 : 3;
  const Operand *operands = inst.operands;
  if (inst.numOperands < fixed || inst.numOperands > fixed + 1 ||
      operands[0].kind != Operand::Kind::Address ||
      operands[1].kind != Operand::Kind::Address ||
      operands[2].kind != Operand::Kind::Immediate)
    return std::string("cp.async takes [shared], [global], a constant "
                       "cp-size, an optional src-size") +
           (inst.cacheHint ? " and the cache policy" : "");
  uint64_t copySize = operands[2].value;
  if (copySize != 4 && copySize != 8 && copySize != 16)
    return "cp-size " + std::to_string(copySize) +
           ": cp.async copies 4, 8 "
           "or 16 bytes";
  if (inst.cacheGlobal && copySize != 16)
    return "cp-size " + std::to_string(copySize) +
           ": cp.async.cg copies 16 "
           "bytes only";
  return "";
}

void executeAsyncCopy(const Instruction &inst, WarpState &warp, uint32_t mask) {
  switch (inst.opcode) {
  case Opcode::CpAsync:
    issueCopies(inst, warp, mask);
    return;
  case Opcode::CpAsyncCommit:
    forEachLane(mask, [&](int lane) { ++warp.committedGroups[lane]; });
    return;
  case Opcode::CpAsyncWait:
    completeCopies(warp, mask, static_cast<uint32_t>(inst.operands[0].value));
    return;
  default: // wait_all: commit the open group, then wait for every group.
    forEachLane(mask, [&](int lane) { ++warp.committedGroups[lane]; });
    completeCopies(warp, mask, 0);
  }
}

void dropAsyncCopies(WarpState &warp, uint32_t mask) {
  std::vector<PendingCopy> &pending = warp.pendingCopies;
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](const PendingCopy &copy) {
                                 return mask >> copy.lane & 1;
                               }),
                pending.end());
}

} // namespace flashdecode::emu
