//===- PartialAttentionKernel.cpp - fd.partial_attention to a kernel ------===//
//
// One block per (split, KV head, sequence) streams its chunk of K/V once per
// row tile for the whole query-head group; PartialKernelLayout
// (FDToGPU.h) says how it maps onto lanes and warps, docs/KernelABI.md what
// it computes.
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

struct PartialAttentionToGPU : OpRewritePattern<PartialAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PartialAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkContiguous(op, rewriter)))
      return failure();
    AttentionGeometry geometry = op.getGeometry();
    Type elementType =
        cast<MemRefType>(op.getQuery().getType()).getElementType();
    PartialKernelLayout layout = PartialKernelLayout::get(
        geometry.headDim, elementType.getIntOrFloatBitWidth() / 8,
        geometry.groupSize(), geometry.queryLength);

    MLIRContext *context = rewriter.getContext();
    Type pointer = LLVM::LLVMPointerType::get(context, kGlobalAddressSpace);
    auto workgroup = gpu::AddressSpaceAttr::get(
        context, gpu::GPUDialect::getWorkgroupAddressSpace());
    Type f32 = rewriter.getF32Type();
    SmallVector<Type> workgroupBuffers = {
        MemRefType::get({layout.rowTile, layout.headDim}, f32, nullptr,
                        workgroup),
        MemRefType::get(
            {PartialKernelLayout::kWarps, layout.rowTile, layout.headDim}, f32,
            nullptr, workgroup),
        MemRefType::get({PartialKernelLayout::kWarps, layout.rowTile, 2}, f32,
                        nullptr, workgroup)};
    SmallVector<Type> arguments(6, pointer);
    arguments.push_back(rewriter.getI32Type());
    if (geometry.isPaged())
      arguments.push_back(pointer);
    // No known block size: it becomes `.maxntid 128`, for which ptxas caps
    // registers at 128 to fit four blocks per SM and spills the larger
    // configurations instead of using the 129 registers they need.
    gpu::GPUFuncOp kernel =
        createKernel(op, "fd_partial_attention", arguments, workgroupBuffers,
                     /*blockSize=*/{}, rewriter);
    buildKernelBody(kernel, op, geometry, layout, elementType, rewriter);

    // The launch: grid (S, Hkv, B).
    Location loc = op.getLoc();
    KernelEmitter e{rewriter, loc};
    Value batch = memref::DimOp::create(rewriter, loc, op.getQuery(), 0);
    // The cache length: Lmax, or max_pages * page_size for a paged cache.
    unsigned lengthDim = op.getKvLayout() == KVLayout::NHD ? 1 : 2;
    Value maxLength =
        geometry.isPaged()
            ? e.mul(memref::DimOp::create(rewriter, loc, op.getBlockTable(), 1),
                    e.index(geometry.pageSize))
            : memref::DimOp::create(rewriter, loc, op.getKeyCache(), lengthDim)
                  .getResult();
    SmallVector<Value> operands;
    for (Value memref :
         {op.getQuery(), op.getKeyCache(), op.getValueCache(), op.getSeqLens(),
          op.getPartialOutput(), op.getPartialLse()})
      operands.push_back(globalPointer(rewriter, loc, memref));
    operands.push_back(arith::IndexCastOp::create(
        rewriter, loc, rewriter.getI32Type(), maxLength));
    if (geometry.isPaged())
      operands.push_back(globalPointer(rewriter, loc, op.getBlockTable()));
    gpu::LaunchFuncOp::create(
        rewriter, loc, kernel,
        gpu::KernelDim3{e.index(op.getNumSplits()),
                        e.index(geometry.numKVHeads), batch},
        gpu::KernelDim3{e.index(PartialKernelLayout::kThreads), e.index(1),
                        e.index(1)},
        /*dynamicSharedMemorySize=*/Value(), operands);
    rewriter.eraseOp(op);
    return success();
  }

  static void buildKernelBody(gpu::GPUFuncOp kernel, PartialAttentionOp op,
                              const AttentionGeometry &geometry,
                              const PartialKernelLayout &layout,
                              Type elementType, PatternRewriter &rewriter) {
    OpBuilder::InsertionGuard guard(rewriter);
    Block &entry = kernel.getBody().front();
    rewriter.setInsertionPointToStart(&entry);
    KernelEmitter e{rewriter, kernel.getLoc()};
    Value query = entry.getArgument(0), keys = entry.getArgument(1),
          values = entry.getArgument(2), seqLens = entry.getArgument(3),
          partialOutput = entry.getArgument(4),
          partialLse = entry.getArgument(5);
    Value maxLength = arith::IndexCastOp::create(
        rewriter, e.loc, rewriter.getIndexType(), entry.getArgument(6));
    Value queryTile = kernel.getWorkgroupAttributions()[0];
    Value warpAccumulators = kernel.getWorkgroupAttributions()[1];
    Value warpMaxSum = kernel.getWorkgroupAttributions()[2];

    const int64_t headDim = geometry.headDim;
    const int64_t group = geometry.groupSize();
    const int64_t numSplits = op.getNumSplits();
    const int64_t lanes = layout.lanesPerToken;
    const int64_t threads = PartialKernelLayout::kThreads;
    const int64_t tokensPerStep =
        PartialKernelLayout::kWarps * layout.tokensPerWarp;

    Value thread = gpu::ThreadIdOp::create(rewriter, e.loc, gpu::Dimension::x);
    Value split = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::x);
    Value kvHead = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::y);
    Value batch = gpu::BlockIdOp::create(rewriter, e.loc, gpu::Dimension::z);
    Value warp = arith::DivUIOp::create(rewriter, e.loc, thread, e.index(32));
    Value lane = arith::RemUIOp::create(rewriter, e.loc, thread, e.index(32));
    Value tokenGroup =
        arith::DivUIOp::create(rewriter, e.loc, lane, e.index(lanes));
    Value laneInGroup =
        arith::RemUIOp::create(rewriter, e.loc, lane, e.index(lanes));
    // This thread's first token within each step of tokensPerStep tokens.
    Value tokenInStep =
        e.add(e.mul(warp, e.index(layout.tokensPerWarp)), tokenGroup);
    // A lane's slice of the head dim: vector v of the lane in its token
    // group covers [(v * lanes + laneInGroup) * width, ... + width), so the
    // lanes of a group read consecutive 16-byte pieces of a row.
    // With idle lanes, a vector past the row is read at the row's last
    // vector (clamped) and masked out of every sum, and never published.
    SmallVector<Value> vectorIndices, vectorIsInRow;
    for (int64_t v = 0; v < layout.vectorsPerLane; ++v) {
      Value index = e.add(laneInGroup, e.index(v * lanes));
      if (layout.hasIdleLanes()) {
        vectorIsInRow.push_back(
            e.lessThan(index, e.index(layout.vectorsPerRow)));
        index = e.min(index, e.index(layout.vectorsPerRow - 1));
      }
      vectorIndices.push_back(index);
    }
    auto laneDim = [&](int64_t element) {
      return e.add(e.mul(vectorIndices[element / layout.vectorWidth],
                         e.index(layout.vectorWidth)),
                   e.index(element % layout.vectorWidth));
    };

    ChunkBounds chunk = emitChunkBounds(e, seqLens, batch, split, maxLength,
                                        numSplits, op.getChunkLength());
    // Scores in base 2: q is prescaled by scale * log2(e).
    Value queryScale = e.f32(op.getEffectiveScale() * llvm::numbers::log2e);
    bool isNHD = op.getKvLayout() == KVLayout::NHD;
    // Element offset of the row of `token` in a dense cache, or of slot
    // token % page_size of `page` in a paged one.
    auto cacheRowOffset = [&](Value token, Value page) {
      Value row;
      if (geometry.isPaged()) {
        Value pageSize = e.index(geometry.pageSize);
        Value slot = arith::RemUIOp::create(rewriter, e.loc, token, pageSize);
        row = isNHD
                  ? e.add(e.mul(e.add(e.mul(page, pageSize), slot),
                                e.index(geometry.numKVHeads)),
                          kvHead)
                  : e.add(e.mul(e.add(e.mul(page, e.index(geometry.numKVHeads)),
                                      kvHead),
                                pageSize),
                          slot);
      } else {
        row =
            isNHD
                ? e.add(e.mul(e.add(e.mul(batch, maxLength), token),
                              e.index(geometry.numKVHeads)),
                        kvHead)
                : e.add(e.mul(e.add(e.mul(batch, e.index(geometry.numKVHeads)),
                                    kvHead),
                              maxLength),
                        token);
      }
      return e.mul(row, e.index(headDim));
    };
    Value blockTable = geometry.isPaged() ? entry.getArgument(7) : Value();
    Value tableRow =
        geometry.isPaged()
            ? e.mul(batch, arith::DivUIOp::create(rewriter, e.loc, maxLength,
                                                  e.index(geometry.pageSize)))
            : Value();
    // Row r of the block is query token r / group of head kvHead * group +
    // r % group; its row index in [B, Lq, Hq] tensors:
    auto queryRow = [&](Value row) {
      Value token =
          arith::DivUIOp::create(rewriter, e.loc, row, e.index(group));
      Value head =
          e.add(e.mul(kvHead, e.index(group)),
                arith::RemUIOp::create(rewriter, e.loc, row, e.index(group)));
      return e.add(
          e.mul(e.add(e.mul(batch, e.index(geometry.queryLength)), token),
                e.index(geometry.numQueryHeads)),
          head);
    };

    auto vectorType = VectorType::get({layout.vectorWidth}, elementType);
    // Row tiles are a loop, not unrolled code: every tile then needs the
    // registers of one. The last tile may be partial (rows >= layout.rows are
    // computed on zero queries and never written).
    const int64_t tileRows = layout.rowTile;
    Value lastRow = e.index(layout.rows - 1);
    e.forLoop(e.index(0), e.index(layout.numRowTiles), 1, [&](Value tile) {
      Value firstRow = e.mul(tile, e.index(tileRows));
      auto isRealRow = [&](Value tileRow) {
        return e.lessThan(e.add(firstRow, tileRow), e.index(layout.rows));
      };

      // Stage the tile's query rows, prescaled, in workgroup memory.
      e.forLoop(thread, e.index(tileRows * headDim), threads, [&](Value idx) {
        Value row =
            arith::DivUIOp::create(rewriter, e.loc, idx, e.index(headDim));
        Value dim =
            arith::RemUIOp::create(rewriter, e.loc, idx, e.index(headDim));
        Value blockRow = e.min(e.add(row, firstRow), lastRow);
        Value offset = e.add(e.mul(queryRow(blockRow), e.index(headDim)), dim);
        Value value = e.toF32(e.load(elementType, query, elementType, offset,
                                     elementType.getIntOrFloatBitWidth() / 8));
        value = e.select(isRealRow(row), e.mul(value, queryScale), e.f32(0.0));
        memref::StoreOp::create(rewriter, e.loc, value, queryTile,
                                ValueRange{row, dim});
      });
      gpu::BarrierOp::create(rewriter, e.loc);

      // Query token t of Lq sees keys j < len - Lq + t + 1. Row r of the
      // tile is token t = (firstRow + r) / group, so key j is visible to it
      // iff (j + Lq - len) * group - firstRow <= r: one value per key,
      // compared with each row's constant. `causalBase` is its part
      // without j.
      Value causalBase;
      if (layout.causal)
        causalBase =
            e.sub(e.mul(e.sub(e.index(geometry.queryLength), chunk.length),
                        e.index(group)),
                  firstRow);

      // Loop state: per row max, sum and the lane's accumulator slice.
      SmallVector<Value> initial;
      for (int64_t r = 0; r < tileRows; ++r) {
        initial.push_back(e.negInf());
        initial.push_back(e.f32(0.0));
        initial.append(layout.dimsPerLane(), e.f32(0.0));
      }
      const int64_t stateSize = 2 + layout.dimsPerLane();
      auto unpack = [&](ValueRange flat) {
        SmallVector<RowState> states;
        for (int64_t r = 0; r < tileRows; ++r) {
          ValueRange slice = flat.slice(r * stateSize, stateSize);
          states.push_back(
              {slice[0], slice[1], SmallVector<Value>(slice.drop_front(2))});
        }
        return states;
      };
      auto pack = [&](ArrayRef<RowState> states) {
        SmallVector<Value> flat;
        for (const RowState &state : states) {
          flat.push_back(state.max);
          flat.push_back(state.sum);
          llvm::append_range(flat, state.accumulator);
        }
        return flat;
      };

      // A paged cache also carries the last block-table entry read: a
      // thread reads a page's index once per page, not once per token.
      if (geometry.isPaged()) {
        initial.push_back(e.index(-1));
        initial.push_back(e.index(0));
      }
      // Streams keys [lower, upper) through the row states `start`,
      // `unroll` steps per iteration; with `causal`, each row also masks the
      // keys its query token may not see.
      auto streamKeys = [&](Value lower, Value upper, int64_t unroll,
                            bool causal, ValueRange start) {
        auto stream = scf::ForOp::create(
            rewriter, e.loc, lower, upper, e.index(tokensPerStep * unroll),
            start,
            [&](OpBuilder &, Location, Value stepStart, ValueRange flat) {
              SmallVector<RowState> states = unpack(flat);
              Value cachedBlock, cachedPage;
              if (geometry.isPaged()) {
                cachedBlock = flat[flat.size() - 2];
                cachedPage = flat.back();
              }
              // Issue every load of the unrolled steps before using any, so
              // several 16-byte loads per lane are in flight.
              SmallVector<Value> tokens;
              SmallVector<SmallVector<Value>> keyVectors, valueVectors;
              Value lastToken = e.sub(upper, e.index(1));
              for (int64_t u = 0; u < unroll; ++u) {
                Value token = e.add(
                    e.add(stepStart, e.index(u * tokensPerStep)), tokenInStep);
                tokens.push_back(token);
                Value clamped = e.min(token, lastToken);
                Value page;
                if (geometry.isPaged()) {
                  Value block = arith::DivUIOp::create(
                      rewriter, e.loc, clamped, e.index(geometry.pageSize));
                  auto lookup = scf::IfOp::create(
                      rewriter, e.loc, e.equal(block, cachedBlock),
                      [&](OpBuilder &, Location) {
                        scf::YieldOp::create(rewriter, e.loc, cachedPage);
                      },
                      [&](OpBuilder &, Location) {
                        Value entry = e.load(rewriter.getI32Type(), blockTable,
                                             rewriter.getI32Type(),
                                             e.add(tableRow, block), 4);
                        scf::YieldOp::create(
                            rewriter, e.loc,
                            ValueRange{arith::IndexCastOp::create(
                                rewriter, e.loc, rewriter.getIndexType(),
                                entry)});
                      });
                  page = lookup.getResult(0);
                  cachedBlock = block;
                  cachedPage = page;
                }
                Value offset = cacheRowOffset(clamped, page);
                keyVectors.emplace_back();
                valueVectors.emplace_back();
                for (int64_t v = 0; v < layout.vectorsPerLane; ++v) {
                  Value vectorOffset =
                      e.add(offset, e.mul(vectorIndices[v],
                                          e.index(layout.vectorWidth)));
                  keyVectors.back().push_back(
                      e.load(vectorType, keys, elementType, vectorOffset, 16));
                  valueVectors.back().push_back(e.load(
                      vectorType, values, elementType, vectorOffset, 16));
                }
              }
              // The step's keys as one tile: every (step, row) score first,
              // as independent FMA chains and shuffles the in-order issue
              // can overlap, then one max and one rescale per row for the
              // whole tile, each score's exp computed once.
              SmallVector<SmallVector<Value>> keyElements(unroll),
                  valueElements(unroll);
              for (int64_t u = 0; u < unroll; ++u)
                for (int64_t v = 0; v < layout.vectorsPerLane; ++v)
                  for (int64_t i = 0; i < layout.vectorWidth; ++i) {
                    Value key = e.toF32(e.extract(keyVectors[u][v], i));
                    if (layout.hasIdleLanes())
                      key = e.select(vectorIsInRow[v], key, e.f32(0.0));
                    keyElements[u].push_back(key);
                    valueElements[u].push_back(
                        e.toF32(e.extract(valueVectors[u][v], i)));
                  }
              SmallVector<SmallVector<Value>> scores(
                  tileRows, SmallVector<Value>(unroll, e.f32(0.0)));
              for (int64_t r = 0; r < tileRows; ++r)
                for (int64_t i = 0; i < layout.dimsPerLane(); ++i) {
                  Value q = memref::LoadOp::create(
                      rewriter, e.loc, queryTile,
                      ValueRange{e.index(r), laneDim(i)});
                  for (int64_t u = 0; u < unroll; ++u)
                    scores[r][u] = e.fma(q, keyElements[u][i], scores[r][u]);
                }
              // The lanes of a token group hold slices of one dot product.
              for (int64_t offset = lanes / 2; offset >= 1; offset /= 2)
                for (SmallVector<Value> &rowScores : scores)
                  for (Value &score : rowScores)
                    score = e.add(score, e.shuffleXor(score, offset));
              for (int64_t r = 0; r < tileRows; ++r) {
                RowState &state = states[r];
                SmallVector<Value> visible;
                Value tileMax = state.max;
                for (int64_t u = 0; u < unroll; ++u) {
                  visible.push_back(e.lessThan(tokens[u], upper));
                  if (causal)
                    visible[u] = arith::AndIOp::create(
                        rewriter, e.loc, visible[u],
                        e.lessThan(
                            e.add(e.mul(tokens[u], e.index(group)), causalBase),
                            e.index(r + 1)));
                  tileMax =
                      e.select(visible[u],
                               arith::MaximumFOp::create(rewriter, e.loc,
                                                         tileMax, scores[r][u]),
                               tileMax);
                }
                // Nothing visible yet: keep the empty state (2^(-inf - -inf)
                // would be NaN); a NaN score propagates through the max.
                Value rescale = e.select(e.isNegInf(tileMax), e.f32(1.0),
                                         e.exp2(e.sub(state.max, tileMax)));
                SmallVector<Value> weights;
                for (int64_t u = 0; u < unroll; ++u)
                  weights.push_back(
                      e.select(visible[u], e.exp2(e.sub(scores[r][u], tileMax)),
                               e.f32(0.0)));
                state.sum = e.mul(state.sum, rescale);
                for (Value weight : weights)
                  state.sum = e.add(state.sum, weight);
                for (int64_t i = 0; i < layout.dimsPerLane(); ++i) {
                  Value accumulator = e.mul(state.accumulator[i], rescale);
                  for (int64_t u = 0; u < unroll; ++u)
                    accumulator =
                        e.fma(weights[u], valueElements[u][i], accumulator);
                  state.accumulator[i] = accumulator;
                }
                state.max = tileMax;
              }
              SmallVector<Value> next = pack(states);
              if (geometry.isPaged()) {
                next.push_back(cachedBlock);
                next.push_back(cachedPage);
              }
              scf::YieldOp::create(rewriter, e.loc, next);
            });
        return SmallVector<Value>(stream.getResults());
      };

      // Every row sees the keys before len - Lq + 1: only the last Lq - 1
      // keys of a sequence need the per-row mask. The chunk streams in two
      // loops, those keys with the mask (at most 7: one or two iterations of
      // one step) and the others without it, so the mask costs the main loop
      // neither instructions nor registers. The masked loop runs first, so
      // nothing is kept live through the main loop for it (the chunk's end,
      // `causalBase`); the online softmax does not depend on the order of
      // the keys (up to rounding).
      SmallVector<Value> streamed;
      if (!layout.causal) {
        streamed = streamKeys(chunk.begin, chunk.end, layout.unroll,
                              /*causal=*/false, initial);
      } else {
        Value maskedBegin =
            e.max(chunk.begin,
                  e.min(chunk.end, e.add(chunk.length,
                                         e.index(1 - geometry.queryLength))));
        streamed = streamKeys(maskedBegin, chunk.end, /*unroll=*/1,
                              /*causal=*/true, initial);
        streamed = streamKeys(chunk.begin, maskedBegin, layout.unroll,
                              /*causal=*/false, streamed);
      }
      SmallVector<RowState> states = unpack(streamed);

      // Token groups of a warp hold the same slices: combine them with
      // shuffles across the group bits of the lane id.
      for (int64_t offset = lanes; offset < 32; offset *= 2)
        for (RowState &state : states) {
          RowState other{e.shuffleXor(state.max, offset),
                         e.shuffleXor(state.sum, offset),
                         {}};
          for (Value value : state.accumulator)
            other.accumulator.push_back(e.shuffleXor(value, offset));
          combineStates(e, state, other);
        }

      // Lanes of token group 0 publish the warp's state per row.
      Value firstGroup = e.equal(tokenGroup, e.index(0));
      auto publish = scf::IfOp::create(rewriter, e.loc, firstGroup,
                                       /*withElseRegion=*/false);
      {
        OpBuilder::InsertionGuard publishGuard(rewriter);
        rewriter.setInsertionPointToStart(publish.thenBlock());
        for (int64_t r = 0; r < tileRows; ++r) {
          for (int64_t v = 0; v < layout.vectorsPerLane; ++v) {
            OpBuilder::InsertionGuard vectorGuard(rewriter);
            if (layout.hasIdleLanes()) {
              auto inRow = scf::IfOp::create(rewriter, e.loc, vectorIsInRow[v],
                                             /*withElseRegion=*/false);
              rewriter.setInsertionPointToStart(inRow.thenBlock());
            }
            for (int64_t i = v * layout.vectorWidth;
                 i < (v + 1) * layout.vectorWidth; ++i)
              memref::StoreOp::create(rewriter, e.loc, states[r].accumulator[i],
                                      warpAccumulators,
                                      ValueRange{warp, e.index(r), laneDim(i)});
          }
          memref::StoreOp::create(rewriter, e.loc, states[r].max, warpMaxSum,
                                  ValueRange{warp, e.index(r), e.index(0)});
          memref::StoreOp::create(rewriter, e.loc, states[r].sum, warpMaxSum,
                                  ValueRange{warp, e.index(r), e.index(1)});
        }
      }
      gpu::BarrierOp::create(rewriter, e.loc);

      // Combine the warps and write the normalized partial and its lse.
      e.forLoop(thread, e.index(tileRows * headDim), threads, [&](Value idx) {
        Value row =
            arith::DivUIOp::create(rewriter, e.loc, idx, e.index(headDim));
        Value dim =
            arith::RemUIOp::create(rewriter, e.loc, idx, e.index(headDim));
        RowState total{e.negInf(), e.f32(0.0), {e.f32(0.0)}};
        for (int64_t w = 0; w < PartialKernelLayout::kWarps; ++w) {
          Value warpIndex = e.index(w);
          RowState part{
              memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                     ValueRange{warpIndex, row, e.index(0)}),
              memref::LoadOp::create(rewriter, e.loc, warpMaxSum,
                                     ValueRange{warpIndex, row, e.index(1)}),
              {memref::LoadOp::create(rewriter, e.loc, warpAccumulators,
                                      ValueRange{warpIndex, row, dim})}};
          combineStates(e, total, part);
        }
        Value hasKeys = e.sawKeys(total.max);
        Value normalized =
            e.select(hasKeys,
                     arith::DivFOp::create(rewriter, e.loc,
                                           total.accumulator[0], total.sum),
                     e.f32(0.0));
        auto realRow = scf::IfOp::create(rewriter, e.loc, isRealRow(row),
                                         /*withElseRegion=*/false);
        OpBuilder::InsertionGuard rowGuard(rewriter);
        rewriter.setInsertionPointToStart(realRow.thenBlock());
        Value outputRow = e.add(
            e.mul(queryRow(e.add(row, firstRow)), e.index(numSplits)), split);
        e.store(normalized, partialOutput,
                e.add(e.mul(outputRow, e.index(headDim)), dim));
        auto writeLse =
            scf::IfOp::create(rewriter, e.loc, e.equal(dim, e.index(0)), false);
        OpBuilder::InsertionGuard lseGuard(rewriter);
        rewriter.setInsertionPointToStart(writeLse.thenBlock());
        Value lse = e.mul(e.add(total.max, e.log2(total.sum)),
                          e.f32(llvm::numbers::ln2));
        e.store(e.select(hasKeys, lse, e.negInf()), partialLse, outputRow);
      });
      // The workgroup buffers are reused by the next row tile.
      gpu::BarrierOp::create(rewriter, e.loc);
    });
    gpu::ReturnOp::create(rewriter, e.loc);
  }
};

} // namespace

void mlir::fd::detail::populatePartialAttentionToGPUPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PartialAttentionToGPU>(patterns.getContext());
}
