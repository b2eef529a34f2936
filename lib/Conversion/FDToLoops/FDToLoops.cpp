//===- FDToLoops.cpp - fd ops to scf/arith/math/memref loops --------------===//
//
// The CPU reference lowering of the attention ops. Each becomes a loop nest
// over (sequence, [split,] query token, query head) whose body streams the
// row's keys once with an online softmax, accumulating in f32 exactly as
// the ops specify; fd.merge's lowering is in MergeToLoops.cpp.
//
//===----------------------------------------------------------------------===//

#include "fd/Conversion/FDToLoops/FDToLoops.h"
#include "LoopBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

SmallVector<Value> withDim(ArrayRef<Value> row, Value dim) {
  SmallVector<Value> indices(row);
  indices.push_back(dim);
  return indices;
}

/// Operands and indices of one row: a (sequence, query token, query head).
/// `values` is the value cache, or the key cache whose first D_v columns
/// are the values.
struct RowOperands {
  Value query, keyCache, values;
  /// `cacheBatch` is the cache's sequence: `batch`, or 0 for a shared
  /// prefix.
  Value batch, token, head, kvHead, cacheBatch;
  /// With ALiBi: the head's slope and the query token's position; else null.
  Value alibiSlope, position;
  /// The sequence's extent: where its keys are (buildKeyPosition).
  const SequenceExtent *sequence = nullptr;
  /// With per-sequence query lengths: whether the token is a query, not
  /// padding; else null (every token is).
  Value isQuery;
  /// With an fp8 cache: the key and value scales; else null.
  Value kScale, vScale;
};

/// The scale of an fp8 cache row: the tensor's ([1]) or the row's (per
/// token and KV head, indexed like the cache without the head dim).
Value loadKVScale(OpBuilder &b, Location loc, Value scales,
                  ArrayRef<Value> cacheRow) {
  if (isPerTensorScale(scales))
    return memref::LoadOp::create(b, loc, scales, indexConstant(b, loc, 0));
  return memref::LoadOp::create(b, loc, scales, cacheRow);
}

/// A cache element in f32; an fp8 one dequantized: its value times `scale`
/// (the row's scale; null for 16- and 32-bit caches).
Value loadCacheElement(OpBuilder &b, Location loc, Value cache,
                       ValueRange indices, Value scale) {
  if (!scale)
    return loadAsF32(b, loc, cache, indices);
  Value element = memref::LoadOp::create(b, loc, cache, indices);
  return arith::MulFOp::create(b, loc, buildFloat8ToF32(b, loc, element),
                               scale);
}

