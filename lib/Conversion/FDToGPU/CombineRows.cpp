//===- CombineRows.cpp - The partial kernel's row combine and write -------===//
//
// After the token loop of a row tile: the token groups of a warp combine
// their row states with shuffles, each warp publishes its states in
// workgroup memory, and the block's threads combine the warps into each
// row's normalized partial and lse.
//
//===----------------------------------------------------------------------===//

#include "PartialKernelBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void PartialKernelBuilder::combineLaneGroups(SmallVector<RowState> &states) {
  // Shuffles across the group bits of the lane id.
  for (int64_t offset = layout.lanesPerToken; offset < 32; offset *= 2)
    for (RowState &state : states) {
      RowState other{
          e.shuffleXor(state.max, offset), e.shuffleXor(state.sum, offset), {}};
      for (Value value : state.accumulator)
        other.accumulator.push_back(e.shuffleXor(value, offset));
      combineStates(e, state, other);
    }
}

void PartialKernelBuilder::publishWarpStates(ArrayRef<RowState> states) {
  Value firstGroup = e.equal(tokenGroup, e.index(0));
  auto publish = scf::IfOp::create(rewriter, e.loc, firstGroup,
                                   /*withElseRegion=*/false);
  OpBuilder::InsertionGuard publishGuard(rewriter);
  rewriter.setInsertionPointToStart(publish.thenBlock());
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    for (int64_t v = 0; v < layout.vectorsPerLane; ++v) {
      OpBuilder::InsertionGuard vectorGuard(rewriter);
      if (layout.hasIdleLanes()) {
        auto inRow = scf::IfOp::create(rewriter, e.loc, vectorIsInRow[v],
                                       /*withElseRegion=*/false);
        rewriter.setInsertionPointToStart(inRow.thenBlock());
      }
      for (int64_t i = v * layout.vectorWidth; i < (v + 1) * layout.vectorWidth;
           ++i)
        memref::StoreOp::create(rewriter, e.loc, states[r].accumulator[i],
                                warpAccumulators,
                                ValueRange{warp, e.index(r), laneDim(i)});
    }
    memref::StoreOp::create(rewriter, e.loc, states[r].max, warpMaxSum,
                            ValueRange{warp, e.index(r), e.index(0)});
    memref::StoreOp::create(rewriter, e.loc, states[r].sum, warpMaxSum,
                            ValueRange{warp, e.index(r), e.index(1)});
  }
}

void PartialKernelBuilder::writePartials(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  forEachTileElement([&](Value row, Value dim) {
    RowState total{e.negInf(), e.f32(0.0), {e.f32(0.0)}};
    for (int64_t w = 0; w < PartialKernelLayout::kWarps; ++w) {
      Value warpIndex = e.index(w);
      RowState part{
          memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                 ValueRange{warpIndex, row, e.index(0)}),
          memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                 ValueRange{warpIndex, row, e.index(1)}),
          {memref::LoadOp::create(rewriter, e.loc, warpAccumulators,
                                  ValueRange{warpIndex, row, dim})}};
      combineStates(e, total, part);
    }
    Value hasKeys = buildSawKeys(rewriter, e.loc, total.max);
    Value normalized =
        arith::DivFOp::create(rewriter, e.loc, total.accumulator[0], total.sum);
    if (outputScale)
      normalized = e.mul(normalized, outputScale);
    normalized = e.select(hasKeys, normalized, e.f32(0.0));
    auto realRow = scf::IfOp::create(rewriter, e.loc, isRealRow(firstRow, row),
                                     /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(rewriter);
    rewriter.setInsertionPointToStart(realRow.thenBlock());
    Value outputRow =
        e.add(e.mul(queryRow(e.add(row, firstRow)), e.index(op.getNumSplits())),
              split);
    e.store(normalized, partialOutput,
            e.add(e.mul(outputRow, e.index(headDim)), dim));
    auto writeLse =
        scf::IfOp::create(rewriter, e.loc, e.equal(dim, e.index(0)), false);
    OpBuilder::InsertionGuard lseGuard(rewriter);
    rewriter.setInsertionPointToStart(writeLse.thenBlock());
    Value lse =
        e.mul(e.add(total.max, e.log2(total.sum)), e.f32(llvm::numbers::ln2));
    e.store(e.select(hasKeys, lse, e.negInf()), partialLse, outputRow);
  });
}
