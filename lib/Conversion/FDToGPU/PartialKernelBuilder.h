//===- PartialKernelBuilder.h - The partial kernel's body -------*- C++ -*-===//
//
// Private to the FDToGPU lowering. Builds the body of one partial-attention
// kernel in stages: the values every stage reads (block and thread
// coordinates, the lane's slice of the head dim, the chunk, the kernel's
// arguments) are members, each stage a method. Per row tile: stage the
// query rows (stageQueryTile), stream the chunk's keys and values through
// the rows' online softmax (streamKeys, StreamKeys.cpp), combine the lane
// groups of a warp (combineLaneGroups), publish each warp's state
// (publishWarpStates) and combine the warps into the normalized partial and
// its lse (writePartials; these three in CombineRows.cpp). With tensor cores,
// streamTensorCoreTile (TensorCoreTile.cpp) takes the place of all but the last
// stage. With a fused merge the block that finishes its (sequence, KV head)
// last merges the partials (mergeIfLast, FusedMerge.cpp). Where rows and
// keys are (queryRow, cacheRow, the page lookups, ...): KernelIndexing.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H

#include "KernelBuilder.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/KernelPlan.h"

namespace mlir::fd::detail {

/// The partial kernel's workgroup buffers, in order (fd/Planning/KernelPlan.h).
using ::flashdecode::kMergeWeightsBuffer;
using ::flashdecode::kQueryBuffer;
using ::flashdecode::kWarpAccumulatorsBuffer;
using ::flashdecode::kWarpMaxSumBuffer;

/// Tensor cores: a lane's 16-byte K or V vector (8-byte with an fp8
/// cache): 8 elements, 4 mma words of element pairs.
constexpr int64_t kFragmentWordsPerVector = 4;
constexpr int64_t kFragmentElementsPerVector = 8;

/// The schedule of `op`'s kernel: its #fd.schedule (getReasonNotLowerableToGPU
/// refuses an op without one).
::flashdecode::KernelSchedule getPartialKernelSchedule(PartialAttentionOp op);

/// The workgroup buffers of a kernel of `schedule`
/// (KernelSchedule::getWorkgroupBuffers) as memrefs in workgroup memory, for
/// a fused merge of `fusedMergeSplits` splits (0: none).
SmallVector<MemRefType>
getPartialKernelWorkgroupBuffers(const ::flashdecode::KernelSchedule &schedule,
                                 int64_t fusedMergeSplits,
                                 MLIRContext *context);

/// The fd.merge of `op`'s partials, or null (FusedMerge.cpp).
MergeOp findMergeOfPartials(PartialAttentionOp op);

/// Adds what a fused merge takes after the partial kernel's own parameters:
/// `merge`'s output, lse and sinks, and the counters of the blocks done per
/// (sequence, KV head), which it allocates zeroed before the launch (the
/// runtime keeps them zeroed instead: the last block resets its own).
/// Returns the counters, to free after the launch (FusedMerge.cpp).
Value addFusedMergeParameters(OpBuilder &b, Location loc, PartialAttentionOp op,
                              MergeOp merge, KernelParameters &parameters);

/// A query row's ALiBi: its head's slope (base 2) and its token's position.
struct AlibiRow {
  Value slope, position;
};

class PartialKernelBuilder {
public:
  /// Builds `op`'s kernel as `schedule` says.
  PartialKernelBuilder(gpu::GPUFuncOp kernel, PartialAttentionOp op,
                       const AttentionGeometry &geometry,
                       const ::flashdecode::KernelSchedule &schedule,
                       Type elementType, const CacheElements &cache,
                       PatternRewriter &rewriter);

  /// The whole body: the block's row tile, the fused merge of `merge` when
  /// given, and the return.
  void build(MergeOp merge = nullptr);

private:
  /// The tensor-core tile's K/V stages read the builder's state.
  friend class KeyValuePipeline;