/// Streams keys [begin, end) of one row with an online softmax: `accumulator`
/// (memref<D_vxf32>) receives sum_j exp(s_j - max) * v_j and the returned state
/// the final max and sum. Scores are scaled, then soft-capped and biased
/// (ALiBi) if the rules say so.
SoftmaxState emitOnlineSoftmax(OpBuilder &b, Location loc,
                               const AttentionIndexing &indexing,
                               const AttentionRules &rules,
                               const RowOperands &row, Value begin, Value end,
                               Value scale, SoftmaxState initial,
                               Value accumulator) {
  Value zeroIndex = indexConstant(b, loc, 0);
  Value one = indexConstant(b, loc, 1);
  Value headDim = indexConstant(b, loc, indexing.geometry.headDim);
  Value valueHeadDim = indexConstant(b, loc, indexing.geometry.valueHeadDim);
  Value zero = f32Constant(b, loc, 0.0f);

  scf::ForOp::create(b, loc, zeroIndex, valueHeadDim, one, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
                       memref::StoreOp::create(b, loc, zero, accumulator, dim);
                       scf::YieldOp::create(b, loc);
                     });

  auto keyLoop = scf::ForOp::create(
      b, loc, begin, end, one, ValueRange{initial.max, initial.sum},
      [&](OpBuilder &b, Location loc, Value position, ValueRange state) {
        // A hole of the block table is no key: the state goes on unchanged
        // and nothing of its position is read.
        Value isKey;
        SmallVector<Value> cacheRow = indexing.cacheRow(
            b, loc, row.keyCache, row.cacheBatch, position, row.kvHead,
            rules.blockTableHoles ? &isKey : nullptr);
        auto foldKey = [&](OpBuilder &b, Location loc) {
          Value kScale =
              row.kScale ? loadKVScale(b, loc, row.kScale, cacheRow) : Value();
          // Values read from the key cache are scaled as its keys are.
          Value vScale = row.values == row.keyCache ? kScale
                         : row.vScale ? loadKVScale(b, loc, row.vScale, cacheRow)
                                      : Value();
          auto dotLoop = scf::ForOp::create(
              b, loc, zeroIndex, headDim, one, ValueRange{zero},
              [&](OpBuilder &b, Location loc, Value dim, ValueRange partial) {
                Value q = loadAsF32(
                    b, loc, row.query,
                    indexing.row(row.batch, row.token, row.head, {dim}));
                Value k = loadCacheElement(b, loc, row.keyCache,
                                           withDim(cacheRow, dim), kScale);
                Value product = arith::MulFOp::create(b, loc, q, k);
                scf::YieldOp::create(b, loc,
                                     ValueRange{arith::AddFOp::create(
                                         b, loc, partial[0], product)});
              });
          Value score =
              arith::MulFOp::create(b, loc, dotLoop.getResult(0), scale);
          if (rules.logitsSoftCap)
            score = buildSoftCap(b, loc, score, *rules.logitsSoftCap,
                                 [&](Value x) -> Value {
                                   return math::Exp2Op::create(b, loc, x);
                                 });
          if (row.alibiSlope)
            score = buildAlibiBias(
                b, loc, score, row.alibiSlope,
                buildKeyPosition(b, loc, *row.sequence, position), row.position);
          Value newMax = arith::MaximumFOp::create(b, loc, state[0], score);
          // Rescales what was accumulated under the old maximum.
          Value correction = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, state[0], newMax));
          Value weight = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, score, newMax));
          scf::ForOp::create(
              b, loc, zeroIndex, valueHeadDim, one, ValueRange{},
              [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
                Value v = loadCacheElement(b, loc, row.values,
                                           withDim(cacheRow, dim), vScale);
                Value previous = memref::LoadOp::create(b, loc, accumulator, dim);
                Value updated = arith::AddFOp::create(
                    b, loc, arith::MulFOp::create(b, loc, previous, correction),
                    arith::MulFOp::create(b, loc, weight, v));
                memref::StoreOp::create(b, loc, updated, accumulator, dim);
                scf::YieldOp::create(b, loc);
              });
          Value newSum = arith::AddFOp::create(
              b, loc, arith::MulFOp::create(b, loc, state[1], correction),
              weight);
          scf::YieldOp::create(b, loc, ValueRange{newMax, newSum});
        };
        if (!isKey) {
          foldKey(b, loc);
          return;
        }
        auto ifKey = scf::IfOp::create(
            b, loc, isKey, foldKey, [&](OpBuilder &b, Location loc) {
              scf::YieldOp::create(b, loc, state);
            });
        scf::YieldOp::create(b, loc, ifKey.getResults());
      });
  return {keyLoop.getResult(0), keyLoop.getResult(1)};
}

/// The state before any key: empty, or with attention sinks the row's sink
/// as a key of value zero (AttentionUtils.h: max = sink, sum = its weight),
/// except in a padding row (`isQuery` false), which stays empty.
SoftmaxState initialState(OpBuilder &b, Location loc, Value sinks, Value head,
                          Value isQuery) {
  if (!sinks)
    return {negativeInfinity(b, loc), f32Constant(b, loc, 0.0f)};
  Value sink = memref::LoadOp::create(b, loc, sinks, head);
  if (isQuery)
    sink = arith::SelectOp::create(b, loc, isQuery, sink,
                                   negativeInfinity(b, loc));
  Value shift = buildMergeShift(b, loc, sink);
  return {sink, math::ExpOp::create(
                    b, loc, arith::SubFOp::create(b, loc, sink, shift))};
}

/// Writes accumulator * scale to `output` at row indices + [d], for every d
/// below `headDim` (D_v).
void storeScaledRow(OpBuilder &b, Location loc, Value accumulator,
                    Value scaleFactor, Value output, ArrayRef<Value> rowIndices,
                    int64_t headDim) {
  scf::ForOp::create(
      b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, headDim),
      indexConstant(b, loc, 1), ValueRange{},
      [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
        Value value = arith::MulFOp::create(
            b, loc, memref::LoadOp::create(b, loc, accumulator, dim),
            scaleFactor);
        SmallVector<Value> indices(rowIndices);
        indices.push_back(dim);
        storeFromF32(b, loc, value, output, indices);
        scf::YieldOp::create(b, loc);
      });
}

