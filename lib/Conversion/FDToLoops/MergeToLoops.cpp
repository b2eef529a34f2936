//===- MergeToLoops.cpp - fd.merge to loops -------------------------------===//
//
// The CPU lowering of the exact log-sum-exp merge: a loop nest over
// (sequence, [query token,] query head) whose body weighs the row's split
// partials, as fd.merge specifies.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

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
    Value allSplits = indexConstant(rewriter, loc, numSplits);
    SmallVector<Value> upperBounds = {
        memref::DimOp::create(rewriter, loc, op.getPartialOutput(), 0)};
    if (hasQueryLengthDim)
      upperBounds.push_back(indexConstant(rewriter, loc, geometry.queryLength));
    upperBounds.push_back(indexConstant(rewriter, loc, geometry.numQueryHeads));

    scf::buildLoopNest(
        rewriter, loc, SmallVector<Value>(upperBounds.size(), zero),
        upperBounds, SmallVector<Value>(upperBounds.size(), one),
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value token = hasQueryLengthDim ? ivs[1] : zero;
          SmallVector<Value> rowIndices =
              indexing.row(ivs.front(), token, ivs.back());
          // A padding token's row (AttentionUtils.h) reads no partial (the
          // partial attention did not write them) and no sink: zeros, lse
          // -inf.
          Value splits = allSplits, isQuery;
          if (Value queryLens = op.getQueryLens()) {
            Value queryLen =
                memref::LoadOp::create(b, loc, queryLens, ivs.front());
            isQuery = buildIsQueryToken(
                b, loc,
                {Value(),
                 buildQueryLength(b, loc, queryLen, geometry.queryLength)},
                token);
            splits = arith::SelectOp::create(b, loc, isQuery, splits, zero);
          }
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
            if (isQuery)
              sink = arith::SelectOp::create(b, loc, isQuery, sink,
                                             negativeInfinity(b, loc));
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

void mlir::fd::detail::populateMergeToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MergeOpLowering>(patterns.getContext());
}
