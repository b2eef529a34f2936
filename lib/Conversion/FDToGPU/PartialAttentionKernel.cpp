//===- PartialAttentionKernel.cpp - fd.partial_attention to a kernel ------===//
//
// One block per (split, KV head, sequence) streams its chunk of K/V once per
// row tile for the whole query-head group; PartialKernelLayout
// (FDToGPU.h) says how it maps onto lanes and warps, docs/KernelABI.md what
// it computes.
//
//===----------------------------------------------------------------------===//

#include "CudaCoreTileBuilder.h"
#include "MergeRows.h"
#include "PopulatePatterns.h"
#include "SplitValueTileBuilder.h"
#include "TensorCoreTileBuilder.h"
#include "WarpgroupTileBuilder.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/Chip.h"
#include "fd/Planning/KernelChoice.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {

struct PartialAttentionToGPU : OpRewritePattern<PartialAttentionOp> {
  PartialAttentionToGPU(MLIRContext *context, const ::flashdecode::Chip &chip,
                        bool fuseMerge)
      : OpRewritePattern(context), chip(chip), fuseMerge(fuseMerge) {}

  LogicalResult matchAndRewrite(PartialAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkLowerable(op, rewriter)))
      return failure();
    AttentionGeometry geometry = op.getGeometry();
    Type elementType =
        cast<MemRefType>(op.getQuery().getType()).getElementType();
    CacheElements cache{
        cast<MemRefType>(op.getKeyCache().getType()).getElementType(),
        chip.hasFloat8Conversions};
    ::flashdecode::KernelSchedule schedule = getPartialKernelSchedule(op);
    const PartialKernelLayout &layout = schedule.layout;

    MergeOp merge = fuseMerge ? findMergeOfPartials(op) : nullptr;
    SmallVector<Type> workgroupBuffers(llvm::map_range(
        getPartialKernelWorkgroupBuffers(
            schedule, merge ? op.getNumSplits() : 0, op.getContext()),
        [](MemRefType type) -> Type { return type; }));
    // The parameters (docs/KernelABI.md) and what the launch passes.
    Location loc = op.getLoc();
    KernelEmitter host{rewriter, loc};
    KernelParameters parameters;
    // Values read from the keys take no value cache.
    for (auto [name, memref] :
         {std::pair<StringRef, Value>{"query", op.getQuery()},
          {"key_cache", op.getKeyCache()},
          {"value_cache", op.getValueCache()},
          {"seq_lens", op.getSeqLens()},
          {"partial_output", op.getPartialOutput()},
          {"partial_lse", op.getPartialLse()}})
      if (memref)
        parameters.addPointer(rewriter, loc, name, memref);
    // The cache length: Lmax, or max_pages * page_size for a paged cache.
    unsigned lengthDim = op.getKvLayout() == KVLayout::NHD ? 1 : 2;
    Value maxLength =
        geometry.isPaged()
            ? host.mul(
                  memref::DimOp::create(rewriter, loc, op.getBlockTable(), 1),
                  host.index(geometry.pageSize))
            : memref::DimOp::create(rewriter, loc, op.getKeyCache(), lengthDim)
                  .getResult();
    parameters.addI32(rewriter, loc, "max_len", maxLength);
    // A paged cache: the block table and the pool's page count (entries
    // are clamped into the pool).
    if (geometry.isPaged()) {
      parameters.addPointer(rewriter, loc, "block_table", op.getBlockTable());
      parameters.addI32(
          rewriter, loc, "num_pages",
          memref::DimOp::create(rewriter, loc, op.getKeyCache(), 0));
    }
    // ALiBi: the slope of each query head.
    if (op.getAlibiSlopes())
      parameters.addPointer(rewriter, loc, "alibi_slopes", op.getAlibiSlopes());
    // Per-sequence query lengths.
    if (op.getQueryLens())
      parameters.addPointer(rewriter, loc, "query_lens", op.getQueryLens());
    // An fp8 cache's scales: per tensor or per token and KV head.
    if (op.getKScale()) {
      parameters.addPointer(rewriter, loc, "k_scale", op.getKScale());
      if (op.getValueCache())
        parameters.addPointer(rewriter, loc, "v_scale", op.getVScale());
    }
    // A sharded cache: this rank.
    if (op.getKvShardRank())
      parameters.addPointer(rewriter, loc, "kv_shard_rank",
                            op.getKvShardRank());
    // A shared prefix: each query sequence's suffix, and how many there are
    // (the last block's group of sequences may be partial).
    Value batch = memref::DimOp::create(rewriter, loc, op.getQuery(), 0);
    if (op.getSuffixLens()) {
      parameters.addPointer(rewriter, loc, "suffix_lens", op.getSuffixLens());
      parameters.addI32(rewriter, loc, "batch", batch);
    }
    // A fused merge: the merge's outputs and the counters (FusedMerge.cpp).
    Value counters =
        merge ? addFusedMergeParameters(rewriter, loc, op, merge, parameters)
              : Value();
    // No known block size: it becomes `.maxntid 128`, for which ptxas caps
    // registers at 128 to fit four blocks per SM and spills the larger
    // configurations instead of using the 129 registers they need.
    gpu::GPUFuncOp kernel =
        createKernel(op, "fd_partial_attention", parameters, workgroupBuffers,
                     /*blockSize=*/{}, rewriter);
    kernel->setAttr(kKernelMathUnitsAttrName,
                    rewriter.getStringAttr(StringRef(
                        ::flashdecode::getKernelFormName(schedule.form))));
    if (schedule.minBlocksPerSM) {
      kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                      rewriter.getDenseI32ArrayAttr(
                          {static_cast<int32_t>(schedule.threads), 1, 1}));
      kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                      rewriter.getI32IntegerAttr(schedule.minBlocksPerSM));
    }
    {
      OpBuilder::InsertionGuard guard(rewriter);
      createPartialKernelBuilder(kernel, op, geometry, schedule, elementType,
                                 cache, rewriter)
          ->build(merge);
    }

    // The launch: grid (S, Hkv * row tiles, B), or with a shared prefix B
    // in groups of the sequences a block computes.
    int64_t sequencesPerBlock = getSequencesPerBlock(op, layout);
    GridDimension sequences{batch, "batch"};
    if (sequencesPerBlock > 1)
      sequences = {arith::CeilDivUIOp::create(rewriter, loc, batch,
                                              host.index(sequencesPerBlock)),
                   "batch/" + std::to_string(sequencesPerBlock)};
    // A chunk's cluster of blocks are neighbours along x (the kernel's
    // .reqnctapercluster): the grid's x is then the splits' blocks, not
    // the splits.
    GridDimension splitBlocks{host.index(op.getNumSplits()), "num_splits"};
    if (schedule.clusterCtas > 1) {
      splitBlocks = {host.index(op.getNumSplits() * schedule.clusterCtas)};
      kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                      rewriter.getDenseI32ArrayAttr(
                          {static_cast<int32_t>(schedule.clusterCtas), 1, 1}));
    }
    launchKernel(rewriter, loc, kernel,
                 {splitBlocks,
                  {host.index(geometry.numKVHeads * layout.numRowTiles)},
                  sequences},
                 {schedule.threads, 1, 1}, parameters,
                 schedule.getDynamicSharedMemoryBytes());
    if (merge) {
      memref::DeallocOp::create(rewriter, loc, counters);
      rewriter.eraseOp(merge);
    }
    rewriter.eraseOp(op);
    return success();
  }

  const ::flashdecode::Chip &chip;
  bool fuseMerge;
};

} // namespace

