//===- ClusterMerge.cpp - A chunk's blocks merged in their cluster --------===//
//
// With cluster_ctas = C, a chunk's C blocks form a thread block cluster,
// each streaming a C-th of its keys. Their rows meet in distributed shared
// memory instead of global memory: after the cluster barrier each block
// reads the others' row lses and, for its C-th of the value dims, their
// weighted accumulators, and writes the chunk's one partial, so the merge
// reads S partials however many blocks streamed them. A second barrier
// keeps every block's workgroup memory alive until the others have read
// it.
//
//===----------------------------------------------------------------------===//

#include "PartialKernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {
/// PTX's .shared::cluster window (NVVMMemorySpace::SharedCluster).
constexpr unsigned kSharedClusterAddressSpace = 7;
} // namespace

void PartialKernelBuilder::writeClusterPartials(Value firstRow) {
  // The warps' states as writePartials left them: accumulators [state][row]
  // [column], weights [state][row][0] and the lse [0][row][1] of the
  // max-sum buffer.
  auto shape = cast<MemRefType>(warpAccumulators.getType()).getShape();
  ClusterRows rows;
  rows.states = schedule.getPublishedWarpStates();
  rows.accumulators = sharedPointer(rewriter, e.loc, warpAccumulators);
  rows.weights = sharedPointer(rewriter, e.loc, warpMaxSum);
  auto maxSumOffset = [this](int64_t state, Value row, int64_t slot) {
    return e.add(e.mul(e.add(e.index(state * layout.rowTile), row), e.index(2)),
                 e.index(slot));
  };
  rows.lseOffset = [=](Value row) { return maxSumOffset(0, row, 1); };
  rows.weightOffset = [=](int64_t state, Value row) {
    return maxSumOffset(state, row, 0);
  };
  rows.accumulatorOffset = [this, shape](int64_t state, Value row, Value dim) {
    return e.add(e.mul(e.add(e.mul(e.index(state), e.index(shape[1])), row),
                       e.index(shape[2])),
                 accumulatorColumn(row, dim));
  };
  mergeClusterRows(firstRow, rows);
}

void PartialKernelBuilder::mergeClusterRows(Value firstRow,
                                            const ClusterRows &rows) {
  const int64_t blocks = schedule.clusterCtas;
  const int64_t valueHeadDim = geometry.valueHeadDim;
  constexpr int64_t kWidth = 4;
  const int64_t groups = valueHeadDim / kWidth;
  // An even count, so that every block's groups start a 32-byte sector.
  const int64_t groupsPerBlock =
      llvm::alignTo(llvm::divideCeil(groups, blocks), 2);
  Type f32 = rewriter.getF32Type();
  auto f32x4 = VectorType::get({kWidth}, f32);
  auto cluster = [&] {
    NVVM::ClusterArriveOp::create(rewriter, e.loc, rewriter.getUnitAttr());
    NVVM::ClusterWaitOp::create(rewriter, e.loc, rewriter.getUnitAttr());
  };
  cluster();

  // Each block's buffers as this block reads them.
  auto remote = LLVM::LLVMPointerType::get(rewriter.getContext(),
                                           kSharedClusterAddressSpace);
  SmallVector<Value> accumulators, weightBuffers;
  for (int64_t c = 0; c < blocks; ++c) {
    accumulators.push_back(NVVM::MapaOp::create(rewriter, e.loc, remote,
                                                rows.accumulators, e.i32(c)));
    weightBuffers.push_back(
        NVVM::MapaOp::create(rewriter, e.loc, remote, rows.weights, e.i32(c)));
  }
  // The row's lse over the blocks (base 2; -inf when no block saw a key)
  // and each block's weight 2^(lse_c - lse).
  auto mergeRow = [&](Value row, SmallVector<Value> &weights) {
    SmallVector<Value> lses;
    Value max = e.negInf();
    for (int64_t c = 0; c < blocks; ++c) {
      lses.push_back(
          e.load(f32, weightBuffers[c], f32, rows.lseOffset(row), 4));
      max = e.max(max, lses.back());
    }
    Value sum = e.f32(0.0);
    for (Value lse : lses)
      sum = e.add(
          sum, e.select(e.isNegInf(lse), e.f32(0.0), e.exp2(e.sub(lse, max))));
    Value lse = e.select(e.isNegInf(max), e.negInf(), e.add(max, e.log2(sum)));
    for (Value blockLse : lses)
      weights.push_back(e.select(e.isNegInf(blockLse), e.f32(0.0),
                                 e.exp2(e.sub(blockLse, lse))));
    return lse;
  };
  // The chunk's lse, by the first block.
  auto first =
      scf::IfOp::create(rewriter, e.loc, e.equal(clusterRank, e.index(0)),
                        /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(first.thenBlock());
    e.forLoop(thread, e.index(layout.rowTile), schedule.threads,
              [&](Value row) {
                SmallVector<Value> weights;
                Value lse = mergeRow(row, weights);
                ifRealRow(firstRow, row, [&] {
                  e.store(e.mul(lse, e.f32(llvm::numbers::ln2)), partialLse,
                          partialRowOf(firstRow, row));
                });
              });
  }

  // Block c's 4-dim groups c G .. (c + 1) G - 1 (G = groupsPerBlock, even;
  // the last blocks' past the row take none): sum over the blocks and their
  // states of weight x state weight x accumulator. A warp's lanes take a
  // row's consecutive groups, so no 32-byte sector of the row is stored by
  // two blocks (groups c, c + C, ... left each sector's halves to two,
  // which fdemu's DRAM term counted twice) and its remote reads meet no
  // bank twice.
  forEachElement(layout.rowTile, groupsPerBlock, [&](Value row, Value slot) {
    Value group = e.add(e.mul(clusterRank, e.index(groupsPerBlock)), slot);
    OpBuilder::InsertionGuard guard(rewriter);
    if (groupsPerBlock * blocks != groups) {
      auto inRow =
          scf::IfOp::create(rewriter, e.loc, e.lessThan(group, e.index(groups)),
                            /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(inRow.thenBlock());
    }
    Value dim = e.mul(group, e.index(kWidth));
    SmallVector<Value> blockWeights;
    mergeRow(row, blockWeights);
    Value merged = LLVM::ZeroOp::create(rewriter, e.loc, f32x4);
    for (int64_t c = 0; c < blocks; ++c)
      for (int64_t w = 0; w < rows.states; ++w) {
        Value weight = blockWeights[c];
        if (rows.weightOffset)
          weight = e.mul(weight, e.load(f32, weightBuffers[c], f32,
                                        rows.weightOffset(w, row), 4));
        Value accumulator = e.load(f32x4, accumulators[c], f32,
                                   rows.accumulatorOffset(w, row, dim), 16);
        merged = e.fma(accumulator,
                       e.vector(SmallVector<Value>(kWidth, weight)), merged);
      }
    ifRealRow(firstRow, row, [&] {
      LLVM::StoreOp::create(rewriter, e.loc, merged,
                            e.address(partialOutput, f32,
                                      e.add(e.mul(partialRowOf(firstRow, row),
                                                  e.index(valueHeadDim)),
                                            dim)),
                            16);
    });
  });
  cluster();
}
