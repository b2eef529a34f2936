//===- AttentionUtils.cpp - The attention rules, once ---------------------===//

#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::fd;

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

/// The keys a rank holds of the global tokens before `position` (an
/// index, maybe negative): the first local key at or after it.
static Value buildLocalKey(OpBuilder &b, Location loc,
                           const SequenceExtent &sequence, Value position) {
  if (!sequence.shard)
    return position;
  const KVShard &shard = *sequence.shard;
  // Ops one at a time: the IR's order must not depend on the C++
  // compiler's order of evaluating arguments.
  Value interleave = index(b, loc, shard.interleave);
  Value round = index(b, loc, shard.round());
  position = arith::MaxSIOp::create(b, loc, position, index(b, loc, 0));
  Value rounds = arith::DivUIOp::create(b, loc, position, round);
  Value inRound = arith::RemUIOp::create(b, loc, position, round);
  Value rankStart =
      arith::MulIOp::create(b, loc, sequence.shardRank, interleave);
  Value rest = arith::SubIOp::create(b, loc, inRound, rankStart);
  rest = arith::MaxSIOp::create(b, loc, rest, index(b, loc, 0));
  rest = arith::MinSIOp::create(b, loc, rest, interleave);
  Value whole = arith::MulIOp::create(b, loc, rounds, interleave);
  return arith::AddIOp::create(b, loc, whole, rest);
}

/// P, the sequence's length in positions.
static Value positionLength(const SequenceExtent &sequence) {
  return sequence.globalLength ? sequence.globalLength : sequence.length;
}

mlir::fd::SequenceExtent
mlir::fd::buildSequenceExtent(OpBuilder &b, Location loc, Value length,
                              Value maxLength, const AttentionRules &rules,
                              Value shardRank) {
  if (!rules.kvShard)
    return {buildClampedLength(b, loc, length, maxLength), Value()};
  const KVShard &shard = *rules.kvShard;
  SequenceExtent sequence{
      Value(), Value(), Value(),
      buildClampedLength(b, loc, shardRank, index(b, loc, shard.world - 1)),
      shard};
  // Every rank holds at most maxLength keys of a global length up to
  // world * interleave * (maxLength / interleave) + maxLength % interleave
  // (rank 0 takes the tokens of an incomplete round first).
  Value interleave = index(b, loc, shard.interleave);
  Value blocks = arith::DivUIOp::create(b, loc, maxLength, interleave);
  Value wholeRounds =
      arith::MulIOp::create(b, loc, blocks, index(b, loc, shard.round()));
  Value partialBlock = arith::RemUIOp::create(b, loc, maxLength, interleave);
  Value capacity = arith::AddIOp::create(b, loc, wholeRounds, partialBlock);
  sequence.globalLength = buildClampedLength(b, loc, length, capacity);
  sequence.length = buildLocalKey(b, loc, sequence, sequence.globalLength);
  return sequence;
}

mlir::fd::SequenceExtent
mlir::fd::buildSharedPrefixExtent(OpBuilder &b, Location loc,
                                  const SequenceExtent &prefix,
                                  Value suffixLength) {
  // Positions stay within an i32 (the tensor-core kernel compares keys as
  // i32) for prefixes shorter than 2^30 keys.
  constexpr int64_t kMaxSuffixLength = int64_t(1) << 30;
  SequenceExtent sequence = prefix;
  sequence.globalLength = arith::AddIOp::create(
      b, loc, prefix.length,
      buildClampedLength(b, loc, suffixLength,
                         index(b, loc, kMaxSuffixLength)));
  return sequence;
}

Value mlir::fd::buildClampedPage(OpBuilder &b, Location loc, Value entry,
                                 Value numPages) {
  Value lastPage = arith::SubIOp::create(b, loc, numPages, index(b, loc, 1));
  entry = arith::MaxSIOp::create(b, loc, entry, index(b, loc, 0));
  return arith::MinSIOp::create(b, loc, entry, lastPage);
}

