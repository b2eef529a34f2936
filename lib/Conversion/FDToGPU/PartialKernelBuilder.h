//===- PartialKernelBuilder.h - The partial kernel's body -------*- C++ -*-===//
//
// Private to the FDToGPU lowering. Builds the body of one partial-attention
// kernel in stages: the values every stage reads (block and thread
// coordinates, the chunk, the kernel's arguments) are members, each stage a
// method. The stages both forms share are here: the row tile's frame, the
// warps' combine into the normalized partial and its lse (writePartials,
// CombineRows.cpp) and, with a fused merge, the merge by the block that
// finishes its (sequence, KV head) last (mergeIfLast, FusedMerge.cpp);
// where rows and keys are (queryRow, cacheRow, the page lookups, ...):
// KernelIndexing.cpp. Each form streams the chunk through the tile's rows
// in a builder of its own: CudaCoreTileBuilder.h, TensorCoreTileBuilder.h.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H

#include "KernelBuilder.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/KernelPlan.h"

#include <functional>
#include <memory>

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

/// The query sequences whose rows one block of `op`'s kernel (of
/// `layout`) computes: 1, or with a shared prefix those of a group
/// (KernelProblem::getRequestsPerBlock).
int64_t getSequencesPerBlock(PartialAttentionOp op,
                             const PartialKernelLayout &layout);

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

/// The partial kernel's body, the stages both forms share: the block's
/// coordinates, the chunk and the scales (setUp), the row tile's frame
/// (build: the tile, then writePartials, then a fused merge) and the
/// addressing of rows, keys and pages. A form (CudaCoreTileBuilder.h,
/// TensorCoreTileBuilder.h) sets up its lanes and streams the chunk through
/// the tile's rows, leaving each warp's state where writePartials reads it.
class PartialKernelBuilder {
public:
  PartialKernelBuilder(gpu::GPUFuncOp kernel, PartialAttentionOp op,
                       const AttentionGeometry &geometry,
                       const ::flashdecode::KernelSchedule &schedule,
                       Type elementType, const CacheElements &cache,
                       PatternRewriter &rewriter);
  virtual ~PartialKernelBuilder() = default;

  /// The whole body: the block's row tile, the fused merge of `merge` when
  /// given, and the return.
  void build(MergeOp merge = nullptr);

protected:
  /// The form's lane coordinates and its query buffer, set up after the
  /// block's and the thread's.
  virtual void setUpLanes() = 0;
  /// Streams the chunk through the rows of the tile starting at `firstRow`
  /// and publishes each warp's state: its accumulators in warpAccumulators
  /// (at accumulatorColumn), its max and sum per row in warpMaxSum.
  virtual void streamRowTile(Value firstRow) = 0;
  /// Where every block's rows are real (no per-sequence query lengths, no
  /// shared prefix), called before the sequence's extent is loaded: a form
  /// may start copying q for the tile at `firstRow`, so that its latency
  /// runs beside the lengths' and the block table's.
  virtual void startQueryCopy(Value firstRow) {}
  /// Where dim `dim` of row `row` of a warp's published accumulators lies
  /// (warpAccumulators' last index): `dim` unless the form swizzles them.
  virtual Value accumulatorColumn(Value row, Value dim) { return dim; }
  /// What the form's probabilities carry besides the weights (an fp8
  /// cache's per-token value scales' factor, which the normalization then
  /// divides out); 1 for none.
  virtual double getProbabilityFactor() const { return 1.0; }

  /// The row of `token` in a dense cache, or of slot token % page_size of
  /// `page` in a paged one: its index among the cache's rows, and of its
  /// per-token scale.
  Value cacheRow(Value token, Value page);
  /// For a copy of `token`'s row whose block-table entry (loaded earlier;
  /// null for a dense cache) is `entry`: its cache row (the entry's page,
  /// clamped into the pool) and whether to copy it, `live` and, with holes,
  /// the entry being a key.
  struct CopiedRow {
    Value row, live;
  };
  CopiedRow copiedRow(Value token, Value entry, Value live);
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
  /// Whether a block-table entry (i32) is a key, not a hole (negative).
  Value isKeyEntry(Value entry);
  /// The query head of row `row` of the block: kvHead * group + row % group.
  Value queryHeadOf(Value row);
  /// The query token of row `row` of the block: row / group (with a shared
  /// prefix, counted over the block's sequences: sequence token / Lq of
  /// them, its token token % Lq).
  Value tokenOf(Value row);
  /// Row `row` of the block (query token row / group of head queryHeadOf)
  /// as a row index of the [B, Lq, Hq] tensors.
  Value queryRow(Value row);
  /// The query of a row as the rules see it: its sequence's extent and its
  /// token there.
  struct RowQuery {
    SequenceExtent sequence;
    Value token;
  };
  /// The query of row `row` of the block (a real row, or clamped to
  /// lastRow): the chunk's sequence and tokenOf(row); with a shared prefix
  /// the prefix continued by the suffix of the row's sequence, and the
  /// row's token in it.
  RowQuery queryOfRow(Value row);
  /// Whether row `tileRow` of the tile starting at `firstRow` is a real row
  /// (the last tile may be partial, and rows of padding tokens are not).
  Value isRealRow(Value firstRow, Value tileRow);
  /// Builds `body` where row `tileRow` of the tile starting at `firstRow`
  /// is a real row (in an scf.if on isRealRow).
  void ifRealRow(Value firstRow, Value tileRow, function_ref<void()> body);
  /// A scaled score (base 2) as the softmax takes it: soft-capped when the
  /// rules say so.
  Value shapeScore(Value score);
  /// The ALiBi slope and position of row `tileRow` of the tile starting at
  /// `firstRow` (padding rows take the last row's).
  AlibiRow alibiOfRow(Value firstRow, Value tileRow);
  /// The start of the token-loop step `steps` steps after the one starting
  /// at `stepStart`.
  Value stepAhead(Value stepStart, int64_t steps);
  /// Where a tile copies each step into a ring of keyValueStages stages, a
  /// step a stage from the chunk's first: the stage of the step `ahead`
  /// steps after the one starting at `stepStart`.
  Value stageOfStep(Value stepStart, int64_t ahead);

