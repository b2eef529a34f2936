//===- PartialAttentionKernel.cpp - fd.partial_attention to a kernel ------===//
//
// One block per (split, KV head, sequence) streams its chunk of K/V once per
// row tile for the whole query-head group; PartialKernelLayout
// (FDToGPU.h) says how it maps onto lanes and warps, docs/KernelABI.md what
// it computes.
//
//===----------------------------------------------------------------------===//

#include "MergeRows.h"
#include "PartialKernelBuilder.h"
#include "PopulatePatterns.h"
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
      PartialKernelBuilder(kernel, op, geometry, schedule, elementType, cache,
                           rewriter)
          .build(merge);
    }

    // The launch: grid (S, Hkv * row tiles, B).
    Value batch = memref::DimOp::create(rewriter, loc, op.getQuery(), 0);
    launchKernel(rewriter, loc, kernel,
                 {{host.index(op.getNumSplits()), "num_splits"},
                  {host.index(geometry.numKVHeads * layout.numRowTiles)},
                  {batch, "batch"}},
                 {schedule.threads, 1, 1}, parameters);
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
      rewriter(rewriter), e{rewriter, kernel.getLoc()} {
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
  (layout.tensorCores ? queryFragments : queryTile) =
      kernel.getWorkgroupAttributions()[kQueryBuffer];
  warpAccumulators = kernel.getWorkgroupAttributions()[kWarpAccumulatorsBuffer];
  warpMaxSum = kernel.getWorkgroupAttributions()[kWarpMaxSumBuffer];

  thread = gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
  split = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
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
  warp = arith::DivUIOp::create(rewriter, e.loc, thread, e.index(32));
  lane = arith::RemUIOp::create(rewriter, e.loc, thread, e.index(32));
  if (layout.tensorCores) {
    fragmentRow = arith::DivUIOp::create(rewriter, e.loc, lane, e.index(4));
    fragmentPair = arith::RemUIOp::create(rewriter, e.loc, lane, e.index(4));
  } else {
    setUpTokenGroups();
  }

  alibiSlopes = getKernelArgument(kernel, "alibi_slopes");
  chunk = emitChunkBounds(
      e,
      emitSequenceExtent(e, seqLens, getKernelArgument(kernel, "query_lens"),
                         batch, maxLength, rules),
      split, op.getNumSplits(), op.getChunkLength(), rules);
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
      // Tensor cores carry probabilityFactor() in P (TensorCoreTile.cpp).
      outputScale =
          e.f32(cache.decodeFactor() /
                (layout.tensorCores ? cache.probabilityFactor() : 1.0));
    }
  }
  if (geometry.isPaged()) {
    blockTable = getKernelArgument(kernel, "block_table");
    numPages =
        arith::IndexCastOp::create(rewriter, e.loc, rewriter.getIndexType(),
                                   getKernelArgument(kernel, "num_pages"));
    tableRow = e.mul(batch, arith::DivUIOp::create(rewriter, e.loc, maxLength,
                                                   e.index(geometry.pageSize)));
  }
  // Rows are token-major: the sequence's query tokens are its first n *
  // group rows.
  realRows =
      rules.perSequenceQueryLengths
          ? e.mul(chunk.sequence.queryLength, e.index(geometry.groupSize()))
          : e.index(layout.rows);
  // Padding rows read the last real row (and are computed on zero
  // queries): a padding token's query row may be left unwritten.
  lastRow = rules.perSequenceQueryLengths ? e.sub(realRows, e.index(1))
                                          : e.index(layout.rows - 1);
}

