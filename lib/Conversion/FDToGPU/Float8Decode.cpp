//===- Float8Decode.cpp - fp8 cache elements to f16 pairs -----------------===//
//
// An fp8 value is exactly an f16 (E5M2 is an f16's high byte; E4M3FN's
// magnitude bits placed in an f16 are its value / 2^8), so the kernels
// decode to f16 pairs: one instruction per pair where the chip has it
// (cvt.rn.f16x2.e4m3x2 / e5m2x2: hasFloat8Conversions), a byte permute and a
// few integer operations on every other chip, two elements at a time. For
// bf16 queries the integer operations make bf16 pairs directly (no chip
// converts fp8 to bf16 in one instruction; through f16 and f32 it took four
// conversions a pair).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

/// Hardware: elements 2 * pair and 2 * pair + 1 of the word's bytes through
/// one cvt.
static Value convertPair(KernelEmitter &e, const CacheElements &cache,
                         Value bytes, int64_t pair) {
  Value two = LLVM::ShuffleVectorOp::create(
      e.b, e.loc, bytes, bytes,
      ArrayRef<int32_t>{static_cast<int32_t>(2 * pair),
                        static_cast<int32_t>(2 * pair + 1)});
  return NVVM::ConvertF8x2ToF16x2Op::create(
      e.b, e.loc, VectorType::get({2}, e.b.getF16Type()), two,
      /*relu=*/false, cache.type);
}

/// Elements 2 * pair and 2 * pair + 1 of `bytes` as the high bytes of the
/// two halves of an i32, the low bytes zero (a byte permute).
static Value spreadPair(KernelEmitter &e, Value bytes, int64_t pair) {
  auto zeros = LLVM::ZeroOp::create(e.b, e.loc, bytes.getType());
  Value spread = LLVM::ShuffleVectorOp::create(
      e.b, e.loc, bytes, zeros,
      ArrayRef<int32_t>{4, static_cast<int32_t>(2 * pair), 5,
                        static_cast<int32_t>(2 * pair + 1)});
  return LLVM::BitcastOp::create(e.b, e.loc, e.b.getI32Type(), spread);
}

/// Bit 15 of each half of `word` set where the half's bits under `mask` (a
/// half's) are all ones: adding the mask's lowest bit to them carries into
/// bit 15 (the mask leaves bit 15 out).
static Value halvesWithAllOnes(KernelEmitter &e, Value word, uint32_t mask) {
  const uint32_t lowest = mask & (~mask + 1);
  Value masked =
      arith::AndIOp::create(e.b, e.loc, word, e.i32(mask * 0x00010001u));
  return arith::AndIOp::create(e.b, e.loc,
                               e.add(masked, e.i32(lowest * 0x00010001u)),
                               e.i32(0x80008000));
}

/// Bit operations: elements 2 * pair and 2 * pair + 1 as the high bytes of
/// the two halves of a word, decoded in place.
static Value decodePair(KernelEmitter &e, const CacheElements &cache,
                        Value bytes, int64_t pair) {
  Value word = spreadPair(e, bytes, pair);
  auto constant = [&](uint32_t value) { return e.i32(value); };
  if (isa<Float8E4M3FNType>(cache.type)) {
    // Sign bit in place, magnitude shifted one right into the f16's exponent
    // and mantissa: the value / 2^8 (E4M3FN's bias 7 against f16's 15, its
    // subnormals onto f16 subnormals alike). Magnitude 0x7f is NaN: adding 1
    // to it carries into bit 7 of its byte, which turned into 0x7c00 (all
    // exponent bits) makes the half an f16 NaN.
    Value sign = arith::AndIOp::create(e.b, e.loc, word, constant(0x80008000));
    Value magnitude = arith::AndIOp::create(
        e.b, e.loc, arith::ShRUIOp::create(e.b, e.loc, word, constant(1)),
        constant(0x3f803f80));
    Value nanBits = halvesWithAllOnes(e, word, 0x7f00);
    Value nanExponent = e.sub(
        nanBits, arith::ShRUIOp::create(e.b, e.loc, nanBits, constant(5)));
    word = arith::OrIOp::create(
        e.b, e.loc, arith::OrIOp::create(e.b, e.loc, sign, magnitude),
        nanExponent);
  }
  return LLVM::BitcastOp::create(e.b, e.loc,
                                 VectorType::get({2}, e.b.getF16Type()), word);
}

