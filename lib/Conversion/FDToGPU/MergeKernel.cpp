//===- MergeKernel.cpp - fd.merge to a kernel -----------------------------===//
//
// One block per (query head, query token, sequence), one thread per output
// element: the exact log-sum-exp merge of the split partials.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "PopulatePatterns.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

/// The most splits an iteration of the merge's loops loads before using
/// any: the partials are independent, and a loop that used each load at once
/// would wait one memory latency per split (63 splits in Llama-3-8B's B=1
/// plan: 43.8 us modeled on fdemu's H200 with one split per iteration, 37.7
/// with 8, 36.9 with 32). Fewer splits take one iteration of the next power
/// of two.
constexpr int64_t kMaxSplitsPerIteration = 32;

struct MergeToGPU : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkLowerable(op, rewriter)))
      return failure();
    AttentionGeometry geometry = op.getGeometry();
    int64_t headDim = geometry.headDim;
    int64_t numSplits = op.getNumSplits();
    const int64_t splitsPerIteration = std::min<int64_t>(
        kMaxSplitsPerIteration, llvm::PowerOf2Ceil(numSplits));
    int64_t queryHeads = geometry.numQueryHeads;
    int64_t queryLength = geometry.queryLength;
    Type outputElement =
        cast<MemRefType>(op.getOutput().getType()).getElementType();

    // Partials, lse partials, output, then the lse, the sinks and the query
    // lengths when there (docs/KernelABI.md).
    Location loc = op.getLoc();
    KernelParameters parameters;
    for (auto [name, memref] :
         {std::pair<StringRef, Value>{"partial_output", op.getPartialOutput()},
          {"partial_lse", op.getPartialLse()},
          {"output", op.getOutput()},
          {"lse", op.getLse()},
          {"sinks", op.getSinks()},
          {"query_lens", op.getQueryLens()}})
      if (memref)
        parameters.addPointer(rewriter, loc, name, memref);
    gpu::GPUFuncOp kernel =
        createKernel(op, "fd_merge", parameters, {},
                     {static_cast<int32_t>(headDim), 1, 1}, rewriter);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      Block &entry = kernel.getBody().front();
      rewriter.setInsertionPointToStart(&entry);
      KernelEmitter e{rewriter, kernel.getLoc()};
      Value dim = gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value head = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value token = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::y);
      Value batch = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::z);
      Value row = e.add(e.mul(e.add(e.mul(batch, e.index(queryLength)), token),
                              e.index(queryHeads)),
                        head);
      Value firstSplit = e.mul(row, e.index(numSplits));
      Type f32 = rewriter.getF32Type();
      // A padding token's row (AttentionUtils.h) reads no partial (the
      // partial kernel left them unwritten) and no sink: zeros, lse -inf.
      Value splits = e.index(numSplits), isQuery;
      if (op.getQueryLens()) {
        Type i32 = rewriter.getI32Type();
        Value queryLen =
            e.load(i32, getKernelArgument(kernel, "query_lens"), i32, batch, 4);
        isQuery = buildIsQueryToken(
            rewriter, e.loc,
            {Value(), buildQueryLength(rewriter, e.loc, queryLen, queryLength)},
            token);
        splits = e.select(isQuery, splits, e.index(0));
      }
      // Split `first + i` of an iteration is real if below `splits`; a
      // split past them reads the last one's and counts as an empty chunk
      // (lse -inf).
      auto splitOf = [&](Value first, int64_t i) {
        Value split = e.add(first, e.index(i));
        return std::pair(
            e.lessThan(split, splits),
            e.add(firstSplit, e.min(split, e.index(numSplits - 1))));
      };
      auto lseOf = [&](std::pair<Value, Value> split) {
        Value lse = e.load(f32, getKernelArgument(kernel, "partial_lse"), f32,
                           split.second, 4);
        return e.select(split.first, lse, e.negInf());
      };
      auto forEachIteration =
          [&](ValueRange initial,
              function_ref<SmallVector<Value>(Value first, ValueRange state)>
                  body) {
            return scf::ForOp::create(
                rewriter, e.loc, e.index(0), splits,
                e.index(splitsPerIteration), initial,
                [&](OpBuilder &, Location, Value first, ValueRange state) {
                  scf::YieldOp::create(rewriter, e.loc, body(first, state));
                });
          };
      Value max =
          forEachIteration(
              ValueRange{e.negInf()},
              [&](Value first, ValueRange state) -> SmallVector<Value> {
                SmallVector<Value> lses;
                for (int64_t i = 0; i < splitsPerIteration; ++i)
                  lses.push_back(lseOf(splitOf(first, i)));
                Value max = state[0];
                for (Value lse : lses)
                  max = arith::MaximumFOp::create(rewriter, e.loc, max, lse);
                return {max};
              })
              .getResult(0);
      // A sink is one more partial (AttentionUtils.h): its lse is the sink,
      // its output zero.
      Value sink;
      if (op.getSinks()) {
        sink = e.load(f32, getKernelArgument(kernel, "sinks"), f32, head, 4);
        if (isQuery)
          sink = e.select(isQuery, sink, e.negInf());
        max = arith::MaximumFOp::create(rewriter, e.loc, max, sink);
      }
      Value shift = buildMergeShift(rewriter, e.loc, max);
      Value log2e = e.f32(llvm::numbers::log2e);
      Value sinkWeight =
          sink ? e.exp2(e.mul(e.sub(sink, shift), log2e)) : e.f32(0.0);
      auto sums = forEachIteration(
          ValueRange{sinkWeight, e.f32(0.0)},
          [&](Value first, ValueRange state) -> SmallVector<Value> {
            SmallVector<Value> lses, partials;
            for (int64_t i = 0; i < splitsPerIteration; ++i) {
              auto split = splitOf(first, i);
              lses.push_back(lseOf(split));
              Value partial =
                  e.load(f32, getKernelArgument(kernel, "partial_output"), f32,
                         e.add(e.mul(split.second, e.index(headDim)), dim), 4);
              partials.push_back(e.select(split.first, partial, e.f32(0.0)));
            }
            Value sum = state[0], accumulator = state[1];
            for (auto [lse, partial] : llvm::zip_equal(lses, partials)) {
              Value weight = e.exp2(e.mul(e.sub(lse, shift), log2e));
              sum = e.add(sum, weight);
              accumulator = e.fma(weight, partial, accumulator);
            }
            return {sum, accumulator};
          });
      Value sum = sums.getResult(0);
      Value hasKeys = buildSawKeys(rewriter, e.loc, max);
      Value output = e.select(
          hasKeys,
          arith::DivFOp::create(rewriter, e.loc, sums.getResult(1), sum),
          e.f32(0.0));
      if (outputElement != f32)
        output =
            arith::TruncFOp::create(rewriter, e.loc, outputElement, output);
      e.store(output, getKernelArgument(kernel, "output"),
              e.add(e.mul(row, e.index(headDim)), dim));
      if (Value lseOutput = getKernelArgument(kernel, "lse")) {
        auto writeLse =
            scf::IfOp::create(rewriter, e.loc, e.equal(dim, e.index(0)), false);
        rewriter.setInsertionPointToStart(writeLse.thenBlock());
        Value lse = e.add(max, e.mul(e.log2(sum), e.f32(llvm::numbers::ln2)));
        e.store(e.select(hasKeys, lse, e.negInf()), lseOutput, row);
        rewriter.setInsertionPointAfter(writeLse);
      }
      gpu::ReturnOp::create(rewriter, e.loc);
    }

    KernelEmitter e{rewriter, loc};
    Value batch = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    launchKernel(
        rewriter, loc, kernel,
        {{e.index(queryHeads)}, {e.index(queryLength)}, {batch, "batch"}},
        {headDim, 1, 1}, parameters);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::detail::populateMergeToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<MergeToGPU>(patterns.getContext());
}
