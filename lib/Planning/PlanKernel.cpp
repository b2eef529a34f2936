//===- PlanKernel.cpp - planKernel: a problem's schedule on a chip --------===//
//
// The choices planKernel makes (fd/Planning/KernelPlan.h): the form, the
// row tiling, the held q fragments, the stages and the launch bounds.
// KernelPlan.cpp has what a schedule is and which ones are valid.
//
//===----------------------------------------------------------------------===//

#include "IntegerMath.h"
#include "KernelPlanRules.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/KernelPlan.h"
#include "fd/Planning/Limits.h"

#include <algorithm>
#include <optional>

namespace flashdecode {

using detail::ceilDiv;
using detail::getReasonNoTensorCoreTile;
using detail::kRegistersPerHeldQueryStep;
using detail::setLaunchBoundsForRegisterDemand;

/// The tensor-core kernel's held q fragments and launch bounds. A k-step of
/// q held in registers costs nothing per step; one that is not is read from
/// workgroup memory every step, as much traffic as K's and V's. So a tile
/// holds all of q where four blocks' registers allow it. Where they do not,
/// a full tile of 16 rows still holds all (read from workgroup memory, MQA's
/// 16-row tiles at D = 128 were shared-memory-bound), with fewer blocks; a
/// smaller tile keeps four blocks and holds the k-steps their registers
/// leave, if they leave any.
static void planTensorCoreResidency(const KernelProblem &problem,
                                    const Chip &chip,
                                    KernelSchedule &schedule) {
  schedule.heldQuerySteps = schedule.layout.headDim / 16;
  setLaunchBoundsForRegisterDemand(schedule, problem, chip);
  if (schedule.minBlocksPerSM == kPlannedBlocksPerSM ||
      schedule.getRowsPerTile() == kTensorCoreTileRows)
    return;
  KernelSchedule fourBlocks = schedule;
  fourBlocks.minBlocksPerSM = kPlannedBlocksPerSM;
  fourBlocks.heldQuerySteps = 0;
  int64_t spare = fourBlocks.getRegisterBudget(chip) -
                  fourBlocks.getRegisterDemand(problem);
  if (spare < 0)
    return;
  fourBlocks.heldQuerySteps = spare / kRegistersPerHeldQueryStep;
  schedule = fourBlocks;
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

/// A CUDA-core kernel's row tiling and launch bounds. Its blocks are bound
/// by latency (each streams its chunk with the loads its warps keep in
/// flight), so a KV head's rows take time in proportion to their tiles (each
/// streams the chunk again) over the blocks an SM holds at once: the tiling
/// in equal tiles of at most `mostRows` with the fewest tiles per resident
/// block, among equals the one with more blocks (bench/RESULTS.md
/// 2026-12-04, "The register model": fewer rows a tile, more blocks).
static KernelSchedule planCudaCoreTiling(const KernelProblem &problem,
                                         const Chip &chip, int64_t mostRows) {
  const int64_t rows = problem.getRowsPerKVHead();
  std::optional<KernelSchedule> best;
  int64_t bestTiles = 0, bestBlocks = 0;
  for (int64_t tiles = ceilDiv(rows, mostRows); tiles <= rows; ++tiles) {
    ScheduleChoice choice;
    choice.rowsPerTile = ceilDiv(rows, tiles);
    choice.rowTiles = tiles;
    // Equal tiles of that many rows take fewer: a tile would have none.
    if (ceilDiv(rows, choice.rowsPerTile) != tiles)
      continue;
    KernelSchedule schedule = getKernelSchedule(problem, choice);
    setLaunchBoundsForRegisterDemand(schedule, problem, chip);
    int64_t blocks = schedule.getResidentBlocks(chip);
    if (!best || tiles * bestBlocks <= bestTiles * blocks) {
      best = schedule;
      bestTiles = tiles;
      bestBlocks = blocks;
    }
    // More tiles of no more blocks only cost more.
    if (blocks >= kPlannedBlocksPerSM)
      break;
  }
  return *best;
}

/// A split-value tile's stages: as many as the static workgroup memory
/// holds, up to kMostSplitValueStages (each a step's copy in flight), with
/// its held q and launch bounds.
static constexpr int64_t kMostSplitValueStages = 4;
static void planSplitValueTile(const KernelProblem &problem, const Chip &chip,
                               KernelSchedule &schedule) {
  schedule.heldQuerySteps = schedule.layout.warpHeadDims() / 16;
  while (schedule.keyValueStages < kMostSplitValueStages) {
    KernelSchedule more = schedule;
    ++more.keyValueStages;
    if (more.getSharedMemoryBytes() > kMaxStaticSharedMemoryBytes)
      break;
    schedule = more;
  }
  setLaunchBoundsForRegisterDemand(schedule, problem, chip);
}

/// The warpgroup tile: two warpgroups, one block a SM (its registers and
/// shared memory), as many stages as the chip's shared memory holds up to
/// kMostWarpgroupStages.
static KernelSchedule planWarpgroupTile(const KernelProblem &problem,
                                        const Chip &chip) {
  ScheduleChoice choice;
  choice.form = KernelForm::WarpgroupTensorCores;
  choice.threads = kWarpgroupTileThreads;
  choice.rowsPerTile = kWarpgroupTileRows;
  choice.rowTiles = ceilDiv(problem.getRowsPerKVHead(), kWarpgroupTileRows);
  choice.minBlocksPerSM = 1;
  choice.keyValueStages = 2;
  KernelSchedule schedule = getKernelSchedule(problem, choice);
  while (schedule.keyValueStages < kMostWarpgroupStages) {
    KernelSchedule more = schedule;
    ++more.keyValueStages;
    if (more.getSharedMemoryBytes() > chip.maxSharedMemoryBytesPerBlock)
      break;
    schedule = more;
  }
  return schedule;
}

KernelSchedule planKernel(const KernelProblem &problem, const Chip &chip) {
  ScheduleChoice choice;
  const int64_t rows = problem.getRowsPerKVHead();
  // A KV head of a full wgmma tile of rows (MLA at 64 or 128 heads) on a
  // chip with wgmma: the warpgroup tile, where mma.sync's 16-row tiles
  // were bound by shared memory at half its peak (bench/RESULTS.md).
  if (chip.hasWarpgroupMma && rows >= kWarpgroupTileRows &&
      detail::getReasonNoWarpgroupTile(problem).empty())
    return planWarpgroupTile(problem, chip);
  const bool splitValues = usesSplitValueTile(
      problem.headDim, problem.getValueHeadDim(), problem.valuesFromKeys);
  // The split-value tile takes the heads the per-warp tile does not, except
  // D = 256 with values of its own, where CUDA-core tiles stream as fast
  // over 16-bit caches. Over an fp8 cache that tensor cores multiply in f16
  // the CUDA-core kernels are bound by their conversions to f32 (modeled on
  // an H200, bf16 over e4m3, L = 32k: Gemma-2-9B's D = 256 54.5 µs a layer
  // against 33.8 on tensor cores; MHA at D = 128 101.0 against 65.3): there
  // tensor cores take D = 256 too, and heads of one row where the chip
  // decodes an fp8 pair in one instruction (sm_80's bit operations made
  // MHA's one-row tile slower than its CUDA cores).
  const bool halfFloat8 = problem.multipliesFloat8InHalf();
  const int64_t minRows =
      halfFloat8 && chip.hasFloat8Conversions ? 1 : kTensorCoreMinRows;
  bool tensorCores =
      rows >= minRows && getReasonNoTensorCoreTile(problem).empty() &&
      (splitValues
           ? !(problem.headDim == 256 && problem.getValueHeadDim() == 256 &&
               !problem.valuesFromKeys && !halfFloat8)
           : choosesTensorCores(problem.queryElementBytes, problem.headDim,
                                rows, minRows));
  // CUDA-core tiles by the blocks an SM holds of them; tensor-core tiles as
  // few as the rows allow (each streams the chunk again), of equal size:
  // 24 rows are two tiles of 12, not 16 + 8 (fewer registers a tile).
  if (!tensorCores)
    return planCudaCoreTiling(problem, chip,
                              getMostCudaCoreTileRows(problem, choice));
  choice.rowTiles = ceilDiv(rows, kTensorCoreTileRows);
  choice.rowsPerTile = ceilDiv(rows, choice.rowTiles);
  choice.form = KernelForm::TensorCores;
  choice.keyValueStages = PartialKernelLayout::kKeyValueStages;
  KernelSchedule schedule = getKernelSchedule(problem, choice);
  if (splitValues)
    planSplitValueTile(problem, chip, schedule);
  else
    planTensorCoreResidency(problem, chip, schedule);
  return schedule;
}

} // namespace flashdecode
