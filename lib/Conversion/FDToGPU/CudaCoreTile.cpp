//===- CudaCoreTile.cpp - The partial kernel's row tile on CUDA cores -----===//
//
// The lane's slices of the key and value rows, the staged query tile, the
// row states the token loop carries, and the tile's streams: the keys the
// rows see alike in one loop, those masked per row (causal Lq > 1, the
// window) in loops of their own.
//
//===----------------------------------------------------------------------===//

#include "CudaCoreTileBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void CudaCoreTileBuilder::setUpLanes() {
  queryTile = kernel.getWorkgroupAttributions()[kQueryBuffer];
  const int64_t lanes = layout.lanesPerToken;
  tokenGroup = arith::DivUIOp::create(rewriter, e.loc, lane, e.index(lanes));
  laneInGroup = arith::RemUIOp::create(rewriter, e.loc, lane, e.index(lanes));
  tokenInStep = e.add(e.mul(warp, e.index(layout.tokensPerWarp)), tokenGroup);
  // A lane's slice of the head dim: vector v of the lane in its token
  // group covers [(v * lanes + laneInGroup) * width, ... + width), so the
  // lanes of a group read consecutive 16-byte pieces of a row.
  // With idle lanes, a vector past the row is read at the row's last
  // vector (clamped) and masked out of every sum, and never published.
  // Value vector v is the same piece of the value row (with values from
  // the keys, the lane's key vector v itself).
  auto slice = [&](int64_t vectors, int64_t vectorsPerRow, bool idle,
                   SmallVector<Value> &indices, SmallVector<Value> &inRow) {
    for (int64_t v = 0; v < vectors; ++v) {
      Value index = e.add(laneInGroup, e.index(v * lanes));
      if (idle) {
        inRow.push_back(e.lessThan(index, e.index(vectorsPerRow)));
        index = e.min(index, e.index(vectorsPerRow - 1));
      }
      indices.push_back(index);
    }
  };
  slice(layout.vectorsPerLane, layout.vectorsPerRow, layout.hasIdleLanes(),
        vectorIndices, vectorIsInRow);
  if (layout.valueVectorsPerRow == layout.vectorsPerRow) {
    valueVectorIndices = vectorIndices;
    valueVectorIsInRow = vectorIsInRow;
    return;
  }
  slice(layout.valueVectorsPerLane, layout.valueVectorsPerRow,
        layout.hasIdleValueLanes(), valueVectorIndices, valueVectorIsInRow);
}

void CudaCoreTileBuilder::streamRowTile(Value firstRow) {
  stageQueryTile(firstRow);

  // Every row sees the keys in [the last token's window start, len - Lq
  // + 1): only the last Lq - 1 keys of a sequence (and with a window the
  // first Lq - 1 the splits cover) need the per-row mask. Those stream in
  // loops of their own with the mask (at most 7 keys each: one or two
  // iterations of one step), the others without it, so the mask costs
  // the main loop neither instructions nor registers. The masked loops
  // run first, so nothing is kept live through the main loop for them
  // (`causalBase`); the online softmax does not depend on the order of
  // the keys (up to rounding).
  rowAlibi.clear();
  if (alibiSlopes)
    for (int64_t r = 0; r < layout.rowTile; ++r)
      rowAlibi.push_back(alibiOfRow(firstRow, e.index(r)));
  SmallVector<Value> streamed = initialState();
  Value unmaskedBegin = chunk.begin, unmaskedEnd = chunk.end;
  RowMask mask;
  if (rules.rowsDiffer()) {
    // Query token t sees keys [firstMasked + t - W, firstMasked + t)
    // (AttentionUtils.h). Row r of the tile is token t = (firstRow + r) /
    // group, so key j is before its end iff (j + 1 - firstMasked) * group
    // - firstRow <= r, and not before its window iff r < that value + W *
    // group: one value per key, compared with each row's constants.
    // `causalBase` is its part without j. With a KV shard or a shared
    // prefix a row's keys are not that linear rule: each row keeps its
    // own, and every row sees those from the latest start to the earliest
    // end among them.
    Value firstMasked, allSee;
    if (rules.kvShard || rules.sharedPrefix) {
      for (int64_t r = 0; r < layout.rowTile; ++r) {
        RowQuery rowQuery =
            queryOfRow(e.min(e.add(firstRow, e.index(r)), lastRow));
        KeyRange keys = buildVisibleKeys(rewriter, e.loc, rowQuery.sequence,
                                         rowQuery.token, rules);
        mask.rowKeys.push_back(keys);
        firstMasked = r == 0 ? keys.end : e.min(firstMasked, keys.end);
        if (keys.begin)
          allSee = r == 0 ? keys.begin : e.max(allSee, keys.begin);
      }
    } else {
      firstMasked = buildFirstMaskedKey(rewriter, e.loc, chunk.sequence);
      mask.causalBase = e.sub(
          e.mul(e.sub(e.index(1), firstMasked), e.index(geometry.groupSize())),
          firstRow);
    }
    unmaskedEnd = e.max(chunk.begin, e.min(chunk.end, firstMasked));
    if (rules.windowLeft) {
      // The sequence's last token's window starts last.
      if (mask.causalBase)
        allSee = buildVisibleKeys(rewriter, e.loc, chunk.sequence,
                                  e.sub(chunk.sequence.queryLength,
                                        e.index(1)),
                                  rules)
                     .begin;
      unmaskedBegin = e.min(unmaskedEnd, e.max(chunk.begin, allSee));
      streamed =
          streamKeys(chunk.begin, unmaskedBegin, /*unroll=*/1, mask, streamed);
    }
    streamed = streamKeys(unmaskedEnd, chunk.end, /*unroll=*/1, mask, streamed);
  }
  streamed = streamKeys(unmaskedBegin, unmaskedEnd, layout.unroll, RowMask(),
                        streamed);
  SmallVector<RowState> states = unpack(streamed);
  combineLaneGroups(states);
  publishWarpStates(states);
}

