//===- CombineRows.cpp - The partial kernel's row combine and write -------===//
//
// After the token loop of a row tile: the token groups of a warp combine
// their row states with shuffles, each warp publishes its states in
// workgroup memory, and the block's threads combine the warps into each
// row's normalized partial and lse.
//
//===----------------------------------------------------------------------===//

#include "CudaCoreTileBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void CudaCoreTileBuilder::combineLaneGroups(SmallVector<RowState> &states) {
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

void CudaCoreTileBuilder::publishWarpStates(ArrayRef<RowState> states) {
  Value firstGroup = e.equal(tokenGroup, e.index(0));
  auto publish = scf::IfOp::create(rewriter, e.loc, firstGroup,
                                   /*withElseRegion=*/false);
  OpBuilder::InsertionGuard publishGuard(rewriter);
  rewriter.setInsertionPointToStart(publish.thenBlock());
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    for (int64_t v = 0; v < layout.valueVectorsPerLane; ++v) {
      OpBuilder::InsertionGuard vectorGuard(rewriter);
      if (layout.hasIdleValueLanes()) {
        auto inRow = scf::IfOp::create(rewriter, e.loc, valueVectorIsInRow[v],
                                       /*withElseRegion=*/false);
        rewriter.setInsertionPointToStart(inRow.thenBlock());
      }
      for (int64_t i = v * layout.vectorWidth; i < (v + 1) * layout.vectorWidth;
           ++i)
        memref::StoreOp::create(rewriter, e.loc, states[r].accumulator[i],
                                warpAccumulators,
                                ValueRange{warp, e.index(r), laneValueDim(i)});
    }
    memref::StoreOp::create(rewriter, e.loc, states[r].max, warpMaxSum,
                            ValueRange{warp, e.index(r), e.index(0)});
    memref::StoreOp::create(rewriter, e.loc, states[r].sum, warpMaxSum,
                            ValueRange{warp, e.index(r), e.index(1)});
  }
}

Value PartialKernelBuilder::partialRowOf(Value firstRow, Value tileRow) {
  return e.add(
      e.mul(queryRow(e.add(tileRow, firstRow)), e.index(op.getNumSplits())),
      split);
}

void PartialKernelBuilder::writePartials(Value firstRow) {
  // Once per row (a thread each): the row's lse, and in place of each
  // warp's max the weight of its accumulator, 2^(m_w - m) / sum (times the
  // output scale), so that an element costs one multiply-add per warp
  // rather than the rescales and a division per element (the merge's
  // weights, MergeRows.cpp, are made the same way).
  const int64_t valueHeadDim = geometry.valueHeadDim;
  // Each warp's state, or a split-value tile's one.
  constexpr int64_t kWarps = PartialKernelLayout::kWarps;
  const int64_t states = schedule.getPublishedWarpStates();
  auto outputRowOf = [&](Value row) { return partialRowOf(firstRow, row); };
  e.forLoop(
      thread, e.index(layout.rowTile), PartialKernelLayout::kThreads,
      [&](Value row) {
        Value maxes[kWarps], sums[kWarps];
        Value max = e.negInf();
        for (int64_t w = 0; w < states; ++w) {
          maxes[w] =
              memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                     ValueRange{e.index(w), row, e.index(0)});
          sums[w] =
              memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                     ValueRange{e.index(w), row, e.index(1)});
          max = e.max(max, maxes[w]);
        }
        Value scales[kWarps];
        Value sum = e.f32(0.0);
        for (int64_t w = 0; w < states; ++w) {
          scales[w] = e.select(e.isNegInf(maxes[w]), e.f32(0.0),
                               e.exp2(e.sub(maxes[w], max)));
          sum = e.fma(sums[w], scales[w], sum);
        }
        Value hasKeys = buildSawKeys(rewriter, e.loc, max);
        for (int64_t w = 0; w < states; ++w) {
          Value weight = arith::DivFOp::create(rewriter, e.loc, scales[w], sum);
          if (outputScale)
            weight = e.mul(weight, outputScale);
          memref::StoreOp::create(
              rewriter, e.loc, e.select(hasKeys, weight, e.f32(0.0)),
              warpMaxSum, ValueRange{e.index(w), row, e.index(0)});
        }
        // A cluster's blocks merge first: the block's lse (base 2) where
        // the first state's sum was.
        if (clusterRank) {
          memref::StoreOp::create(
              rewriter, e.loc,
              e.select(hasKeys, e.add(max, e.log2(sum)), e.negInf()),
              warpMaxSum, ValueRange{e.index(0), row, e.index(1)});
          return;
        }
        ifRealRow(firstRow, row, [&] {
          Value lse = e.mul(e.add(max, e.log2(sum)), e.f32(llvm::numbers::ln2));
          e.store(e.select(hasKeys, lse, e.negInf()), partialLse,
                  outputRowOf(row));
        });
      });
  if (clusterRank) {
    writeClusterPartials(firstRow);
    return;
  }
  gpu::BarrierOp::create(rewriter, e.loc);

  // Four consecutive dims a thread (16-byte loads and stores: D_v is a
  // multiple of 8, the tiles keep 4-dim groups whole in the accumulators,
  // rows and buffers start 16-byte aligned): a quarter of the iterations.
  constexpr int64_t kWidth = 4;
  Type f32 = rewriter.getF32Type();
  auto f32x4 = VectorType::get({kWidth}, f32);
  auto accumulators = cast<MemRefType>(warpAccumulators.getType());
  Value accumulatorsPointer = sharedPointer(rewriter, e.loc, warpAccumulators);
  forEachElement(
      layout.rowTile, valueHeadDim / kWidth, [&](Value row, Value group) {
        Value dim = e.mul(group, e.index(kWidth));
        Value column = accumulatorColumn(row, dim);
        Value normalized = LLVM::ZeroOp::create(rewriter, e.loc, f32x4);
        for (int64_t w = 0; w < states; ++w) {
          Value warpIndex = e.index(w);
          Value weight =
              memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                     ValueRange{warpIndex, row, e.index(0)});
          Value accumulator = e.load(
              f32x4, accumulatorsPointer, f32,
              e.add(e.mul(e.add(e.mul(warpIndex,
                                      e.index(accumulators.getDimSize(1))),
                                row),
                          e.index(accumulators.getDimSize(2))),
                    column),
              16);
          normalized =
              e.fma(accumulator, e.vector(SmallVector<Value>(kWidth, weight)),
                    normalized);
        }
        ifRealRow(firstRow, row, [&] {
          LLVM::StoreOp::create(
              rewriter, e.loc, normalized,
              e.address(
                  partialOutput, f32,
                  e.add(e.mul(outputRowOf(row), e.index(valueHeadDim)), dim)),
              16);
        });
      });
}