  /// Runs `body(index)` for every index in [0, count), the block's threads
  /// striding over them.
  void forEachThreadIndex(int64_t count, function_ref<void(Value)> body);
  /// Runs `body(row, column)` for every element of `rows` x `columns`, the
  /// block's threads striding over them.
  void forEachElement(int64_t rows, int64_t columns,
                      function_ref<void(Value row, Value column)> body);
  /// Combines the warps and writes the normalized partial and its lse (the
  /// warpgroup tile writes its own from registers); a chunk's cluster of
  /// blocks merges its blocks' rows first (ClusterMerge.cpp).
  virtual void writePartials(Value firstRow);
  /// A block of a chunk's cluster: its share of the chunk's keys (whole
  /// steps from the chunk's start, rank by rank).
  ChunkBounds takeClusterShare(ChunkBounds whole);
  /// After writePartials' per-row pass left each block's warp weights and
  /// its rows' lse (base 2, in warpMaxSum's first sum slot): waits for the
  /// cluster, merges the blocks' rows (each block a C-th of the value
  /// dims, read from the others' workgroup memory) into the chunk's
  /// partial and lse, and waits again so that no block leaves while
  /// another reads it.
  void writeClusterPartials(Value firstRow);
  /// Where a block's rows wait for its cluster's merge, in its workgroup
  /// memory (f32 element offsets from shared pointers): `states` weighted
  /// accumulators a row, each row's lse (base 2) and each state's weight
  /// (no weightOffset: weights of 1, the rows normalized already).
  struct ClusterRows {
    Value accumulators, weights;
    int64_t states = 1;
    std::function<Value(Value row)> lseOffset;
    std::function<Value(int64_t state, Value row)> weightOffset;
    std::function<Value(int64_t state, Value row, Value dim)> accumulatorOffset;
  };
  /// Waits for the cluster; merges the blocks' `rows` (each block a run of
  /// consecutive 4-dim groups of every row, the rank's) into the chunk's
  /// partial and lse (rank 0); waits again before the blocks may exit.
  void mergeClusterRows(Value firstRow, const ClusterRows &rows);
  /// The row of the partial output and lse that row `tileRow` of the tile
  /// starting at `firstRow` writes for this block's split.
  Value partialRowOf(Value firstRow, Value tileRow);
  /// Counts the block in its (sequence, KV head)'s counter once its
  /// partials are written; the last of the splits to count resets the
  /// counter and merges the group's rows as `merge` says. Defined in
  /// FusedMerge.cpp.
  void mergeIfLast(MergeOp merge);

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
  /// A shared prefix: the suffix lengths' pointer and the number of query
  /// sequences (null without).
  Value suffixLens, numSequences;
  /// ALiBi: the slopes' pointer (null without).
  Value alibiSlopes;
  Value warpAccumulators, warpMaxSum;
  // Where this thread is. `batch` is the block's query sequence, or with a
  // shared prefix its group of layout.rows / (group x Lq) sequences;
  // `cacheBatch` the cache's sequence it reads (0 for a shared prefix).
  Value thread, split, kvHead, rowTile, batch, cacheBatch, warp, lane;
  /// The block's rank in its chunk's cluster (null without clusters).
  Value clusterRank;
  ChunkBounds chunk;
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
  /// tokens (all layout.rows without per-sequence query lengths), or with
  /// a shared prefix the rows of those of its sequences that exist.
  Value realRows;
  /// Whether realRows is known only at run time (per-sequence query
  /// lengths, a shared prefix's last group of sequences).
  bool realRowsVary = false;
  /// The query sequences whose rows a block computes: 1, or with a shared
  /// prefix layout.rows / (group x Lq).
  int64_t sequencesPerBlock;

private:
  /// The values every stage reads, at the kernel's start; the form's lanes
  /// (setUpLanes) after the thread's coordinates.
  void setUp();
  /// The row tile starting at row `firstRow` against the chunk, and its
  /// partials written.
  void computeRowTile(Value firstRow);
};

/// The builder of `schedule`'s form for `op`'s kernel.
std::unique_ptr<PartialKernelBuilder>
createPartialKernelBuilder(gpu::GPUFuncOp kernel, PartialAttentionOp op,
                           const AttentionGeometry &geometry,
                           const ::flashdecode::KernelSchedule &schedule,
                           Type elementType, const CacheElements &cache,
                           PatternRewriter &rewriter);

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_PARTIALKERNELBUILDER_H
