//===- WarpCollectives.cpp - .sync instructions across a warp's lanes ----===//
//
// Once every lane a .sync warp instruction waits for has arrived at it (the
// executor's scheduling), its work: shfl.sync and vote.sync among the lanes
// that arrived, and mma.sync and ldmatrix (TensorCore.cpp) for the whole
// warp, which their .aligned qualifier requires to be all there: a short
// last warp or lanes that exited without executing the instruction are an
// error naming the lanes, not an undefined result.
//
//===----------------------------------------------------------------------===//

#include "WarpState.h"

namespace flashdecode::emu {
namespace {

void shuffle(const Instruction &inst, WarpState &warp, uint32_t lanes) {
  uint32_t sources[kWarpSize];
  bool inRange[kWarpSize];
  forEachLane(lanes, [&](int lane) {
    uint32_t b = readOperand(warp, inst.operands[2], lane) & 31;
    uint32_t c = readOperand(warp, inst.operands[3], lane);
    uint32_t clamp = c & 31, segmentMask = (c >> 8) & 31;
    int maxLane = (lane & segmentMask) | (clamp & ~segmentMask);
    int minLane = lane & segmentMask;
    int source;
    bool valid;
    switch (inst.shuffleMode) {
    case ShuffleMode::Up:
      source = lane - static_cast<int>(b);
      valid = source >= maxLane;
      break;
    case ShuffleMode::Down:
      source = lane + static_cast<int>(b);
      valid = source <= maxLane;
      break;
    case ShuffleMode::Bfly:
      source = lane ^ static_cast<int>(b);
      valid = source <= maxLane;
      break;
    default:
      source = minLane | (b & ~segmentMask);
      valid = source <= maxLane;
    }
    if (!valid)
      source = lane;
    if (!(lanes >> source & 1))
      throw ExecutionError{
          kLaunchFailed,
          "shfl.sync in lane " + std::to_string(lane) + " reads lane " +
              std::to_string(source) +
              (warp.exitedMask >> source & 1
                   ? ", which has exited"
                   : ", which is not executing this shfl.sync"),
          lane};
    sources[lane] = source;
    inRange[lane] = valid;
  });
  uint32_t value[kWarpSize];
  forEachLane(lanes, [&](int lane) {
    value[lane] = readOperand(warp, inst.operands[1], lane);
  });
  forEachLane(lanes, [&](int lane) {
    uint32_t destination = inst.operands[0].registers[0];
    if (destination != kNoRegister)
      warp.reg(destination, lane) = value[sources[lane]];
    if (inst.secondDestination != kNoRegister)
      warp.reg(inst.secondDestination, lane) = inRange[lane];
  });
}

void vote(const Instruction &inst, WarpState &warp, uint32_t lanes) {
  uint32_t ballot = 0;
  forEachLane(lanes, [&](int lane) {
    if (readOperand(warp, inst.operands[1], lane))
      ballot |= 1u << lane;
  });
  // Each lane votes with its own member mask's lanes: groups with
  // different masks may arrive at one vote together.
  forEachLane(lanes, [&](int lane) {
    uint32_t group = getMemberMask(inst, warp, lane) & lanes;
    uint32_t votes = ballot & group;
    uint64_t result = votes == 0 || votes == group; // uni
    if (inst.voteMode == VoteMode::Ballot)
      result = votes;
    else if (inst.voteMode == VoteMode::All)
      result = votes == group;
    else if (inst.voteMode == VoteMode::Any)
      result = votes != 0;
    warp.reg(inst.operands[0].registers[0], lane) = result;
  });
}

/// mma.sync, ldmatrix and wgmma read and write all 32 lanes' registers.
void checkWholeWarp(const Instruction &inst, const WarpState &warp,
                    uint32_t arrived) {
  if (arrived == ~0u)
    return;
  const char *name = "ldmatrix.sync.aligned";
  switch (inst.opcode) {
  case Opcode::Mma:
    name = "mma.sync.aligned";
    break;
  case Opcode::WarpgroupMma:
    name = "wgmma.mma_async.sync.aligned";
    break;
  case Opcode::WarpgroupFence:
    name = "wgmma.fence.sync.aligned";
    break;
  case Opcode::WarpgroupCommit:
    name = "wgmma.commit_group.sync.aligned";
    break;
  case Opcode::WarpgroupWait:
    name = "wgmma.wait_group.sync.aligned";
    break;
  default:
    break;
  }
  std::string what =
      warp.existingMask != ~0u
          ? "warp " + std::to_string(warp.index) + " has only lanes " +
                hexLaneMask(warp.existingMask) +
                " (the CTA's threads end inside it)"
          : "lanes " + hexLaneMask(~arrived) + " exited without executing it";
  throw ExecutionError{kLaunchFailed,
                       std::string(name) +
                           " needs all 32 lanes of the warp to execute "
                           "it together, but " +
                           what};
}

} // namespace

void executeWarpCollective(const Instruction &inst, WarpState &warp,
                           uint32_t arrived) {
  switch (inst.opcode) {
  case Opcode::Shfl:
    shuffle(inst, warp, arrived);
    return;
  case Opcode::Vote:
    vote(inst, warp, arrived);
    return;
  case Opcode::Mma:
    checkWholeWarp(inst, warp, arrived);
    executeMma(inst, warp);
    return;
  case Opcode::Ldmatrix:
    checkWholeWarp(inst, warp, arrived);
    executeLdmatrix(inst, warp);
    return;
  case Opcode::WarpgroupMma:
  case Opcode::WarpgroupFence:
  case Opcode::WarpgroupCommit:
  case Opcode::WarpgroupWait:
    checkWholeWarp(inst, warp, arrived);
    executeWarpgroup(inst, warp);
    return;
  default: // bar.warp.sync: arriving was all it does.
    return;
  }
}

} // namespace flashdecode::emu
