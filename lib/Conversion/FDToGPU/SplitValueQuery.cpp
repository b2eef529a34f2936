//===- SplitValueQuery.cpp - The split-value tile's q ---------------------===//
//
// Before its loop the split-value tile (SplitValueTile.cpp) copies q's 16
// rows into the end of its stages' buffer with cp.async (at the kernel's
// start where its rows are known then), and each warp reads its k-steps' A
// words from there: a warp's own global loads of its quarter of MLA's q
// (4.6 KB) took a memory latency per KB. With f16 products (bf16 queries
// over an fp8 cache with one scale; HalfQuery.cpp) the words become f16
// pairs times a power of two the whole tile agrees on.
//
//===----------------------------------------------------------------------===//

#include "SplitValueTileBuilder.h"

#include "fd/Planning/KernelChoice.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void SplitValueTileBuilder::copyQuery(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  const int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  const int64_t piecesPerRow = headDim * elementBytes / kPieceBytes;
  forEachThreadIndex(
      ::flashdecode::kTensorCoreTileRows * piecesPerRow, [&](Value index) {
        Value tileRow = arith::DivUIOp::create(rewriter, e.loc, index,
                                               e.index(piecesPerRow));
        Value piece = arith::RemUIOp::create(rewriter, e.loc, index,
                                             e.index(piecesPerRow));
        Value blockRow = e.min(e.add(firstRow, tileRow), lastRow);
        Value source =
            e.address(query, elementType,
                      e.add(e.mul(queryRow(blockRow), e.index(headDim)),
                            e.mul(piece, e.index(kPieceBytes / elementBytes))));
        Value target = e.address(
            stages, rewriter.getI8Type(),
            e.add(e.add(e.index(schedule.getQueryStageOffset()),
                        e.mul(tileRow, e.index(layout.queryStageRowBytes))),
                  e.mul(piece, e.index(kPieceBytes))));
        NVVM::CpAsyncOp::create(rewriter, e.loc, target, source,
                                static_cast<uint32_t>(kPieceBytes),
                                NVVM::LoadCacheModifierKind::CG,
                                e.select(isRealRow(firstRow, tileRow),
                                         e.i32(kPieceBytes), e.i32(0)));
      });
  NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
}

SmallVector<SmallVector<Value>> SplitValueTileBuilder::readWarpQuery() {
  auto wordsType = VectorType::get({2}, rewriter.getI32Type());
  const int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  Value rowOffsets[2];
  for (int64_t half = 0; half < 2; ++half)
    rowOffsets[half] = e.add(e.index(schedule.getQueryStageOffset()),
                             e.mul(e.add(fragmentRow, e.index(8 * half)),
                                   e.index(layout.queryStageRowBytes)));
  Value laneDim =
      e.add(e.mul(warpFirstStep, e.index(16)), e.mul(fragmentPair, e.index(4)));
  SmallVector<SmallVector<Value>> steps;
  for (int64_t step = 0; step < layout.warpHeadDims() / 16; ++step) {
    SmallVector<Value> words(4);
    Value dimBytes =
        e.mul(e.add(laneDim, e.index(16 * step)), e.index(elementBytes));
    // a0, a2: row g's dims {0, 1} and {2, 3}; a1, a3: row g + 8's.
    for (int64_t half = 0; half < 2; ++half) {
      Value pair = e.load(wordsType, stages, rewriter.getI8Type(),
                          e.add(rowOffsets[half], dimBytes), 8);
      for (int64_t i = 0; i < 2; ++i)
        words[half + 2 * i] = e.extract(pair, i);
    }
    steps.push_back(words);
  }
  return steps;
}

Value SplitValueTileBuilder::toHalfQuery(
    MutableArrayRef<SmallVector<Value>> words) {
  // The lane's largest |q|, the warp's, then the tile's through the score
  // exchange (free before the loop, whose first barrier comes before its
  // first use).
  Type f32 = rewriter.getF32Type();
  Value largest = e.f32(0.0);
  for (ArrayRef<Value> step : words)
    for (Value word : step)
      largest = foldFiniteMagnitudes(largest, word);
  largest =
      e.reduceWarp(largest, [&](Value a, Value b) { return e.max(a, b); });
  auto firstLane = scf::IfOp::create(rewriter, e.loc, e.equal(lane, e.index(0)),
                                     /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(firstLane.thenBlock());
    e.store(largest, scoreExchange, warp);
  }
  gpu::BarrierOp::create(rewriter, e.loc);
  for (int64_t w = 0; w < PartialKernelLayout::kWarps; ++w)
    largest = e.max(largest, e.load(f32, scoreExchange, f32, e.index(w), 4));
  HalfQueryScale scale = getHalfQueryScale(largest);
  for (SmallVector<Value> &step : words)
    for (Value &word : step)
      word = toHalfWord(word, scale.scale);
  return scale.inverse;
}
