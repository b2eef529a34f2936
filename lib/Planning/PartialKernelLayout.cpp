//===- PartialKernelLayout.cpp - The partial kernel's tiling --------------===//

#include "fd/Planning/PartialKernelLayout.h"
#include "IntegerMath.h"

#include <algorithm>

namespace flashdecode {

using detail::ceilDiv;
using detail::powerOf2Ceil;

PartialKernelLayout PartialKernelLayout::get(
    int64_t headDim, int64_t elementBytes, int64_t cacheElementBytes,
    int64_t groupSize, int64_t queryLength, bool withAlibi, bool tensorCores) {
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
  layout.rowTile = layout.rows;
  layout.numRowTiles = 1;
  layout.tensorCores = tensorCores;
  if (tensorCores) {
    layout.tokensPerWarp = 8;
    bool float8 = cacheElementBytes == 1;
    layout.slotBytes = float8 ? 8 : 16;
    layout.stageSlots = headDim / 16 + (float8 ? 2 : 0);
  }
  return layout;
}

} // namespace flashdecode
