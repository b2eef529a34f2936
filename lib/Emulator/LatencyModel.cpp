//===- LatencyModel.cpp - Instruction latencies and SM residency ----------===//

#include "fd/Emulator/LatencyModel.h"

#include "Opcodes.h"
#include "Timeline.h"
#include "WarpState.h"

#include <algorithm>

namespace flashdecode::emu {

unsigned getResidentCtasPerSM(const SmResources &sm, uint64_t threadsPerCta,
                              uint64_t sharedBytesPerCta,
                              unsigned registersPerThread) {
  uint64_t warps = (std::max<uint64_t>(threadsPerCta, 1) + 31) / 32;
  uint64_t registers = (std::max(registersPerThread, 1u) + 7) / 8 * 8;
  uint64_t limits[] = {
      sm.maxCtas, sm.maxThreads / (warps * 32),
      sm.sharedBytes / (sharedBytesPerCta + sm.sharedBytesReservedPerCta),
      // Registers are allocated per warp: floor(warps that fit / warps per
      // CTA) is floor(registers / (per warp * warps per CTA)).
      sm.registers / (registers * 32 * warps)};
  uint64_t resident = *std::min_element(std::begin(limits), std::end(limits));
  return static_cast<unsigned>(std::max<uint64_t>(resident, 1));
}

namespace {

unsigned getLatency(const Instruction &inst, const LatencyModel &model) {
  switch (inst.kind) {
  case InstructionClass::Conversion:
    return model.conversion;
  case InstructionClass::SpecialFunction:
    return model.specialFunction;
  case InstructionClass::Shuffle:
    return model.shuffle;
  case InstructionClass::TensorCore:
    return model.tensorCore;
  case InstructionClass::SharedLoad:
  case InstructionClass::SharedStore: // atom.shared's result
    return inst.space == StateSpace::SharedCluster && model.distributedShared
               ? model.distributedShared
               : model.sharedLoad;
  case InstructionClass::GlobalLoad:
  case InstructionClass::GlobalStore: // atom.global's result
    return model.globalLoad;
  case InstructionClass::Barrier:
    // A memory fence waits until the thread's earlier accesses are
    // performed GPU-wide: a round trip to L2, counted as a global load.
    return inst.opcode == Opcode::Membar ? model.globalLoad : model.alu;
  default:
    return model.alu;
  }
}

void addRegisters(const Operand &operand, std::vector<uint32_t> &registers) {
  for (unsigned i = 0; i < operand.getNumRegisters(); ++i)
    if (operand.registers[i] != kNoRegister)
      registers.push_back(operand.registers[i]);
}

/// An instruction's registers before they are laid out in the Timeline.
struct Decoded {
  std::vector<uint32_t> sources, destinations, placedLoads;
  bool rename = false, fence = false;
};

bool readsAny(const Decoded &inst, const std::vector<uint32_t> &registers) {
  for (uint32_t source : inst.sources)
    if (std::find(registers.begin(), registers.end(), source) !=
        registers.end())
      return true;
  return false;
}

/// Places the global load at `pc` (loadLead): follows its results through
/// renames to the first instruction of its basic block that reads them;
/// when that is more than `lead` instructions (renames not counted) ahead,
/// the results and their renamed copies are ready only a load latency after
/// the instruction `lead` before the use.
void placeLoad(std::vector<Decoded> &code, const std::vector<bool> &blockStart,
               size_t pc, unsigned lead) {
  std::vector<uint32_t> results = code[pc].destinations;
  std::vector<size_t> issued; // instructions between the load and the use
  for (size_t next = pc + 1; next < code.size() && !blockStart[next]; ++next) {
    Decoded &inst = code[next];
    bool reads = readsAny(inst, results);
    if (inst.rename) {
      if (reads)
        results.insert(results.end(), inst.destinations.begin(),
                       inst.destinations.end());
      continue;
    }
    if (reads) {
      if (issued.size() >= lead) {
        std::vector<uint32_t> &placed =
            code[issued[issued.size() - lead]].placedLoads;
        placed.insert(placed.end(), results.begin(), results.end());
      }
      return;
    }
    if (inst.fence)
      return;
    issued.push_back(next);
  }
}

} // namespace

Timeline::Timeline(const Kernel &kernel, const LatencyModel &model)
    : numRegisters(kernel.numRegisters), window(std::max(model.window, 1u)),
      globalLoadLatency(model.globalLoad), barrierLatency(model.barrier),
      l2HitLatency(model.l2Hit),
      clusterBarrierLatency(model.clusterBarrier ? model.clusterBarrier
                                                 : model.barrier),
      maxSectorsInFlight((model.warpBytesInFlight + 31) / 32) {
  std::vector<Decoded> code(kernel.code.size());
  std::vector<bool> blockStart(kernel.code.size() + 1);
  for (size_t pc = 0; pc < kernel.code.size(); ++pc) {
    const Instruction &inst = kernel.code[pc];
    Decoded &decoded = code[pc];
    unsigned firstSource = 0;
    // wgmma.mma_async reads and writes its accumulators.
    decoded.destinations = inst.accumulators;
    decoded.sources = inst.accumulators;
    if (writesFirstOperand(inst.opcode) && inst.numOperands > 0) {
      addRegisters(inst.operands[0], decoded.destinations);
      firstSource = 1;
    }
    if (inst.secondDestination != kNoRegister)
      decoded.destinations.push_back(inst.secondDestination);
    for (unsigned i = firstSource; i < inst.numOperands; ++i)
      addRegisters(inst.operands[i], decoded.sources);
    if (inst.guard != kNoRegister)
      decoded.sources.push_back(inst.guard);
    // A guarded move is a select in SASS; an unguarded one is a rename.
    decoded.rename = inst.opcode == Opcode::Mov && inst.guard == kNoRegister;
    // cp.async's commit and wait are dependency barriers (SASS LDGDEPBAR,
    // DEPBAR) that ptxas does not move copies across.
    decoded.fence = inst.kind == InstructionClass::Control ||
                    inst.opcode == Opcode::BarSync ||
                    inst.opcode == Opcode::Membar ||
                    inst.opcode == Opcode::GridDependencyWait ||
                    inst.opcode == Opcode::ClusterArrive ||
                    inst.opcode == Opcode::ClusterWait ||
                    inst.opcode == Opcode::CpAsyncCommit ||
                    inst.opcode == Opcode::CpAsyncWait ||
                    inst.opcode == Opcode::CpAsyncWaitAll ||
                    inst.opcode == Opcode::WarpgroupCommit ||
                    inst.opcode == Opcode::WarpgroupWait;
    if (inst.opcode == Opcode::Bra)
      blockStart[inst.operands[0].value] = true;
  }
  if (model.loadLead)
    for (size_t pc = 0; pc < code.size(); ++pc)
      if (kernel.code[pc].opcode == Opcode::Ld &&
          kernel.code[pc].kind == InstructionClass::GlobalLoad)
        placeLoad(code, blockStart, pc, model.loadLead);

  entries.resize(code.size());
  for (size_t pc = 0; pc < code.size(); ++pc) {
    const Decoded &decoded = code[pc];
    Entry &entry = entries[pc];
    entry.first = static_cast<uint32_t>(registers.size());
    entry.numSources = static_cast<uint16_t>(decoded.sources.size());
    entry.numDestinations = static_cast<uint16_t>(decoded.destinations.size());
    entry.numPlacedLoads = static_cast<uint16_t>(decoded.placedLoads.size());
    for (const std::vector<uint32_t> *part :
         {&decoded.sources, &decoded.destinations, &decoded.placedLoads})
      registers.insert(registers.end(), part->begin(), part->end());
    entry.rename = decoded.rename;
    entry.fence = decoded.fence;
    entry.latency = getLatency(kernel.code[pc], model);
    if (kernel.code[pc].opcode == Opcode::Membar)
      entry.fenceLatency = entry.latency;
    entry.globalLoad = kernel.code[pc].opcode == Opcode::Ld &&
                       kernel.code[pc].kind == InstructionClass::GlobalLoad;
    entry.globalAtomic = (kernel.code[pc].opcode == Opcode::Atom ||
                          kernel.code[pc].opcode == Opcode::Red) &&
                         kernel.code[pc].kind == InstructionClass::GlobalStore;
    const Instruction &inst = kernel.code[pc];
    entry.asyncCopy = inst.opcode == Opcode::CpAsync         ? AsyncCopy::Copy
                      : inst.opcode == Opcode::CpAsyncCommit ? AsyncCopy::Commit
                      : inst.opcode == Opcode::CpAsyncWait   ? AsyncCopy::Wait
                      : inst.opcode == Opcode::CpAsyncWaitAll
                          ? AsyncCopy::WaitAll
                          : AsyncCopy::None;
    if (inst.opcode == Opcode::CpAsyncWait)
      entry.keepGroups = static_cast<uint32_t>(inst.operands[0].value);
    entry.warpgroup = inst.opcode == Opcode::WarpgroupMma ? Warpgroup::Mma
                      : inst.opcode == Opcode::WarpgroupCommit
                          ? Warpgroup::Commit
                      : inst.opcode == Opcode::WarpgroupWait ? Warpgroup::Wait
                                                             : Warpgroup::None;
    if (inst.opcode == Opcode::WarpgroupWait)
      entry.keepGroups = static_cast<uint32_t>(inst.operands[0].value);
    if (inst.opcode == Opcode::WarpgroupMma) {
      // A warp's 16 x N x 16 multiply-adds at a quarter of the SM's
      // 2048 a clock: N / 2 cycles, after which a chained wgmma may use
      // the accumulators; wait_group sees them a tensor latency later.
      entry.latency = inst.warpgroupColumns / 2u;
      entry.warpgroupCompletion = entry.latency + model.tensorCore;
    }
  }
}

void Timeline::start(WarpTiming &timing) const {
  timing.clock = timing.fence = timing.floor = timing.busyBase = 0;
  timing.ready.assign(numRegisters, 0);
  timing.loadLatency.assign(numRegisters, globalLoadLatency);
  timing.recent.assign(window, 0);
  timing.slot = 0;
  timing.busy.fill(0);
  timing.openCopiesReady = 0;
  timing.committedCopiesReady.clear();
  timing.openMmasReady = 0;
  timing.committedMmasReady.clear();
  timing.lastGlobalAtomic.reset();
  timing.loadsInFlight.clear();
  timing.sectorsInFlight = 0;
}

void Timeline::slideBusy(WarpTiming &timing, uint64_t cycle) {
  uint64_t base = (cycle - WarpTiming::kBusyCycles / 2) & ~uint64_t(63);
  for (uint64_t word = timing.busyBase / 64;
       word < base / 64 && word < timing.busyBase / 64 + timing.busy.size();
       ++word)
    timing.busy[word % timing.busy.size()] = 0;
  timing.busyBase = base;
}

void Timeline::releaseBarrier(std::vector<WarpState> &warps) const {
  uint64_t last = 0;
  for (const WarpState &warp : warps)
    if (warp.existingMask & ~warp.exitedMask)
      last = std::max(last, warp.timing.clock);
  for (WarpState &warp : warps)
    if (warp.existingMask & ~warp.exitedMask)
      warp.timing.clock = warp.timing.fence = last + barrierLatency;
}

uint64_t Timeline::getCtaCycles(const std::vector<WarpState> &warps) {
  uint64_t latest = 0;
  for (const WarpState &warp : warps)
    latest = std::max(latest, warp.timing.clock);
  return latest;
}

uint64_t Timeline::getSerialTailCycles(const std::vector<WarpState> &warps) {
  std::optional<uint64_t> lastAtomic;
  for (const WarpState &warp : warps)
    if (warp.timing.lastGlobalAtomic)
      lastAtomic =
          std::max(lastAtomic.value_or(0), *warp.timing.lastGlobalAtomic);
  return lastAtomic ? getCtaCycles(warps) - *lastAtomic : 0;
}

} // namespace flashdecode::emu
