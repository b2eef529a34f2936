//===- FDToLoops.cpp - fd ops to scf/arith/math/memref loops --------------===//
//
// The CPU reference lowering. Each op becomes a loop nest over (sequence,
// [split,] query token, query head) whose body streams the row's keys once
// with an online softmax, accumulating in f32 exactly as the ops specify.
//
//===----------------------------------------------------------------------===//

#include "fd/Conversion/FDToLoops/FDToLoops.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value f32Constant(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value negativeInfinity(OpBuilder &b, Location loc) {
  return f32Constant(b, loc, -std::numeric_limits<float>::infinity());
}

/// Loads one element and widens it to f32, the accumulation type.
Value loadAsF32(OpBuilder &b, Location loc, Value memref, ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, memref, indices);
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

/// Stores an f32 value into `memref`, rounding it to the element type.
void storeFromF32(OpBuilder &b, Location loc, Value value, Value memref,
                  ValueRange indices) {
  Type elementType = cast<MemRefType>(memref.getType()).getElementType();
  if (elementType != value.getType())
    value = arith::TruncFOp::create(b, loc, elementType, value);
  memref::StoreOp::create(b, loc, value, memref, indices);
}

/// A static scratch buffer at the start of the enclosing allocation scope
/// (the function), so the loops of the nest reuse one buffer instead of
/// growing the stack on every iteration.
Value allocateScratch(OpBuilder &b, Operation *op, MemRefType type) {
  OpBuilder::InsertionGuard guard(b);
  if (Operation *scope =
          op->getParentWithTrait<OpTrait::AutomaticAllocationScope>())
    b.setInsertionPointToStart(&scope->getRegion(0).front());
  return memref::AllocaOp::create(b, op->getLoc(), type);
}

/// The length of sequence `batchIndex`, clamped to [0, Lmax] so that a bad
/// length reads no memory outside the cache.
Value loadSequenceLength(OpBuilder &b, Location loc, Value seqLens,
                         Value batchIndex, Value maxLength) {
  Value length = memref::LoadOp::create(b, loc, seqLens, batchIndex);
  length = arith::IndexCastOp::create(b, loc, b.getIndexType(), length);
  return buildClampedLength(b, loc, length, maxLength);
}

/// Index lists for the operands of one attention op.
struct AttentionIndexing {
  AttentionGeometry geometry;
  KVLayout layout;
  /// The block table of a paged cache, else null.
  Value blockTable;

  /// [b, (t,) h] followed by `trailing`: queries, outputs, lse, partials.
  SmallVector<Value> row(Value batch, Value token, Value head,
                         ValueRange trailing = {}) const {
    SmallVector<Value> indices = {batch};
    if (geometry.hasQueryLengthDim)
      indices.push_back(token);
    indices.push_back(head);
    llvm::append_range(indices, trailing);
    return indices;
  }

  /// The cache indices of position `position` of sequence `batch`, without
  /// the head-dim index. A paged cache reads the position's page from the
  /// block table (clamped into the pool, so a bad entry reads no memory
  /// outside it) once per position.
  SmallVector<Value> cacheRow(OpBuilder &b, Location loc, Value cache,
                              Value batch, Value position, Value kvHead) const {
    Value outer = batch, slot = position;
    if (blockTable) {
      Value pageSize =
          arith::ConstantIndexOp::create(b, loc, geometry.pageSize);
      Value block = arith::DivUIOp::create(b, loc, position, pageSize);
      Value page =
          memref::LoadOp::create(b, loc, blockTable, ValueRange{batch, block});
      page = arith::IndexCastOp::create(b, loc, b.getIndexType(), page);
      outer = buildClampedPage(b, loc, page,
                               memref::DimOp::create(b, loc, cache, 0));
      slot = arith::RemUIOp::create(b, loc, position, pageSize);
    }
    if (layout == KVLayout::NHD)
      return {outer, slot, kvHead};
    return {outer, kvHead, slot};
  }

  /// The cache length: the positions dimension of a dense cache, max_pages *
  /// page_size of a paged one.
  Value maxLength(OpBuilder &b, Location loc, Value cache) const {
    if (!blockTable)
      return memref::DimOp::create(b, loc, cache,
                                   layout == KVLayout::NHD ? 1 : 2);
    return arith::MulIOp::create(
        b, loc, memref::DimOp::create(b, loc, blockTable, 1),
        arith::ConstantIndexOp::create(b, loc, geometry.pageSize));
  }
};

