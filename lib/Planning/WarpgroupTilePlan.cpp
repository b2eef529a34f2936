//===- WarpgroupTilePlan.cpp - The warpgroup tile's schedule --------------===//
//
// What the warpgroup tile (form = warpgroup_tensor_cores: wgmma on sm_90a,
// lib/Conversion/FDToGPU/WarpgroupTile.cpp) accepts and where its dynamic
// shared memory's regions lie; KernelPlan.cpp has the other forms'.
//
//===----------------------------------------------------------------------===//

#include "IntegerMath.h"
#include "KernelPlanRules.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/KernelPlan.h"

#include <sstream>

namespace flashdecode {

using detail::ceilDiv;

std::string detail::getReasonNoWarpgroupTile(const KernelProblem &problem) {
  // wgmma over f16/bf16 operands in shared memory: q, K and V 16-bit (an
  // fp8 cache takes the split-value tile); one K tile serves q K^T and
  // P V, so the values are the keys' first D_v columns (MLA); K-major
  // 128-byte swizzled rows of 64 dims; each warpgroup's half of the value
  // dims is one wgmma's N (up to 256) of whole 64-dim blocks.
  const char *prefix = "form = warpgroup_tensor_cores needs ";
  if (problem.queryElementBytes != 2 || problem.cacheElementBytes != 2)
    return std::string(prefix) +
           "f16 or bf16 queries and cache (wgmma's operands), got " +
           std::to_string(problem.queryElementBytes * 8) + "-bit queries and " +
           std::to_string(problem.cacheElementBytes * 8) + "-bit cache";
  if (!problem.valuesFromKeys)
    return std::string(prefix) +
           "values that are the key cache's first D_v columns (shared_kv, "
           "MLA's latent cache)";
  if (problem.headDim % 64 != 0 || problem.headDim > 576)
    return std::string(prefix) +
           "a head dim that is a multiple of 64 up to 576, got " +
           std::to_string(problem.headDim);
  const int64_t valueHeadDim = problem.getValueHeadDim();
  if (valueHeadDim % 128 != 0 || valueHeadDim > 512)
    return std::string(prefix) +
           "a value head dim that is a multiple of 128 up to 512, got " +
           std::to_string(valueHeadDim);
  if (problem.sharedPrefix)
    return std::string(prefix) + "no shared prefix (suffix_lens)";
  return "";
}

std::string
detail::getReasonWarpgroupTilingInvalid(const KernelProblem &problem,
                                        const ScheduleChoice &choice) {
  std::ostringstream os;
  const int64_t rows = problem.getRowsPerKVHead();
  if (std::string reason = detail::getReasonNoWarpgroupTile(problem);
      !reason.empty())
    os << reason;
  else if (choice.threads != kWarpgroupTileThreads)
    os << "threads = " << choice.threads
       << ": form = warpgroup_tensor_cores takes " << kWarpgroupTileThreads
       << " (two warpgroups)";
  else if (choice.rowsPerTile != kWarpgroupTileRows)
    os << "rows_per_tile = " << choice.rowsPerTile
       << ": form = warpgroup_tensor_cores takes " << kWarpgroupTileRows
       << " (wgmma's M)";
  else if (choice.rowTiles != ceilDiv(rows, kWarpgroupTileRows))
    os << "row_tiles = " << choice.rowTiles << ": the " << rows
       << " query rows of a KV head take " << ceilDiv(rows, kWarpgroupTileRows)
       << " tiles of " << kWarpgroupTileRows;
  else if (choice.keyValueStages < 2)
    os << "stages = " << choice.keyValueStages
       << " is too few: the K/V pipeline copies the next step while the block "
          "computes this one, so it needs at least 2";
  else if (choice.keyValueStages > kMostWarpgroupStages)
    os << "stages = " << choice.keyValueStages << " is out of range: 2 to "
       << kMostWarpgroupStages;
  else if (choice.heldQuerySteps != 0)
    os << "held_query_steps = " << choice.heldQuerySteps
       << ": expected 0 (the warpgroup tile reads q from shared memory)";
  return os.str();
}

KernelSchedule::WarpgroupRegions KernelSchedule::getWarpgroupRegions() const {
  WarpgroupRegions regions;
  if (!usesWarpgroupTile())
    return regions;
  regions.stages = layout.rowTile * layout.queryStageRowBytes;
  regions.probabilities = regions.stages + keyValueStages * layout.stageBytes();
  // A 16-byte row (8 keys) per 8 keys of the step and row.
  regions.end =
      regions.probabilities + layout.tokensPerStep() / 8 * layout.rowTile * 16;
  return regions;
}

int64_t KernelSchedule::getDynamicSharedMemoryBytes() const {
  // The regions start on a swizzle atom's boundary, found in 1 KB more
  // than they take (dynamic shared memory is only 16-byte aligned).
  return usesWarpgroupTile()
             ? getWarpgroupRegions().end + kWarpgroupSwizzleAtomBytes
             : 0;
}

} // namespace flashdecode