/// The keys row `row` sees within [begin, end) (AttentionUtils.h), an empty
/// range at `begin` when none (always for a padding token).
std::pair<Value, Value> visibleWithin(OpBuilder &b, Location loc,
                                      const AttentionRules &rules,
                                      const SequenceExtent &sequence,
                                      const RowOperands &row, Value begin,
                                      Value end) {
  KeyRange visible = buildVisibleKeys(b, loc, sequence, row.token, rules);
  if (visible.begin)
    begin = arith::MaxSIOp::create(b, loc, begin, visible.begin);
  Value clipped = arith::MinSIOp::create(b, loc, end, visible.end);
  if (row.isQuery)
    clipped = arith::SelectOp::create(b, loc, row.isQuery, clipped, begin);
  return {begin, arith::MaxSIOp::create(b, loc, begin, clipped)};
}

/// Query sequence `batch`'s extents (AttentionUtils.h): the one the splits
/// divide and the one its rows see. Both are its own (from its length, its
/// query length with `query_lens` and this rank with a KV shard), except
/// for a shared prefix: the prefix's, and the prefix continued by the
/// sequence's suffix.
struct SequenceExtents {
  SequenceExtent split, rows;
};

SequenceExtents loadSequenceExtents(OpBuilder &b, Location loc,
                                    AttentionOpInterface op, Value batch,
                                    Value cacheBatch, Value maxLength,
                                    const AttentionRules &rules) {
  auto loadIndex = [&](Value memref, Value position) -> Value {
    return arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        memref::LoadOp::create(b, loc, memref, position));
  };
  Value queryLen =
      op.getQueryLens()
          ? memref::LoadOp::create(b, loc, op.getQueryLens(), batch).getResult()
          : Value();
  Value length = loadIndex(op.getSeqLens(), cacheBatch);
  Value rank = op.getKvShardRank()
                   ? loadIndex(op.getKvShardRank(), indexConstant(b, loc, 0))
                   : Value();
  SequenceExtent sequence =
      buildSequenceExtent(b, loc, length, maxLength, rules, rank);
  sequence.queryLength = buildQueryLength(b, loc, queryLen, rules.queryLength);
  if (!op.getSuffixLens())
    return {sequence, sequence};
  return {sequence,
          buildSharedPrefixExtent(b, loc, sequence,
                                  loadIndex(op.getSuffixLens(), batch))};
}

/// Builds the (b, [split,] t, h) loop nest shared by the attention lowerings
/// and hands the body the row operands and the sequence's extents.
void buildRowNest(OpBuilder &b, AttentionOpInterface op,
                  const AttentionIndexing &indexing, int64_t numSplits,
                  function_ref<void(OpBuilder &, Location, const RowOperands &,
                                    Value split, const SequenceExtents &)>
                      bodyBuilder) {
  Location loc = op.getLoc();
  const AttentionGeometry &geometry = indexing.geometry;
  Value batchSize = memref::DimOp::create(b, loc, op.getQuery(), 0);
  Value maxLength = indexing.maxLength(b, loc, op.getKeyCache());
  Value zero = indexConstant(b, loc, 0);
  Value one = indexConstant(b, loc, 1);
  SmallVector<Value> upperBounds = {
      batchSize, indexConstant(b, loc, numSplits),
      indexConstant(b, loc, geometry.queryLength),
      indexConstant(b, loc, geometry.numQueryHeads)};
  Value group = indexConstant(b, loc, geometry.groupSize());
  scf::buildLoopNest(
      b, loc, SmallVector<Value>(4, zero), upperBounds,
      SmallVector<Value>(4, one),
      [&](OpBuilder &b, Location loc, ValueRange ivs) {
        RowOperands row{op.getQuery(),
                        op.getKeyCache(),
                        op.getValueSource(),
                        ivs[0],
                        ivs[2],
                        ivs[3],
                        arith::DivUIOp::create(b, loc, ivs[3], group),
                        op.getSuffixLens() ? zero : ivs[0]};
        SequenceExtents extents = loadSequenceExtents(
            b, loc, op, row.batch, row.cacheBatch, maxLength, op.getRules());
        const SequenceExtent &sequence = extents.rows;
        row.sequence = &sequence;
        if (op.getQueryLens())
          row.isQuery = buildIsQueryToken(b, loc, sequence, row.token);
        row.kScale = op.getKScale();
        row.vScale = op.getVScale();
        if (Value slopes = op.getAlibiSlopes()) {
          row.alibiSlope = memref::LoadOp::create(b, loc, slopes, row.head);
          row.position = buildQueryPosition(b, loc, sequence, row.token);
        }
        bodyBuilder(b, loc, row, ivs[1], extents);
      });
}