PartialKernelBuilder::PartialKernelBuilder(
    gpu::GPUFuncOp kernel, PartialAttentionOp op,
    const AttentionGeometry &geometry,
    const ::flashdecode::KernelSchedule &schedule, Type elementType,
    const CacheElements &cache, PatternRewriter &rewriter)
    : kernel(kernel), op(op), schedule(schedule), geometry(geometry),
      rules(op.getRules()), layout(this->schedule.layout),
      elementType(elementType), cache(cache),
      rewriter(rewriter), e{rewriter, kernel.getLoc()},
      sequencesPerBlock(getSequencesPerBlock(op, layout)) {}

void PartialKernelBuilder::setUp() {
  Block &entry = kernel.getBody().front();
  rewriter.setInsertionPointToStart(&entry);
  query = getKernelArgument(kernel, "query");
  keys = getKernelArgument(kernel, "key_cache");
  values = getKernelArgument(kernel, "value_cache");
  seqLens = getKernelArgument(kernel, "seq_lens");
  partialOutput = getKernelArgument(kernel, "partial_output");
  partialLse = getKernelArgument(kernel, "partial_lse");
  maxLength =
      arith::IndexCastOp::create(rewriter, e.loc, rewriter.getIndexType(),
                                 getKernelArgument(kernel, "max_len"));
  warpAccumulators = kernel.getWorkgroupAttributions()[kWarpAccumulatorsBuffer];
  warpMaxSum = kernel.getWorkgroupAttributions()[kWarpMaxSumBuffer];

  thread = gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
  split = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
  if (schedule.clusterCtas > 1) {
    Value blocks = e.index(schedule.clusterCtas);
    clusterRank = arith::RemUIOp::create(rewriter, e.loc, split, blocks);
    split = arith::DivUIOp::create(rewriter, e.loc, split, blocks);
  }
  // y = kvHead * tiles + rowTile: a KV head's tiles are neighbours, as
  // they share its chunk in L2.
  Value kvHeadTile = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::y);
  kvHead = kvHeadTile;
  rowTile = e.index(0);
  if (layout.numRowTiles > 1) {
    Value tiles = e.index(layout.numRowTiles);
    kvHead = arith::DivUIOp::create(rewriter, e.loc, kvHeadTile, tiles);
    rowTile = arith::RemUIOp::create(rewriter, e.loc, kvHeadTile, tiles);
  }
  batch = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::z);
  suffixLens = getKernelArgument(kernel, "suffix_lens");
  cacheBatch = suffixLens ? e.index(0) : batch;
  warp = arith::DivUIOp::create(rewriter, e.loc, thread, e.index(32));
  lane = arith::RemUIOp::create(rewriter, e.loc, thread, e.index(32));
  setUpLanes();
  realRowsVary = rules.perSequenceQueryLengths || suffixLens;
  realRows = e.index(layout.rows);
  lastRow = e.index(layout.rows - 1);
  if (!realRowsVary)
    startQueryCopy(e.mul(rowTile, e.index(layout.rowTile)));

  alibiSlopes = getKernelArgument(kernel, "alibi_slopes");
  chunk = emitChunkBounds(
      e,
      emitSequenceExtent(e, seqLens, getKernelArgument(kernel, "query_lens"),
                         getKernelArgument(kernel, "kv_shard_rank"), cacheBatch,
                         maxLength, rules),
      split, op.getNumSplits(), op.getChunkLength(), rules);
  if (clusterRank)
    chunk = takeClusterShare(chunk);
  queryScale = e.f32(op.getEffectiveScale() * llvm::numbers::log2e *
                     cache.decodeFactor());
  // An fp8 cache's scales: per tensor, the key scale joins q's prescale and
  // the value scale the output's normalization, so the token loop does
  // nothing more; per token, the loop loads and applies them
  // (loadTokenScale).
  if (Value kScale = getKernelArgument(kernel, "k_scale")) {
    // Values read from the keys are scaled as the keys are.
    Value vScale = values ? getKernelArgument(kernel, "v_scale") : kScale;
    Type f32 = rewriter.getF32Type();
    if (isPerTensorScale(op.getKScale())) {
      queryScale = e.mul(queryScale, e.load(f32, kScale, f32, e.index(0), 4));
      outputScale = e.mul(e.f32(cache.decodeFactor()),
                          e.load(f32, vScale, f32, e.index(0), 4));
    } else {
      keyScales = kScale;
      valueScales = vScale;
      outputScale = e.f32(cache.decodeFactor() / getProbabilityFactor());
    }
  }
  if (geometry.isPaged()) {
    blockTable = getKernelArgument(kernel, "block_table");
    numPages =
        arith::IndexCastOp::create(rewriter, e.loc, rewriter.getIndexType(),
                                   getKernelArgument(kernel, "num_pages"));
    tableRow =
        e.mul(cacheBatch, arith::DivUIOp::create(rewriter, e.loc, maxLength,
                                                 e.index(geometry.pageSize)));
  }
  // Rows are token-major: the sequence's query tokens are its first n *
  // group rows; a shared prefix's sequences follow one another, the last
  // group's real ones first.
  const int64_t rowsPerSequence = geometry.groupSize() * geometry.queryLength;
  if (rules.perSequenceQueryLengths)
    realRows = e.mul(chunk.sequence.queryLength, e.index(geometry.groupSize()));
  if (suffixLens) {
    numSequences =
        arith::IndexCastOp::create(rewriter, e.loc, rewriter.getIndexType(),
                                   getKernelArgument(kernel, "batch"));
    Value remaining =
        e.sub(numSequences, e.mul(batch, e.index(sequencesPerBlock)));
    realRows = e.mul(e.min(remaining, e.index(sequencesPerBlock)),
                     e.index(rowsPerSequence));
  }
  // Padding rows read the last real row (and are computed on zero
  // queries): a padding token's query row may be left unwritten.
  if (realRowsVary)
    lastRow = e.sub(realRows, e.index(1));
}

