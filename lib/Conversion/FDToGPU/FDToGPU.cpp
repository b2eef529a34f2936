//===- FDToGPU.cpp - fd split-KV ops to GPU kernels -----------------------===//
//
// Builds the Flash-Decoding kernels in the GPU dialect (with LLVM-dialect
// pointer arithmetic for 16-byte global loads) and replaces the fd ops with
// their launches. DESIGN §5 says what makes them fast; the comments here say
// how each piece maps onto the hardware.
//
//===----------------------------------------------------------------------===//

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;

int mlir::fd::getMinimumPTXVersion(StringRef chip) {
  return llvm::StringSwitch<int>(chip)
      .Case("sm_80", 70)
      .Case("sm_86", 71)
      .Case("sm_89", 78)
      .Case("sm_90", 78)
      .Case("sm_90a", 78)
      .Default(0);
}

PartialKernelLayout PartialKernelLayout::get(int64_t headDim,
                                             int64_t elementBytes,
                                             int64_t groupSize,
                                             int64_t queryLength) {
  PartialKernelLayout layout;
  layout.headDim = headDim;
  layout.vectorWidth = 16 / elementBytes;
  layout.vectorsPerRow = headDim / layout.vectorWidth;
  // A power of two so token groups tile the warp; enough lanes that each
  // holds at most two vectors (head dims are at most 256).
  layout.lanesPerToken =
      std::min<int64_t>(32, llvm::PowerOf2Ceil(layout.vectorsPerRow));
  layout.vectorsPerLane =
      llvm::divideCeil(layout.vectorsPerRow, layout.lanesPerToken);
  layout.unroll =
      std::max<int64_t>(1, kVectorsInFlight / layout.vectorsPerLane);
  layout.tokensPerWarp = 32 / layout.lanesPerToken;
  layout.rows = groupSize * queryLength;
  layout.causal = queryLength > 1;
  // As few tiles as the register budget allows (each streams the chunk
  // again), of equal size: 16 rows, at most 7 per tile, are three tiles of
  // 6, not 7 + 7 + 2 (fewer registers and less shared memory per tile).
  int64_t maxRowTile = kRowRegisterBudget / layout.registersPerRow();
  if (layout.rows > maxRowTile)
    maxRowTile =
        (kRowRegisterBudget - kRowTileLoopRegisters) / layout.registersPerRow();
  maxRowTile = std::max<int64_t>(1, maxRowTile);
  layout.numRowTiles = llvm::divideCeil(layout.rows, maxRowTile);
  layout.rowTile = llvm::divideCeil(layout.rows, layout.numRowTiles);
  return layout;
}

