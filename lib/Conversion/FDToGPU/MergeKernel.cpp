//===- MergeKernel.cpp - fd.merge to a kernel -----------------------------===//
//
// One block per (query head, query token, sequence), one thread per output
// element (where few rows merge many splits, blocks per slice of the row,
// groups of threads per share of the splits): the exact log-sum-exp merge of
// the split partials.
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
/// (ptxas, no spills): such plans have few rows, so few blocks. Blocks of
/// more than 256 threads leave a thread 65536 / threads registers (128 at
/// 512): 64 splits in flight fit (ptxas: 101 registers).
static int64_t getSplitsPerIteration(int64_t threads) {
  return threads > 256 ? 64 : 128;
}

/// How merge blocks cover an output row: `slices` blocks of `sliceDims`
/// consecutive dims, each of `groups` groups of a thread a dim, group g
/// summing the g-th share of the splits (the shares meet in workgroup
/// memory). A warp keeps about 1 KB of loads in flight (fdemu's calibrated
/// model), so where few rows merge many splits one thread a dim summing
/// them all leaves the GPU's DRAM waiting on too few warps (MLA at 16
/// heads and B = 1: 16 rows, 121 splits, 16 blocks of 16 warps took 4.9
/// us; bench/RESULTS.md): a group for each 4 splits or more, up to 16, in
/// blocks of at most 512 threads. Shares of 4 to 8 splits keep a warp's
/// partials and its lses in flight at once, one memory latency: 16 to 64
/// splits merged in 0.57 to 0.60 us against 0.94 to 0.98 in shares of 12
/// to 24, and 128 (Llama-3-8B) in 0.70 against 0.99. Every warp weighs its
/// row, so groups past about a wave of 512-thread blocks a sequence (128)
/// cost more than their loads save: MLA's 121 splits in 16 shares of 8
/// took 1.03 us against 0.99 in 8 of 16, and Kimi K2's 64 rows over 33
/// splits 0.43 us more in 8 groups than in 2.
struct MergeBlockShape {
  int64_t groups, sliceDims, slices;

  static MergeBlockShape get(int64_t headDim, int64_t numSplits,
                             int64_t rowsPerSequence) {
    constexpr int64_t kSplitsPerShare = 4, kMostGroups = 16, kMostThreads = 512,
                      kMostThreadsPerSequence = 128 * kMostThreads;
    int64_t groups = 1;
    while (groups < kMostGroups && numSplits >= 2 * groups * kSplitsPerShare &&
           2 * groups * rowsPerSequence * headDim <= kMostThreadsPerSequence)
      groups *= 2;
    // Slices keep whole warps; a row that will not slice takes fewer
    // groups.
    int64_t sliceDims = headDim;
    while (groups * sliceDims > kMostThreads) {
      if (sliceDims % 64 == 0)
        sliceDims /= 2;
      else
        groups /= 2;
    }
    return {groups, sliceDims, headDim / sliceDims};
  }
  int64_t getThreads() const { return groups * sliceDims; }
  /// The splits of a group's share (the last may overrun the splits).
  int64_t getShareSplits(int64_t numSplits) const {
    return llvm::divideCeil(numSplits, groups);
  }
};

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
    const MergeBlockShape shape =
        MergeBlockShape::get(headDim, numSplits, queryHeads * queryLength);
    const int32_t threads = static_cast<int32_t>(shape.getThreads());
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
    // The row's split weights (MergeRows.h), and the groups' sums.
    auto workgroup = gpu::AddressSpaceAttr::get(
        rewriter.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace());
    SmallVector<Type> workgroupBuffers = {
        MemRefType::get({MergeBuffers::getWeightsPerRow(numSplits)},
                        rewriter.getF32Type(), nullptr, workgroup)};
    if (shape.groups > 1)
      workgroupBuffers.push_back(MemRefType::get(
          {shape.getThreads()}, rewriter.getF32Type(), nullptr, workgroup));
    gpu::GPUFuncOp kernel =
        createKernel(op, "fd_merge", parameters, workgroupBuffers,
                     {threads, 1, 1}, rewriter);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      Block &entry = kernel.getBody().front();
      rewriter.setInsertionPointToStart(&entry);
      KernelEmitter e{rewriter, kernel.getLoc()};
      Value thread =
          gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      // A row's slices are consecutive blocks along x; a slice's groups
      // consecutive runs of threads.
      Value head = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
      Value slice = e.index(0), group = e.index(0), dimInSlice = thread;
      if (shape.slices > 1) {
        slice = arith::RemUIOp::create(rewriter, e.loc, head,
                                       e.index(shape.slices));
        head = arith::DivUIOp::create(rewriter, e.loc, head,
                                      e.index(shape.slices));
      }
      if (shape.groups > 1) {
        group = arith::DivUIOp::create(rewriter, e.loc, thread,
                                       e.index(shape.sliceDims));
        dimInSlice = arith::RemUIOp::create(rewriter, e.loc, thread,
                                            e.index(shape.sliceDims));
      }
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
                           outputElement,
                           shape.slices > 1 ? e.equal(slice, e.index(0))
                                            : Value()};
      // Every thread loads its first iteration's partials and weighs the
      // splits meanwhile, warp 0 stores the weights (head dims are at least
      // 32), then every thread sums its element over its group's share, and
      // the first group adds the others' sums. Every warp weighs (its lses'
      // loads first), not warp 0 alone: LLVM sinks loads into the one
      // branch that uses them, a memory latency after the partials' (fdemu,
      // gpt-oss B=1 L=32k: 1191 -> 1114 cycles). A head dim that is not a
      // multiple of 32 has a partial last warp, whose shuffles would read
      // lanes that do not exist: there warp 0 weighs alone.
      Value zero = e.index(0);
      Value firstDim =
          e.add(e.mul(slice, e.index(shape.sliceDims)), dimInSlice);
      const int64_t shareSplits = shape.getShareSplits(numSplits);
      WeightedSum sum(e, buffers, row, firstDim, /*width=*/1, isQuery,
                      getSplitsPerIteration(threads),
                      shape.groups > 1 ? e.mul(group, e.index(shareSplits))
                                       : Value(),
                      shareSplits);
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
      if (shape.groups == 1) {
        sum.emit(zero);
      } else {
        Value sums = kernel.getWorkgroupAttributions()[1];
        memref::StoreOp::create(rewriter, e.loc, sum.sum(zero).front(), sums,
                                thread);
        gpu::BarrierOp::create(rewriter, e.loc);
        auto ifFirstGroup = scf::IfOp::create(
            rewriter, e.loc, e.equal(group, e.index(0)), false);
        rewriter.setInsertionPointToStart(ifFirstGroup.thenBlock());
        Value total;
        for (int64_t g = 0; g < shape.groups; ++g) {
          Value groupSum = memref::LoadOp::create(
              rewriter, e.loc, sums,
              ValueRange{e.add(dimInSlice, e.index(g * shape.sliceDims))});
          total = total ? e.add(total, groupSum) : groupSum;
        }
        sum.store({total});
        rewriter.setInsertionPointAfter(ifFirstGroup);
      }
      gpu::ReturnOp::create(rewriter, e.loc);
    }

    KernelEmitter e{rewriter, loc};
    Value batch = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    launchKernel(rewriter, loc, kernel,
                 {{e.index(queryHeads * shape.slices)},
                  {e.index(queryLength)},
                  {batch, "batch"}},
                 {threads, 1, 1}, parameters);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::detail::populateMergeToGPUPatterns(RewritePatternSet &patterns) {
  patterns.add<MergeToGPU>(patterns.getContext());
}