Value PartialKernelBuilder::shapeScore(Value score) {
  if (!rules.logitsSoftCap)
    return score;
  // The scores are in base 2 (q is prescaled by log2(e)), so is the cap.
  return buildSoftCap(rewriter, e.loc, score,
                      *rules.logitsSoftCap * llvm::numbers::log2ef,
                      [&](Value x) { return e.exp2(x); });
}

ChunkBounds PartialKernelBuilder::takeClusterShare(ChunkBounds whole) {
  // Whole steps each, so that only the last block's last step is partial;
  // blocks past the keys get none (and write an empty state).
  Value step = e.index(layout.tokensPerStep());
  // (A chunk past the keys may end before it begins: no keys.)
  Value keys = e.max(e.sub(whole.end, whole.begin), e.index(0));
  Value share =
      e.mul(arith::CeilDivUIOp::create(
                rewriter, e.loc,
                arith::CeilDivUIOp::create(rewriter, e.loc, keys,
                                           e.index(schedule.clusterCtas)),
                step),
            step);
  ChunkBounds part = whole;
  part.begin = e.min(e.add(whole.begin, e.mul(clusterRank, share)), whole.end);
  part.end = e.min(e.add(part.begin, share), whole.end);
  return part;
}

void PartialKernelBuilder::build(MergeOp merge) {
  setUp();
  // Each block computes one row tile: the tiles of a KV head stream the same
  // chunk side by side (the second read is an L2 hit), not one after the
  // other, so a block's latency is one tile's. The last tile may be partial
  // (rows >= realRows are computed on zero queries and never written); with
  // per-sequence query lengths a tile of padding tokens only (every tile
  // when n = 0: its padding rows would read row -1's query) does nothing
  // but count, with a fused merge.
  Value firstRow = e.mul(rowTile, e.index(layout.rowTile));
  if (realRowsVary) {
    auto ifReal = scf::IfOp::create(rewriter, e.loc,
                                    e.lessThan(firstRow, realRows), false);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(ifReal.thenBlock());
    computeRowTile(firstRow);
  } else {
    computeRowTile(firstRow);
  }
  if (merge)
    mergeIfLast(merge);
  gpu::ReturnOp::create(rewriter, e.loc);
}

