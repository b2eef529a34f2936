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

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

struct MergeToGPU : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkLowerable(op, rewriter)))
      return failure();
    AttentionGeometry geometry = op.getGeometry();
    int64_t headDim = geometry.headDim;
    int64_t numSplits = op.getNumSplits();
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
      auto lseAt = [&](Value split) {
        return e.load(f32, getKernelArgument(kernel, "partial_lse"), f32,
                      e.add(firstSplit, split), 4);
      };
      Value max =
          scf::ForOp::create(
              rewriter, e.loc, e.index(0), splits, e.index(1),
              ValueRange{e.negInf()},
              [&](OpBuilder &, Location, Value split, ValueRange state) {
                scf::YieldOp::create(
                    rewriter, e.loc,
                    ValueRange{arith::MaximumFOp::create(
                        rewriter, e.loc, state[0], lseAt(split))});
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
      auto sums = scf::ForOp::create(
          rewriter, e.loc, e.index(0), splits, e.index(1),
          ValueRange{sinkWeight, e.f32(0.0)},
          [&](OpBuilder &, Location, Value split, ValueRange state) {
            Value weight = e.exp2(e.mul(e.sub(lseAt(split), shift), log2e));
            Value partial = e.load(
                f32, getKernelArgument(kernel, "partial_output"), f32,
                e.add(e.mul(e.add(firstSplit, split), e.index(headDim)), dim),
                4);
            scf::YieldOp::create(rewriter, e.loc,
                                 ValueRange{e.add(state[0], weight),
                                            e.fma(weight, partial, state[1])});
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