SmallVector<Value> withDim(ArrayRef<Value> row, Value dim) {
  SmallVector<Value> indices(row);
  indices.push_back(dim);
  return indices;
}

/// The running maximum and sum of exp(score - max) of one softmax row.
struct SoftmaxState {
  Value max;
  Value sum;
};

/// Operands and indices of one row: a (sequence, query token, query head).
struct RowOperands {
  Value query, keyCache, valueCache;
  Value batch, token, head, kvHead;
  /// With ALiBi: the head's slope and the query token's position; else null.
  Value alibiSlope, position;
};

/// Streams keys [begin, end) of one row with an online softmax: `accumulator`
/// (memref<Dxf32>) receives sum_j exp(s_j - max) * v_j and the returned state
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
  Value zero = f32Constant(b, loc, 0.0f);

  scf::ForOp::create(b, loc, zeroIndex, headDim, one, ValueRange{},
                     [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
                       memref::StoreOp::create(b, loc, zero, accumulator, dim);
                       scf::YieldOp::create(b, loc);
                     });

  auto keyLoop = scf::ForOp::create(
      b, loc, begin, end, one, ValueRange{initial.max, initial.sum},
      [&](OpBuilder &b, Location loc, Value position, ValueRange state) {
        SmallVector<Value> cacheRow = indexing.cacheRow(
            b, loc, row.keyCache, row.batch, position, row.kvHead);
        auto dotLoop = scf::ForOp::create(
            b, loc, zeroIndex, headDim, one, ValueRange{zero},
            [&](OpBuilder &b, Location loc, Value dim, ValueRange partial) {
              Value q = loadAsF32(
                  b, loc, row.query,
                  indexing.row(row.batch, row.token, row.head, {dim}));
              Value k = loadAsF32(b, loc, row.keyCache, withDim(cacheRow, dim));
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
          score = buildAlibiBias(b, loc, score, row.alibiSlope, position,
                                 row.position);
        Value newMax = arith::MaximumFOp::create(b, loc, state[0], score);
        // Rescales what was accumulated under the old maximum.
        Value correction = math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, state[0], newMax));
        Value weight = math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, score, newMax));
        scf::ForOp::create(
            b, loc, zeroIndex, headDim, one, ValueRange{},
            [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
              Value v =
                  loadAsF32(b, loc, row.valueCache, withDim(cacheRow, dim));
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
      });
  return {keyLoop.getResult(0), keyLoop.getResult(1)};
}

/// The state before any key: empty, or with attention sinks the row's sink
/// as a key of value zero (AttentionUtils.h: max = sink, sum = its weight).
SoftmaxState initialState(OpBuilder &b, Location loc, Value sinks, Value head) {
  if (!sinks)
    return {negativeInfinity(b, loc), f32Constant(b, loc, 0.0f)};
  Value sink = memref::LoadOp::create(b, loc, sinks, head);
  Value shift = buildMergeShift(b, loc, sink);
  return {sink, math::ExpOp::create(
                    b, loc, arith::SubFOp::create(b, loc, sink, shift))};
}

/// 1 / sum, or 0 for a row without keys so that its output is zeros.
Value reciprocalOrZero(OpBuilder &b, Location loc, SoftmaxState state) {
  Value zero = f32Constant(b, loc, 0.0f);
  Value reciprocal =
      arith::DivFOp::create(b, loc, f32Constant(b, loc, 1.0f), state.sum);
  return arith::SelectOp::create(b, loc, buildSawKeys(b, loc, state.max),
                                 reciprocal, zero);
}

/// max + log(sum), or -inf for a row without keys.
Value logSumExp(OpBuilder &b, Location loc, SoftmaxState state) {
  Value hasKeys = buildSawKeys(b, loc, state.max);
  Value lse = arith::AddFOp::create(b, loc, state.max,
                                    math::LogOp::create(b, loc, state.sum));
  return arith::SelectOp::create(b, loc, hasKeys, lse,
                                 negativeInfinity(b, loc));
}

/// Writes accumulator * scale to `output` at row indices + [d], for every d.
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

/// The keys query token `token` sees within [begin, end) (AttentionUtils.h),
/// an empty range at `begin` when none.
std::pair<Value, Value> visibleWithin(OpBuilder &b, Location loc,
                                      const AttentionRules &rules, Value length,
                                      Value token, Value begin, Value end) {
  KeyRange visible = buildVisibleKeys(b, loc, length, token, rules);
  if (visible.begin)
    begin = arith::MaxSIOp::create(b, loc, begin, visible.begin);
  Value clipped = arith::MinSIOp::create(b, loc, end, visible.end);
  return {begin, arith::MaxSIOp::create(b, loc, begin, clipped)};
}

