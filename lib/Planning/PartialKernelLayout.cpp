//===- PartialKernelLayout.cpp - The partial kernel's tiling --------------===//

#include "fd/Planning/PartialKernelLayout.h"
#include "IntegerMath.h"
#include "fd/Planning/KernelChoice.h"

#include <algorithm>

namespace flashdecode {

using detail::ceilDiv;
using detail::powerOf2Ceil;

PartialKernelLayout PartialKernelLayout::get(
    int64_t headDim, int64_t elementBytes, int64_t cacheElementBytes,
    int64_t groupSize, int64_t queryLength, bool withAlibi, bool tensorCores,
    int64_t valueHeadDim, bool valuesFromKeys, bool warpgroupTile) {
  PartialKernelLayout layout;
  layout.headDim = headDim;
  layout.valueHeadDim = valueHeadDim ? valueHeadDim : headDim;
  layout.alibi = withAlibi;
  auto isWhole16 = [&](int64_t dims) {
    return dims * cacheElementBytes % 16 == 0;
  };
  int64_t vectorBytes =
      isWhole16(headDim) && isWhole16(layout.valueHeadDim) ? 16 : 8;
  layout.vectorWidth = vectorBytes / cacheElementBytes;
  layout.vectorsPerRow = headDim / layout.vectorWidth;
  layout.valueVectorsPerRow = layout.valueHeadDim / layout.vectorWidth;
  // A power of two so token groups tile the warp; enough lanes that each
  // holds at most two vectors of a row up to 256 wide (three of a 576-wide
  // bf16 key row).
  layout.lanesPerToken = std::min<int64_t>(
      32,
      powerOf2Ceil(std::max(layout.vectorsPerRow, layout.valueVectorsPerRow)));
  layout.vectorsPerLane = ceilDiv(layout.vectorsPerRow, layout.lanesPerToken);
  layout.valueVectorsPerLane =
      ceilDiv(layout.valueVectorsPerRow, layout.lanesPerToken);
  layout.unroll = std::max<int64_t>(
      1, kVectorsInFlight /
             std::max(layout.vectorsPerLane, layout.valueVectorsPerLane));
  layout.tokensPerWarp = 32 / layout.lanesPerToken;
  layout.rows = groupSize * queryLength;
  layout.causal = queryLength > 1;
  layout.rowTile = layout.rows;
  layout.numRowTiles = 1;
  layout.tensorCores = tensorCores || warpgroupTile;
  if (warpgroupTile) {
    layout.warpgroupTile = true;
    layout.tokensPerWarp = kWarpgroupStepKeys;
    layout.stageRowBytes = headDim * cacheElementBytes;
    layout.queryStageRowBytes = headDim * elementBytes;
  } else if (tensorCores) {
    layout.tokensPerWarp = 8;
    bool float8 = cacheElementBytes == 1;
    layout.slotBytes = float8 ? 8 : 16;
    layout.stageSlots = headDim / 16 + (float8 ? 2 : 0);
    layout.splitsValues =
        usesSplitValueTile(headDim, layout.valueHeadDim, valuesFromKeys);
    if (layout.splitsValues) {
      layout.stageValueOffset =
          valuesFromKeys ? 0 : headDim * cacheElementBytes;
      layout.stageScaleOffset =
          (headDim + (valuesFromKeys ? 0 : layout.valueHeadDim)) *
          cacheElementBytes;
      // K reads: 8 bytes a lane (4 for fp8), keys g of a pass 32 (16)
      // bytes apart modulo 128; 8 bytes at least for the scales.
      int64_t apart = float8 ? 16 : 32;
      int64_t padding = ((apart - layout.stageScaleOffset) % 128 + 128) % 128;
      if (padding < 8)
        padding += 128;
      layout.stageRowBytes = layout.stageScaleOffset + padding;
      int64_t laneValueBytes = layout.warpValueDims() / 8 * cacheElementBytes;
      if (!float8)
        layout.stageSwizzleBytes = laneValueBytes == 32 ? 16 : 32;
      layout.queryStageRowBytes = headDim * elementBytes + 16;
    }
  }
  return layout;
}

bool usesSplitValueTile(int64_t headDim, int64_t valueHeadDim,
                        bool valuesFromKeys) {
  return valuesFromKeys || valueHeadDim != headDim ||
         (headDim != 64 && headDim != 128);
}

std::string getReasonNoSplitValueTile(int64_t headDim, int64_t valueHeadDim,
                                      int64_t cacheElementBytes) {
  // Each warp's quarter of q K^T is whole k-steps, and its quarter of the
  // value dims whole output tiles whose lane columns are 8-byte pieces.
  if (headDim % 64 != 0 || headDim > 576)
    return "a head dim that is a multiple of 64 up to 576, got " +
           std::to_string(headDim);
  if (valueHeadDim % 128 != 0 || valueHeadDim > 512)
    return "a value head dim that is a multiple of 128 up to 512, got " +
           std::to_string(valueHeadDim);
  if (cacheElementBytes == 4)
    return "an f16, bf16 or fp8 cache, got an f32 cache";
  return "";
}

} // namespace flashdecode