Value mlir::fd::buildQueryLength(OpBuilder &b, Location loc, Value queryLen,
                                 int64_t queryLength) {
  Value maxQueryLength = index(b, loc, queryLength);
  if (!queryLen)
    return maxQueryLength;
  return buildClampedLength(
      b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), queryLen),
      maxQueryLength);
}

Value mlir::fd::buildIsQueryToken(OpBuilder &b, Location loc,
                                  const SequenceExtent &sequence, Value token) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, token,
                               sequence.queryLength);
}

/// The position of the first key some query token may not see: P - n + 1.
static Value buildFirstMaskedPosition(OpBuilder &b, Location loc,
                                      const SequenceExtent &sequence) {
  return arith::AddIOp::create(b, loc,
                               arith::SubIOp::create(b, loc,
                                                     positionLength(sequence),
                                                     sequence.queryLength),
                               index(b, loc, 1));
}

mlir::fd::KeyRange mlir::fd::buildAttendedKeys(OpBuilder &b, Location loc,
                                               const SequenceExtent &sequence,
                                               const AttentionRules &rules) {
  Value first = index(b, loc, 0);
  if (rules.windowLeft) {
    Value firstWindow = arith::SubIOp::create(
        b, loc, buildFirstMaskedPosition(b, loc, sequence),
        index(b, loc, *rules.windowLeft));
    first = sequence.shard ? buildLocalKey(b, loc, sequence, firstWindow)
                           : arith::MaxSIOp::create(b, loc, firstWindow, first);
  }
  Value end = sequence.length;
  if (rules.perSequenceQueryLengths) {
    Value noQueries =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                              sequence.queryLength, index(b, loc, 0));
    end = arith::SelectOp::create(b, loc, noQueries, first, end);
  }
  return {first, end};
}

mlir::fd::ChunkRange
mlir::fd::buildChunkRange(OpBuilder &b, Location loc, Value first, Value length,
                          Value split, int64_t numSplits,
                          std::optional<int64_t> chunkLength) {
  Value span = arith::SubIOp::create(b, loc, length, first);
  Value chunk =
      arith::CeilDivSIOp::create(b, loc, span, index(b, loc, numSplits));
  if (chunkLength)
    chunk = arith::MaxSIOp::create(b, loc, chunk, index(b, loc, *chunkLength));
  Value offset = arith::MinSIOp::create(
      b, loc, arith::MulIOp::create(b, loc, split, chunk), span);
  Value begin = arith::AddIOp::create(b, loc, first, offset);
  Value end = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, begin, chunk), length);
  return {begin, end};
}

Value mlir::fd::buildFirstMaskedKey(OpBuilder &b, Location loc,
                                    const SequenceExtent &sequence) {
  return buildLocalKey(b, loc, sequence,
                       buildFirstMaskedPosition(b, loc, sequence));
}

mlir::fd::KeyRange mlir::fd::buildVisibleKeys(OpBuilder &b, Location loc,
                                              const SequenceExtent &sequence,
                                              Value token,
                                              const AttentionRules &rules) {
  Value end = arith::AddIOp::create(
      b, loc, buildFirstMaskedPosition(b, loc, sequence), token);
  Value begin;
  if (rules.windowLeft)
    begin = buildLocalKey(
        b, loc, sequence,
        arith::SubIOp::create(b, loc, end, index(b, loc, *rules.windowLeft)));
  return {begin, buildLocalKey(b, loc, sequence, end)};
}

Value mlir::fd::buildQueryPosition(OpBuilder &b, Location loc,
                                   const SequenceExtent &sequence,
                                   Value token) {
  Value end = arith::AddIOp::create(
      b, loc, buildFirstMaskedPosition(b, loc, sequence), token);
  return arith::SubIOp::create(b, loc, end, index(b, loc, 1));
}

