//===- WarpgroupTile.cpp - wgmma tiles of 64 rows -------------------------===//
//
// A row tile of 64 query rows (MLA at 64 or 128 heads) on sm_90a's wgmma,
// its operands in dynamic shared memory (WarpgroupCopies.cpp): two
// warpgroups of four warps; warp w of a warpgroup owns rows 16 (w % 4) to
// 16 (w % 4) + 15, lane l rows g and g + 8 (g = l / 4) at column pair
// p = l % 4, as mma.sync's fragments. A step takes 32 keys:
//
// - Each warpgroup computes S = q K^T for 16 of them (warpgroup k its keys
//   16k to 16k + 15): D / 16 chained m64n16k16 whose A is q and B the
//   keys' K rows, both read through K-major 128-byte-swizzled descriptors
//   (16 keys, not 8: at 8, q's reads, 2 KB a k-step, bound the tile).
// - Each warp's row maxima over its 16 keys are exchanged with the other
//   warpgroup's warp of the same rows through shared memory: the same max
//   (max is commutative) in both, so the two agree on every rescale and
//   weight. The online softmax is the tensor-core tile's (its max lag
//   included); each warpgroup sums the weights of its own keys.
// - Each warpgroup stores its P (rows x its 16 keys, two K-major
//   core-matrix columns of 8 keys) and, after a barrier, computes O += P V
//   for its half of the value dims: two chained m64nNk16 (N = D_v / 2)
//   whose A is the whole P and B the stage read MN-major (V is K's first
//   D_v columns).
//
// Three barriers a step: the stage's copies in, the maxima exchanged, P
// stored. Each wgmma group is waited for before its results are used (no
// register holds a pending accumulator across anything else). At the end
// the warpgroups add their row sums, and each lane writes its rows'
// normalized partials from registers.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupTileBuilder.h"
#include "fd/Planning/KernelChoice.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {
/// The descriptors' swizzle modes, and the 128-byte swizzle's rows and
/// atoms (KernelChoice.h).
constexpr int64_t kNoSwizzle = 0, kSwizzle128 = 1;
constexpr int64_t kSwizzleRowBytes = ::flashdecode::kWarpgroupSwizzleRowBytes;
constexpr int64_t kSwizzleAtomBytes = ::flashdecode::kWarpgroupSwizzleAtomBytes;
/// A K-major core matrix's rows: 8 of 16 bytes.
constexpr int64_t kCoreMatrixRowBytes = 16;
} // namespace

void WarpgroupTileBuilder::setUpLanes() {
  warpgroup = arith::DivUIOp::create(rewriter, e.loc, thread, e.index(128));
  Value warpInGroup = arith::RemUIOp::create(rewriter, e.loc, warp, e.index(4));
  fragmentRow =
      e.add(e.mul(warpInGroup, e.index(16)),
            arith::DivUIOp::create(rewriter, e.loc, lane, e.index(4)));
  fragmentPair = arith::RemUIOp::create(rewriter, e.loc, lane, e.index(4));
  // Dynamic shared memory: an external shared array (`.extern .shared`),
  // which the launch sizes. (MLIR 22's gpu.dynamic_shared_memory becomes
  // an internal variable that ptxas places among the static ones.) Its
  // first 1024-byte boundary starts the regions, whatever alignment the
  // driver gives.
  constexpr StringLiteral kDynamicShared = "fd_dynamic_shared";
  auto module = kernel->getParentOfType<gpu::GPUModuleOp>();
  auto pointerType =
      LLVM::LLVMPointerType::get(rewriter.getContext(), kSharedAddressSpace);
  if (!module.lookupSymbol(kDynamicShared)) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(
        rewriter, e.loc, LLVM::LLVMArrayType::get(rewriter.getI8Type(), 0),
        /*isConstant=*/false, LLVM::Linkage::External, kDynamicShared,
        Attribute(), /*alignment=*/16, kSharedAddressSpace);
  }
  Value dynamic =
      LLVM::AddressOfOp::create(rewriter, e.loc, pointerType, kDynamicShared);
  Value raw = arith::IndexCastOp::create(
      rewriter, e.loc, rewriter.getIndexType(),
      LLVM::PtrToIntOp::create(rewriter, e.loc, rewriter.getI64Type(),
                               dynamic));
  sharedBase = arith::AndIOp::create(rewriter, e.loc,
                                     e.add(raw, e.index(kSwizzleAtomBytes - 1)),
                                     e.index(~(kSwizzleAtomBytes - 1)));
}

