//===- Cluster.cpp - Thread block clusters: barrier.cluster and mapa ------===//
//
// The forms fdemu runs (PTX ISA 8.x, "barrier.cluster", "mapa"):
// barrier.cluster.arrive{.release}{.aligned} and
// barrier.cluster.wait{.acquire}{.aligned}, the default semantics being
// those; mapa.shared::cluster.{u32,u64} d, a, rank. The relaxed arrive
// (no release: a wait would not make the cluster's earlier accesses
// visible) and mapa of generic addresses are refused, so a kernel never
// runs on a weaker rule than written. CtaRunner runs a cluster's CTAs
// together and completes the barrier's phases; MemoryAccess.cpp resolves
// and checks .shared::cluster accesses.
//
//===----------------------------------------------------------------------===//

#include "Opcodes.h"
#include "WarpState.h"

namespace flashdecode::emu {

std::string decodeClusterOpcode(const std::string &base,
                                const std::vector<std::string> &modifiers,
                                Instruction &inst) {
  if (base == "mapa") {
    inst.opcode = Opcode::Mapa;
    if (modifiers.size() == 2 && modifiers[0] == "shared::cluster" &&
        (modifiers[1] == "u32" || modifiers[1] == "u64")) {
      inst.space = StateSpace::SharedCluster;
      inst.type = modifiers[1] == "u32" ? Type::U32 : Type::U64;
      return "";
    }
    return "unsupported form of mapa (fdemu runs "
           "mapa.shared::cluster.u32 and mapa.shared::cluster.u64; generic "
           "addresses of other CTAs' shared memory are not emulated)";
  }
  if (modifiers.empty() || modifiers[0] != "cluster")
    return "unsupported form of barrier (fdemu runs barrier.cluster.arrive, "
           "barrier.cluster.wait and bar.sync)";
  if (modifiers.size() >= 2 && modifiers[1] == "arrive") {
    inst.opcode = Opcode::ClusterArrive;
    for (size_t i = 2; i < modifiers.size(); ++i) {
      if (modifiers[i] == "aligned" && !inst.aligned)
        inst.aligned = true;
      else if (modifiers[i] != "release" || i != 2)
        return "unsupported form of barrier.cluster.arrive (fdemu runs "
               "barrier.cluster.arrive{.release}{.aligned}; .relaxed "
               "releases nothing a wait could acquire)";
    }
    return "";
  }
  if (modifiers.size() >= 2 && modifiers[1] == "wait") {
    inst.opcode = Opcode::ClusterWait;
    for (size_t i = 2; i < modifiers.size(); ++i) {
      if (modifiers[i] == "aligned" && !inst.aligned)
        inst.aligned = true;
      else if (modifiers[i] != "acquire" || i != 2)
        return "unsupported form of barrier.cluster.wait (fdemu runs "
               "barrier.cluster.wait{.acquire}{.aligned})";
    }
    return "";
  }
  return "unsupported form of barrier.cluster (fdemu runs "
         "barrier.cluster.arrive and barrier.cluster.wait)";
}

void executeMapa(const Instruction &inst, WarpState &warp, uint32_t mask) {
  CtaState &cta = *warp.cta;
  uint32_t size = static_cast<uint32_t>(cta.cluster->size());
  forEachLane(mask, [&](int lane) {
    uint64_t address = readOperand(warp, inst.operands[1], lane);
    uint64_t rank = readOperand(warp, inst.operands[2], lane) & 0xFFFFFFFFu;
    uint64_t offset = address & ((uint64_t(1) << kClusterRankShift) - 1);
    uint64_t ofRank = address >> kClusterRankShift;
    if (ofRank > size || offset > cta.sharedBytes)
      throw ExecutionError{kIllegalAddress,
                           "mapa of " + hexAddress(address) +
                               ", which is not an address in the " +
                               std::to_string(cta.sharedBytes) +
                               " bytes of shared memory of a CTA of the "
                               "cluster",
                           lane};
    if (rank >= size)
      throw ExecutionError{kLaunchFailed,
                           "mapa to CTA rank " + std::to_string(rank) +
                               " of a cluster of " + std::to_string(size) +
                               " CTAs (ranks 0 to " + std::to_string(size - 1) +
                               ")",
                           lane};
    warp.reg(inst.operands[0].registers[0], lane) =
        (rank + 1) << kClusterRankShift | offset;
  });
}

std::string checkClusterImplemented(const Instruction &inst) {
  if (inst.opcode == Opcode::Mapa &&
      (inst.numOperands != 3 ||
       inst.operands[0].kind != Operand::Kind::Register))
    return "mapa takes a destination register, an address and a rank";
  return "";
}

} // namespace flashdecode::emu
