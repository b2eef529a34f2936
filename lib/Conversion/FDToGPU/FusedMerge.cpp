//===- FusedMerge.cpp - The merge in the partial kernel -------------------===//
//
// With convert-fd-to-gpu's fuse-merge the partial kernel also merges: every
// block counts itself in its (sequence, KV head)'s counter once its partials
// are written, and the block that counts last (its S * T - 1 peers, S
// splits times T row tiles, have written theirs) merges the group's rows. One
// launch instead of two, and the merge starts as soon as a group's last split
// ends instead of after the grid. The last block also resets the counter, so
// the counters, zeroed once when allocated, are zero again after every launch
// and a captured graph replays correctly (docs/KernelABI.md).
//
//===----------------------------------------------------------------------===//

#include "MergeRows.h"
#include "PartialKernelBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

/// Splits whose partials a thread loads before using any: a memory latency
/// per iteration. 16 partial vectors (4 f32 each), their weights and the 8
/// fma chains are about 90 registers, which the tensor-core kernel's 128
/// (4 blocks per SM) leave once the chunk is streamed; ptxas spills none in
/// the sweep (PTXAssemblyTest FusedMerge).
constexpr int64_t kFusedSplitsPerIteration = 16;

/// Each thread merges 4 consecutive dims of a row (one 16-byte load per
/// partial): head dims are multiples of 8.
constexpr int64_t kFusedSliceWidth = 4;

} // namespace

MergeOp mlir::fd::detail::findMergeOfPartials(PartialAttentionOp op) {
  for (Operation *user : op.getPartialOutput().getUsers())
    if (auto merge = dyn_cast<MergeOp>(user);
        merge && merge.getPartialOutput() == op.getPartialOutput() &&
        merge.getPartialLse() == op.getPartialLse())
      return merge;
  return nullptr;
}

Value mlir::fd::detail::addFusedMergeParameters(OpBuilder &b, Location loc,
                                                PartialAttentionOp op,
                                                MergeOp merge,
                                                KernelParameters &parameters) {
  for (auto [name, memref] :
       {std::pair<StringRef, Value>{"output", merge.getOutput()},
        {"lse", merge.getLse()},
        {"sinks", merge.getSinks()}})
    if (memref)
      parameters.addPointer(b, loc, name, memref);
  Value counters = memref::AllocOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic, op.getGeometry().numKVHeads},
                      b.getI32Type()),
      ValueRange{memref::DimOp::create(b, loc, op.getQuery(), 0)});
  gpu::MemsetOp::create(
      b, loc, Type(), ValueRange{}, counters,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
  parameters.addPointer(b, loc, "merge_counters", counters);
  return counters;
}

std::string mlir::fd::getReasonMergeNotFusable(Operation *op) {
  auto partial = dyn_cast<PartialAttentionOp>(op);
  // Without a schedule there is no kernel to fuse into
  // (getReasonNotLowerableToGPU says so).
  if (!partial || !partial.getScheduleAttr())
    return "";
  if (partial.getSuffixLens())
    return "convert-fd-to-gpu: fuse-merge: a shared prefix's partial kernel "
           "takes the query sequences in groups along its grid, which the "
           "fused merge's counters per (sequence, KV head) do not follow; "
           "use the merge kernel (no fuse-merge)";
  // The fused merge keeps its rows' split weights in workgroup memory: in
  // the warps' accumulators, or in a buffer of their own, which must leave
  // the kernel within the static limit.
  ::flashdecode::KernelSchedule schedule = getPartialKernelSchedule(partial);
  if (schedule.usesWarpgroupTile())
    return "convert-fd-to-gpu: fuse-merge: the warpgroup tile "
           "(form = warpgroup_tensor_cores) writes its partials from "
           "registers and keeps no workgroup buffers for the merge's "
           "weights; use the merge kernel (no fuse-merge)";
  if (schedule.clusterCtas > 1)
    return "convert-fd-to-gpu: fuse-merge: cluster_ctas = " +
           std::to_string(schedule.clusterCtas) +
           ": a chunk's blocks merge their rows in the cluster, and the "
           "cluster's blocks would each count; use the merge kernel (no "
           "fuse-merge)";
  int64_t bytes = schedule.getSharedMemoryBytes(partial.getNumSplits());
  if (bytes <= ::flashdecode::kMaxStaticSharedMemoryBytes)
    return "";
  int64_t most = schedule.getMostFusedMergeSplits();
  return ("convert-fd-to-gpu: fuse-merge: the merge's weights (" +
          Twine(schedule.layout.rows) + " rows x " +
          Twine(partial.getNumSplits()) +
          " splits) take the partial kernel to " + Twine(bytes) +
          " bytes of static shared memory, over " +
          Twine(::flashdecode::kMaxStaticSharedMemoryBytes) + "; " +
          (most > 0 ? "use at most " + Twine(most) + " splits, or "
                    : Twine("use ")) +
          "the merge kernel (no fuse-merge)")
      .str();
}

