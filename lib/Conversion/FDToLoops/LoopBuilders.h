//===- LoopBuilders.h - Building blocks of the fd loop lowering -*- C++ -*-===//
//
// Private to the FDToLoops lowering: constants, f32 loads and stores,
// scratch buffers, the index lists of the attention operands and a softmax
// row's result, shared by the attention lowerings (FDToLoops.cpp) and the
// merges' (MergeToLoops.cpp, MergeStatesToLoops.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOLOOPS_LOOPBUILDERS_H
#define FD_LIB_CONVERSION_FDTOLOOPS_LOOPBUILDERS_H

#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fd::detail {

Value indexConstant(OpBuilder &b, Location loc, int64_t value);
Value f32Constant(OpBuilder &b, Location loc, float value);
Value negativeInfinity(OpBuilder &b, Location loc);

/// Loads one element and widens it to f32, the accumulation type.
Value loadAsF32(OpBuilder &b, Location loc, Value memref, ValueRange indices);

/// Stores an f32 value into `memref`, rounding it to the element type.
void storeFromF32(OpBuilder &b, Location loc, Value value, Value memref,
                  ValueRange indices);

/// A static scratch buffer at the start of the enclosing allocation scope
/// (the function), so the loops of the nest reuse one buffer instead of
/// growing the stack on every iteration.
Value allocateScratch(OpBuilder &b, Operation *op, MemRefType type);

/// Index lists for the operands of one attention op.
struct AttentionIndexing {
  AttentionGeometry geometry;
  KVLayout layout;
  /// The block table of a paged cache, else null.
  Value blockTable;

  /// [b, (t,) h] followed by `trailing`: queries, outputs, lse, partials.
  SmallVector<Value> row(Value batch, Value token, Value head,
                         ValueRange trailing = {}) const {
    SmallVector<Value> indices = {batch};
    if (geometry.hasQueryLengthDim)
      indices.push_back(token);
    indices.push_back(head);
    llvm::append_range(indices, trailing);
    return indices;
  }

  /// The cache indices of position `position` of sequence `batch`, without
  /// the head-dim index. A paged cache reads the position's page from the
  /// block table (clamped into the pool, so a bad entry reads no memory
  /// outside it) once per position; with holes (`isKey` not null) whether
  /// the entry is one (negative: a hole, whose position is no key) goes to
  /// `isKey`.
  SmallVector<Value> cacheRow(OpBuilder &b, Location loc, Value cache,
                              Value batch, Value position, Value kvHead,
                              Value *isKey = nullptr) const {
    Value outer = batch, slot = position;
    if (blockTable) {
      Value pageSize =
          arith::ConstantIndexOp::create(b, loc, geometry.pageSize);
      Value block = arith::DivUIOp::create(b, loc, position, pageSize);
      Value page =
          memref::LoadOp::create(b, loc, blockTable, ValueRange{batch, block});
      page = arith::IndexCastOp::create(b, loc, b.getIndexType(), page);
      if (isKey)
        *isKey = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::sge, page,
            arith::ConstantIndexOp::create(b, loc, 0));
      outer = buildClampedPage(b, loc, page,
                               memref::DimOp::create(b, loc, cache, 0));
      slot = arith::RemUIOp::create(b, loc, position, pageSize);
    }
    if (layout == KVLayout::NHD)
      return {outer, slot, kvHead};
    return {outer, kvHead, slot};
  }

  /// The cache length: the positions dimension of a dense cache, max_pages *
  /// page_size of a paged one.
  Value maxLength(OpBuilder &b, Location loc, Value cache) const {
    if (!blockTable)
      return memref::DimOp::create(b, loc, cache,
                                   layout == KVLayout::NHD ? 1 : 2);
    return arith::MulIOp::create(
        b, loc, memref::DimOp::create(b, loc, blockTable, 1),
        arith::ConstantIndexOp::create(b, loc, geometry.pageSize));
  }
};

/// The running maximum and sum of exp(score - max) of one softmax row.
struct SoftmaxState {
  Value max;
  Value sum;
};

/// 1 / sum, or 0 for a row without keys so that its output is zeros.
Value reciprocalOrZero(OpBuilder &b, Location loc, SoftmaxState state);

/// max + log(sum), or -inf for a row without keys.
Value logSumExp(OpBuilder &b, Location loc, SoftmaxState state);

/// The fd.merge lowering (MergeToLoops.cpp).
void populateMergeToLoopsPatterns(RewritePatternSet &patterns);
/// The fd.merge_states lowering (MergeStatesToLoops.cpp).
void populateMergeStatesToLoopsPatterns(RewritePatternSet &patterns);

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOLOOPS_LOOPBUILDERS_H
