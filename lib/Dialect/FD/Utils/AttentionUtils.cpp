//===- AttentionUtils.cpp - The attention rules, once ---------------------===//

#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

static Value index(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

static Value negativeInfinity(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
}

Value mlir::fd::buildClampedLength(OpBuilder &b, Location loc, Value length,
                                   Value maxLength) {
  length = arith::MaxSIOp::create(b, loc, length, index(b, loc, 0));
  return arith::MinSIOp::create(b, loc, length, maxLength);
}

Value mlir::fd::buildClampedPage(OpBuilder &b, Location loc, Value entry,
                                 Value numPages) {
  Value lastPage = arith::SubIOp::create(b, loc, numPages, index(b, loc, 1));
  entry = arith::MaxSIOp::create(b, loc, entry, index(b, loc, 0));
  return arith::MinSIOp::create(b, loc, entry, lastPage);
}

mlir::fd::ChunkRange
mlir::fd::buildChunkRange(OpBuilder &b, Location loc, Value length, Value split,
                          int64_t numSplits,
                          std::optional<int64_t> chunkLength) {
  Value chunk =
      arith::CeilDivSIOp::create(b, loc, length, index(b, loc, numSplits));
  if (chunkLength)
    chunk = arith::MaxSIOp::create(b, loc, chunk, index(b, loc, *chunkLength));
  Value begin = arith::MinSIOp::create(
      b, loc, arith::MulIOp::create(b, loc, split, chunk), length);
  Value end = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, begin, chunk), length);
  return {begin, end};
}

Value mlir::fd::buildFirstMaskedKey(OpBuilder &b, Location loc, Value length,
                                    int64_t queryLength) {
  return arith::AddIOp::create(b, loc, length, index(b, loc, 1 - queryLength));
}

Value mlir::fd::buildSawKeys(OpBuilder &b, Location loc, Value max) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, max,
                               negativeInfinity(b, loc));
}

Value mlir::fd::buildMergeShift(OpBuilder &b, Location loc, Value max) {
  Value allEmpty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max,
                                         negativeInfinity(b, loc));
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return arith::SelectOp::create(b, loc, allEmpty, zero, max);
}