void PartialKernelBuilder::computeRowTile(Value firstRow) {
  streamRowTile(firstRow);
  gpu::BarrierOp::create(rewriter, e.loc);
  writePartials(firstRow);
  // A fused merge reuses the workgroup buffers.
  gpu::BarrierOp::create(rewriter, e.loc);
}

void PartialKernelBuilder::forEachThreadIndex(int64_t count,
                                              function_ref<void(Value)> body) {
  // Written out when every thread takes the same few indices: a loop's
  // branch would keep each iteration's loads (the query's, at a kernel's
  // start) from overlapping the next's.
  constexpr int64_t kMaxUnrolled = 8;
  const int64_t threads = schedule.threads;
  if (count % threads == 0 && count / threads <= kMaxUnrolled) {
    for (int64_t i = 0; i < count / threads; ++i)
      body(e.add(thread, e.index(i * threads)));
    return;
  }
  e.forLoop(thread, e.index(count), threads, body);
}

void PartialKernelBuilder::forEachElement(
    int64_t rows, int64_t columns,
    function_ref<void(Value row, Value column)> body) {
  forEachThreadIndex(rows * columns, [&](Value idx) {
    Value row = arith::DivUIOp::create(rewriter, e.loc, idx, e.index(columns));
    Value column =
        arith::RemUIOp::create(rewriter, e.loc, idx, e.index(columns));
    body(row, column);
  });
}