  /// The row tile starting at row `firstRow` against the chunk, and its
  /// partials written.
  void computeRowTile(Value firstRow);
  /// CUDA cores: the lane's token group, its place in the group and its
  /// vectors of the key and value rows.
  void setUpTokenGroups();
  /// Element `element` of the lane's slice of the key head dim, as an index.
  Value laneDim(int64_t element);
  /// Element `element` of the lane's slice of the value head dim.
  Value laneValueDim(int64_t element);
  /// The row of `token` in a dense cache, or of slot token % page_size of
  /// `page` in a paged one: its index among the cache's rows of D elements,
  /// and of its per-token scale.
  Value cacheRow(Value token, Value page);
  /// CUDA cores: the cache vector of layout.vectorWidth elements at element
  /// `offset` of `base` (the keys or the values), as loaded.
  Value loadCacheVector(Value base, Value offset);
  /// A loaded cache vector's elements as f32 (an fp8 cache's values /
  /// cache.decodeFactor()).
  SmallVector<Value> cacheVectorToF32(Value vector);
  /// Tensor cores: the 8 cache elements at `address` (a K/V stage in
  /// workgroup memory) as four mma operand words of element pairs in the
  /// query's type.
  SmallVector<Value> loadFragmentWords(Value address);
  /// The per-token scale of cache row `row` (cacheRow) in `scales`.
  Value loadTokenScale(Value scales, Value row);
  /// The page holding `token` (its block-table entry, clamped into the
  /// pool), or a null value for a dense cache.
  Value pageOf(Value token);
  /// The block-table entry (i32) of `token`'s page as stored, unchecked:
  /// a load whose first use, clampPage, may come a loop step later.
  Value loadPageEntry(Value token);
  /// The page a block-table entry names, clamped into the pool (index).
  Value clampPage(Value entry);
  /// The query head of row `row` of the block: kvHead * group + row % group.
  Value queryHeadOf(Value row);
  /// The query token of row `row` of the block: row / group.
  Value tokenOf(Value row);
  /// Row `row` of the block (query token row / group of head queryHeadOf)
  /// as a row index of the [B, Lq, Hq] tensors.
  Value queryRow(Value row);
  /// Whether row `tileRow` of the tile starting at `firstRow` is a real row
  /// (the last tile may be partial, and rows of padding tokens are not).
  Value isRealRow(Value firstRow, Value tileRow);

  /// Runs `body(index)` for every index in [0, count), the block's threads
  /// striding over them.
  void forEachThreadIndex(int64_t count, function_ref<void(Value)> body);
  /// Runs `body(row, column)` for every element of `rows` x `columns`, the
  /// block's threads striding over them.
  void forEachElement(int64_t rows, int64_t columns,
                      function_ref<void(Value row, Value column)> body);
  /// forEachElement over a row tile's queries (rowTile x head dim).
  void forEachTileElement(function_ref<void(Value row, Value dim)> body) {
    forEachElement(layout.rowTile, geometry.headDim, body);
  }
  /// Stages the tile's query rows, prescaled, in workgroup memory.
  void stageQueryTile(Value firstRow);
  /// The row states before any key (and the paging state), flattened as
  /// the loops carry them.
  SmallVector<Value> initialState();
  SmallVector<RowState> unpack(ValueRange flat);
  SmallVector<Value> pack(ArrayRef<RowState> states);
  /// Streams keys [lower, upper) through the row states `start`, `unroll`
  /// steps per iteration; with a `causalBase` each row also masks the keys
  /// its query token may not see (after it, or before its window). Defined
  /// in StreamKeys.cpp.
  SmallVector<Value> streamKeys(Value lower, Value upper, int64_t unroll,
                                Value causalBase, ValueRange start);
  /// One iteration of streamKeys: the loads of `unroll` steps, then the
  /// steps as one tile of the online softmax.
  SmallVector<Value> streamStep(Value stepStart, Value upper, int64_t unroll,
                                Value causalBase, ValueRange flat);
  /// Token groups of a warp hold the same slices: combines them.
  void combineLaneGroups(SmallVector<RowState> &states);
  /// Lanes of token group 0 publish the warp's state per row.
  void publishWarpStates(ArrayRef<RowState> states);
  /// Combines the warps and writes the normalized partial and its lse.
  void writePartials(Value firstRow);
  /// Counts the block in its (sequence, KV head)'s counter once its
  /// partials are written; the last of the splits to count resets the
  /// counter and merges the group's rows as `merge` says. Defined in
  /// FusedMerge.cpp.
  void mergeIfLast(MergeOp merge);

