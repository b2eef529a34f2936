//===- WarpgroupCopies.cpp - The warpgroup tile's shared memory -----------===//
//
// The warpgroup tile (WarpgroupTile.cpp) keeps its operands in dynamic
// shared memory from a 1024-byte boundary (KernelSchedule::
// getWarpgroupRegions): q's 64 rows, then the K/V stages of 32 keys, then
// P. q and the stages are laid out for wgmma's K-major 128-byte swizzle:
// the rows' 64-dim blocks one after another, each block 128 bytes a row,
// and the 16-byte piece c of row r at position c ^ (r % 8) of its 128
// bytes (the swizzle is a function of the address: blocks and regions
// start on 1024-byte boundaries). A pass of 8 threads copies one row's 128
// bytes: conflict-free. The same stage is K (K-major, for q K^T) and V
// (MN-major, for P V): MLA's values are its keys' first D_v columns.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupTileBuilder.h"
#include "fd/Planning/KernelChoice.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

namespace {
/// The bytes a thread copies with one cp.async, and a swizzled row of a
/// 64-dim block (KernelChoice.h).
constexpr int64_t kPieceBytes = 16;
constexpr int64_t kSwizzleRowBytes = ::flashdecode::kWarpgroupSwizzleRowBytes;
constexpr int64_t kPiecesPerSwizzleRow = kSwizzleRowBytes / kPieceBytes;
} // namespace

Value WarpgroupTileBuilder::sharedAddress(Value offset) {
  return e.add(sharedBase, offset);
}

Value WarpgroupTileBuilder::sharedBytePointer(Value offset) {
  return LLVM::IntToPtrOp::create(
      rewriter, e.loc,
      LLVM::LLVMPointerType::get(rewriter.getContext(), kSharedAddressSpace),
      e.toI64(sharedAddress(offset)));
}

Value WarpgroupTileBuilder::swizzledPieceOffset(int64_t rows, Value row,
                                                Value piece) {
  Value block = arith::DivUIOp::create(rewriter, e.loc, piece,
                                       e.index(kPiecesPerSwizzleRow));
  Value column = arith::RemUIOp::create(rewriter, e.loc, piece,
                                        e.index(kPiecesPerSwizzleRow));
  Value phase = arith::RemUIOp::create(rewriter, e.loc, row,
                                       e.index(kPiecesPerSwizzleRow));
  Value swizzled = arith::XOrIOp::create(rewriter, e.loc, column, phase);
  return e.add(e.add(e.mul(block, e.index(rows * kSwizzleRowBytes)),
                     e.mul(row, e.index(kSwizzleRowBytes))),
               e.mul(swizzled, e.index(kPieceBytes)));
}

void WarpgroupTileBuilder::copyQuery(Value firstRow) {
  const int64_t headDim = geometry.headDim;
  const int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  const int64_t piecesPerRow = headDim * elementBytes / kPieceBytes;
  const int64_t queryRegion = schedule.getWarpgroupRegions().query;
  forEachThreadIndex(layout.rowTile * piecesPerRow, [&](Value index) {
    Value tileRow =
        arith::DivUIOp::create(rewriter, e.loc, index, e.index(piecesPerRow));
    Value piece =
        arith::RemUIOp::create(rewriter, e.loc, index, e.index(piecesPerRow));
    Value blockRow = e.min(e.add(firstRow, tileRow), lastRow);
    Value source =
        e.address(query, elementType,
                  e.add(e.mul(queryRow(blockRow), e.index(headDim)),
                        e.mul(piece, e.index(kPieceBytes / elementBytes))));
    Value target = sharedBytePointer(
        e.add(e.index(queryRegion),
              swizzledPieceOffset(layout.rowTile, tileRow, piece)));
    // Padding rows are zeros.
    NVVM::CpAsyncOp::create(
        rewriter, e.loc, target, source, static_cast<uint32_t>(kPieceBytes),
        NVVM::LoadCacheModifierKind::CG,
        e.select(isRealRow(firstRow, tileRow), e.i32(kPieceBytes), e.i32(0)));
  });
  NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
}

SmallVector<WarpgroupTileBuilder::Piece>
WarpgroupTileBuilder::getStepPieces(Value stepStart) {
  const int64_t threads = schedule.threads;
  const int64_t piecesPerKey = layout.stageRowBytes / kPieceBytes;
  const int64_t pieces = layout.tokensPerStep() * piecesPerKey;
  // 32 keys of D / 8 pieces (D a multiple of 64): 4 D, whole passes of the
  // 256 threads.
  assert(pieces % threads == 0 && "a step's pieces are whole passes");
  SmallVector<Piece> stepPieces;
  for (int64_t first = 0; first < pieces; first += threads) {
    Piece p;
    Value index = e.add(thread, e.index(first));
    p.key =
        arith::DivUIOp::create(rewriter, e.loc, index, e.index(piecesPerKey));
    p.piece =
        arith::RemUIOp::create(rewriter, e.loc, index, e.index(piecesPerKey));
    Value token = e.add(stepStart, p.key);
    p.live = e.lessThan(token, chunk.end);
    p.token = e.min(token, lastKey);
    stepPieces.push_back(p);
  }
  return stepPieces;
}

SmallVector<Value> WarpgroupTileBuilder::loadStepEntries(Value stepStart) {
  SmallVector<Value> entries;
  if (geometry.isPaged())
    for (const Piece &p : getStepPieces(stepStart))
      entries.push_back(loadPageEntry(p.token));
  return entries;
}

void WarpgroupTileBuilder::copyStep(Value stepStart, Value stage,
                                    ValueRange entries) {
  const int64_t headDim = geometry.headDim;
  Value stageStart = e.add(e.index(schedule.getWarpgroupRegions().stages),
                           e.mul(stage, e.index(layout.stageBytes())));
  Value elementsPerPiece = e.index(kPieceBytes / cache.bytes());
  for (auto [index, p] : llvm::enumerate(getStepPieces(stepStart))) {
    auto [row, live] =
        copiedRow(p.token, entries.empty() ? Value() : entries[index], p.live);
    Value source = e.address(
        keys, cache.addressType(),
        e.add(e.mul(row, e.index(headDim)), e.mul(p.piece, elementsPerPiece)));
    Value target = sharedBytePointer(
        e.add(stageStart,
              swizzledPieceOffset(layout.tokensPerStep(), p.key, p.piece)));
    NVVM::CpAsyncOp::create(rewriter, e.loc, target, source,
                            static_cast<uint32_t>(kPieceBytes),
                            NVVM::LoadCacheModifierKind::CG,
                            e.select(live, e.i32(kPieceBytes), e.i32(0)));
  }
  NVVM::CpAsyncCommitGroupOp::create(rewriter, e.loc);
}