struct AttentionOpLowering : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    AttentionIndexing indexing{op.getGeometry(), op.getKvLayout(),
                               op.getBlockTable()};
    int64_t valueHeadDim = indexing.geometry.valueHeadDim;
    Value accumulator = allocateScratch(
        rewriter, op, MemRefType::get({valueHeadDim}, rewriter.getF32Type()));
    Value scale = f32Constant(rewriter, op.getLoc(), op.getEffectiveScale());
    AttentionRules rules = op.getRules();
    buildRowNest(
        rewriter, op, indexing, /*numSplits=*/1,
        [&](OpBuilder &b, Location loc, const RowOperands &row, Value,
            const SequenceExtents &extents) {
          // A padding token's row sees no key and no sink: zeros, lse -inf.
          auto [begin, end] =
              visibleWithin(b, loc, rules, extents.rows, row,
                            indexConstant(b, loc, 0), extents.rows.length);
          SoftmaxState state = emitOnlineSoftmax(
              b, loc, indexing, rules, row, begin, end, scale,
              initialState(b, loc, op.getSinks(), row.head, row.isQuery),
              accumulator);
          SmallVector<Value> rowIndices =
              indexing.row(row.batch, row.token, row.head);
          storeScaledRow(b, loc, accumulator, reciprocalOrZero(b, loc, state),
                         op.getOutput(), rowIndices, valueHeadDim);
          if (op.getLse())
            memref::StoreOp::create(b, loc, logSumExp(b, loc, state),
                                    op.getLse(), rowIndices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

struct PartialAttentionOpLowering : OpConversionPattern<PartialAttentionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(PartialAttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    AttentionIndexing indexing{op.getGeometry(), op.getKvLayout(),
                               op.getBlockTable()};
    int64_t valueHeadDim = indexing.geometry.valueHeadDim;
    int64_t numSplits = op.getNumSplits();
    Value accumulator = allocateScratch(
        rewriter, op, MemRefType::get({valueHeadDim}, rewriter.getF32Type()));
    Value scale = f32Constant(rewriter, op.getLoc(), op.getEffectiveScale());
    std::optional<int64_t> fixedChunk = op.getChunkLength();
    AttentionRules rules = op.getRules();
    buildRowNest(
        rewriter, op, indexing, numSplits,
        [&](OpBuilder &b, Location loc, const RowOperands &row, Value split,
            const SequenceExtents &extents) {
          // The rows of padding tokens are not written (fd.merge skips
          // them).
          OpBuilder::InsertionGuard guard(b);
          if (row.isQuery)
            b.setInsertionPointToStart(
                scf::IfOp::create(b, loc, row.isQuery, /*withElseRegion=*/false)
                    .thenBlock());
          KeyRange attended = buildAttendedKeys(b, loc, extents.split, rules);
          ChunkRange range =
              buildChunkRange(b, loc, attended.begin, attended.end, split,
                              numSplits, fixedChunk);
          auto [begin, end] = visibleWithin(b, loc, rules, extents.rows, row,
                                            range.begin, range.end);
          SoftmaxState state = emitOnlineSoftmax(
              b, loc, indexing, rules, row, begin, end, scale,
              initialState(b, loc, Value(), row.head, Value()), accumulator);
          SmallVector<Value> rowIndices =
              indexing.row(row.batch, row.token, row.head, {split});
          storeScaledRow(b, loc, accumulator, reciprocalOrZero(b, loc, state),
                         op.getPartialOutput(), rowIndices, valueHeadDim);
          memref::StoreOp::create(b, loc, logSumExp(b, loc, state),
                                  op.getPartialLse(), rowIndices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::populateFDToLoopsConversionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<AttentionOpLowering, PartialAttentionOpLowering>(
      patterns.getContext());
  detail::populateMergeToLoopsPatterns(patterns);
  detail::populateMergeStatesToLoopsPatterns(patterns);
}