Value WarpgroupTileBuilder::matrixDescriptor(Value address,
                                             int64_t leadingBytes,
                                             int64_t strideBytes,
                                             int64_t swizzleMode) {
  // Bits 0-13 the start address, 16-29 and 32-45 the leading and stride
  // byte offsets, each >> 4; 62-63 the swizzle (PTX ISA, "Matrix
  // Descriptor Format").
  Type i64 = rewriter.getI64Type();
  auto constant = [&](int64_t value) {
    return arith::ConstantIntOp::create(rewriter, e.loc, i64, value);
  };
  Value start = arith::ShRUIOp::create(rewriter, e.loc,
                                       arith::AndIOp::create(rewriter, e.loc,
                                                             e.toI64(address),
                                                             constant(0x3FFFF)),
                                       constant(4));
  int64_t fields =
      ((leadingBytes >> 4) & 0x3FFF) << 16 |
      ((strideBytes >> 4) & 0x3FFF) << 32 |
      static_cast<int64_t>(static_cast<uint64_t>(swizzleMode) << 62);
  return arith::OrIOp::create(rewriter, e.loc, start, constant(fields));
}

Value WarpgroupTileBuilder::advanceDescriptor(Value descriptor, int64_t bytes) {
  if (bytes == 0)
    return descriptor;
  return arith::AddIOp::create(
      rewriter, e.loc, descriptor,
      arith::ConstantIntOp::create(rewriter, e.loc, rewriter.getI64Type(),
                                   bytes >> 4));
}

SmallVector<Value>
WarpgroupTileBuilder::warpgroupMma(Value descriptorA, Value descriptorB,
                                   int64_t n, ArrayRef<Value> accumulators,
                                   bool accumulate, bool valuesMajor) {
  MLIRContext *context = rewriter.getContext();
  Type f32 = rewriter.getF32Type();
  auto structType =
      LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(n / 2, f32));
  Value inouts = LLVM::PoisonOp::create(rewriter, e.loc, structType);
  for (auto [i, value] : llvm::enumerate(accumulators))
    inouts = LLVM::InsertValueOp::create(rewriter, e.loc, inouts, value, i);
  auto operandType =
      elementType.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  Value result = NVVM::WgmmaMmaAsyncOp::create(
      rewriter, e.loc, structType, inouts, descriptorA, descriptorB,
      NVVM::MMAShapeAttr::get(context, 64, n, 16), operandType, operandType,
      NVVM::WGMMATypes::f32,
      accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
      NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
      valuesMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
      /*satfinite=*/nullptr);
  SmallVector<Value> values;
  for (int64_t i = 0; i < n / 2; ++i)
    values.push_back(LLVM::ExtractValueOp::create(rewriter, e.loc, result, i));
  return values;
}

/// Closes the wgmma group and waits for it: its results are read next.
static void commitAndWait(PatternRewriter &rewriter, Location loc) {
  NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, 0);
}