void PartialKernelBuilder::mergeIfLast(MergeOp merge) {
  Type i32 = rewriter.getI32Type();
  // Every thread's partials are written (the row tile ends at a barrier):
  // thread 0 counts the block with an acquire-release atomic at GPU scope.
  // Its release covers the block's writes that the barrier ordered before
  // it, its acquire the writes of the blocks that counted before, which the
  // next barrier orders before every thread's reads (PTX memory model:
  // causality is transitive through bar.sync; CUTLASS's semaphores and
  // cooperative groups' grid sync count in one thread alike). Written as
  // PTX: LLVM's NVPTX backend emits an acq_rel atomicrmw as a plain atom,
  // without its ordering, and fences around one would be two more round
  // trips to L2.
  auto countBlock = [&](Value address) {
    return LLVM::InlineAsmOp::create(
               rewriter, e.loc, i32, ValueRange{address},
               "atom.acq_rel.gpu.global.add.u32 $0, [$1], 1;", "=r,l",
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::tailcallkind::TailCallKind::None,
               LLVM::AsmDialectAttr::get(rewriter.getContext(),
                                         LLVM::AsmDialect::AD_ATT),
               /*operand_attrs=*/ArrayAttr())
        .getResult(0);
  };
  Value counter =
      e.address(getKernelArgument(kernel, "merge_counters"), i32,
                e.add(e.mul(batch, e.index(geometry.numKVHeads)), kvHead));
  // Thread 0 counts the block and tells the others whether it was the last
  // (1.0 or 0.0) in the first float of the warps' max and sum, free once
  // the last row tile's partials are written (its closing barrier).
  Value zero = e.index(0);
  SmallVector<Value> lastBlockFlag = {zero, zero, zero};
  auto ifCounting =
      scf::IfOp::create(rewriter, e.loc, e.equal(thread, zero), false);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(ifCounting.thenBlock());
    Value counted = countBlock(counter);
    // A (sequence, KV head) has a block per split and row tile.
    Value isLast =
        e.equal(counted, e.i32(op.getNumSplits() * layout.numRowTiles - 1));
    auto ifLast = scf::IfOp::create(rewriter, e.loc, isLast, false);
    rewriter.setInsertionPointToStart(ifLast.thenBlock());
    // Every block of the group has counted: the next launch starts at 0.
    LLVM::StoreOp::create(rewriter, e.loc, e.i32(0), counter, 4);
    rewriter.setInsertionPointAfter(ifLast);
    memref::StoreOp::create(rewriter, e.loc,
                            e.select(isLast, e.f32(1.0), e.f32(0.0)),
                            warpMaxSum, lastBlockFlag);
  }
  gpu::BarrierOp::create(rewriter, e.loc);
  Value isLast = arith::CmpFOp::create(
      rewriter, e.loc, arith::CmpFPredicate::OEQ,
      memref::LoadOp::create(rewriter, e.loc, warpMaxSum, lastBlockFlag),
      e.f32(1.0));
  auto ifLast = scf::IfOp::create(rewriter, e.loc, isLast, false);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(ifLast.thenBlock());

  // The weights (rows x S): in a buffer of their own when the kernel has
  // one (getPartialKernelWorkgroupBuffers), else in the warps'
  // accumulators, free again, as one array.
  Value mergeWeights;
  auto workgroupBuffers = kernel.getWorkgroupAttributions();
  if (workgroupBuffers.size() > kMergeWeightsBuffer) {
    mergeWeights = workgroupBuffers[kMergeWeightsBuffer];
  } else {
    auto accumulators = cast<MemRefType>(warpAccumulators.getType());
    int64_t capacity = accumulators.getNumElements();
    mergeWeights = memref::ReinterpretCastOp::create(
        rewriter, e.loc,
        MemRefType::get({capacity}, accumulators.getElementType(),
                        StridedLayoutAttr::get(rewriter.getContext(), 0, {1}),
                        accumulators.getMemorySpace()),
        warpAccumulators, /*offset=*/0, ArrayRef<int64_t>{capacity},
        ArrayRef<int64_t>{1});
  }
  MergeBuffers buffers{
      partialOutput,
      partialLse,
      getKernelArgument(kernel, "output"),
      getKernelArgument(kernel, "lse"),
      getKernelArgument(kernel, "sinks"),
      mergeWeights,
      op.getNumSplits(),
      geometry.valueHeadDim,
      cast<MemRefType>(merge.getOutput().getType()).getElementType()};
  // A padding token's rows get zeros and lse -inf, as the merge kernel
  // gives them.
  auto isQueryRow = [&](Value blockRow) -> Value {
    if (!rules.perSequenceQueryLengths)
      return Value();
    return buildIsQueryToken(rewriter, e.loc, chunk.sequence,
                             tokenOf(blockRow));
  };
  // Each warp weighs the splits of every fourth row, then each thread sums
  // 4-element slices of the rows.
  e.forLoop(warp, e.index(layout.rows), PartialKernelLayout::kWarps,
            [&](Value blockRow) {
              emitMergeWeights(e, buffers, queryRow(blockRow),
                               queryHeadOf(blockRow), isQueryRow(blockRow),
                               lane, blockRow);
            });
  gpu::BarrierOp::create(rewriter, e.loc);
  forEachElement(layout.rows, geometry.valueHeadDim / kFusedSliceWidth,
                 [&](Value blockRow, Value sliceInRow) {
                   WeightedSum(e, buffers, queryRow(blockRow),
                               e.mul(sliceInRow, e.index(kFusedSliceWidth)),
                               kFusedSliceWidth, isQueryRow(blockRow),
                               kFusedSplitsPerIteration)
                       .emit(blockRow);
                 });
}
