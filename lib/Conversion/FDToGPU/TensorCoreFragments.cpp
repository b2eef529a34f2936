//===- TensorCoreFragments.cpp - mma operands of the tensor-core tile -----===//
//
// The tensor-core tile's operand plumbing (TensorCoreTile.cpp has the tile):
// staging q's A fragments, packing element pairs into mma words, one
// mma.sync, reading a lane's K/V vector back from its stage as mma words
// (an fp8 cache decoded on the way), and where a published accumulator
// element lies (the swizzle that keeps the 16-byte publishing stores free
// of bank conflicts).
//
//===----------------------------------------------------------------------===//

#include "TensorCoreTileBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

void TensorCoreTileBuilder::stageQueryFragments(Value firstRow) {
  // The block's threads stride over (k-step, lane) and store that lane's
  // four A words of the step: a0, a2 = row g at dims 32c + 8p + 4h + {0,1}
  // and {2,3} (one 8-byte load), a1, a3 the same of row g + 8, for k-step
  // 2c + h. Padding rows (past the block's rows) are zero. In workgroup
  // memory, not registers: the 16-byte read per k-step is cheap, and the
  // registers go to the keys in flight.
  const int64_t headDim = geometry.headDim;
  auto wordsType = VectorType::get({2}, rewriter.getI32Type());
  Value zero = e.i32(0);
  forEachThreadIndex(headDim / 16 * 32, [&](Value entry) {
    Value step = arith::DivUIOp::create(rewriter, e.loc, entry, e.index(32));
    Value entryLane =
        arith::RemUIOp::create(rewriter, e.loc, entry, e.index(32));
    Value row = arith::DivUIOp::create(rewriter, e.loc, entryLane, e.index(4));
    Value pair = arith::RemUIOp::create(rewriter, e.loc, entryLane, e.index(4));
    Value c = arith::DivUIOp::create(rewriter, e.loc, step, e.index(2));
    Value h = arith::RemUIOp::create(rewriter, e.loc, step, e.index(2));
    Value dim = e.add(e.add(e.mul(c, e.index(32)), e.mul(pair, e.index(8))),
                      e.mul(h, e.index(4)));
    for (int64_t half = 0; half < 2; ++half) {
      Value tileRow = e.add(row, e.index(half * 8));
      Value blockRow = e.min(e.add(firstRow, tileRow), lastRow);
      Value offset = e.add(e.mul(queryRow(blockRow), e.index(headDim)), dim);
      Value words = e.load(wordsType, query, elementType, offset, 8);
      Value isReal = isRealRow(firstRow, tileRow);
      for (int64_t i = 0; i < 2; ++i)
        memref::StoreOp::create(
            rewriter, e.loc, e.select(isReal, e.extract(words, i), zero),
            queryFragments, ValueRange{step, entryLane, e.index(half + 2 * i)});
    }
  });
  gpu::BarrierOp::create(rewriter, e.loc);
}

Value TensorCoreTileBuilder::packPair(Value low, Value high) {
  return LLVM::BitcastOp::create(rewriter, e.loc, rewriter.getI32Type(),
                                 e.vector({low, high}));
}

SmallVector<Value> TensorCoreTileBuilder::mma(ArrayRef<Value> a,
                                              ArrayRef<Value> b,
                                              ArrayRef<Value> c) {
  // f16 operands are typed <2 x half>; bf16 ones are i32 words (as the
  // intrinsics take them). nvgpu.mma.sync cannot lower bf16 in MLIR 22.
  bool isF16 = getOperandType().isF16();
  auto operand = [&](Value word) -> Value {
    if (!isF16)
      return word;
    return LLVM::BitcastOp::create(
        rewriter, e.loc, VectorType::get({2}, getOperandType()), word);
  };
  SmallVector<Value> aOperands, bOperands;
  for (Value word : a)
    aOperands.push_back(operand(word));
  for (Value word : b)
    bOperands.push_back(operand(word));
  Type f32 = rewriter.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(rewriter.getContext(),
                                                     SmallVector<Type>(4, f32));
  NVVM::MMATypes type = isF16 ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  Value result = NVVM::MmaOp::create(
      rewriter, e.loc, resultType, aOperands, bOperands, c,
      /*shape=*/{16, 8, 8 * static_cast<int64_t>(b.size())},
      /*b1Op=*/std::nullopt,
      /*intOverflow=*/std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(rewriter, e.loc, result, i));
  return d;
}

Value TensorCoreTileBuilder::accumulatorColumn(Value row, Value dim) {
  // Published as above, the 8 lanes of a 16-byte store's pass (rows g and
  // g + 1, pairs p = 0..3) write dims 16p + c of their rows: p and p + 2
  // meet in the same banks, and so do the two rows (a row is D words, a
  // multiple of 32), four ways. Swapping the dims' bit 3 where bit 5 is set
  // and their bit 2 in odd rows spreads the pass over all 32 banks; the
  // swap keeps 4-dim groups whole (the stores stay 16 bytes) and 32-dim
  // groups in place (a warp reading 32 consecutive dims of a row still
  // meets 32 banks).
  auto bit = [&](Value value, int64_t from, int64_t to) {
    Value shifted =
        arith::ShRUIOp::create(rewriter, e.loc, value, e.index(from));
    Value masked = arith::AndIOp::create(rewriter, e.loc, shifted, e.index(1));
    return arith::ShLIOp::create(rewriter, e.loc, masked, e.index(to));
  };
  Value group = arith::AndIOp::create(rewriter, e.loc, dim, e.index(~3));
  Value swap =
      arith::OrIOp::create(rewriter, e.loc, bit(group, 5, 3), bit(row, 0, 2));
  Value swapped = arith::XOrIOp::create(rewriter, e.loc, group, swap);
  return e.add(swapped,
               arith::AndIOp::create(rewriter, e.loc, dim, e.index(3)));
}

SmallVector<Value> TensorCoreTileBuilder::loadFragmentWords(Value address) {
  Type i32 = rewriter.getI32Type();
  SmallVector<Value> words;
  if (!cache.isFloat8()) {
    Value vector = LLVM::LoadOp::create(
        rewriter, e.loc, VectorType::get({kFragmentWordsPerVector}, i32),
        address, 16);
    for (int64_t word = 0; word < kFragmentWordsPerVector; ++word)
      words.push_back(e.extract(vector, word));
    return words;
  }
  // fp8: 8 bytes, each word decoded to two words of pairs.
  Value vector = LLVM::LoadOp::create(
      rewriter, e.loc, VectorType::get({kFragmentWordsPerVector / 2}, i32),
      address, kFragmentElementsPerVector);
  for (int64_t word = 0; word < kFragmentWordsPerVector / 2; ++word)
    llvm::append_range(words, decodeFloat8Words(e.extract(vector, word)));
  return words;
}

SmallVector<Value> TensorCoreTileBuilder::decodeFloat8Words(Value word) {
  SmallVector<Value> words;
  for (Value pair : getOperandType().isF16()
                        ? decodeFloat8Word(e, cache, word)
                        : decodeFloat8WordToBFloat16(e, cache, word))
    words.push_back(
        LLVM::BitcastOp::create(rewriter, e.loc, rewriter.getI32Type(), pair));
  return words;
}