/// bf16 pairs by bit operations: the magnitude bits shifted into a bf16's
/// exponent and mantissa are a bf16 (normal or subnormal) of the value /
/// 2^(127 - bias); a bf16 multiply by that power of two over the decode
/// factor is exact (bf16 arithmetic keeps subnormal inputs: PTX has no .ftz
/// for it). Where the element's exponent bits are all ones (E4M3FN's NaN,
/// magnitude 0x7f; E5M2's infinities and NaNs) a carry out of them sets
/// the bf16's exponent bits afterwards: the product's mantissa, zero only
/// for an infinity, is the element's.
static Value decodePairToBFloat16(KernelEmitter &e, const CacheElements &cache,
                                  Value bytes, int64_t pair) {
  Value word = spreadPair(e, bytes, pair);
  auto constant = [&](uint32_t value) { return e.i32(value); };
  const bool e4m3 = isa<Float8E4M3FNType>(cache.type);
  const int64_t exponentBits = e4m3 ? 4 : 5, bias = e4m3 ? 7 : 15;
  const uint32_t shift = 8 - exponentBits;
  Value sign = arith::AndIOp::create(e.b, e.loc, word, constant(0x80008000));
  Value magnitude = arith::AndIOp::create(
      e.b, e.loc, arith::ShRUIOp::create(e.b, e.loc, word, constant(shift)),
      constant((0x7f00u >> shift) * 0x00010001u));
  Type pairType = VectorType::get({2}, e.b.getBF16Type());
  Value bits = LLVM::BitcastOp::create(
      e.b, e.loc, pairType, arith::OrIOp::create(e.b, e.loc, sign, magnitude));
  const double factor =
      std::ldexp(1.0, static_cast<int>(127 - bias)) / cache.decodeFactor();
  Value scaled = arith::MulFOp::create(
      e.b, e.loc, bits,
      arith::ConstantOp::create(
          e.b, e.loc,
          DenseElementsAttr::get(
              cast<ShapedType>(pairType),
              e.b.getFloatAttr(e.b.getBF16Type(), factor).getValue())));
  // E4M3FN: all seven magnitude bits; E5M2: the exponent's five.
  Value specialBits = halvesWithAllOnes(e, word, e4m3 ? 0x7f00 : 0x7c00);
  Value specialExponent =
      e.sub(specialBits,
            arith::ShRUIOp::create(e.b, e.loc, specialBits, constant(8)));
  return LLVM::BitcastOp::create(
      e.b, e.loc, pairType,
      arith::OrIOp::create(
          e.b, e.loc,
          LLVM::BitcastOp::create(e.b, e.loc, e.b.getI32Type(), scaled),
          specialExponent));
}

std::array<Value, 2> mlir::fd::detail::decodeFloat8WordToBFloat16(
    KernelEmitter &e, const CacheElements &cache, Value word) {
  Value bytes = LLVM::BitcastOp::create(
      e.b, e.loc, VectorType::get({4}, e.b.getI8Type()), word);
  return {decodePairToBFloat16(e, cache, bytes, 0),
          decodePairToBFloat16(e, cache, bytes, 1)};
}

std::array<Value, 2>
mlir::fd::detail::decodeFloat8Word(KernelEmitter &e, const CacheElements &cache,
                                   Value word) {
  Value bytes = LLVM::BitcastOp::create(
      e.b, e.loc, VectorType::get({4}, e.b.getI8Type()), word);
  std::array<Value, 2> pairs;
  for (int64_t pair = 0; pair < 2; ++pair)
    pairs[pair] = cache.hardwareConversion ? convertPair(e, cache, bytes, pair)
                                           : decodePair(e, cache, bytes, pair);
  return pairs;
}
