//===- CtaRunner.cpp - Run a launch's clusters one at a time --------------===//

#include "CtaRunner.h"

#include "Opcodes.h"

#include <algorithm>
#include <cstdio>

namespace flashdecode::emu {

CtaRunner::CtaRunner(const LaunchRequest &request, DeviceMemory &memory,
                     const Timeline &timeline)
    : request(request), kernel(*request.kernel), timeline(timeline) {
  threads = request.block[0] * request.block[1] * request.block[2];
  if (request.coverage)
    coverage.assign(kernel.code.size(), 0);
  ctas.resize(getClusterCtas(request));
  for (uint32_t rank = 0; rank < ctas.size(); ++rank) {
    CtaState &cta = ctas[rank];
    cta.request = &request;
    cta.kernel = &kernel;
    cta.memory = &memory;
    cta.cluster = &ctas;
    cta.clusterRank = rank;
    cta.tracksRereads = timeline.tellsRereadsApart();
    cta.sharedBytes = getSharedBytes(request);
    size_t shared = cta.sharedBytes;
    cta.shared.resize(shared);
    cta.sharedWritten.resize(shared);
    cta.lastWriteEpoch.resize(shared);
    cta.lastReadEpoch.resize(shared);
    cta.lastWriter.resize(shared);
    cta.lastReader.resize(shared);
    if (ctas.size() > 1) {
      cta.clusterWriteEpoch.resize(shared);
      cta.clusterReadEpoch.resize(shared);
      cta.clusterWriter.resize(shared);
      cta.clusterReader.resize(shared);
      cta.clusterWriteBarrier.resize(shared);
      cta.clusterReadBarrier.resize(shared);
    }
    cta.warps.resize((threads + kWarpSize - 1) / kWarpSize);
    for (WarpState &warp : cta.warps) {
      warp.registers.resize(static_cast<size_t>(kernel.numRegisters) *
                            kWarpSize);
      warp.local.resize(static_cast<size_t>(kernel.localBytes) * kWarpSize);
    }
  }
}

uint32_t CtaRunner::getClusterCtas(const LaunchRequest &request) {
  return request.cluster[0] * request.cluster[1] * request.cluster[2];
}

void CtaRunner::startCta(CtaState &cta, uint64_t clusterIndex, uint32_t rank,
                         const ClusterPlacement &placement) {
  const uint32_t *grid = request.grid;
  const uint32_t *size = request.cluster;
  uint32_t clustersX = grid[0] / size[0], clustersY = grid[1] / size[1];
  uint32_t clusterId[3] = {
      static_cast<uint32_t>(clusterIndex % clustersX),
      static_cast<uint32_t>(clusterIndex / clustersX % clustersY),
      static_cast<uint32_t>(clusterIndex / (uint64_t(clustersX) * clustersY))};
  uint32_t inCluster[3] = {rank % size[0], rank / size[0] % size[1],
                           rank / (size[0] * size[1])};
  for (int i = 0; i < 3; ++i)
    cta.ctaid[i] = clusterId[i] * size[i] + inCluster[i];
  cta.linear =
      cta.ctaid[0] +
      uint64_t(grid[0]) * (cta.ctaid[1] + uint64_t(grid[1]) * cta.ctaid[2]);
  cta.sm = placement.getSM(clusterIndex, rank, cta.linear);
  std::fill(cta.sharedWritten.begin(), cta.sharedWritten.end(), 0);
  std::fill(cta.lastWriteEpoch.begin(), cta.lastWriteEpoch.end(), 0);
  std::fill(cta.lastReadEpoch.begin(), cta.lastReadEpoch.end(), 0);
  std::fill(cta.clusterWriteEpoch.begin(), cta.clusterWriteEpoch.end(), 0);
  std::fill(cta.clusterReadEpoch.begin(), cta.clusterReadEpoch.end(), 0);
  cta.barrierEpoch = 1;
  cta.clusterEpoch = 1;
  cta.exited = false;
  cta.lastRemoteAccessEpoch = 0;
  cta.triggeredDependents = false;
  cta.workAtLastGlobalAtomic.reset();
  cta.sectorsLoadedByCta.clear();
  cta.lastAllocation = nullptr;
  cta.counts = ClassCounts();
  for (uint32_t w = 0; w < cta.warps.size(); ++w)
    startWarp(cta, cta.warps[w], w);
}

void CtaRunner::run(uint64_t index, const ClusterPlacement &placement) {
  clusterPhases = 0;
  clusterPhaseDone.clear();
  latestClusterArrival = 0;
  for (uint32_t rank = 0; rank < ctas.size(); ++rank)
    startCta(ctas[rank], index, rank, placement);
  for (;;) {
    for (CtaState &cta : ctas) {
      tracing = request.traceStream &&
                static_cast<int64_t>(cta.linear) == request.traceCta;
      for (WarpState &warp : cta.warps)
        if (warp.runningMask)
          runWarp(warp);
    }
    bool released = false, live = false;
    for (CtaState &cta : ctas) {
      BarrierState state = releaseBarrier(cta);
      released |= state == BarrierState::Released;
      live |= state != BarrierState::Exited;
    }
    if (released || completeClusterPhase())
      continue;
    if (live)
      reportDeadlock();
    break;
  }
  for (CtaState &cta : ctas) {
    cta.counts.ctas = 1;
    cta.counts.triggeredCtas = cta.triggeredDependents;
    // The serial tail runs after the other CTAs (modelLaunch adds the
    // longest): not in the latency the SM's resident CTAs share.
    cta.counts.serialTailCycles = Timeline::getSerialTailCycles(cta.warps);
    if (cta.workAtLastGlobalAtomic) {
      cta.counts.serialTail = cta.counts;
      cta.counts.serialTail -= *cta.workAtLastGlobalAtomic;
    }
    cta.counts.latencyCycles =
        Timeline::getCtaCycles(cta.warps) - cta.counts.serialTailCycles;
  }
}

uint32_t CtaRunner::getSharedBytes(const LaunchRequest &request) {
  return request.kernel->getSharedBytes(request.dynamicSharedBytes);
}

void CtaRunner::startWarp(CtaState &cta, WarpState &warp, uint32_t index) {
  warp.cta = &cta;
  warp.index = index;
  uint32_t first = index * kWarpSize;
  uint32_t lanes = std::min<uint32_t>(kWarpSize, threads - first);
  warp.existingMask = lanes == 32 ? ~0u : (1u << lanes) - 1;
  warp.runningMask = warp.existingMask;
  // Lanes past the end of a short last warp count as exited: a full
  // member mask there waits only for the lanes that exist.
  warp.exitedMask = ~warp.existingMask;
  warp.converged = true;
  warp.commonPc = 0;
  warp.waitedMask = request.programmatic ? 0u : ~0u;
  warp.pendingCopies.clear();
  warp.pendingWarpgroupMmas.clear();
  warp.committedWarpgroupGroups = 0;
  warp.warpgroupFenced = false;
  warp.registerLocks.clear();
  std::fill(std::begin(warp.committedGroups), std::end(warp.committedGroups),
            0);
  std::fill(std::begin(warp.clusterArrivals), std::end(warp.clusterArrivals),
            0);
  std::fill(std::begin(warp.clusterWaits), std::end(warp.clusterWaits), 0);
  timeline.start(warp.timing);
  std::fill(warp.registers.begin(), warp.registers.end(), 0);
  const uint32_t *block = request.block;
  const uint32_t *grid = request.grid;
  const uint32_t *cluster = request.cluster;
  uint32_t numWarps = cta.warps.size();
  for (int lane = 0; lane < kWarpSize; ++lane) {
    uint32_t thread = first + lane;
    warp.state[lane] = (warp.existingMask >> lane & 1) ? LaneState::Running
                                                       : LaneState::Exited;
    uint64_t values[NumSpecialRegisters] = {thread % block[0],
                                            thread / block[0] % block[1],
                                            thread / (block[0] * block[1]),
                                            block[0],
                                            block[1],
                                            block[2],
                                            cta.ctaid[0],
                                            cta.ctaid[1],
                                            cta.ctaid[2],
                                            grid[0],
                                            grid[1],
                                            grid[2],
                                            uint64_t(lane),
                                            index,
                                            numWarps,
                                            1u << lane,
                                            (1u << lane) - 1,
                                            (2u << lane) - 1,
                                            ~((2u << lane) - 1) & 0xFFFFFFFFu,
                                            ~((1u << lane) - 1) & 0xFFFFFFFFu,
                                            cta.sm,
                                            request.dynamicSharedBytes,
                                            0,
                                            0,
                                            cta.clusterRank,
                                            ctas.size(),
                                            cta.ctaid[0] % cluster[0],
                                            cta.ctaid[1] % cluster[1],
                                            cta.ctaid[2] % cluster[2],
                                            cluster[0],
                                            cluster[1],
                                            cluster[2],
                                            cta.ctaid[0] / cluster[0],
                                            cta.ctaid[1] / cluster[1],
                                            cta.ctaid[2] / cluster[2],
                                            grid[0] / cluster[0],
                                            grid[1] / cluster[1],
                                            grid[2] / cluster[2],
                                            request.explicitCluster ? 1u : 0u};
    for (uint32_t r = 0; r < NumSpecialRegisters; ++r)
      warp.reg(r, lane) = values[r];
  }
}

void CtaRunner::materialize(WarpState &warp) {
  if (!warp.converged)
    return;
  forEachLane(warp.runningMask,
              [&](int lane) { warp.pc[lane] = warp.commonPc; });
  warp.converged = false;
}

void CtaRunner::setPc(WarpState &warp, uint32_t lanes, uint32_t pc) {
  if (warp.converged && lanes == warp.runningMask) {
    warp.commonPc = pc;
    return;
  }
  materialize(warp);
  forEachLane(lanes, [&](int lane) { warp.pc[lane] = pc; });
}

void CtaRunner::leave(WarpState &warp, uint32_t lanes, LaneState state,
                      uint32_t pc) {
  materialize(warp);
  forEachLane(lanes, [&](int lane) {
    warp.state[lane] = state;
    warp.pc[lane] = pc;
  });
  warp.runningMask &= ~lanes;
  if (state == LaneState::Exited)
    warp.exitedMask |= lanes;
}

void CtaRunner::fail(const ExecutionError &error, const WarpState &warp,
                     const Instruction &inst, uint32_t mask) {
  int lane = error.lane >= 0 ? error.lane : __builtin_ctz(mask | 1u << 31);
  uint32_t thread = warp.threadIndex(lane);
  const uint32_t *block = request.block;
  const CtaState &cta = *warp.cta;
  std::string report =
      "fdemu: kernel " + kernel.name + ": " + error.message +
      "\n  at PTX line " + std::to_string(inst.line) + ": " + inst.text +
      "\n  block (" + std::to_string(cta.ctaid[0]) + ", " +
      std::to_string(cta.ctaid[1]) + ", " + std::to_string(cta.ctaid[2]) +
      "), thread (" + std::to_string(thread % block[0]) + ", " +
      std::to_string(thread / block[0] % block[1]) + ", " +
      std::to_string(thread / (block[0] * block[1])) + ")";
  throw LocatedError{error.code, report};
}

void CtaRunner::runWarp(WarpState &warp) {
  const std::vector<Instruction> &code = kernel.code;
  CtaState &cta = *warp.cta;
  while (warp.runningMask) {
    uint32_t pc, mask;
    if (warp.converged) {
      pc = warp.commonPc;
      mask = warp.runningMask;
    } else {
      pc = ~0u;
      mask = 0;
      forEachLane(warp.runningMask, [&](int lane) {
        if (warp.pc[lane] < pc) {
          pc = warp.pc[lane];
          mask = 0;
        }
        if (warp.pc[lane] == pc)
          mask |= 1u << lane;
      });
      if (mask == warp.runningMask) {
        warp.converged = true;
        warp.commonPc = pc;
      }
    }
    if (pc >= code.size()) {
      static const Instruction end;
      fail({kIllegalInstruction, "execution ran past the kernel's last "
                                 "instruction"},
           warp, code.empty() ? end : code.back(), mask);
    }
    const Instruction &inst = code[pc];
    ++cta.counts.warpInstructions[static_cast<size_t>(inst.kind)];
    cta.threadInstructions += __builtin_popcount(mask);
    uint32_t active = mask;
    if (inst.guard != kNoRegister) {
      active = 0;
      forEachLane(mask, [&](int lane) {
        if ((warp.reg(inst.guard, lane) != 0) != inst.guardNegated)
          active |= 1u << lane;
      });
    }
    if (!coverage.empty())
      coverage[pc] |= (active ? kReachedGuardTrue : 0) |
                      (active != mask ? kReachedGuardFalse : 0);
    uint64_t wavefronts = cta.counts.sharedWavefronts;
    uint64_t loadSectors = cta.counts.globalLoadSectors;
    cta.lastLoadReread = false;
    try {
      if (!warp.pendingWarpgroupMmas.empty() &&
          inst.opcode != Opcode::WarpgroupMma)
        checkWarpgroupRegisters(inst, warp);
      execute(inst, warp, pc, mask, active);
    } catch (const ExecutionError &error) {
      fail(error, warp, inst, active);
    }
    // wgmma.mma_async's operand reads are in its own latency.
    uint64_t passes = inst.opcode == Opcode::WarpgroupMma
                          ? 0
                          : cta.counts.sharedWavefronts - wavefronts;
    loadSectors = cta.counts.globalLoadSectors - loadSectors;
    uint64_t issued =
        timeline.issue(warp.timing, pc, active != 0, passes ? passes - 1 : 0,
                       loadSectors, cta.lastLoadReread);
    if (inst.opcode == Opcode::ClusterArrive && active)
      latestClusterArrival = std::max(latestClusterArrival, issued);
    if (tracing)
      std::fprintf(request.traceStream,
                   "fdemu trace: %s cta %llu warp %u cycle %llu line %u: "
                   "%s%s wavefronts %llu\n",
                   kernel.name.c_str(), (unsigned long long)cta.linear,
                   warp.index, (unsigned long long)issued, inst.line,
                   inst.text.c_str(), active ? "" : " (guard false)",
                   (unsigned long long)passes);
  }
}

void CtaRunner::execute(const Instruction &inst, WarpState &warp, uint32_t pc,
                        uint32_t mask, uint32_t active) {
  switch (inst.opcode) {
  case Opcode::Bra:
    if (active != mask)
      setPc(warp, mask & ~active, pc + 1);
    if (active)
      setPc(warp, active, static_cast<uint32_t>(inst.operands[0].value));
    return;
  case Opcode::Ret:
  case Opcode::Exit:
    if (active != mask)
      setPc(warp, mask & ~active, pc + 1);
    if (active) {
      checkNoPendingWarpgroupMma(warp);
      dropAsyncCopies(warp, active);
      leave(warp, active, LaneState::Exited, pc);
      completeWarpSyncsAfterExit(warp);
      CtaState &cta = *warp.cta;
      cta.exited = std::all_of(
          cta.warps.begin(), cta.warps.end(), [](const WarpState &other) {
            return (other.existingMask & ~other.exitedMask) == 0;
          });
      if (cta.exited && cta.lastRemoteAccessEpoch >= cta.clusterEpoch)
        throw ExecutionError{
            kLaunchFailed,
            "CTA rank " + std::to_string(cta.clusterRank) +
                " of the cluster exits with no barrier.cluster since CTA "
                "rank " +
                std::to_string(cta.lastRemoteAccessor) +
                " accessed its shared memory: it could exit first, and its "
                "shared memory is gone then (end with barrier.cluster.arrive "
                "and wait)"};
    }
    return;
  case Opcode::Trap:
    if (active)
      throw ExecutionError{kLaunchFailed, "trap executed"};
    break;
  case Opcode::BarSync:
    if (inst.numOperands > 1) {
      uint64_t count = readOperand(warp, inst.operands[1], __builtin_ctz(mask));
      if (count != threads)
        throw ExecutionError{kLaunchFailed,
                             "bar.sync with a thread count below the "
                             "CTA's is not supported"};
    }
    if (active != mask)
      setPc(warp, mask & ~active, pc + 1);
    if (active)
      leave(warp, active, LaneState::WaitingBarrier, pc);
    return;
  case Opcode::Mma:
  case Opcode::Ldmatrix:
  case Opcode::WarpgroupMma:
  case Opcode::WarpgroupFence:
  case Opcode::WarpgroupCommit:
  case Opcode::WarpgroupWait:
    if (active && active != mask)
      throw ExecutionError{kLaunchFailed,
                           "the guard of this .aligned warp instruction is "
                           "true in lanes " +
                               hexLaneMask(active) + " and false in lanes " +
                               hexLaneMask(mask & ~active) +
                               ": all 32 lanes must execute it together"};
    [[fallthrough]];
  case Opcode::Shfl:
  case Opcode::Vote:
  case Opcode::BarWarpSync:
    if (active != mask)
      setPc(warp, mask & ~active, pc + 1);
    if (active)
      arriveAtWarpSync(inst, warp, pc, active);
    return;
  case Opcode::Activemask:
    forEachLane(active, [&](int lane) {
      warp.reg(inst.operands[0].registers[0], lane) = mask;
    });
    break;
  case Opcode::Membar:
  case Opcode::Nop:
    break;
  // Launches run one after another here: the grid before has ended, so
  // waiting only opens global memory to the lanes (MemoryAccess.cpp).
  case Opcode::GridDependencyWait:
    warp.waitedMask |= active;
    break;
  case Opcode::LaunchDependents:
    warp.cta->triggeredDependents |= active != 0;
    break;
  case Opcode::ClusterArrive:
  case Opcode::ClusterWait:
    if (inst.aligned && active != (warp.existingMask & ~warp.exitedMask))
      throw ExecutionError{
          kLaunchFailed, "barrier.cluster .aligned executed by lanes " +
                             hexLaneMask(active) + " of live lanes " +
                             hexLaneMask(warp.existingMask & ~warp.exitedMask) +
                             ": every live lane of the warp must execute "
                             "it together"};
    if (inst.opcode == Opcode::ClusterArrive) {
      arriveAtCluster(inst, warp, active);
      break;
    }
    if (active != mask)
      setPc(warp, mask & ~active, pc + 1);
    if (active)
      waitAtCluster(inst, warp, pc, active);
    return;
  case Opcode::Mapa:
    if (active)
      executeMapa(inst, warp, active);
    break;
  case Opcode::Ld:
  case Opcode::St:
  case Opcode::Atom:
  case Opcode::Red:
  case Opcode::Cvta:
    if (active)
      executeMemory(inst, warp, active);
    break;
  case Opcode::CpAsync:
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWait:
  case Opcode::CpAsyncWaitAll:
    if (active)
      executeAsyncCopy(inst, warp, active);
    break;
  default:
    if (active && !executeArithmetic(inst, warp, active))
      throw ExecutionError{kIllegalInstruction,
                           "instruction not implemented by fdemu"};
  }
  setPc(warp, mask, pc + 1);
}

void CtaRunner::arriveAtWarpSync(const Instruction &inst, WarpState &warp,
                                 uint32_t pc, uint32_t active) {
  forEachLane(active, [&](int lane) {
    if (!(getMemberMask(inst, warp, lane) >> lane & 1))
      throw ExecutionError{kLaunchFailed,
                           "lane " + std::to_string(lane) +
                               " executes a .sync warp instruction whose "
                               "member mask does not include it",
                           lane};
  });
  leave(warp, active, LaneState::WaitingWarpSync, pc);
  completeWarpSync(warp, pc);
}

void CtaRunner::completeWarpSync(WarpState &warp, uint32_t pc) {
  const Instruction &inst = kernel.code[pc];
  uint32_t arrived = 0;
  forEachLane(warp.existingMask, [&](int lane) {
    if (warp.state[lane] == LaneState::WaitingWarpSync && warp.pc[lane] == pc)
      arrived |= 1u << lane;
  });
  bool ready = arrived != 0;
  forEachLane(arrived, [&](int lane) {
    if (getMemberMask(inst, warp, lane) & ~warp.exitedMask & ~arrived)
      ready = false;
  });
  if (!ready)
    return;
  executeWarpCollective(inst, warp, arrived);
  forEachLane(arrived, [&](int lane) {
    warp.state[lane] = LaneState::Running;
    warp.pc[lane] = pc + 1;
  });
  warp.runningMask |= arrived;
  warp.converged = false;
}

void CtaRunner::completeWarpSyncsAfterExit(WarpState &warp) {
  forEachLane(warp.existingMask & ~warp.exitedMask, [&](int lane) {
    if (warp.state[lane] != LaneState::WaitingWarpSync)
      return;
    uint32_t pc = warp.pc[lane];
    try {
      completeWarpSync(warp, pc);
    } catch (const ExecutionError &error) {
      fail(error, warp, kernel.code[pc], 1u << lane);
    }
  });
}

} // namespace flashdecode::emu