std::unique_ptr<PartialKernelBuilder>
mlir::fd::detail::createPartialKernelBuilder(
    gpu::GPUFuncOp kernel, PartialAttentionOp op,
    const AttentionGeometry &geometry,
    const ::flashdecode::KernelSchedule &schedule, Type elementType,
    const CacheElements &cache, PatternRewriter &rewriter) {
  if (schedule.usesWarpgroupTile())
    return std::make_unique<WarpgroupTileBuilder>(
        kernel, op, geometry, schedule, elementType, cache, rewriter);
  if (schedule.usesTensorCores() && schedule.layout.splitsValues)
    return std::make_unique<SplitValueTileBuilder>(
        kernel, op, geometry, schedule, elementType, cache, rewriter);
  if (schedule.usesTensorCores())
    return std::make_unique<TensorCoreTileBuilder>(
        kernel, op, geometry, schedule, elementType, cache, rewriter);
  return std::make_unique<CudaCoreTileBuilder>(kernel, op, geometry, schedule,
                                               elementType, cache, rewriter);
}

void mlir::fd::detail::populatePartialAttentionToGPUPatterns(
    RewritePatternSet &patterns, const ::flashdecode::Chip &chip,
    bool fuseMerge) {
  patterns.add<PartialAttentionToGPU>(patterns.getContext(), chip, fuseMerge);
}

int64_t
mlir::fd::detail::getSequencesPerBlock(PartialAttentionOp op,
                                       const PartialKernelLayout &layout) {
  AttentionGeometry geometry = op.getGeometry();
  return layout.rows / (geometry.groupSize() * geometry.queryLength);
}

::flashdecode::KernelSchedule
mlir::fd::detail::getPartialKernelSchedule(PartialAttentionOp op) {
  return ::flashdecode::getKernelSchedule(getKernelProblem(op),
                                          op.getScheduleAttr().getChoice());
}

SmallVector<MemRefType> mlir::fd::detail::getPartialKernelWorkgroupBuffers(
    const ::flashdecode::KernelSchedule &schedule, int64_t fusedMergeSplits,
    MLIRContext *context) {
  auto workgroup = gpu::AddressSpaceAttr::get(
      context, gpu::GPUDialect::getWorkgroupAddressSpace());
  Type f32 = Float32Type::get(context);
  Type i32 = IntegerType::get(context, 32);
  SmallVector<MemRefType> buffers;
  for (const ::flashdecode::WorkgroupBuffer &buffer :
       schedule.getWorkgroupBuffers(fusedMergeSplits))
    buffers.push_back(MemRefType::get(buffer.shape, buffer.integer ? i32 : f32,
                                      nullptr, workgroup));
  return buffers;
}
