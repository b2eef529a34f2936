//===- PartialKernelLayout.cpp - The partial kernel's tiling --------------===//

#include "fd/Planning/PartialKernelLayout.h"
#include "IntegerMath.h"
#include "fd/Planning/Chip.h"
#include "fd/Planning/KernelChoice.h"

#include <algorithm>

namespace flashdecode {

using detail::ceilDiv;
using detail::powerOf2Ceil;

PartialKernelLayout
PartialKernelLayout::get(int64_t headDim, int64_t elementBytes,
                         int64_t cacheElementBytes, int64_t groupSize,
                         int64_t queryLength, bool withAlibi) {
  PartialKernelLayout layout;
  layout.headDim = headDim;
  layout.alibi = withAlibi;
  int64_t vectorBytes = headDim * cacheElementBytes % 16 == 0 ? 16 : 8;
  layout.vectorWidth = vectorBytes / cacheElementBytes;
  layout.vectorsPerRow = headDim / layout.vectorWidth;
  // A power of two so token groups tile the warp; enough lanes that each
  // holds at most two vectors (head dims are at most 256).
  layout.lanesPerToken =
      std::min<int64_t>(32, powerOf2Ceil(layout.vectorsPerRow));
  layout.vectorsPerLane = ceilDiv(layout.vectorsPerRow, layout.lanesPerToken);
  layout.unroll =
      std::max<int64_t>(1, kVectorsInFlight / layout.vectorsPerLane);
  layout.tokensPerWarp = 32 / layout.lanesPerToken;
  layout.rows = groupSize * queryLength;
  layout.causal = queryLength > 1;
  layout.tensorCores = choosesTensorCores(elementBytes, headDim, layout.rows);
  if (layout.tensorCores) {
    layout.tokensPerWarp = 8;
    layout.numRowTiles = ceilDiv(layout.rows, kTensorCoreTileRows);
    layout.rowTile = ceilDiv(layout.rows, layout.numRowTiles);
    bool float8 = cacheElementBytes == 1;
    layout.slotBytes = float8 ? 8 : 16;
    layout.stageSlots = headDim / 16 + (float8 ? 2 : 0);
    return layout;
  }
  // As few tiles as the register budget allows (each streams the chunk
  // again), of equal size: 16 rows, at most 7 per tile, are three tiles of
  // 6, not 7 + 7 + 2 (fewer registers and less shared memory per tile).
  int64_t maxRowTile = kRowRegisterBudget / layout.registersPerRow();
  if (layout.rows > maxRowTile)
    maxRowTile =
        (kRowRegisterBudget - kRowTileLoopRegisters) / layout.registersPerRow();
  maxRowTile = std::max<int64_t>(1, maxRowTile);
  layout.numRowTiles = ceilDiv(layout.rows, maxRowTile);
  layout.rowTile = ceilDiv(layout.rows, layout.numRowTiles);
  return layout;
}

TensorCoreResidency
getTensorCoreResidency(const PartialKernelLayout &layout,
                       const PartialKernelFeatures &features,
                       const Chip &chip) {
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
  TensorCoreResidency residency;
  residency.minBlocksPerSM = tight ? 3 : 4;
  // q's fragments all stay in registers through the token loop (else
  // they are read from workgroup memory every step: as much traffic as
  // K's and V's) where ptxas fits them: with three blocks' registers,
  // and with four at D = 64 on sm_90. Elsewhere ptxas 13.0 spills with
  // more than two held (sm_90, D = 128: 20 bytes with all eight).
  residency.heldQuerySteps = layout.headDim / 16;
  bool hopper = chip.computeCapability >= 90;
  if (!tight && (!hopper || layout.headDim > 64))
    residency.heldQuerySteps = 2;
  return residency;
}

} // namespace flashdecode
