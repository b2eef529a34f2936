//===- FDToGPU.cpp - fd split-KV ops to GPU kernels -----------------------===//
//
// The Flash-Decoding kernels in the GPU dialect (with LLVM-dialect pointer
// arithmetic for 16-byte global loads), replacing the fd ops with their
// launches: the partial kernel's layout and the patterns of
// PartialAttentionKernel.cpp and MergeKernel.cpp, built from
// KernelBuilder.h. DESIGN §5 says what makes them fast; the comments in
// those files say how each piece maps onto the hardware.
//
//===----------------------------------------------------------------------===//

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "PopulatePatterns.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/KernelChoice.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fd;

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
      std::min<int64_t>(32, llvm::PowerOf2Ceil(layout.vectorsPerRow));
  layout.vectorsPerLane =
      llvm::divideCeil(layout.vectorsPerRow, layout.lanesPerToken);
  layout.unroll =
      std::max<int64_t>(1, kVectorsInFlight / layout.vectorsPerLane);
  layout.tokensPerWarp = 32 / layout.lanesPerToken;
  layout.rows = groupSize * queryLength;
  layout.causal = queryLength > 1;
  layout.tensorCores =
      ::flashdecode::choosesTensorCores(elementBytes, headDim, layout.rows);
  if (layout.tensorCores) {
    layout.tokensPerWarp = 8;
    layout.numRowTiles =
        llvm::divideCeil(layout.rows, ::flashdecode::kTensorCoreTileRows);
    layout.rowTile = llvm::divideCeil(layout.rows, layout.numRowTiles);
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
  layout.numRowTiles = llvm::divideCeil(layout.rows, maxRowTile);
  layout.rowTile = llvm::divideCeil(layout.rows, layout.numRowTiles);
  return layout;
}

void mlir::fd::populateFDToGPUConversionPatterns(
    RewritePatternSet &patterns, const ::flashdecode::Chip &chip,
    bool fuseMerge) {
  detail::populatePartialAttentionToGPUPatterns(patterns, chip, fuseMerge);
  detail::populateMergeToGPUPatterns(patterns);
}

std::string mlir::fd::getReasonNotLowerableToGPU(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // fd-split-kv leaves prefill-shaped ops alone: advice to split would
    // fail the same way.
    int64_t queryLength = attention.getGeometry().queryLength;
    if (queryLength > kMaxDecodeQueryLength)
      return "convert-fd-to-gpu: " + std::to_string(queryLength) +
             " query tokens per sequence is prefill-shaped: the GPU kernels "
             "take 1 to " +
             std::to_string(kMaxDecodeQueryLength) +
             " (decode and speculative queries)";
    return "convert-fd-to-gpu: split it first with fd-split-kv (num-splits=1 "
           "for the unsplit kernel)";
  }
  // The kernels address every buffer as a dense row-major array.
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<MemRefType>(operand.getType());
        type && !type.getLayout().isIdentity())
      return "convert-fd-to-gpu: operands must be contiguous memrefs "
             "(identity layout)";
  return "";
}
