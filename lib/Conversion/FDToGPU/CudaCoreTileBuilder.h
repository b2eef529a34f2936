//===- CudaCoreTileBuilder.h - The partial kernel on CUDA cores -*- C++ -*-===//
//
// Private to the FDToGPU lowering. A row tile on CUDA cores
// (PartialKernelLayout: token groups of lanes each read one key and value
// row): stage the query rows (stageQueryTile), stream the chunk's keys and
// values through the rows' online softmax (streamKeys, StreamKeys.cpp),
// combine the lane groups of a warp (combineLaneGroups) and publish each
// warp's state (publishWarpStates; both in CombineRows.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_CUDACORETILEBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_CUDACORETILEBUILDER_H

#include "PartialKernelBuilder.h"

namespace mlir::fd::detail {

class CudaCoreTileBuilder : public PartialKernelBuilder {
public:
  using PartialKernelBuilder::PartialKernelBuilder;

private:
  /// The lane's token group, its place in the group and its vectors of the
  /// key and value rows.
  void setUpLanes() override;
  void streamRowTile(Value firstRow) override;

  /// Element `element` of the lane's slice of the key head dim, as an index.
  Value laneDim(int64_t element);
  /// Element `element` of the lane's slice of the value head dim.
  Value laneValueDim(int64_t element);
  /// The cache vector of layout.vectorWidth elements at element `offset` of
  /// `base` (the keys or the values), as loaded.
  Value loadCacheVector(Value base, Value offset);
  /// A loaded cache vector's elements as f32 (an fp8 cache's values /
  /// cache.decodeFactor()).
  SmallVector<Value> cacheVectorToF32(Value vector);
  /// Stages the tile's query rows, prescaled, in workgroup memory.
  void stageQueryTile(Value firstRow);
  /// The row states before any key (and the paging state), flattened as
  /// the loops carry them.
  SmallVector<Value> initialState();
  SmallVector<RowState> unpack(ValueRange flat);
  SmallVector<Value> pack(ArrayRef<RowState> states);
  /// Which keys each row of the tile sees where its rows differ (causal Lq
  /// > 1, the window): without a KV shard one value per key compared with
  /// each row's constant (`causalBase`, CudaCoreTileBuilder::streamRowTile
  /// says why), with one each row's keys (`rowKeys`, buildVisibleKeys:
  /// positions are not keys there). Neither: every row sees every key.
  struct RowMask {
    Value causalBase;
    SmallVector<KeyRange> rowKeys;
    explicit operator bool() const { return causalBase || !rowKeys.empty(); }
  };
  /// Streams keys [lower, upper) through the row states `start`, `unroll`
  /// steps per iteration; with a `mask` each row also masks the keys its
  /// query token may not see (after it, or before its window). Defined in
  /// StreamKeys.cpp.
  SmallVector<Value> streamKeys(Value lower, Value upper, int64_t unroll,
                                const RowMask &mask, ValueRange start);
  /// One iteration of streamKeys: the loads of `unroll` steps, then the
  /// steps as one tile of the online softmax.
  SmallVector<Value> streamStep(Value stepStart, Value upper, int64_t unroll,
                                const RowMask &mask, ValueRange flat);
  /// `visible` and whether row `r` of the tile sees `token` by `mask` (not
  /// empty).
  Value maskForRow(const RowMask &mask, int64_t r, Value token, Value visible);
  /// What a lane loads for `unroll` steps: per step its token (unclamped),
  /// with per-token scales those of its key and value, and its vectors of
  /// the key row and the value row (none where the values are the keys').
  struct StepLoads {
    SmallVector<Value> tokens, keyScales, valueScales;
    SmallVector<SmallVector<Value>> keyVectors, valueVectors;
    /// With block-table holes, whether each step's token is a key (its
    /// loads are zeros where not).
    SmallVector<Value> isKey;
  };
  /// Issues every load of the steps from `stepStart` before any is used,
  /// so several 16-byte loads per lane are in flight; a paged cache's
  /// lookups go through the page last read (`cachedBlock`, `cachedPage`,
  /// updated).
  StepLoads loadStep(Value stepStart, Value upper, int64_t unroll,
                     Value &cachedBlock, Value &cachedPage);
  /// The loads of one cache row as loadStep issues them: its per-token
  /// scales (with them), then its key and value vectors alternating.
  SmallVector<Value> loadRow(Value row);
  /// Appends `loaded` (loadRow's order) to `loads`' lists.
  void unpackRow(ArrayRef<Value> loaded, StepLoads &loads);
  /// Every (row, step) score of `loads` (scaled, shaped and with ALiBi, as
  /// the softmax takes them), and the steps' value elements as f32.
  SmallVector<SmallVector<Value>>
  scoreStep(const StepLoads &loads, int64_t unroll,
            SmallVector<SmallVector<Value>> &valueElements);
  /// Token groups of a warp hold the same slices: combines them.
  void combineLaneGroups(SmallVector<RowState> &states);
  /// Lanes of token group 0 publish the warp's state per row.
  void publishWarpStates(ArrayRef<RowState> states);

  /// The query tile: f32 rows in workgroup memory.
  Value queryTile;
  /// With ALiBi each row of the current tile's slope and position.
  SmallVector<AlibiRow> rowAlibi;
  /// The lane's token group and place in it, and its first token within
  /// each step of the layout's tokensPerStep() tokens.
  Value tokenGroup, laneInGroup, tokenInStep;
  /// Per vector of the lane's slice of a key row: its index in the row, and
  /// (with idle lanes) whether it lies in the row; the same of a value row.
  SmallVector<Value> vectorIndices, vectorIsInRow;
  SmallVector<Value> valueVectorIndices, valueVectorIsInRow;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_CUDACORETILEBUILDER_H
