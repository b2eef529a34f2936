//===- Float8Decode.cpp - fp8 cache elements to f16 pairs -----------------===//
//
// An fp8 value is exactly an f16 (E5M2 is an f16's high byte; E4M3FN's
// magnitude bits placed in an f16 are its value / 2^8), so the kernels
// decode to f16 pairs: one instruction per pair where the chip has it
// (cvt.rn.f16x2.e4m3x2 / e5m2x2: hasFloat8Conversions), a byte permute and a
// few integer operations on every other chip, two elements at a time.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

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

/// Bit operations: elements 2 * pair and 2 * pair + 1 as the high bytes of
/// the two halves of a word, decoded in place.
static Value decodePair(KernelEmitter &e, const CacheElements &cache,
                        Value bytes, int64_t pair) {
  Type i32 = e.b.getI32Type();
  // A byte permute: [0, b0, 0, b1] (zeros from the second operand).
  auto zeros = LLVM::ZeroOp::create(e.b, e.loc, bytes.getType());
  Value spread = LLVM::ShuffleVectorOp::create(
      e.b, e.loc, bytes, zeros,
      ArrayRef<int32_t>{4, static_cast<int32_t>(2 * pair), 5,
                        static_cast<int32_t>(2 * pair + 1)});
  Value word = LLVM::BitcastOp::create(e.b, e.loc, i32, spread);
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
    Value nanBits = arith::AndIOp::create(
        e.b, e.loc,
        e.add(arith::AndIOp::create(e.b, e.loc, word, constant(0x7f007f00)),
              constant(0x01000100)),
        constant(0x80008000));
    Value nanExponent = e.sub(
        nanBits, arith::ShRUIOp::create(e.b, e.loc, nanBits, constant(5)));
    word = arith::OrIOp::create(
        e.b, e.loc, arith::OrIOp::create(e.b, e.loc, sign, magnitude),
        nanExponent);
  }
  return LLVM::BitcastOp::create(e.b, e.loc,
                                 VectorType::get({2}, e.b.getF16Type()), word);
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