void WarpgroupTileBuilder::fenceAndBarrier() {
  NVVM::FenceProxyOp::create(
      rewriter, e.loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(rewriter.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  gpu::BarrierOp::create(rewriter, e.loc);
}

SmallVector<Value> WarpgroupTileBuilder::multiplyQueryKeys(Value stage) {
  ::flashdecode::KernelSchedule::WarpgroupRegions regions =
      schedule.getWarpgroupRegions();
  const int64_t rows = layout.rowTile, keys = layout.tokensPerStep();
  // A 64-dim block of q is rows x 128 bytes, of a stage keys x 128; the
  // warpgroup's keys start keys / 2 rows into each block of the stage.
  Value query =
      matrixDescriptor(sharedAddress(e.index(regions.query)),
                       kCoreMatrixRowBytes, kSwizzleAtomBytes, kSwizzle128);
  Value stageKeys = matrixDescriptor(
      sharedAddress(
          e.add(e.add(e.index(regions.stages),
                      e.mul(stage, e.index(layout.stageBytes()))),
                e.mul(warpgroup, e.index(keys / 2 * kSwizzleRowBytes)))),
      kCoreMatrixRowBytes, kSwizzleAtomBytes, kSwizzle128);
  SmallVector<Value> s(keys / 4, e.f32(0.0));
  NVVM::WgmmaFenceAlignedOp::create(rewriter, e.loc);
  for (int64_t step = 0; step < geometry.headDim / 16; ++step) {
    // Step k: dims 16k .. 16k + 15, 32 bytes into its block's rows.
    int64_t block = step / 4, within = step % 4 * 32;
    s = warpgroupMma(
        advanceDescriptor(query, block * rows * kSwizzleRowBytes + within),
        advanceDescriptor(stageKeys, block * keys * kSwizzleRowBytes + within),
        keys / 2, s, /*accumulate=*/step > 0, /*valuesMajor=*/false);
  }
  commitAndWait(rewriter, e.loc);
  return s;
}

void WarpgroupTileBuilder::combineRowsAcrossWarpgroups(
    MutableArrayRef<Value> values, int64_t slot,
    function_ref<Value(Value, Value)> combine) {
  // Slot `slot` of the max-sum buffer: the warpgroup's value per row, from
  // the first lane of each quad.
  Value other = arith::XOrIOp::create(rewriter, e.loc, warpgroup, e.index(1));
  {
    auto firstOfQuad =
        scf::IfOp::create(rewriter, e.loc, e.equal(fragmentPair, e.index(0)),
                          /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(firstOfQuad.thenBlock());
    for (int64_t r = 0; r < 2; ++r)
      memref::StoreOp::create(rewriter, e.loc, values[r], warpMaxSum,
                              ValueRange{warpgroup,
                                         e.add(fragmentRow, e.index(8 * r)),
                                         e.index(slot)});
  }
  gpu::BarrierOp::create(rewriter, e.loc);
  for (int64_t r = 0; r < 2; ++r)
    values[r] = combine(
        values[r], memref::LoadOp::create(
                       rewriter, e.loc, warpMaxSum,
                       ValueRange{other, e.add(fragmentRow, e.index(8 * r)),
                                  e.index(slot)}));
}

void WarpgroupTileBuilder::storeProbabilities(ArrayRef<Value> words) {
  // P is K-major core-matrix columns of 8 keys each (rowTile x 16 bytes):
  // row m at 16 m, key 2p at byte 4p; the warpgroup's keys are its half of
  // the columns. words[2 j + r]: its tile j, row g + 8 r.
  const int64_t column = layout.rowTile * kCoreMatrixRowBytes;
  const int64_t tiles = layout.tokensPerStep() / 2 / 8;
  Value lanePair =
      e.add(e.index(schedule.getWarpgroupRegions().probabilities),
            e.add(e.mul(warpgroup, e.index(tiles * column)),
                  e.add(e.mul(fragmentRow, e.index(kCoreMatrixRowBytes)),
                        e.mul(fragmentPair, e.index(4)))));
  for (int64_t tile = 0; tile < tiles; ++tile)
    for (int64_t r = 0; r < 2; ++r)
      LLVM::StoreOp::create(
          rewriter, e.loc, words[2 * tile + r],
          sharedBytePointer(e.add(
              lanePair, e.index(tile * column + 8 * r * kCoreMatrixRowBytes))),
          4);
}

SmallVector<Value>
WarpgroupTileBuilder::accumulateValues(Value stage, ArrayRef<Value> outputs) {
  ::flashdecode::KernelSchedule::WarpgroupRegions regions =
      schedule.getWarpgroupRegions();
  const int64_t keys = layout.tokensPerStep();
  const int64_t half = geometry.valueHeadDim / 2;
  // A: P, its K halves (the warpgroups' keys) rows x 16 bytes apart, 8-row
  // core matrices 128 bytes apart. B: the stage MN-major, 64-dim blocks
  // keys x 128 bytes apart, 8-key groups 1024; the warpgroup's value dims
  // start half / 64 blocks in.
  Value probabilities =
      matrixDescriptor(sharedAddress(e.index(regions.probabilities)),
                       layout.rowTile * kCoreMatrixRowBytes,
                       8 * kCoreMatrixRowBytes, kNoSwizzle);
  Value valueDims = matrixDescriptor(
      sharedAddress(e.add(
          e.add(e.index(regions.stages),
                e.mul(stage, e.index(layout.stageBytes()))),
          e.mul(warpgroup, e.index(half / 64 * keys * kSwizzleRowBytes)))),
      keys * kSwizzleRowBytes, kSwizzleAtomBytes, kSwizzle128);
  // k-step t: keys 16t .. 16t + 15, two of P's columns and two of V's
  // 8-key groups on.
  NVVM::WgmmaFenceAlignedOp::create(rewriter, e.loc);
  SmallVector<Value> next(outputs);
  for (int64_t step = 0; step < keys / 16; ++step)
    next = warpgroupMma(
        advanceDescriptor(probabilities,
                          step * 2 * layout.rowTile * kCoreMatrixRowBytes),
        advanceDescriptor(valueDims, step * 2 * kSwizzleAtomBytes), half, next,
        /*accumulate=*/true, /*valuesMajor=*/true);
  commitAndWait(rewriter, e.loc);
  return next;
}

void WarpgroupTileBuilder::streamRowTile(Value firstRow) {
  const int64_t stagesCount = schedule.keyValueStages;
  const int64_t keysPerStep = layout.tokensPerStep();
  const int64_t tiles = geometry.valueHeadDim / 2 / 8;
  Value pairKey = e.mul(fragmentPair, e.index(2));
  Value warpgroupFirstKey = e.mul(warpgroup, e.index(keysPerStep / 2));
  lastKey = e.max(e.sub(chunk.end, e.index(1)), e.index(0));
  // q, then steps 0 .. S - 2, each a group; a paged cache's entries of
  // those copies all loaded first (their latencies overlap). In the loop a
  // copy's entries are loaded just before it: carried from the step
  // before, a thread's 9 entries took the registers a tile with every
  // feature needs (ptxas spilled).
  SmallVector<SmallVector<Value>> prologueEntries;
  for (int64_t step = 0; step + 1 < stagesCount; ++step)
    prologueEntries.push_back(loadStepEntries(stepAhead(chunk.begin, step)));
  copyQuery(firstRow);
  for (int64_t step = 0; step + 1 < stagesCount; ++step)
    copyStep(stepAhead(chunk.begin, step), e.index(step),
             prologueEntries[step]);
  TensorCoreRows rows = getTensorCoreRows(firstRow);

  SmallVector<Value> initial = getInitialTileState(tiles);
  auto stream = scf::ForOp::create(
      rewriter, e.loc, chunk.begin, chunk.end, e.index(keysPerStep), initial,
      [&](OpBuilder &, Location, Value stepStart, ValueRange carried) {
        Value stage = stageOfStep(stepStart, 0);
        // This step's copies (and, first, q's) are in once the S - 2 newer
        // groups are all that is pending; past the barrier every thread's
        // are visible to wgmma, and every warp is done with the previous
        // step's stage, which the copy of step i + S - 1 takes.
        NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc,
                                         static_cast<int32_t>(stagesCount - 2));
        fenceAndBarrier();
        Value copied = stepAhead(stepStart, stagesCount - 1);
        copyStep(copied, stageOfStep(stepStart, stagesCount - 1),
                 loadStepEntries(copied));
        SmallVector<Value> s = multiplyQueryKeys(stage);
        Value first = e.add(stepStart, warpgroupFirstKey);
        // With holes, whether the lane's keys 2p, 2p + 1 of each 8-key
        // tile are keys.
        SmallVector<Value> pairIsKey;
        if (rules.blockTableHoles)
          for (int64_t key = 0; key < keysPerStep / 2 / 8 * 2; ++key)
            pairIsKey.push_back(isKeyEntry(loadPageEntry(e.min(
                e.add(first, e.add(pairKey, e.index(8 * (key / 2) + key % 2))),
                lastKey))));
        SmallVector<Value> scores = maskTensorCoreScores(
            first, pairKey, s, {queryScale, queryScale}, rows, pairIsKey);
        SmallVector<Value> next(carried.begin(), carried.end());
        TensorCoreSoftmaxStep softmax = stepTensorCoreSoftmax(
            carried, scores, next, [&](MutableArrayRef<Value> maxes) {
              combineRowsAcrossWarpgroups(
                  maxes, /*slot=*/0,
                  [&](Value own, Value other) { return e.max(own, other); });
            });
        storeProbabilities(packProbabilities(softmax, {}));
        fenceAndBarrier();
        SmallVector<Value> outputs = rescaleOutputs(softmax, carried, tiles);
        llvm::copy(accumulateValues(stage, outputs), next.begin() + 4);
        scf::YieldOp::create(rewriter, e.loc, next);
      });
  // The last copies (past the chunk: empty) drain; then the warpgroups add
  // their row sums (each the weights of its own keys).
  NVVM::CpAsyncWaitGroupOp::create(rewriter, e.loc, 0);
  gpu::BarrierOp::create(rewriter, e.loc);
  results.assign(stream.getResults().begin(),
                 stream.getResults().begin() + 4 + 4 * tiles);
  sumRowsOverQuad(results);
  combineRowsAcrossWarpgroups(
      MutableArrayRef<Value>(results).slice(2, 2), /*slot=*/1,
      [&](Value own, Value other) { return e.add(own, other); });
}

void WarpgroupTileBuilder::writeLaneRows(Value firstRow,
                                         const LaneRowTarget &target) {
  const int64_t valueHeadDim = geometry.valueHeadDim;
  const int64_t tiles = valueHeadDim / 2 / 8;
  Type f32 = rewriter.getF32Type();
  Value firstColumn = e.add(e.mul(warpgroup, e.index(valueHeadDim / 2)),
                            e.mul(fragmentPair, e.index(2)));
  for (int64_t r = 0; r < 2; ++r) {
    Value tileRow = e.add(fragmentRow, e.index(8 * r));
    Value max = results[r], sum = results[2 + r];
    Value hasKeys = buildSawKeys(rewriter, e.loc, max);
    Value weight = arith::DivFOp::create(rewriter, e.loc, e.f32(1.0), sum);
    if (outputScale)
      weight = e.mul(weight, outputScale);
    weight = e.select(hasKeys, weight, e.f32(0.0));
    auto writeRow = [&] {
      Value row = target.rowOf(tileRow);
      {
        // Both warpgroups hold the row's max and sum: the first pair of the
        // first writes its lse.
        auto writesLse = scf::IfOp::create(
            rewriter, e.loc,
            arith::AndIOp::create(rewriter, e.loc,
                                  e.equal(fragmentPair, e.index(0)),
                                  e.equal(warpgroup, e.index(0))),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard lseGuard(rewriter);
        rewriter.setInsertionPointToStart(writesLse.thenBlock());
        target.storeLse(row, max, sum, hasKeys);
      }
      // Output tile j holds dims 8j + 2p, 8j + 2p + 1 of the warpgroup's
      // half: one 8-byte store each.
      Value rowStart = e.mul(row, e.index(valueHeadDim));
      for (int64_t tile = 0; tile < tiles; ++tile) {
        Value pair =
            e.vector({e.mul(results[4 + 4 * tile + 2 * r], weight),
                      e.mul(results[4 + 4 * tile + 2 * r + 1], weight)});
        LLVM::StoreOp::create(
            rewriter, e.loc, pair,
            e.address(target.rows, f32,
                      e.add(rowStart, e.add(firstColumn, e.index(8 * tile)))),
            8);
      }
    };
    if (target.realRowsOnly)
      ifRealRow(firstRow, tileRow, writeRow);
    else
      writeRow();
  }
}

void WarpgroupTileBuilder::stageClusterRows(Value firstRow) {
  const int64_t valueHeadDim = geometry.valueHeadDim;
  const int64_t lseStart = layout.rowTile * valueHeadDim;
  // The normalized rows (f32, row-major) then each row's lse go where q and
  // the stages were, once both warpgroups' wgmmas have read them.
  gpu::BarrierOp::create(rewriter, e.loc);
  Value rows = sharedBytePointer(e.index(0));
  writeLaneRows(
      firstRow,
      {rows, /*realRowsOnly=*/false, [](Value tileRow) { return tileRow; },
       [&](Value row, Value max, Value sum, Value hasKeys) {
         e.store(e.select(hasKeys, e.add(max, e.log2(sum)), e.negInf()), rows,
                 e.add(e.index(lseStart), row));
       }});
  ClusterRows staged;
  staged.accumulators = staged.weights = rows;
  staged.lseOffset = [=](Value row) { return e.add(e.index(lseStart), row); };
  staged.accumulatorOffset = [=](int64_t, Value row, Value dim) {
    return e.add(e.mul(row, e.index(valueHeadDim)), dim);
  };
  mergeClusterRows(firstRow, staged);
}

void WarpgroupTileBuilder::writePartials(Value firstRow) {
  if (clusterRank) {
    stageClusterRows(firstRow);
    return;
  }
  writeLaneRows(firstRow,
                {partialOutput, /*realRowsOnly=*/true,
                 [&](Value tileRow) { return partialRowOf(firstRow, tileRow); },
                 [&](Value row, Value max, Value sum, Value hasKeys) {
                   Value lse = e.mul(e.add(max, e.log2(sum)),
                                     e.f32(llvm::numbers::ln2));
                   e.store(e.select(hasKeys, lse, e.negInf()), partialLse, row);
                 }});
}