namespace {

constexpr unsigned kGlobalAddressSpace = 1;

/// Emits arithmetic inside a kernel with short names for the common ops.
struct KernelEmitter {
  OpBuilder &b;
  Location loc;

  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  Value f32(double value) {
    return arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(static_cast<float>(value)));
  }
  Value negInf() { return f32(-std::numeric_limits<float>::infinity()); }
  Value i32(int64_t value) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
  }
  Value add(Value lhs, Value rhs) {
    if (isa<FloatType>(lhs.getType()))
      return arith::AddFOp::create(b, loc, lhs, rhs);
    return arith::AddIOp::create(b, loc, lhs, rhs);
  }
  Value mul(Value lhs, Value rhs) {
    if (isa<FloatType>(lhs.getType()))
      return arith::MulFOp::create(b, loc, lhs, rhs);
    return arith::MulIOp::create(b, loc, lhs, rhs);
  }
  /// a * b + c rounded once (fma.rn.f32): one instruction and one latency
  /// where mul.rn + add.rn are two, and ptxas does not fuse those.
  Value fma(Value a, Value b, Value c) {
    return LLVM::FMAOp::create(this->b, loc, a, b, c);
  }
  Value sub(Value lhs, Value rhs) {
    if (isa<FloatType>(lhs.getType()))
      return arith::SubFOp::create(b, loc, lhs, rhs);
    return arith::SubIOp::create(b, loc, lhs, rhs);
  }
  Value min(Value lhs, Value rhs) {
    return arith::MinSIOp::create(b, loc, lhs, rhs);
  }
  Value max(Value lhs, Value rhs) {
    return arith::MaxSIOp::create(b, loc, lhs, rhs);
  }
  Value select(Value condition, Value lhs, Value rhs) {
    return arith::SelectOp::create(b, loc, condition, lhs, rhs);
  }
  Value lessThan(Value lhs, Value rhs) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lhs, rhs);
  }
  Value equal(Value lhs, Value rhs) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lhs, rhs);
  }
  Value isNegInf(Value value) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, value,
                                 negInf());
  }
  /// Whether a row whose running max is `max` saw a key: its max left
  /// -inf. Decided by the max, not by the sum being positive, so that a NaN
  /// score (a poisoned cache) propagates instead of reading as an empty row.
  Value sawKeys(Value max) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, max,
                                 negInf());
  }
  Value toI64(Value indexValue) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), indexValue);
  }
  Value toF32(Value value) {
    if (value.getType().isF32())
      return value;
    return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  }
  /// 2^x and log2(x) as the SFU's ex2.approx / lg2.approx: no libdevice.
  Value exp2(Value value) {
    return intrinsic("llvm.nvvm.ex2.approx.f32", value);
  }
  Value log2(Value value) { return intrinsic("llvm.nvvm.lg2.approx.f", value); }
  Value intrinsic(StringRef name, Value operand) {
    return LLVM::CallIntrinsicOp::create(b, loc, b.getF32Type(),
                                         b.getStringAttr(name),
                                         ValueRange{operand})
        .getResult(0);
  }
  Value shuffleXor(Value value, int64_t offset) {
    return gpu::ShuffleOp::create(b, loc, value, offset, /*width=*/32,
                                  gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  /// Address of element `offset` (an index) of a global array of `type`.
  Value address(Value base, Type elementType, Value offset) {
    return LLVM::GEPOp::create(b, loc, base.getType(), elementType, base,
                               ValueRange{toI64(offset)});
  }
  Value load(Type type, Value base, Type elementType, Value offset,
             unsigned alignment) {
    return LLVM::LoadOp::create(b, loc, type,
                                address(base, elementType, offset), alignment);
  }
  void store(Value value, Value base, Value offset) {
    LLVM::StoreOp::create(b, loc, value, address(base, value.getType(), offset),
                          value.getType().getIntOrFloatBitWidth() / 8);
  }
  Value extract(Value vector, int64_t position) {
    return LLVM::ExtractElementOp::create(b, loc, vector, i32(position));
  }
  /// A loop `for (i = lower; i < upper; i += step)` with no results.
  void forLoop(Value lower, Value upper, int64_t step,
               function_ref<void(Value)> body) {
    scf::ForOp::create(b, loc, lower, upper, index(step), ValueRange{},
                       [&](OpBuilder &, Location, Value iv, ValueRange) {
                         body(iv);
                         scf::YieldOp::create(b, loc);
                       });
  }
};

/// The chunk [begin, end) of sequence `batch` that split `split` of
/// `numSplits` covers, and the clamped sequence length, per the semantics of
/// fd.partial_attention.
struct ChunkBounds {
  Value length, begin, end;
};

ChunkBounds emitChunkBounds(KernelEmitter &e, Value seqLens, Value batch,
                            Value split, Value maxLength, int64_t numSplits,
                            std::optional<int64_t> chunkLength) {
  Value length = e.load(e.b.getI32Type(), seqLens, e.b.getI32Type(), batch, 4);
  length = arith::IndexCastOp::create(e.b, e.loc, e.b.getIndexType(), length);
  length = e.min(e.max(length, e.index(0)), maxLength);
  Value chunk =
      arith::CeilDivSIOp::create(e.b, e.loc, length, e.index(numSplits));
  if (chunkLength)
    chunk = e.max(chunk, e.index(*chunkLength));
  Value begin = e.min(e.mul(split, chunk), length);
  Value end = e.min(e.add(begin, chunk), length);
  return {length, begin, end};
}

/// The online-softmax state of one query row in one lane group: running max
/// and sum of 2^(score - max), and the lane's slice of sum p * v.
struct RowState {
  Value max, sum;
  SmallVector<Value> accumulator;
};

/// Merges `other` into `state` (both partial softmaxes of the same row).
void combineStates(KernelEmitter &e, RowState &state, const RowState &other) {
  Value newMax = arith::MaximumFOp::create(e.b, e.loc, state.max, other.max);
  auto weight = [&](Value max) {
    return e.select(e.isNegInf(max), e.f32(0.0), e.exp2(e.sub(max, newMax)));
  };
  Value own = weight(state.max), theirs = weight(other.max);
  state.sum = e.fma(state.sum, own, e.mul(other.sum, theirs));
  for (auto [mine, their] :
       llvm::zip_equal(state.accumulator, other.accumulator))
    mine = e.fma(mine, own, e.mul(their, theirs));
  state.max = newMax;
}

/// Creates `gpu.module @name { gpu.func @name kernel }` at the end of the
/// enclosing module, with `name` uniqued there, and a known block size
/// unless `blockSize` is empty. One module per kernel: each
/// becomes its own PTX file and the runtime loads what it launches.
gpu::GPUFuncOp createKernel(Operation *anchor, StringRef name,
                            TypeRange arguments, TypeRange workgroupBuffers,
                            ArrayRef<int32_t> blockSize,
                            PatternRewriter &rewriter) {
  auto module = anchor->getParentOfType<ModuleOp>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  rewriter.getUnitAttr());
  std::string uniqueName = name.str();
  for (int suffix = 1; module.lookupSymbol(uniqueName); ++suffix)
    uniqueName = (name + "_" + Twine(suffix)).str();

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  auto kernels =
      gpu::GPUModuleOp::create(rewriter, anchor->getLoc(), uniqueName);
  rewriter.setInsertionPointToStart(kernels.getBody());
  auto kernel = gpu::GPUFuncOp::create(rewriter, anchor->getLoc(), uniqueName,
                                       rewriter.getFunctionType(arguments, {}),
                                       workgroupBuffers);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  rewriter.getUnitAttr());
  // The kernels move workgroup memory 16 bytes at a time (.v4): align every
  // buffer to that, not just to its element.
  for (unsigned i = 0; i < workgroupBuffers.size(); ++i)
    kernel.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                       rewriter.getI64IntegerAttr(16));
  if (!blockSize.empty())
    kernel.setKnownBlockSizeAttr(rewriter.getDenseI32ArrayAttr(blockSize));
  return kernel;
}