/// Builds the (b, [split,] t, h) loop nest shared by the attention lowerings
/// and hands the body the row operands and the sequence length.
void buildRowNest(OpBuilder &b, AttentionOpInterface op,
                  const AttentionIndexing &indexing, int64_t numSplits,
                  function_ref<void(OpBuilder &, Location, const RowOperands &,
                                    Value split, Value length)>
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
                        op.getValueCache(),
                        ivs[0],
                        ivs[2],
                        ivs[3],
                        arith::DivUIOp::create(b, loc, ivs[3], group)};
        Value length =
            loadSequenceLength(b, loc, op.getSeqLens(), ivs[0], maxLength);
        if (Value slopes = op.getAlibiSlopes()) {
          row.alibiSlope = memref::LoadOp::create(b, loc, slopes, row.head);
          Value end =
              buildVisibleKeys(b, loc, length, row.token, op.getRules()).end;
          row.position = arith::SubIOp::create(b, loc, end, one);
        }
        bodyBuilder(b, loc, row, ivs[1], length);
      });
}

struct AttentionOpLowering : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    AttentionIndexing indexing{op.getGeometry(), op.getKvLayout(),
                               op.getBlockTable()};
    int64_t headDim = indexing.geometry.headDim;
    Value accumulator = allocateScratch(
        rewriter, op, MemRefType::get({headDim}, rewriter.getF32Type()));
    Value scale = f32Constant(rewriter, op.getLoc(), op.getEffectiveScale());
    AttentionRules rules = op.getRules();
    buildRowNest(
        rewriter, op, indexing, /*numSplits=*/1,
        [&](OpBuilder &b, Location loc, const RowOperands &row, Value,
            Value length) {
          auto [begin, end] = visibleWithin(b, loc, rules, length, row.token,
                                            indexConstant(b, loc, 0), length);
          SoftmaxState state = emitOnlineSoftmax(
              b, loc, indexing, rules, row, begin, end, scale,
              initialState(b, loc, op.getSinks(), row.head), accumulator);
          SmallVector<Value> rowIndices =
              indexing.row(row.batch, row.token, row.head);
          storeScaledRow(b, loc, accumulator, reciprocalOrZero(b, loc, state),
                         op.getOutput(), rowIndices, headDim);
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
    int64_t headDim = indexing.geometry.headDim;
    int64_t numSplits = op.getNumSplits();
    Value accumulator = allocateScratch(
        rewriter, op, MemRefType::get({headDim}, rewriter.getF32Type()));
    Value scale = f32Constant(rewriter, op.getLoc(), op.getEffectiveScale());
    std::optional<int64_t> fixedChunk = op.getChunkLength();
    AttentionRules rules = op.getRules();
    buildRowNest(
        rewriter, op, indexing, numSplits,
        [&](OpBuilder &b, Location loc, const RowOperands &row, Value split,
            Value length) {
          ChunkRange range = buildChunkRange(
              b, loc, buildFirstAttendedKey(b, loc, length, rules), length,
              split, numSplits, fixedChunk);
          auto [begin, end] = visibleWithin(b, loc, rules, length, row.token,
                                            range.begin, range.end);
          SoftmaxState state = emitOnlineSoftmax(
              b, loc, indexing, rules, row, begin, end, scale,
              initialState(b, loc, Value(), row.head), accumulator);
          SmallVector<Value> rowIndices =
              indexing.row(row.batch, row.token, row.head, {split});
          storeScaledRow(b, loc, accumulator, reciprocalOrZero(b, loc, state),
                         op.getPartialOutput(), rowIndices, headDim);
          memref::StoreOp::create(b, loc, logSumExp(b, loc, state),
                                  op.getPartialLse(), rowIndices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

struct MergeOpLowering : OpConversionPattern<MergeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(MergeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttentionGeometry geometry = op.getGeometry();
    bool hasQueryLengthDim = geometry.hasQueryLengthDim;
    int64_t numSplits = op.getNumSplits();
    int64_t headDim = geometry.headDim;
    AttentionIndexing indexing{geometry, KVLayout::NHD};

    Value weights = allocateScratch(
        rewriter, op, MemRefType::get({numSplits}, rewriter.getF32Type()));
    Value zero = indexConstant(rewriter, loc, 0);
    Value one = indexConstant(rewriter, loc, 1);
    Value splits = indexConstant(rewriter, loc, numSplits);
    SmallVector<Value> upperBounds = {
        memref::DimOp::create(rewriter, loc, op.getPartialOutput(), 0)};
    if (hasQueryLengthDim)
      upperBounds.push_back(indexConstant(rewriter, loc, geometry.queryLength));
    upperBounds.push_back(indexConstant(rewriter, loc, geometry.numQueryHeads));

    scf::buildLoopNest(
        rewriter, loc, SmallVector<Value>(upperBounds.size(), zero),
        upperBounds, SmallVector<Value>(upperBounds.size(), one),
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value token = hasQueryLengthDim ? ivs[1] : Value();
          SmallVector<Value> rowIndices =
              indexing.row(ivs.front(), token, ivs.back());
          auto lseAt = [&](OpBuilder &b, Location loc, Value split) {
            SmallVector<Value> indices(rowIndices);
            indices.push_back(split);
            return memref::LoadOp::create(b, loc, op.getPartialLse(), indices)
                .getResult();
          };
          Value max = scf::ForOp::create(
                          b, loc, zero, splits, one,
                          ValueRange{negativeInfinity(b, loc)},
                          [&](OpBuilder &b, Location loc, Value split,
                              ValueRange state) {
                            scf::YieldOp::create(
                                b, loc,
                                ValueRange{arith::MaximumFOp::create(
                                    b, loc, state[0], lseAt(b, loc, split))});
                          })
                          .getResult(0);
          // A sink is one more partial: lse = the sink, output zero.
          Value sinkWeight = f32Constant(b, loc, 0.0f);
          Value sink;
          if (op.getSinks()) {
            sink = memref::LoadOp::create(b, loc, op.getSinks(), ivs.back());
            max = arith::MaximumFOp::create(b, loc, max, sink);
          }
          Value shift = buildMergeShift(b, loc, max);
          if (sink)
            sinkWeight = math::ExpOp::create(
                b, loc, arith::SubFOp::create(b, loc, sink, shift));
          Value sum =
              scf::ForOp::create(
                  b, loc, zero, splits, one, ValueRange{sinkWeight},
                  [&](OpBuilder &b, Location loc, Value split,
                      ValueRange state) {
                    Value weight = math::ExpOp::create(
                        b, loc,
                        arith::SubFOp::create(b, loc, lseAt(b, loc, split),
                                              shift));
                    memref::StoreOp::create(b, loc, weight, weights, split);
                    scf::YieldOp::create(b, loc,
                                         ValueRange{arith::AddFOp::create(
                                             b, loc, state[0], weight)});
                  })
                  .getResult(0);
          Value normalizer = reciprocalOrZero(b, loc, {max, sum});
          scf::ForOp::create(
              b, loc, zero, indexConstant(b, loc, headDim), one, ValueRange{},
              [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
                Value weighted =
                    scf::ForOp::create(
                        b, loc, zero, splits, one,
                        ValueRange{f32Constant(b, loc, 0.0f)},
                        [&](OpBuilder &b, Location loc, Value split,
                            ValueRange state) {
                          SmallVector<Value> indices(rowIndices);
                          indices.push_back(split);
                          indices.push_back(dim);
                          Value partial = memref::LoadOp::create(
                              b, loc, op.getPartialOutput(), indices);
                          Value weight =
                              memref::LoadOp::create(b, loc, weights, split);
                          scf::YieldOp::create(
                              b, loc,
                              ValueRange{arith::AddFOp::create(
                                  b, loc, state[0],
                                  arith::MulFOp::create(b, loc, weight,
                                                        partial))});
                        })
                        .getResult(0);
                SmallVector<Value> indices(rowIndices);
                indices.push_back(dim);
                storeFromF32(
                    b, loc, arith::MulFOp::create(b, loc, weighted, normalizer),
                    op.getOutput(), indices);
                scf::YieldOp::create(b, loc);
              });
          if (op.getLse())
            memref::StoreOp::create(b, loc, logSumExp(b, loc, {max, sum}),
                                    op.getLse(), rowIndices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::populateFDToLoopsConversionPatterns(
    RewritePatternSet &patterns) {
  patterns
      .add<AttentionOpLowering, PartialAttentionOpLowering, MergeOpLowering>(
          patterns.getContext());
}
