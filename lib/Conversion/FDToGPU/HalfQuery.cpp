//===- HalfQuery.cpp - bf16 queries multiplied as f16 ---------------------===//
//
// bf16 queries over an fp8 cache with per-tensor scales (or none) multiply
// in f16 on both tensor-core tiles (TensorCoreTileBuilder::
// multipliesInHalf): every fp8 pair decodes to f16 with one conversion,
// where bf16 took twelve instructions. q becomes f16 pairs times a power of
// two 2^k that puts the tile's largest finite |q| in [2^14, 2^15) (k in
// [-113, 100]): every element within 2^-29 of the largest is exact, the
// smaller within 2^-40 of it (f16's subnormals), none overflows; NaN and
// infinities stay, and do not count in the largest (one row's leave the
// others' q as it is). The scores are multiplied by 2^-k.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreTileBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

/// The bf16 pair `word` as two f32s.
static Value widenPair(KernelEmitter &e, Value word) {
  OpBuilder &b = e.b;
  return LLVM::FPExtOp::create(
      b, e.loc, VectorType::get({2}, b.getF32Type()),
      LLVM::BitcastOp::create(b, e.loc, VectorType::get({2}, b.getBF16Type()),
                              word));
}

Value TensorCoreTileBuilder::foldFiniteMagnitudes(Value largest, Value word) {
  // Sign bits cleared; NaN and infinities count 0.
  Value magnitudes = widenPair(
      e, arith::AndIOp::create(rewriter, e.loc, word, e.i32(0x7fff7fff)));
  for (int64_t i = 0; i < 2; ++i) {
    Value magnitude = e.extract(magnitudes, i);
    Value finite = arith::CmpFOp::create(
        rewriter, e.loc, arith::CmpFPredicate::OLT, magnitude,
        e.f32(std::numeric_limits<float>::infinity()));
    largest = e.max(largest, e.select(finite, magnitude, e.f32(0.0)));
  }
  return largest;
}

TensorCoreTileBuilder::HalfQueryScale
TensorCoreTileBuilder::getHalfQueryScale(Value largest) {
  Type f32 = rewriter.getF32Type(), i32 = rewriter.getI32Type();
  // k = 141 - the biased exponent of the largest: it in [2^14, 2^15).
  Value exponent = arith::AndIOp::create(
      rewriter, e.loc,
      arith::ShRUIOp::create(
          rewriter, e.loc,
          LLVM::BitcastOp::create(rewriter, e.loc, i32, largest), e.i32(23)),
      e.i32(0xff));
  Value k = arith::MinSIOp::create(
      rewriter, e.loc,
      arith::MaxSIOp::create(rewriter, e.loc, e.sub(e.i32(141), exponent),
                             e.i32(-113)),
      e.i32(100));
  auto powerOfTwo = [&](Value power) -> Value {
    return LLVM::BitcastOp::create(
        rewriter, e.loc, f32,
        arith::ShLIOp::create(rewriter, e.loc, e.add(power, e.i32(127)),
                              e.i32(23)));
  };
  return {powerOfTwo(k), powerOfTwo(e.sub(e.i32(0), k))};
}

Value TensorCoreTileBuilder::toHalfWord(Value word, Value scale) {
  return LLVM::BitcastOp::create(
      rewriter, e.loc, rewriter.getI32Type(),
      LLVM::FPTruncOp::create(
          rewriter, e.loc, VectorType::get({2}, rewriter.getF16Type()),
          arith::MulFOp::create(rewriter, e.loc, widenPair(e, word),
                                e.vector({scale, scale}))));
}

Value TensorCoreTileBuilder::halveQueryFragments() {
  // A lane's words of a k-step are rows g and g + 8 at its pair's dims, so
  // a warp's lanes hold the tile's whole q: every warp finds the same
  // largest |q| from the staged words, with no exchange.
  const int64_t kSteps = geometry.headDim / 16;
  constexpr int64_t kWords = 4;
  auto word = [&](Value step, Value entryLane, Value index) -> Value {
    return memref::LoadOp::create(rewriter, e.loc, queryFragments,
                                  ValueRange{step, entryLane, index});
  };
  Value largest = e.f32(0.0);
  for (int64_t step = 0; step < kSteps; ++step)
    for (int64_t i = 0; i < kWords; ++i)
      largest =
          foldFiniteMagnitudes(largest, word(e.index(step), lane, e.index(i)));
  largest =
      e.reduceWarp(largest, [&](Value a, Value b) { return e.max(a, b); });
  HalfQueryScale scale = getHalfQueryScale(largest);
  // Every warp has read the bf16 words before any is rewritten.
  gpu::BarrierOp::create(rewriter, e.loc);
  forEachThreadIndex(kSteps * 32 * kWords, [&](Value entry) {
    Value index =
        arith::RemUIOp::create(rewriter, e.loc, entry, e.index(kWords));
    Value rest =
        arith::DivUIOp::create(rewriter, e.loc, entry, e.index(kWords));
    Value entryLane =
        arith::RemUIOp::create(rewriter, e.loc, rest, e.index(32));
    Value step = arith::DivUIOp::create(rewriter, e.loc, rest, e.index(32));
    memref::StoreOp::create(
        rewriter, e.loc, toHalfWord(word(step, entryLane, index), scale.scale),
        queryFragments, ValueRange{step, entryLane, index});
  });
  gpu::BarrierOp::create(rewriter, e.loc);
  return scale.inverse;
}