Value mlir::fd::buildKeyPosition(OpBuilder &b, Location loc,
                                 const SequenceExtent &sequence, Value key) {
  if (!sequence.shard)
    return key;
  const KVShard &shard = *sequence.shard;
  Type type = key.getType();
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantOp::create(b, loc, type,
                                     b.getIntegerAttr(type, value));
  };
  Value rank = sequence.shardRank;
  if (rank.getType() != type)
    rank = arith::IndexCastOp::create(b, loc, type, rank);
  // ((key / I) * W + rank) * I + key % I.
  Value interleave = constant(shard.interleave);
  Value block = arith::DivUIOp::create(b, loc, key, interleave);
  Value rounds = arith::MulIOp::create(b, loc, block, constant(shard.world));
  Value globalBlock = arith::AddIOp::create(b, loc, rounds, rank);
  Value blockStart = arith::MulIOp::create(b, loc, globalBlock, interleave);
  Value inBlock = arith::RemUIOp::create(b, loc, key, interleave);
  return arith::AddIOp::create(b, loc, blockStart, inBlock);
}

int64_t mlir::fd::getAttendedLength(int64_t maxLength,
                                    const AttentionRules &rules) {
  if (!rules.windowLeft)
    return maxLength;
  int64_t window = *rules.windowLeft + rules.queryLength - 1;
  if (rules.kvShard)
    window = ::flashdecode::getMaxShardSpan(window, *rules.kvShard);
  return std::min(maxLength, window);
}

Value mlir::fd::buildSoftCap(OpBuilder &b, Location loc, Value score, float cap,
                             function_ref<Value(Value)> exp2) {
  auto constant = [&](double value) -> Value {
    return arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(static_cast<float>(value)));
  };
  // e^(2 score / cap) = 2^(score * 2 log2(e) / cap).
  Value power = exp2(arith::MulFOp::create(
      b, loc, score, constant(2.0 * llvm::numbers::log2e / cap)));
  Value denominator = arith::AddFOp::create(b, loc, power, constant(1.0));
  // cap * tanh = cap - 2 cap / (e^2y + 1). The division may be approximate
  // (`afn`: div.approx.f32 on the GPU, 2 ulp; 0 for an infinite divisor):
  // an IEEE division's registers made the tensor-core kernel spill.
  return arith::SubFOp::create(
      b, loc, constant(cap),
      arith::DivFOp::create(b, loc, constant(2.0 * cap), denominator,
                            arith::FastMathFlags::afn));
}

Value mlir::fd::buildAlibiBias(OpBuilder &b, Location loc, Value score,
                               Value slope, Value key, Value position) {
  Value distance = arith::SubIOp::create(b, loc, key, position);
  if (distance.getType().isIndex())
    distance = arith::IndexCastOp::create(b, loc, b.getI32Type(), distance);
  Value bias = arith::MulFOp::create(
      b, loc, slope, arith::SIToFPOp::create(b, loc, b.getF32Type(), distance));
  return arith::AddFOp::create(b, loc, score, bias);
}

Value mlir::fd::buildFloat8ToF32(OpBuilder &b, Location loc, Value element) {
  Type i16 = b.getI16Type();
  Type f16 = b.getF16Type();
  Type f32 = b.getF32Type();
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(b, loc, i16, value);
  };
  Value bits = arith::ExtUIOp::create(
      b, loc, i16, arith::BitcastOp::create(b, loc, b.getI8Type(), element));
  if (isa<Float8E5M2Type>(element.getType())) {
    Value half = arith::ShLIOp::create(b, loc, bits, constant(8));
    return arith::ExtFOp::create(
        b, loc, f32, arith::BitcastOp::create(b, loc, f16, half).getResult());
  }
  assert(isa<Float8E4M3FNType>(element.getType()) && "an fp8 element");
  Value magnitude = arith::AndIOp::create(b, loc, bits, constant(0x7f));
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, bits, constant(0x80)), constant(8));
  Value half = arith::OrIOp::create(
      b, loc, sign, arith::ShLIOp::create(b, loc, magnitude, constant(7)));
  Value value = arith::MulFOp::create(
      b, loc,
      arith::ExtFOp::create(
          b, loc, f32, arith::BitcastOp::create(b, loc, f16, half).getResult()),
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(256.0f)));
  Value isNaN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      magnitude, constant(0x7f));
  Value nan = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
  return arith::SelectOp::create(b, loc, isNaN, nan, value);
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