Value CudaCoreTileBuilder::laneDim(int64_t element) {
  return e.add(e.mul(vectorIndices[element / layout.vectorWidth],
                     e.index(layout.vectorWidth)),
               e.index(element % layout.vectorWidth));
}

Value CudaCoreTileBuilder::laneValueDim(int64_t element) {
  return e.add(e.mul(valueVectorIndices[element / layout.vectorWidth],
                     e.index(layout.vectorWidth)),
               e.index(element % layout.vectorWidth));
}

void CudaCoreTileBuilder::stageQueryTile(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  forEachElement(layout.rowTile, headDim, [&](Value row, Value dim) {
    Value blockRow = e.min(e.add(row, firstRow), lastRow);
    Value offset = e.add(e.mul(queryRow(blockRow), e.index(headDim)), dim);
    Value value = e.toF32(e.load(elementType, query, elementType, offset,
                                 elementType.getIntOrFloatBitWidth() / 8));
    value = e.select(isRealRow(firstRow, row), e.mul(value, queryScale),
                     e.f32(0.0));
    memref::StoreOp::create(rewriter, e.loc, value, queryTile,
                            ValueRange{row, dim});
  });
  gpu::BarrierOp::create(rewriter, e.loc);
}

SmallVector<Value> CudaCoreTileBuilder::initialState() {
  // Per row max, sum and the lane's accumulator slice.
  SmallVector<Value> initial;
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    initial.push_back(e.negInf());
    initial.push_back(e.f32(0.0));
    initial.append(layout.valueDimsPerLane(), e.f32(0.0));
  }
  // A paged cache also carries the last block-table entry read: a thread
  // reads a page's index once per page, not once per token.
  if (geometry.isPaged()) {
    initial.push_back(e.index(-1));
    initial.push_back(e.index(0));
  }
  return initial;
}

SmallVector<RowState> CudaCoreTileBuilder::unpack(ValueRange flat) {
  const int64_t stateSize = 2 + layout.valueDimsPerLane();
  SmallVector<RowState> states;
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    ValueRange slice = flat.slice(r * stateSize, stateSize);
    states.push_back(
        {slice[0], slice[1], SmallVector<Value>(slice.drop_front(2))});
  }
  return states;
}

SmallVector<Value> CudaCoreTileBuilder::pack(ArrayRef<RowState> states) {
  SmallVector<Value> flat;
  for (const RowState &state : states) {
    flat.push_back(state.max);
    flat.push_back(state.sum);
    llvm::append_range(flat, state.accumulator);
  }
  return flat;
}