void PartialKernelBuilder::setUpTokenGroups() {
  const int64_t lanes = layout.lanesPerToken;
  tokenGroup = arith::DivUIOp::create(rewriter, e.loc, lane, e.index(lanes));
  laneInGroup = arith::RemUIOp::create(rewriter, e.loc, lane, e.index(lanes));
  tokenInStep = e.add(e.mul(warp, e.index(layout.tokensPerWarp)), tokenGroup);
  // A lane's slice of the head dim: vector v of the lane in its token
  // group covers [(v * lanes + laneInGroup) * width, ... + width), so the
  // lanes of a group read consecutive 16-byte pieces of a row.
  // With idle lanes, a vector past the row is read at the row's last
  // vector (clamped) and masked out of every sum, and never published.
  // Value vector v is the same piece of the value row (with values from
  // the keys, the lane's key vector v itself).
  auto slice = [&](int64_t vectors, int64_t vectorsPerRow, bool idle,
                   SmallVector<Value> &indices, SmallVector<Value> &inRow) {
    for (int64_t v = 0; v < vectors; ++v) {
      Value index = e.add(laneInGroup, e.index(v * lanes));
      if (idle) {
        inRow.push_back(e.lessThan(index, e.index(vectorsPerRow)));
        index = e.min(index, e.index(vectorsPerRow - 1));
      }
      indices.push_back(index);
    }
  };
  slice(layout.vectorsPerLane, layout.vectorsPerRow, layout.hasIdleLanes(),
        vectorIndices, vectorIsInRow);
  if (layout.valueVectorsPerRow == layout.vectorsPerRow) {
    valueVectorIndices = vectorIndices;
    valueVectorIsInRow = vectorIsInRow;
    return;
  }
  slice(layout.valueVectorsPerLane, layout.valueVectorsPerRow,
        layout.hasIdleValueLanes(), valueVectorIndices, valueVectorIsInRow);
}

Value PartialKernelBuilder::shapeScore(Value score) {
  if (!rules.logitsSoftCap)
    return score;
  // The scores are in base 2 (q is prescaled by log2(e)), so is the cap.
  return buildSoftCap(rewriter, e.loc, score,
                      *rules.logitsSoftCap * llvm::numbers::log2ef,
                      [&](Value x) { return e.exp2(x); });
}

