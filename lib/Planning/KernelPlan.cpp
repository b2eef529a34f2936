//===- KernelPlan.cpp - The partial kernel's schedule, chosen once --------===//

#include "fd/Planning/KernelPlan.h"
#include "IntegerMath.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/Limits.h"

#include <algorithm>
#include <sstream>

namespace flashdecode {

using detail::ceilDiv;

std::string_view getKernelFormName(KernelForm form) {
  return form == KernelForm::TensorCores ? "tensor_cores" : "cuda_cores";
}

std::optional<KernelForm> findKernelForm(std::string_view name) {
  for (KernelForm form : {KernelForm::CudaCores, KernelForm::TensorCores})
    if (name == getKernelFormName(form))
      return form;
  return std::nullopt;
}

bool ScheduleChoice::operator==(const ScheduleChoice &other) const {
  return form == other.form && rowsPerTile == other.rowsPerTile &&
         rowTiles == other.rowTiles && threads == other.threads &&
         minBlocksPerSM == other.minBlocksPerSM &&
         heldQuerySteps == other.heldQuerySteps &&
         keyValueStages == other.keyValueStages;
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

std::vector<WorkgroupBuffer>
KernelSchedule::getWorkgroupBuffers(int64_t fusedMergeSplits) const {
  constexpr int64_t kWarps = PartialKernelLayout::kWarps;
  const int64_t headDim = layout.headDim, valueHeadDim = layout.valueHeadDim;
  // A tensor-core tile's K/V stages take the accumulators' place: as many
  // rows as they need.
  const int64_t rowBytes = kWarps * valueHeadDim * 4;
  const int64_t accumulatorRows = std::max<int64_t>(
      layout.rowTile, ceilDiv(keyValueStages * layout.stageBytes(), rowBytes));
  std::vector<WorkgroupBuffer> buffers = {
      usesTensorCores() ? WorkgroupBuffer{{headDim / 16, 32, 4}, true}
                        : WorkgroupBuffer{{layout.rowTile, headDim}, false},
      WorkgroupBuffer{{kWarps, accumulatorRows, valueHeadDim}, false},
      WorkgroupBuffer{{kWarps, layout.rowTile, 2}, false}};
  // A fused merge keeps its rows' weights in the accumulators, free once
  // the chunk is done, or where they do not fit in a buffer of their own.
  int64_t weights = layout.rows * getMergeWeightsPerRow(fusedMergeSplits);
  if (fusedMergeSplits &&
      weights > buffers[kWarpAccumulatorsBuffer].getNumElements())
    buffers.push_back(WorkgroupBuffer{{weights}, false});
  return buffers;
}

int64_t KernelSchedule::getSharedMemoryBytes(int64_t fusedMergeSplits) const {
  // The kernels move workgroup memory 16 bytes at a time: every buffer
  // starts 16-byte aligned.
  int64_t bytes = 0;
  for (const WorkgroupBuffer &buffer : getWorkgroupBuffers(fusedMergeSplits))
    bytes = ceilDiv(bytes, 16) * 16 + buffer.getBytes();
  return bytes;
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
  if (!usesTensorCores()) {
    // PartialKernelLayout::kRowRegisterBudget leaves the rest of 255 to
    // these and the converted elements.
    constexpr int64_t kLoadsInFlight = 32;
    return layout.rowTile * layout.registersPerRow() + kLoadsInFlight;
  }
  // Per lane: 2 rows' max and sum, D / 8 output tiles of 4, 4 words per
  // held k-step of q; per step S's two mma chains (8) and K's words (4).
  return 4 + 4 * (layout.headDim / 8) + 4 * heldQuerySteps + 8 + 4;
}

ScheduleChoice KernelSchedule::getChoice() const {
  return {form,           layout.rowTile, layout.numRowTiles, threads,
          minBlocksPerSM, heldQuerySteps, keyValueStages};
}

KernelSchedule getKernelSchedule(const KernelProblem &problem,
                                 const ScheduleChoice &choice) {
  KernelSchedule schedule;
  schedule.layout = PartialKernelLayout::get(
      problem.headDim, problem.queryElementBytes, problem.cacheElementBytes,
      problem.groupSize, problem.queryLength, problem.alibi,
      choice.form == KernelForm::TensorCores, problem.getValueHeadDim());
  schedule.layout.rowTile = choice.rowsPerTile;
  schedule.layout.numRowTiles = choice.rowTiles;
  schedule.form = choice.form;
  schedule.threads = choice.threads;
  schedule.minBlocksPerSM = choice.minBlocksPerSM;
  schedule.heldQuerySteps = choice.heldQuerySteps;
  schedule.keyValueStages = choice.keyValueStages;
  return schedule;
}

/// Whether `problem`'s values are what a tensor-core tile takes: a value
/// cache of their own, as wide as the keys.
static bool hasTensorCoreValues(const KernelProblem &problem) {
  return !problem.valuesFromKeys &&
         problem.getValueHeadDim() == problem.headDim;
}

/// Why `choice`'s form, tiling and per-form fields cannot serve `problem`.
static std::string getReasonTilingInvalid(const KernelProblem &problem,
                                          const ScheduleChoice &choice) {
  std::ostringstream os;
  const bool tensorCores = choice.form == KernelForm::TensorCores;
  const int64_t rows = problem.getRowsPerKVHead();
  if (choice.threads != PartialKernelLayout::kThreads) {
    os << "threads = " << choice.threads
       << " is not supported: the kernels are built for "
       << PartialKernelLayout::kThreads << " (4 warps)";
  } else if (tensorCores &&
             (problem.queryElementBytes != 2 ||
              (problem.headDim != 64 && problem.headDim != 128))) {
    os << "form = tensor_cores needs f16 or bf16 queries and a head dim of 64 "
          "or 128 (mma.sync's fragments), got "
       << problem.queryElementBytes * 8 << "-bit queries at head dim "
       << problem.headDim;
  } else if (tensorCores && !hasTensorCoreValues(problem)) {
    os << "form = tensor_cores needs a value cache of its own at the key head "
          "dim, got "
       << (problem.valuesFromKeys
               ? "values read from the key cache"
               : "a value head dim of " +
                     std::to_string(problem.getValueHeadDim()));
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
       << " x Lq " << problem.queryLength << ")";
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
  } else if (tensorCores && (choice.heldQuerySteps < 0 ||
                             choice.heldQuerySteps > problem.headDim / 16)) {
    os << "held_query_steps = " << choice.heldQuerySteps
       << " is out of range: 0 to " << problem.headDim / 16
       << " (q's 16-wide k-steps at head dim " << problem.headDim << ")";
  }
  return os.str();
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
  // Bounded before the workgroup memory is summed: a hand-written count
  // may be anything.
  if (choice.keyValueStages >
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
  int64_t sharedMemory = schedule.getSharedMemoryBytes();
  if (sharedMemory > kMaxStaticSharedMemoryBytes)
    os << "stages = " << choice.keyValueStages
       << ", rows_per_tile = " << choice.rowsPerTile
       << ": the kernel's workgroup memory is " << sharedMemory
       << " bytes, more than the " << kMaxStaticSharedMemoryBytes
       << " a block declares statically";
  return os.str();
}

/// The tensor-core kernel's launch bounds and held q fragments.
static void planTensorCoreResidency(const KernelProblem &problem,
                                    const Chip &chip,
                                    KernelSchedule &schedule) {
  const PartialKernelLayout &layout = schedule.layout;
  const PartialKernelFeatures &features = problem.features;
  // The tensor-core kernel fits 128 registers (four blocks per SM, the
  // split planner's default wave) where ptxas would take a few more:
  // say so, as __launch_bounds__(128, 4) does. With a paged cache the
  // page lookups do not fit beside the fragments in 128 (ptxas spills a
  // few bytes in some configurations), nor do the query rows' windows
  // beside the soft-cap (8 bytes at MHA, Lq = 8 on sm_80), nor, at D =
  // 128, the rows' windows or query lengths beside q's held k-steps (4 to
  // 16 bytes at Hq / Hkv = 2 and 4, Lq > 1, on both arches), nor the ALiBi
  // slopes and positions of a lane's rows: three blocks, 168 registers.
  // So do 16-row tiles at D = 128 (MQA), to hold all of q's fragments:
  // read from workgroup memory, they made two blocks shared-memory-bound.
  bool rowsMasked = layout.causal && (features.window || features.queryLens);
  bool tight = features.paged || layout.alibi ||
               (layout.causal && features.window && features.softCap) ||
               (rowsMasked && layout.headDim == 128) ||
               (layout.rowTile == kTensorCoreTileRows && layout.headDim == 128);
  schedule.minBlocksPerSM = tight ? 3 : 4;
  // q's fragments all stay in registers through the token loop (else
  // they are read from workgroup memory every step: as much traffic as
  // K's and V's) where ptxas fits them: with three blocks' registers,
  // and with four at D = 64 on sm_90. Elsewhere ptxas 13.0 spills with
  // more than two held (sm_90, D = 128: 20 bytes with all eight).
  schedule.heldQuerySteps = layout.headDim / 16;
  bool hopper = chip.computeCapability >= 90;
  if (!tight && (!hopper || layout.headDim > 64))
    schedule.heldQuerySteps = 2;
}

/// The most rows of a CUDA-core tile within the register budget and the
/// static workgroup memory (which bounds only rows of 512-wide values).
static int64_t getMostCudaCoreTileRows(const KernelProblem &problem,
                                       ScheduleChoice choice) {
  const PartialKernelLayout layout = getKernelSchedule(problem, choice).layout;
  int64_t rowTile =
      PartialKernelLayout::kRowRegisterBudget / layout.registersPerRow();
  if (layout.rows > rowTile)
    rowTile = (PartialKernelLayout::kRowRegisterBudget -
               PartialKernelLayout::kRowTileLoopRegisters) /
              layout.registersPerRow();
  for (; rowTile > 1; --rowTile) {
    choice.rowsPerTile = rowTile;
    if (getKernelSchedule(problem, choice).getSharedMemoryBytes() <=
        kMaxStaticSharedMemoryBytes)
      break;
  }
  return std::max<int64_t>(1, rowTile);
}

KernelSchedule planKernel(const KernelProblem &problem, const Chip &chip) {
  ScheduleChoice choice;
  const int64_t rows = problem.getRowsPerKVHead();
  bool tensorCores =
      choosesTensorCores(problem.queryElementBytes, problem.headDim, rows) &&
      hasTensorCoreValues(problem);
  // As few tiles as the rows allow (each streams the chunk again), of equal
  // size: 16 rows, at most 7 per tile, are three tiles of 6, not 7 + 7 + 2
  // (fewer registers and less shared memory per tile).
  int64_t mostRows = kTensorCoreTileRows;
  if (!tensorCores)
    mostRows = getMostCudaCoreTileRows(problem, choice);
  choice.rowTiles = ceilDiv(rows, mostRows);
  choice.rowsPerTile = ceilDiv(rows, choice.rowTiles);
  if (!tensorCores)
    return getKernelSchedule(problem, choice);
  choice.form = KernelForm::TensorCores;
  choice.keyValueStages = PartialKernelLayout::kKeyValueStages;
  KernelSchedule schedule = getKernelSchedule(problem, choice);
  planTensorCoreResidency(problem, chip, schedule);
  return schedule;
}

} // namespace flashdecode