  // The tensor-core tile (TensorCoreTile.cpp; its mma operands,
  // TensorCoreFragments.cpp).
  /// Streams the chunk through a tile's rows with mma.sync and publishes
  /// each warp's state as publishWarpStates does.
  void streamTensorCoreTile(Value firstRow);
  /// Where dim `dim` of row `row` of a warp's published accumulators lies
  /// (warpAccumulators' last index): `dim`, or with tensor cores a swizzle
  /// that keeps their 16-byte publishing stores free of bank conflicts.
  Value accumulatorColumn(Value row, Value dim);
  /// Stages the q fragments (A operands) of the tile's rows in workgroup
  /// memory, per k-step and lane.
  void stageQueryFragments(Value firstRow);
  /// The keys row `tileRow` of the tile starting at `firstRow` sees,
  /// unclipped (buildVisibleKeys), or {null, the chunk's end} when every row
  /// sees the whole chunk (one query token).
  KeyRange visibleKeys(Value firstRow, Value tileRow);
  /// What the lane's two rows of a tensor-core tile (g and g + 8) see of
  /// the chunk: their ends as i32 (with a window also the chunk's end, each
  /// row's start recomputed per step from its end), and their ALiBi.
  struct TensorCoreRows {
    bool windowed = false;
    Value ends[2], chunkEnd;
    AlibiRow alibi[2];
  };
  TensorCoreRows getTensorCoreRows(Value firstRow);
  /// A step's scores S (row g + 8 (i / 2), key 2p + i % 2; `first` the
  /// warp's first key, `pairKey` 2p) times the pair's `scoreScales`,
  /// shaped and with ALiBi, -inf where the row may not see the key.
  SmallVector<Value> maskTensorCoreScores(Value first, Value pairKey,
                                          ArrayRef<Value> s,
                                          ArrayRef<Value> scoreScales,
                                          const TensorCoreRows &rows);
  /// One step of a tensor-core tile's online softmax for the lane's rows
  /// g and g + 8: each row's new max (over its four lanes), its sum (the
  /// lane's share), the factor its state is rescaled by, and the scores'
  /// weights (`scores` as maskTensorCoreScores orders them).
  struct TensorCoreSoftmaxStep {
    Value max[2], sum[2], rescale[2], weights[4];
  };
  TensorCoreSoftmaxStep stepTensorCoreSoftmax(ValueRange carried,
                                              ArrayRef<Value> scores);
  /// The token loop's results (each row's max, the lane's share of its sum,
  /// the output accumulator): the sums over the row's four lanes, then the
  /// warp's state per row, as publishWarpStates leaves it (padding rows are
  /// not published).
  void publishTensorCoreStates(ValueRange loopResults);
  /// A scaled score (base 2) as the softmax takes it: soft-capped when the
  /// rules say so.
  Value shapeScore(Value score);
  /// The ALiBi slope and position of row `tileRow` of the tile starting at
  /// `firstRow` (padding rows take the last row's).
  AlibiRow alibiOfRow(Value firstRow, Value tileRow);
  /// D += A * B for one mma tile: m16n8k16 with A four and B two packed
  /// words, m16n8k8 with two and one.
  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> b,
                         ArrayRef<Value> c);
  /// Two 16-bit elements as an mma operand word.
  Value packPair(Value low, Value high);

  gpu::GPUFuncOp kernel;
  PartialAttentionOp op;
  ::flashdecode::KernelSchedule schedule;
  AttentionGeometry geometry;
  AttentionRules rules;
  /// schedule.layout.
  const PartialKernelLayout &layout;
  Type elementType;
  CacheElements cache;
  PatternRewriter &rewriter;
  KernelEmitter e;

  // The kernel's arguments and workgroup buffers (`values` null when they
  // are the keys' first D_v columns).
  Value query, keys, values, seqLens, partialOutput, partialLse, maxLength;
  Value blockTable, tableRow, numPages;
  /// ALiBi: the slopes' pointer (null without), and on CUDA cores each row
  /// of the current tile's slope and position.
  Value alibiSlopes;
  SmallVector<AlibiRow> rowAlibi;
  Value queryTile, queryFragments, warpAccumulators, warpMaxSum;
  // Where this thread is.
  Value thread, split, kvHead, rowTile, batch, warp, lane;
  /// CUDA cores: the lane's token group and place in it, and its first
  /// token within each step of the layout's tokensPerStep() tokens.
  Value tokenGroup, laneInGroup, tokenInStep;
  /// Per vector of the lane's slice of a key row: its index in the row, and
  /// (with idle lanes) whether it lies in the row; the same of a value row.
  SmallVector<Value> vectorIndices, vectorIsInRow;
  SmallVector<Value> valueVectorIndices, valueVectorIsInRow;
  ChunkBounds chunk;
  /// Tensor cores: where a lane's values sit in an mma fragment: row
  /// `fragmentRow` (and + 8), column pair `fragmentPair` (lane / 4 and
  /// lane % 4).
  Value fragmentRow, fragmentPair;
  /// q's prescale: scale * log2(e), for scores in base 2 (with an fp8
  /// cache also its decode factor and a per-tensor k_scale).
  Value queryScale;
  /// An fp8 cache's per-token scales (null per tensor or without fp8).
  Value keyScales, valueScales;
  /// What the partial output is multiplied by when normalized: an fp8
  /// cache's decode factor and per-tensor v_scale; null for none.
  Value outputScale;
  /// The last real row: rows past it read its query, slope and keys.
  Value lastRow;
  /// The block's rows that are real queries: group * the sequence's query
  /// tokens (all layout.rows without per-sequence query lengths).
  Value realRows;
};

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H
