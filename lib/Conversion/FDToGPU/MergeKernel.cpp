//===- MergeKernel.cpp - fd.merge to a kernel -----------------------------===//
//
// One block per (query head, query token, sequence), one thread per output
// element (two in rows over 256): the exact log-sum-exp merge of the split
// partials.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "MergeRows.h"
#include "PopulatePatterns.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

/// The partials a thread loads per iteration before using any: a memory
/// latency per iteration rather than per split (modeled on fdemu's H200 in
/// compiler 0.2.8's one-step merge, Llama-3-8B at B=1 with 63 splits: 43.8
/// us with one split per iteration, 36.9 with 32). 64 made the 64-split
/// plans of B=1 (Llama-3-8B, GQA-8, gpt-oss at L=32k) one iteration: 0.2 us
/// less per graph layer in 0.2.12. 128 make MQA's plan at B=1 (94 splits)
/// one too: its merge took 0.88 us in two rounds, longer than the next
/// layer's launch it overlaps, and takes 0.58 in one (0.19 us less per graph
/// layer in 0.2.20). From 128 splits up a thread holds 155 to 166 registers
/// (ptxas, no spills): such plans have few rows, so few blocks.
constexpr int64_t kSplitsPerIteration = 128;

struct MergeToGPU : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkLowerable(op, rewriter)))
      return failure();
    AttentionGeometry geometry = op.getGeometry();
    int64_t headDim = geometry.headDim;
    const auto [width, threads] = MergeRowThreads::get(headDim);
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
    // The row's split weights (MergeRows.h).
    auto workgroup = gpu::AddressSpaceAttr::get(
        rewriter.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
    gpu::GPUFuncOp kernel = createKernel(
        op, "fd_merge", parameters,
        {MemRefType::get({MergeBuffers::getWeightsPerRow(numSplits)},
                         rewriter.getF32Type(), nullptr, workgroup)},
        {threads, 1, 1}, rewriter);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      Block &entry = kernel.getBody().front();
      rewriter.setInsertionPointToStart(&entry);
      KernelEmitter e{rewriter, kernel.getLoc()};
      Value thread =
          gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value head = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value token = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::y);
      Value batch = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::z);
      Value row = e.add(e.mul(e.add(e.mul(batch, e.index(queryLength)), token),
                              e.index(queryHeads)),
                        head);
      // A padding token's row (AttentionUtils.h) reads no partial and no
      // lse (the partial kernel left them unwritten), and its sink counts
      // as -inf: zeros, lse -inf.
      Value isQuery;
      if (op.getQueryLens()) {
        Type i32 = rewriter.getI32Type();
        Value queryLen =
            e.load(i32, getKernelArgument(kernel, "query_lens"), i32, batch, 4);
        isQuery = buildIsQueryToken(
            rewriter, e.loc,
            {Value(), buildQueryLength(rewriter, e.loc, queryLen, queryLength)},
            token);
      }
      MergeBuffers buffers{getKernelArgument(kernel, "partial_output"),
                           getKernelArgument(kernel, "partial_lse"),
                           getKernelArgument(kernel, "output"),
                           getKernelArgument(kernel, "lse"),
                           getKernelArgument(kernel, "sinks"),
                           kernel.getWorkgroupAttributions()[0],
                           numSplits,
                           headDim,
                           outputElement};
      // Every thread loads its first 128 partials and weighs the splits
      // meanwhile, warp 0 stores the weights (head dims are at least 32),
      // then every thread sums its element. Every warp weighs (its lses'
      // loads first), not warp 0 alone: LLVM sinks loads into the one
      // branch that uses them, a memory latency after the partials' (fdemu,
      // gpt-oss B=1 L=32k: 1191 -> 1114 cycles). A head dim that is not a
      // multiple of 32 has a partial last warp, whose shuffles would read
      // lanes that do not exist: there warp 0 weighs alone.
      Value zero = e.index(0);
      WeightedSum sum(e, buffers, row, e.mul(thread, e.index(width)), width,
                      isQuery, kSplitsPerIteration / width);
      if (threads % 32 == 0) {
        Value lane =
            arith::RemUIOp::create(rewriter, e.loc, thread, e.index(32));
        SmallVector<Value> lses = loadMergeLses(e, buffers, row, isQuery, lane);
        sum.preloadFirstIteration();
        emitMergeWeights(e, buffers, row, head, isQuery, lane, zero,
                         e.lessThan(thread, e.index(32)), lses);
      } else {
        sum.preloadFirstIteration();
        auto ifFirstWarp = scf::IfOp::create(
            rewriter, e.loc, e.lessThan(thread, e.index(32)), false);
        rewriter.setInsertionPointToStart(ifFirstWarp.thenBlock());
        emitMergeWeights(e, buffers, row, head, isQuery, thread, zero);
        rewriter.setInsertionPointAfter(ifFirstWarp);
      }
      gpu::BarrierOp::create(rewriter, e.loc);
      sum.emit(zero);
      gpu::ReturnOp::create(rewriter, e.loc);
    }

    KernelEmitter e{rewriter, loc};
    Value batch = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    launchKernel(
        rewriter, loc, kernel,
        {{e.index(queryHeads)}, {e.index(queryLength)}, {batch, "batch"}},
        {threads, 1, 1}, parameters);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::detail::populateMergeToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<MergeToGPU>(patterns.getContext());
}