/// The global address of a contiguous memref's data, for a kernel argument.
Value globalPointer(OpBuilder &b, Location loc, Value memref) {
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  address = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), kGlobalAddressSpace),
      address);
}

LogicalResult checkContiguous(Operation *op, PatternRewriter &rewriter) {
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<MemRefType>(operand.getType());
        type && !type.getLayout().isIdentity())
      return rewriter.notifyMatchFailure(op, "non-contiguous memref operand");
  return success();
}

//===----------------------------------------------------------------------===//
// Partial attention
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

struct MergeToGPU : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkContiguous(op, rewriter)))
      return failure();
    auto partialType = cast<MemRefType>(op.getPartialOutput().getType());
    ArrayRef<int64_t> shape = partialType.getShape();
    int64_t headDim = shape.back();
    int64_t numSplits = op.getNumSplits();
    int64_t queryHeads = shape[shape.size() - 3];
    int64_t queryLength = shape.size() == 5 ? shape[1] : 1;
    Type outputElement =
        cast<MemRefType>(op.getOutput().getType()).getElementType();
    bool withLse = static_cast<bool>(op.getLse());

    Type pointer =
        LLVM::LLVMPointerType::get(rewriter.getContext(), kGlobalAddressSpace);
    SmallVector<Type> arguments(withLse ? 4 : 3, pointer);
    gpu::GPUFuncOp kernel =
        createKernel(op, "fd_merge", arguments, {},
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
      auto lseAt = [&](Value split) {
        return e.load(f32, entry.getArgument(1), f32, e.add(firstSplit, split),
                      4);
      };
      Value max =
          scf::ForOp::create(
              rewriter, e.loc, e.index(0), e.index(numSplits), e.index(1),
              ValueRange{e.negInf()},
              [&](OpBuilder &, Location, Value split, ValueRange state) {
                scf::YieldOp::create(
                    rewriter, e.loc,
                    ValueRange{arith::MaximumFOp::create(
                        rewriter, e.loc, state[0], lseAt(split))});
              })
              .getResult(0);
      // All chunks empty: shift by 0 so every weight is exp(-inf) = 0.
      Value shift = e.select(e.isNegInf(max), e.f32(0.0), max);
      Value log2e = e.f32(llvm::numbers::log2e);
      auto sums = scf::ForOp::create(
          rewriter, e.loc, e.index(0), e.index(numSplits), e.index(1),
          ValueRange{e.f32(0.0), e.f32(0.0)},
          [&](OpBuilder &, Location, Value split, ValueRange state) {
            Value weight = e.exp2(e.mul(e.sub(lseAt(split), shift), log2e));
            Value partial = e.load(
                f32, entry.getArgument(0), f32,
                e.add(e.mul(e.add(firstSplit, split), e.index(headDim)), dim),
                4);
            scf::YieldOp::create(rewriter, e.loc,
                                 ValueRange{e.add(state[0], weight),
                                            e.fma(weight, partial, state[1])});
          });
      Value sum = sums.getResult(0);
      Value hasKeys = e.sawKeys(max);
      Value output = e.select(
          hasKeys,
          arith::DivFOp::create(rewriter, e.loc, sums.getResult(1), sum),
          e.f32(0.0));
      if (outputElement != f32)
        output =
            arith::TruncFOp::create(rewriter, e.loc, outputElement, output);
      e.store(output, entry.getArgument(2),
              e.add(e.mul(row, e.index(headDim)), dim));
      if (withLse) {
        auto writeLse =
            scf::IfOp::create(rewriter, e.loc, e.equal(dim, e.index(0)), false);
        rewriter.setInsertionPointToStart(writeLse.thenBlock());
        Value lse = e.add(max, e.mul(e.log2(sum), e.f32(llvm::numbers::ln2)));
        e.store(e.select(hasKeys, lse, e.negInf()), entry.getArgument(3), row);
        rewriter.setInsertionPointAfter(writeLse);
      }
      gpu::ReturnOp::create(rewriter, e.loc);
    }

    Location loc = op.getLoc();
    KernelEmitter e{rewriter, loc};
    SmallVector<Value> operands;
    for (Value memref :
         {op.getPartialOutput(), op.getPartialLse(), op.getOutput()})
      operands.push_back(globalPointer(rewriter, loc, memref));
    if (withLse)
      operands.push_back(globalPointer(rewriter, loc, op.getLse()));
    Value batch = memref::DimOp::create(rewriter, loc, op.getOutput(), 0);
    gpu::LaunchFuncOp::create(
        rewriter, loc, kernel,
        gpu::KernelDim3{e.index(queryHeads), e.index(queryLength), batch},
        gpu::KernelDim3{e.index(headDim), e.index(1), e.index(1)},
        /*dynamicSharedMemorySize=*/Value(), operands);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fd::populateFDToGPUConversionPatterns(RewritePatternSet &patterns) {
  patterns.add<PartialAttentionToGPU, MergeToGPU>(patterns.getContext());
}
