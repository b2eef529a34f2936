//===- MergeStatesToLoops.cpp - fd.merge_states to loops ------------------===//
//
// The CPU lowering of the standalone merge: a loop nest over (row, head)
// whose body weighs every state of the row, as fd.merge_states specifies.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

struct MergeStatesOpLowering : OpConversionPattern<MergeStatesOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(MergeStatesOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    const int64_t numStates = op.getNumStates();
    const bool base2 = op.getLseBase2();
    Type f32 = rewriter.getF32Type();
    // Per state of the row: its weight, and whether it is empty (not read).
    Value weights =
        allocateScratch(rewriter, op, MemRefType::get({numStates}, f32));
    Value empties = allocateScratch(
        rewriter, op, MemRefType::get({numStates}, rewriter.getI1Type()));
    Value zero = indexConstant(rewriter, loc, 0);
    Value one = indexConstant(rewriter, loc, 1);
    Value rows = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    Value heads = indexConstant(rewriter, loc, op.getNumHeads());
    Value headDim = indexConstant(rewriter, loc, op.getHeadDim());

    // Calls `body(b, loc, index, state, operand, n)` for every state: the
    // state's index among all, its operand, and its index there.
    auto forEachState =
        [&](OpBuilder &b, Location loc, ValueRange inits,
            function_ref<SmallVector<Value>(OpBuilder &, Location, Value,
                                            unsigned, Value, ValueRange)>
                body) {
          SmallVector<Value> values(inits);
          int64_t first = 0;
          for (auto [operand, states] : llvm::enumerate(op.getStates())) {
            int64_t count = cast<MemRefType>(states.getType()).getShape()[1];
            auto loop = scf::ForOp::create(
                b, loc, zero, indexConstant(b, loc, count), one, values,
                [&](OpBuilder &b, Location loc, Value n, ValueRange current) {
                  Value index = arith::AddIOp::create(
                      b, loc, n, indexConstant(b, loc, first));
                  scf::YieldOp::create(
                      b, loc, body(b, loc, index, operand, n, current));
                });
            values = SmallVector<Value>(loop.getResults());
            first += count;
          }
          return values;
        };

    auto mergeRow = [&](OpBuilder &b, Location loc, Value row, Value head) {
      // The lses, +inf read as -inf (empty): their max, NaN if any is.
      Value negInf = negativeInfinity(b, loc);
      Value posInf =
          f32Constant(b, loc, std::numeric_limits<float>::infinity());
      Value max = forEachState(
          b, loc, {negInf},
          [&](OpBuilder &b, Location loc, Value index, unsigned operand,
              Value n, ValueRange current) -> SmallVector<Value> {
            Value lse = memref::LoadOp::create(
                b, loc, op.getStateLses()[operand], ValueRange{row, n, head});
            Value isEmpty = arith::OrIOp::create(
                b, loc,
                arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse,
                                      negInf),
                arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse,
                                      posInf));
            lse = arith::SelectOp::create(b, loc, isEmpty, negInf, lse);
            memref::StoreOp::create(b, loc, lse, weights, index);
            memref::StoreOp::create(b, loc, isEmpty, empties, index);
            return {arith::MaximumFOp::create(b, loc, current[0], lse)};
          })[0];
      Value shift = buildMergeShift(b, loc, max);
      auto power = [&](Value exponent) -> Value {
        if (base2)
          return math::Exp2Op::create(b, loc, exponent);
        return math::ExpOp::create(b, loc, exponent);
      };
      Value sum = forEachState(
          b, loc, {f32Constant(b, loc, 0.0f)},
          [&](OpBuilder &b, Location loc, Value index, unsigned, Value,
              ValueRange current) -> SmallVector<Value> {
            Value lse = memref::LoadOp::create(b, loc, weights, index);
            Value weight = power(arith::SubFOp::create(b, loc, lse, shift));
            memref::StoreOp::create(b, loc, weight, weights, index);
            return {arith::AddFOp::create(b, loc, current[0], weight)};
          })[0];
      Value normalizer = reciprocalOrZero(b, loc, {max, sum});
      // Element by element, every state of the row read before its output
      // element is written (the output may be a state's memory).
      scf::ForOp::create(
          b, loc, zero, headDim, one, ValueRange{},
          [&](OpBuilder &b, Location loc, Value dim, ValueRange) {
            Value weighted = forEachState(
                b, loc, {f32Constant(b, loc, 0.0f)},
                [&](OpBuilder &b, Location loc, Value index, unsigned operand,
                    Value n, ValueRange current) -> SmallVector<Value> {
                  Value isEmpty =
                      memref::LoadOp::create(b, loc, empties, index);
                  auto ifRead = scf::IfOp::create(b, loc, TypeRange{f32},
                                                  isEmpty, /*withElse=*/true);
                  {
                    OpBuilder::InsertionGuard guard(b);
                    b.setInsertionPointToStart(ifRead.thenBlock());
                    scf::YieldOp::create(b, loc, current[0]);
                    b.setInsertionPointToStart(ifRead.elseBlock());
                    Value state = loadAsF32(b, loc, op.getStates()[operand],
                                            ValueRange{row, n, head, dim});
                    Value weight =
                        memref::LoadOp::create(b, loc, weights, index);
                    scf::YieldOp::create(
                        b, loc,
                        ValueRange{arith::AddFOp::create(
                            b, loc, current[0],
                            arith::MulFOp::create(b, loc, weight, state))});
                  }
                  return {ifRead.getResult(0)};
                })[0];
            storeFromF32(b, loc,
                         arith::MulFOp::create(b, loc, weighted, normalizer),
                         op.getOutput(), ValueRange{row, head, dim});
            scf::YieldOp::create(b, loc);
          });
      Value logSum = base2 ? math::Log2Op::create(b, loc, sum).getResult()
                           : math::LogOp::create(b, loc, sum).getResult();
      Value lse = arith::SelectOp::create(
          b, loc, buildSawKeys(b, loc, max),
          arith::AddFOp::create(b, loc, max, logSum), negInf);
      memref::StoreOp::create(b, loc, lse, op.getLse(), ValueRange{row, head});
    };

    scf::ForOp::create(
        rewriter, loc, zero, rows, one, ValueRange{},
        [&](OpBuilder &b, Location loc, Value row, ValueRange) {
          auto mergeHeads = [&](OpBuilder &b, Location loc) {
            scf::ForOp::create(
                b, loc, zero, heads, one, ValueRange{},
                [&](OpBuilder &b, Location loc, Value head, ValueRange) {
                  mergeRow(b, loc, row, head);
                  scf::YieldOp::create(b, loc);
                });
          };
          if (Value mask = op.getMask()) {
            Value flag = memref::LoadOp::create(b, loc, mask, row);
            Value merges = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ne, flag,
                arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0)));
            auto ifMerges = scf::IfOp::create(b, loc, merges, false);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(ifMerges.thenBlock());
            mergeHeads(b, loc);
          } else {
            mergeHeads(b, loc);
          }
          scf::YieldOp::create(b, loc);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::detail::populateMergeStatesToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MergeStatesOpLowering>(patterns.getContext());
}
