//===- MergeStatesKernel.cpp - fd.merge_states to a kernel ----------------===//
//
// One block per (row, head), one thread per output element, as the merge
// kernel: each thread reads the row's lses itself
// (the block's threads read the same few words, from L1), weighs its
// elements of every state that is not empty (an empty one's loads read its
// lse instead, so they need no branch), and writes them; thread 0
// writes the row's lse once every thread has read the lses (a barrier), so
// an in-place merge, whose output lse is an operand's, reads before it is
// overwritten.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "MergeRows.h"
#include "PopulatePatterns.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

struct MergeStatesToGPU : OpRewritePattern<MergeStatesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeStatesOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkLowerable(op, rewriter)))
      return failure();
    const int64_t headDim = op.getHeadDim(), heads = op.getNumHeads();
    const int32_t threads = static_cast<int32_t>(headDim);
    const bool base2 = op.getLseBase2();
    Type element = cast<MemRefType>(op.getOutput().getType()).getElementType();
    SmallVector<int64_t> counts;
    for (Value states : op.getStates())
      counts.push_back(cast<MemRefType>(states.getType()).getShape()[1]);

    // states_0.., state_lses_0.., output, lse, then the mask when there.
    Location loc = op.getLoc();
    KernelParameters parameters;
    for (auto [index, states] : llvm::enumerate(op.getStates()))
      parameters.addPointer(rewriter, loc, "states_" + std::to_string(index),
                            states);
    for (auto [index, lses] : llvm::enumerate(op.getStateLses()))
      parameters.addPointer(rewriter, loc,
                            "state_lses_" + std::to_string(index), lses);
    parameters.addPointer(rewriter, loc, "output", op.getOutput());
    parameters.addPointer(rewriter, loc, "lse", op.getLse());
    if (op.getMask())
      parameters.addPointer(rewriter, loc, "mask", op.getMask());
    gpu::GPUFuncOp kernel = createKernel(op, "fd_merge_states", parameters, {},
                                         {threads, 1, 1}, rewriter);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&kernel.getBody().front());
      KernelEmitter e{rewriter, kernel.getLoc()};
      Value thread =
          gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value row = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value head = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::y);
      // A row the mask leaves is not touched; the branch is the block's.
      if (Value mask = getKernelArgument(kernel, "mask")) {
        Type i8 = rewriter.getI8Type();
        Value flag = e.load(i8, mask, i8, row, 1);
        Value merges = arith::CmpIOp::create(
            rewriter, e.loc, arith::CmpIPredicate::ne, flag,
            arith::ConstantIntOp::create(rewriter, e.loc, i8, 0));
        auto ifMerges = scf::IfOp::create(rewriter, e.loc, merges, false);
        rewriter.setInsertionPointToStart(ifMerges.thenBlock());
      }
      emitMerge(e, kernel, counts, heads, headDim, base2, element, row, head,
                thread);
      rewriter.setInsertionPointToEnd(&kernel.getBody().front());
      gpu::ReturnOp::create(rewriter, e.loc);
    }

    KernelEmitter e{rewriter, loc};
    Value rows = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    launchKernel(rewriter, loc, kernel,
                 {{rows, "batch"}, {e.index(heads)}, {e.index(1)}},
                 {threads, 1, 1}, parameters);
    rewriter.eraseOp(op);
    return success();
  }

