//===- KernelPlan.cpp - The partial kernel's schedule, chosen once --------===//

#include "fd/Planning/KernelPlan.h"
#include "IntegerMath.h"
#include "KernelPlanRules.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/Limits.h"

#include <algorithm>
#include <sstream>

namespace flashdecode {

using detail::ceilDiv;
using detail::getReasonNoTensorCoreTile;
using detail::kRegistersPerHeldQueryStep;

std::string_view getKernelFormName(KernelForm form) {
  switch (form) {
  case KernelForm::TensorCores:
    return "tensor_cores";
  case KernelForm::WarpgroupTensorCores:
    return "warpgroup_tensor_cores";
  default:
    return "cuda_cores";
  }
}

std::optional<KernelForm> findKernelForm(std::string_view name) {
  for (KernelForm form : {KernelForm::CudaCores, KernelForm::TensorCores,
                          KernelForm::WarpgroupTensorCores})
    if (name == getKernelFormName(form))
      return form;
  return std::nullopt;
}

bool ScheduleChoice::operator==(const ScheduleChoice &other) const {
  return form == other.form && rowsPerTile == other.rowsPerTile &&
         rowTiles == other.rowTiles && threads == other.threads &&
         minBlocksPerSM == other.minBlocksPerSM &&
         heldQuerySteps == other.heldQuerySteps &&
         keyValueStages == other.keyValueStages &&
         clusterCtas == other.clusterCtas;
}

int64_t KernelProblem::getRequestsPerBlock() const {
  if (!sharedPrefix)
    return 1;
  return std::max<int64_t>(1, kTensorCoreTileRows / (groupSize * queryLength));
}

int64_t KernelProblem::getBlockBatch(int64_t batch) const {
  return ceilDiv(batch, getRequestsPerBlock());
}

int64_t WorkgroupBuffer::getNumElements() const {
  int64_t elements = 1;
  for (int64_t extent : shape)
    elements *= extent;
  return elements;
}

int64_t getMergeWeightsPerRow(int64_t numSplits) {
  return ceilDiv(numSplits, 4) * 4;
}

int64_t KernelSchedule::getRegisterBudget(const Chip &chip) const {
  if (minBlocksPerSM == 0)
    return chip.maxRegistersPerThread;
  // ptxas allocates a warp's registers 256 at a time: 8 a thread.
  int64_t perThread = chip.registersPerSM / (threads * minBlocksPerSM) / 8 * 8;
  return std::min<int64_t>(perThread, chip.maxRegistersPerThread);
}

int64_t KernelSchedule::getResidentBlocks(const Chip &chip) const {
  int64_t blocks =
      std::min<int64_t>(chip.maxBlocksPerSM, chip.maxWarpsPerSM * 32 / threads);
  if (minBlocksPerSM > 0)
    blocks = std::min(blocks, minBlocksPerSM);
  return std::min(blocks,
                  chip.sharedMemoryBytesPerSM /
                      (getSharedMemoryBytes() + kReservedSharedMemoryPerBlock));
}

int64_t KernelSchedule::getPublishedWarpStates() const {
  return layout.splitsValues ? 1 : PartialKernelLayout::kWarps;
}

std::vector<WorkgroupBuffer>
KernelSchedule::getWorkgroupBuffers(int64_t fusedMergeSplits) const {
  // The warpgroup tile keeps q, K/V and P in dynamic shared memory, and
  // writes its partials from registers (no query or accumulator buffer);
  // the max-sum buffer exchanges each row's max and sum between its
  // warpgroups.
  if (usesWarpgroupTile())
    return {WorkgroupBuffer{{0}, false}, WorkgroupBuffer{{0}, false},
            WorkgroupBuffer{{2, layout.rowTile, 2}, false}};
  constexpr int64_t kWarps = PartialKernelLayout::kWarps;
  const int64_t headDim = layout.headDim, valueHeadDim = layout.valueHeadDim;
  const int64_t states = getPublishedWarpStates();
  // The query buffer: a CUDA-core tile's f32 rows, a tensor-core tile's q
  // fragments, or a split-value tile's exchange of each warp's share of S
  // (a lane's four scores).
  WorkgroupBuffer query =
      !usesTensorCores()    ? WorkgroupBuffer{{layout.rowTile, headDim}, false}
      : layout.splitsValues ? WorkgroupBuffer{{kWarps, 32, 4}, false}
                            : WorkgroupBuffer{{headDim / 16, 32, 4}, true};
  std::vector<WorkgroupBuffer> buffers = {
      query,
      WorkgroupBuffer{{states, getAccumulatorRows(), valueHeadDim}, false},
      WorkgroupBuffer{{states, layout.rowTile, 2}, false}};
  // A fused merge keeps its rows' weights in the accumulators, free once
  // the chunk is done, or where they do not fit in a buffer of their own.
  int64_t weights = layout.rows * getMergeWeightsPerRow(fusedMergeSplits);
  if (fusedMergeSplits &&
      weights > buffers[kWarpAccumulatorsBuffer].getNumElements())
    buffers.push_back(WorkgroupBuffer{{weights}, false});
  return buffers;
}

int64_t KernelSchedule::getAccumulatorRows() const {
  // A tensor-core tile's K/V stages (and a split-value tile's q) take the
  // accumulators' place: as many rows as they need.
  const int64_t rowBytes = getPublishedWarpStates() * layout.valueHeadDim * 4;
  return std::max({layout.rowTile,
                   ceilDiv(keyValueStages * layout.stageBytes(), rowBytes),
                   ceilDiv(getQueryStageBytes(), rowBytes)});
}

int64_t KernelSchedule::getQueryStageOffset() const {
  const int64_t bufferBytes =
      getAccumulatorRows() * getPublishedWarpStates() * layout.valueHeadDim * 4;
  return (bufferBytes - getQueryStageBytes()) / 16 * 16;
}

int64_t KernelSchedule::getSharedMemoryBytes(int64_t fusedMergeSplits) const {
  // The kernels move workgroup memory 16 bytes at a time: every buffer
  // starts 16-byte aligned.
  int64_t bytes = 0;
  for (const WorkgroupBuffer &buffer : getWorkgroupBuffers(fusedMergeSplits))
    bytes = ceilDiv(bytes, 16) * 16 + buffer.getBytes();
  return bytes + getDynamicSharedMemoryBytes();
}

int64_t KernelSchedule::getMostFusedMergeSplits() const {
  std::vector<WorkgroupBuffer> own = getWorkgroupBuffers();
  int64_t floats =
      std::max(own[kWarpAccumulatorsBuffer].getNumElements(),
               (kMaxStaticSharedMemoryBytes - getSharedMemoryBytes()) / 4);
  // A row's weights are a multiple of 4 (getMergeWeightsPerRow).
  return floats / layout.rows / 4 * 4;
}

int64_t KernelSchedule::getLeastLoopRegisters() const {
  // The warpgroup tile: 2 rows' max and sum, its half of the value dims'
  // accumulators (rowTile x D_v / 2 over 128 threads) and a step's scores
  // (its warpgroup's keys: 4 a lane per 8).
  if (usesWarpgroupTile())
    return 4 + layout.rowTile * layout.valueHeadDim / 2 / 128 +
           layout.tokensPerStep() / 2 / 8 * 4;
  if (!usesTensorCores()) {
    // kCudaCoreOtherRegisters (getRegisterDemand) holds these among others.
    constexpr int64_t kLoadsInFlight = 32;
    return layout.rowTile * layout.registersPerRow() + kLoadsInFlight;
  }
  // Per lane: 2 rows' max and sum, D / 8 output tiles of 4 (a split-value
  // tile: its D_v / 32), the words of each held k-step of q; per step S's
  // two mma chains (8) and K's words (4).
  const int64_t outputTiles =
      layout.splitsValues ? layout.warpValueDims() / 8 : layout.headDim / 8;
  return 4 + 4 * outputTiles + kRegistersPerHeldQueryStep * heldQuerySteps + 8 +
         4;
}

/// The register model's term for a CUDA-core thread's registers besides its
/// rows': fitted on the kernel matrix, each kernel assembled with launch
/// bounds of 2, 3 and 4 blocks, as the least that never promises more blocks
/// than ptxas 13.0 fits with no spill (bench/RESULTS.md 2026-12-04
/// (second), "The register model").
static constexpr int64_t kCudaCoreOtherRegisters = 42;
/// A CUDA-core tile over a paged fp8 cache: a 16-byte vector decodes to 16
/// elements (a 16-bit cache's to 8), beside its scales and the page
/// lookups. Without this term tiles over pages of 1 spill 4 to 64 bytes
/// within 12 registers of their budget.
static constexpr int64_t kPagedFloat8Registers = 14;

/// The register model's terms for a tensor-core tile beside its token
/// loop's least (ptxas 13.0, measured with launch bounds of four blocks:
/// bench/RESULTS.md 2026-12-04 (second), "The register model"). Addresses,
/// bounds and the cp.async pipeline's indices: what ptxas fits beside two held
/// k-steps at D = 128 in 128 registers with no spill (at D = 64 it takes
/// 42).
static constexpr int64_t kTensorCoreOtherRegisters = 40;
/// A tile's page lookups, ALiBi slopes or masked rows (a causal window or
/// query lengths): up to 16 more at D = 64 (106 registers, 118 paged, 122
/// paged with ALiBi); at D = 128, with two held k-steps, any of them spills
/// 4 to 24 bytes in four blocks' 128.
static constexpr int64_t kTensorCoreRowStateRegisters = 16;

/// The warpgroup tile beside its token loop's least: the wgmma operands'
/// structs, descriptors, the copies' addresses and the softmax's scores
/// and weights of 2 tiles. ptxas 13.0 takes 243 to 250 registers at MLA's
/// D = 576 (254 with every feature), of the 255 its one block an SM
/// allows: no spill (PTXAssemblyTest).
static constexpr int64_t kWarpgroupOtherRegisters = 108;

int64_t KernelSchedule::getRegisterDemand(const KernelProblem &problem) const {
  const PartialKernelFeatures &features = problem.features;
  if (!usesTensorCores() && !usesWarpgroupTile())
    return layout.rowTile * layout.registersPerRow() + kCudaCoreOtherRegisters +
           (features.paged && problem.cacheElementBytes == 1
                ? kPagedFloat8Registers
                : 0);
  bool rowsMasked = layout.causal && (features.window || features.queryLens);
  bool rowState = features.paged || layout.alibi || rowsMasked;
  if (usesWarpgroupTile())
    return getLeastLoopRegisters() + kWarpgroupOtherRegisters +
           (rowState ? kTensorCoreRowStateRegisters : 0);
  return getLeastLoopRegisters() + kTensorCoreOtherRegisters +
         (rowState ? kTensorCoreRowStateRegisters : 0);
}

void detail::setLaunchBoundsForRegisterDemand(KernelSchedule &schedule,
                                              const KernelProblem &problem,
                                              const Chip &chip) {
  int64_t demand = std::min<int64_t>(schedule.getRegisterDemand(problem),
                                     chip.maxRegistersPerThread);
  schedule.minBlocksPerSM = kPlannedBlocksPerSM;
  while (schedule.minBlocksPerSM > 1 &&
         schedule.getRegisterBudget(chip) < demand)
    --schedule.minBlocksPerSM;
}

ScheduleChoice KernelSchedule::getChoice() const {
  return {form,           layout.rowTile, layout.numRowTiles, threads,
          minBlocksPerSM, heldQuerySteps, keyValueStages,     clusterCtas};
}

KernelSchedule getKernelSchedule(const KernelProblem &problem,
                                 const ScheduleChoice &choice) {
  KernelSchedule schedule;
  schedule.layout = PartialKernelLayout::get(
      problem.headDim, problem.queryElementBytes, problem.cacheElementBytes,
      problem.groupSize, problem.getTokensPerBlock(), problem.alibi,
      choice.form == KernelForm::TensorCores, problem.getValueHeadDim(),
      problem.valuesFromKeys, choice.form == KernelForm::WarpgroupTensorCores);
  // The rows of sequences continuing a shared prefix see keys of their own
  // positions.
  schedule.layout.causal |= problem.sharedPrefix;
  schedule.layout.rowTile = choice.rowsPerTile;
  schedule.layout.numRowTiles = choice.rowTiles;
  schedule.form = choice.form;
  schedule.threads = choice.threads;
  schedule.minBlocksPerSM = choice.minBlocksPerSM;
  schedule.heldQuerySteps = choice.heldQuerySteps;
  schedule.keyValueStages = choice.keyValueStages;
  schedule.clusterCtas = choice.clusterCtas;
  return schedule;
}

std::string detail::getReasonNoTensorCoreTile(const KernelProblem &problem) {
  if (problem.queryElementBytes != 2)
    return "form = tensor_cores needs f16 or bf16 queries (mma.sync's "
           "operands), got " +
           std::to_string(problem.queryElementBytes * 8) + "-bit queries";
  const int64_t valueHeadDim = problem.getValueHeadDim();
  if (!usesSplitValueTile(problem.headDim, valueHeadDim,
                          problem.valuesFromKeys))
    return "";
  std::string reason = getReasonNoSplitValueTile(problem.headDim, valueHeadDim,
                                                 problem.cacheElementBytes);
  if (reason.empty())
    return "";
  return "form = tensor_cores needs a head dim of 64 or 128 with values of "
         "their own at it, or else (warps splitting the value dims) " +
         reason;
}

/// Why `choice`'s form, tiling and per-form fields cannot serve `problem`.
static std::string getReasonTilingInvalid(const KernelProblem &problem,
                                          const ScheduleChoice &choice) {
  if (choice.form == KernelForm::WarpgroupTensorCores)
    return detail::getReasonWarpgroupTilingInvalid(problem, choice);
  std::ostringstream os;
  const bool tensorCores = choice.form == KernelForm::TensorCores;
  const int64_t rows = problem.getRowsPerKVHead();
  if (choice.threads != PartialKernelLayout::kThreads) {
    os << "threads = " << choice.threads
       << " is not supported: the kernels are built for "
       << PartialKernelLayout::kThreads << " (4 warps)";
  } else if (std::string reason =
                 tensorCores ? getReasonNoTensorCoreTile(problem) : "";
             !reason.empty()) {
    os << reason;
  } else if (int64_t most =
                 tensorCores ? std::min(rows, kTensorCoreTileRows) : rows;
             choice.rowsPerTile < 1 || choice.rowsPerTile > most) {
    os << "rows_per_tile = " << choice.rowsPerTile << " is out of range: 1 to "
       << most << " (the " << rows << " query rows of a KV head"
       << (tensorCores ? ", at most an mma tile's 16" : "") << ")";
  } else if (int64_t needed = ceilDiv(rows, choice.rowsPerTile);
             choice.rowTiles < needed) {
    os << "rows_per_tile = " << choice.rowsPerTile
       << " x row_tiles = " << choice.rowTiles << " do not cover the " << rows
       << " query rows of a KV head (group size " << problem.groupSize
       << " x Lq " << problem.queryLength
       << (problem.sharedPrefix
               ? " x " + std::to_string(problem.getRequestsPerBlock()) +
                     " sequences of a shared prefix"
               : "")
       << ")";
  } else if (choice.rowTiles > needed) {
    os << "row_tiles = " << choice.rowTiles
       << " leaves a tile without rows: " << rows << " rows in tiles of "
       << choice.rowsPerTile << " take " << needed;
  } else if (!tensorCores && (choice.keyValueStages || choice.heldQuerySteps)) {
    os << (choice.keyValueStages ? "stages = " : "held_query_steps = ")
       << (choice.keyValueStages ? choice.keyValueStages
                                 : choice.heldQuerySteps)
       << " applies to form = tensor_cores only: expected 0 for form = "
          "cuda_cores";
  } else if (tensorCores && choice.keyValueStages < 2) {
    os << "stages = " << choice.keyValueStages
       << " is too few: the K/V pipeline copies the next step while the block "
          "computes this one, so it needs at least 2";
  } else if (int64_t warpSteps = problem.headDim / 64;
             tensorCores &&
             usesSplitValueTile(problem.headDim, problem.getValueHeadDim(),
                                problem.valuesFromKeys) &&
             choice.heldQuerySteps != warpSteps) {
    os << "held_query_steps = " << choice.heldQuerySteps << ": expected "
       << warpSteps
       << " (each warp of a split-value tile holds its quarter of q's "
          "16-wide k-steps at head dim "
       << problem.headDim << ")";
  } else if (tensorCores && (choice.heldQuerySteps < 0 ||
                             choice.heldQuerySteps > problem.headDim / 16)) {
    os << "held_query_steps = " << choice.heldQuerySteps
       << " is out of range: 0 to " << problem.headDim / 16
       << " (q's 16-wide k-steps at head dim " << problem.headDim << ")";
  }
  return os.str();
}

std::string getReasonScheduleUnsupportedOnChip(const KernelSchedule &schedule,
                                               const Chip &chip) {
  std::string name(chip.name);
  if (schedule.usesWarpgroupTile() && !chip.hasWarpgroupMma)
    return "form = warpgroup_tensor_cores needs wgmma, which chip " + name +
           " lacks: compile for sm_90a, or take the planner's schedule for " +
           name;
  if (schedule.clusterCtas > 1 && !chip.hasClusters)
    return "cluster_ctas = " + std::to_string(schedule.clusterCtas) +
           " needs thread block clusters, which chip " + name +
           " lacks: compile for sm_90 or later, or take the planner's "
           "schedule for " +
           name;
  return "";
}

KernelSchedule
findPartialKernelSchedule(const KernelProblem &problem,
                          const std::optional<ScheduleChoice> &choice,
                          const Chip &chip) {
  if (choice)
    return getKernelSchedule(problem, *choice);
  return planKernel(problem, chip);
}

std::string getReasonScheduleInvalid(const KernelProblem &problem,
                                     const ScheduleChoice &choice) {
  std::string tiling = getReasonTilingInvalid(problem, choice);
  if (!tiling.empty())
    return tiling;
  KernelSchedule schedule = getKernelSchedule(problem, choice);
  std::ostringstream os;
  if (choice.clusterCtas < 1 || choice.clusterCtas > kMaxClusterCtas) {
    os << "cluster_ctas = " << choice.clusterCtas << " is out of range: 1 to "
       << kMaxClusterCtas << " blocks a chunk (a portable thread block "
       << "cluster)";
    return os.str();
  }
  // The warpgroup tile stages its normalized rows and their lse in its
  // dynamic shared memory for the cluster's merge.
  if (choice.clusterCtas > 1 && schedule.usesWarpgroupTile() &&
      choice.rowsPerTile * (problem.getValueHeadDim() + 1) * 4 >
          schedule.getWarpgroupRegions().end) {
    os << "cluster_ctas = " << choice.clusterCtas << ": the warpgroup tile's "
       << choice.rowsPerTile << " rows of " << problem.getValueHeadDim()
       << " f32 values and their lse do not fit in its "
       << schedule.getWarpgroupRegions().end
       << " bytes of dynamic shared memory for the cluster's merge";
    return os.str();
  }
  // Bounded before the workgroup memory is summed: a hand-written count
  // may be anything.
  if (!schedule.usesWarpgroupTile() &&
      choice.keyValueStages >
          kMaxStaticSharedMemoryBytes /
              std::max<int64_t>(1, schedule.layout.stageBytes())) {
    os << "stages = " << choice.keyValueStages << ": stages of "
       << schedule.layout.stageBytes() << " bytes take more than the "
       << kMaxStaticSharedMemoryBytes << " bytes a block declares statically";
    return os.str();
  }
  // The strictest target's blocks of `threads` per SM.
  const Chip *strictest = nullptr;
  int64_t mostBlocks = 0;
  for (const Chip &chip : getChips()) {
    int64_t blocks = std::min<int64_t>(
        chip.maxBlocksPerSM, chip.maxWarpsPerSM * 32 / choice.threads);
    if (!strictest || blocks < mostBlocks) {
      strictest = &chip;
      mostBlocks = blocks;
    }
  }
  if (choice.minBlocksPerSM < 0 || choice.minBlocksPerSM > mostBlocks) {
    os << "min_blocks_per_sm = " << choice.minBlocksPerSM
       << " is out of range: 0 (no launch bounds) to " << mostBlocks
       << " blocks of " << choice.threads << " threads (what "
       << strictest->name << " holds per SM)";
    return os.str();
  }
  for (const Chip &chip : getChips()) {
    int64_t budget = schedule.getRegisterBudget(chip);
    int64_t least = schedule.getLeastLoopRegisters();
    if (least > budget) {
      os << (choice.minBlocksPerSM ? "min_blocks_per_sm = "
                                   : "rows_per_tile = ")
         << (choice.minBlocksPerSM ? choice.minBlocksPerSM : choice.rowsPerTile)
         << " leaves " << budget << " registers a thread on " << chip.name
         << ", fewer than the " << least << " its token loop holds at least";
      return os.str();
    }
  }
  if (schedule.usesWarpgroupTile()) {
    // Its static and dynamic shared memory, up to the least of the wgmma
    // targets'.
    int64_t most = 0;
    for (const Chip &chip : getChips())
      if (chip.hasWarpgroupMma)
        most = most ? std::min<int64_t>(most, chip.maxSharedMemoryBytesPerBlock)
                    : chip.maxSharedMemoryBytesPerBlock;
    int64_t bytes = schedule.getSharedMemoryBytes();
    if (bytes > most)
      os << "stages = " << choice.keyValueStages
         << ": the warpgroup tile's shared memory is " << bytes
         << " bytes, more than the " << most << " a block may have";
    return os.str();
  }
  int64_t sharedMemory = schedule.getSharedMemoryBytes();
  if (sharedMemory > kMaxStaticSharedMemoryBytes)
    os << "stages = " << choice.keyValueStages
       << ", rows_per_tile = " << choice.rowsPerTile
       << ": the kernel's workgroup memory is " << sharedMemory
       << " bytes, more than the " << kMaxStaticSharedMemoryBytes
       << " a block declares statically";
  return os.str();
}

} // namespace flashdecode