void PartialKernelBuilder::build(MergeOp merge) {
  // Each block computes one row tile: the tiles of a KV head stream the same
  // chunk side by side (the second read is an L2 hit), not one after the
  // other, so a block's latency is one tile's. The last tile may be partial
  // (rows >= realRows are computed on zero queries and never written); with
  // per-sequence query lengths a tile of padding tokens only (every tile
  // when n = 0: its padding rows would read row -1's query) does nothing
  // but count, with a fused merge.
  Value firstRow = e.mul(rowTile, e.index(layout.rowTile));
  if (rules.perSequenceQueryLengths) {
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
  if (layout.tensorCores) {
    streamTensorCoreTile(firstRow);
    gpu::BarrierOp::create(rewriter, e.loc);
    writePartials(firstRow);
    gpu::BarrierOp::create(rewriter, e.loc);
    return;
  }
  stageQueryTile(firstRow);

  // Every row sees the keys in [the last token's window start, len - Lq
  // + 1): only the last Lq - 1 keys of a sequence (and with a window the
  // first Lq - 1 the splits cover) need the per-row mask. Those stream in
  // loops of their own with the mask (at most 7 keys each: one or two
  // iterations of one step), the others without it, so the mask costs
  // the main loop neither instructions nor registers. The masked loops
  // run first, so nothing is kept live through the main loop for them
  // (`causalBase`); the online softmax does not depend on the order of
  // the keys (up to rounding).
  rowAlibi.clear();
  if (alibiSlopes)
    for (int64_t r = 0; r < layout.rowTile; ++r)
      rowAlibi.push_back(alibiOfRow(firstRow, e.index(r)));
  SmallVector<Value> streamed = initialState();
  Value unmaskedBegin = chunk.begin, unmaskedEnd = chunk.end;
  Value causalBase;
  if (rules.rowsDiffer()) {
    // Query token t sees keys [firstMasked + t - W, firstMasked + t)
    // (AttentionUtils.h). Row r of the tile is token t = (firstRow + r) /
    // group, so key j is before its end iff (j + 1 - firstMasked) * group
    // - firstRow <= r, and not before its window iff r < that value + W *
    // group: one value per key, compared with each row's constants.
    // `causalBase` is its part without j.
    Value firstMasked = buildFirstMaskedKey(rewriter, e.loc, chunk.sequence);
    causalBase = e.sub(
        e.mul(e.sub(e.index(1), firstMasked), e.index(geometry.groupSize())),
        firstRow);
    unmaskedEnd = e.max(chunk.begin, e.min(chunk.end, firstMasked));
    if (rules.windowLeft) {
      Value lastToken = e.sub(chunk.sequence.queryLength, e.index(1));
      Value allSee =
          buildVisibleKeys(rewriter, e.loc, chunk.sequence, lastToken, rules)
              .begin;
      unmaskedBegin = e.min(unmaskedEnd, e.max(chunk.begin, allSee));
      streamed = streamKeys(chunk.begin, unmaskedBegin, /*unroll=*/1,
                            causalBase, streamed);
    }
    streamed =
        streamKeys(unmaskedEnd, chunk.end, /*unroll=*/1, causalBase, streamed);
  }
  streamed = streamKeys(unmaskedBegin, unmaskedEnd, layout.unroll,
                        /*causalBase=*/Value(), streamed);
  SmallVector<RowState> states = unpack(streamed);
  combineLaneGroups(states);
  publishWarpStates(states);
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
  const int64_t threads = PartialKernelLayout::kThreads;
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

void PartialKernelBuilder::stageQueryTile(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  forEachTileElement([&](Value row, Value dim) {
    Value blockRow = e.min(e.add(row, firstRow), lastRow);
    Value offset = e.add(e.mul(queryRow(blockRow), e.index(headDim)), dim);
    Value value = e.toF32(e.load(elementType, query, elementType, offset,
                                 elementType.getIntOrFloatBitWidth() / 8));
    value = e.select(isRealRow(firstRow, row), e.mul(value, queryScale),
                     e.f32(0.0));
    memref::StoreOp::create(rewriter, e.loc, value, queryTile,
                            ValueRange{row, dim});
  });
  gpu::BarrierOp::create(rewriter, e.loc);
}

SmallVector<Value> PartialKernelBuilder::initialState() {
  // Per row max, sum and the lane's accumulator slice.
  SmallVector<Value> initial;
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    initial.push_back(e.negInf());
    initial.push_back(e.f32(0.0));
    initial.append(layout.valueDimsPerLane(), e.f32(0.0));
  }
  // A paged cache also carries the last block-table entry read: a thread
  // reads a page's index once per page, not once per token.
  if (geometry.isPaged()) {
    initial.push_back(e.index(-1));
    initial.push_back(e.index(0));
  }
  return initial;
}

SmallVector<RowState> PartialKernelBuilder::unpack(ValueRange flat) {
  const int64_t stateSize = 2 + layout.valueDimsPerLane();
  SmallVector<RowState> states;
  for (int64_t r = 0; r < layout.rowTile; ++r) {
    ValueRange slice = flat.slice(r * stateSize, stateSize);
    states.push_back(
        {slice[0], slice[1], SmallVector<Value>(slice.drop_front(2))});
  }
  return states;
}

SmallVector<Value> PartialKernelBuilder::pack(ArrayRef<RowState> states) {
  SmallVector<Value> flat;
  for (const RowState &state : states) {
    flat.push_back(state.max);
    flat.push_back(state.sum);
    llvm::append_range(flat, state.accumulator);
  }
  return flat;
}

void mlir::fd::detail::populatePartialAttentionToGPUPatterns(
    RewritePatternSet &patterns, const ::flashdecode::Chip &chip,
    bool fuseMerge) {
  patterns.add<PartialAttentionToGPU>(patterns.getContext(), chip, fuseMerge);
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