private:
  /// The merge of output row `row`, head `head`: element `thread` of it by
  /// each thread, and its lse by thread 0.
  static void emitMerge(KernelEmitter &e, gpu::GPUFuncOp kernel,
                        ArrayRef<int64_t> counts, int64_t heads,
                        int64_t headDim, bool base2, Type element, Value row,
                        Value head, Value thread) {
    OpBuilder &b = e.b;
    Type f32 = b.getF32Type();
    Value posInf = e.f32(std::numeric_limits<float>::infinity());
    // State n of operand i: its lse's address, its lse in base 2 (-inf when
    // empty: -inf or +inf), and whether it is empty.
    struct StateLse {
      Value address, lse, isEmpty;
    };
    auto loadLse = [&](size_t operand, Value n) -> StateLse {
      Value lses =
          getKernelArgument(kernel, "state_lses_" + std::to_string(operand));
      Value address =
          e.address(lses, f32,
                    e.add(e.mul(e.add(e.mul(row, e.index(counts[operand])), n),
                                e.index(heads)),
                          head));
      Value lse = LLVM::LoadOp::create(b, e.loc, f32, address, 4);
      Value isEmpty = arith::OrIOp::create(
          b, e.loc, e.isNegInf(lse),
          arith::CmpFOp::create(b, e.loc, arith::CmpFPredicate::OEQ, lse,
                                posInf));
      if (!base2)
        lse = e.mul(lse, e.f32(llvm::numbers::log2e));
      return {address, e.select(isEmpty, e.negInf(), lse), isEmpty};
    };
    // Runs `body(operand, n, values)` over every state, threading values.
    auto forEachState =
        [&](SmallVector<Value> values,
            function_ref<SmallVector<Value>(size_t, Value, ValueRange)> body) {
          for (auto [operand, count] : llvm::enumerate(counts)) {
            auto loop = scf::ForOp::create(
                b, e.loc, e.index(0), e.index(count), e.index(1), values,
                [&](OpBuilder &, Location, Value n, ValueRange current) {
                  scf::YieldOp::create(b, e.loc, body(operand, n, current));
                });
            values = SmallVector<Value>(loop.getResults());
          }
          return values;
        };

    Value max = forEachState(
        {e.negInf()}, [&](size_t operand, Value n, ValueRange current) {
          return SmallVector<Value>{e.max(current[0], loadLse(operand, n).lse)};
        })[0];
    Value shift = buildMergeShift(b, e.loc, max);
    SmallVector<Value> initial(2, e.f32(0.0));
    SmallVector<Value> sums =
        forEachState(initial, [&](size_t operand, Value n, ValueRange current) {
          StateLse state = loadLse(operand, n);
          Value weight = e.exp2(e.sub(state.lse, shift));
          // An empty state's elements are not read: its loads read its lse
          // instead (written, in bounds) and count for nothing. Loads without a
          // branch issue together, one memory latency for the row's states.
          Value states =
              getKernelArgument(kernel, "states_" + std::to_string(operand));
          Value base =
              e.mul(e.add(e.mul(e.add(e.mul(row, e.index(counts[operand])), n),
                                e.index(heads)),
                          head),
                    e.index(headDim));
          // The load is aligned to its element's size wherever it reads (the
          // lse's 4 bytes hold one f32 or 16-bit load in bounds): the ABI's
          // alignment.
          Value address = LLVM::SelectOp::create(
              b, e.loc, state.isEmpty, state.address,
              e.address(states, element, e.add(base, thread)));
          Value value = e.toF32(LLVM::LoadOp::create(
              b, e.loc, element, address, element.getIntOrFloatBitWidth() / 8));
          return SmallVector<Value>{e.add(current[0], weight),
                                    e.select(state.isEmpty, current[1],
                                             e.fma(weight, value, current[1]))};
        });
    Value hasKeys = buildSawKeys(b, e.loc, max);
    Value normalizer =
        e.select(hasKeys, arith::DivFOp::create(b, e.loc, e.f32(1.0), sums[0]),
                 e.f32(0.0));
    Value output = getKernelArgument(kernel, "output");
    Value value = e.mul(sums[1], normalizer);
    if (element != f32)
      value = arith::TruncFOp::create(b, e.loc, element, value);
    e.store(
        value, output,
        e.add(e.mul(e.add(e.mul(row, e.index(heads)), head), e.index(headDim)),
              thread));
    // Every thread has read the lses before thread 0 overwrites one.
    gpu::BarrierOp::create(b, e.loc);
    auto ifFirst =
        scf::IfOp::create(b, e.loc, e.equal(thread, e.index(0)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    Value lse = e.add(max, e.log2(sums[0]));
    if (!base2)
      lse = e.mul(lse, e.f32(llvm::numbers::ln2));
    e.store(e.select(hasKeys, lse, e.negInf()),
            getKernelArgument(kernel, "lse"),
            e.add(e.mul(row, e.index(heads)), head));
  }
};

} // namespace

void mlir::fd::detail::populateMergeStatesToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MergeStatesToGPU>(patterns.getContext());
}
