//===- KernelBuilder.h - Building blocks of the fd GPU kernels --*- C++ -*-===//
//
// Private to the FDToGPU lowering: an emitter with short names for the ops
// the kernels are written in, the chunk bounds of a split, the online-softmax
// state of a row and its combination, and one gpu.module per kernel.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_KERNELBUILDER_H
#define FD_LIB_CONVERSION_FDTOGPU_KERNELBUILDER_H

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

#include <array>
#include <limits>
#include <optional>

namespace mlir::fd::detail {

constexpr unsigned kGlobalAddressSpace = 1;
constexpr unsigned kSharedAddressSpace = 3;

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
  /// Of floats, NaN if either is (arith.maximumf).
  Value max(Value lhs, Value rhs) {
    if (isa<FloatType>(lhs.getType()))
      return arith::MaximumFOp::create(b, loc, lhs, rhs);
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
  Value toI64(Value indexValue) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), indexValue);
  }
  Value toI32(Value indexValue) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), indexValue);
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
  /// Combines a value across the 32 lanes of a warp with xor shuffles.
  Value reduceWarp(Value value, function_ref<Value(Value, Value)> combine) {
    for (int64_t offset = 16; offset > 0; offset /= 2)
      value = combine(value, shuffleXor(value, offset));
    return value;
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
  /// The vector of `elements` (all of one type), element i at position i.
  Value vector(ArrayRef<Value> elements) {
    Value result = LLVM::PoisonOp::create(
        b, loc,
        VectorType::get({static_cast<int64_t>(elements.size())},
                        elements.front().getType()));
    for (auto [position, element] : llvm::enumerate(elements))
      result =
          LLVM::InsertElementOp::create(b, loc, result, element, i32(position));
    return result;
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

/// The element type of a cache and how the kernels read it: 16- and 32-bit
/// caches hold the query's type; an fp8 cache (f8E4M3FN, f8E5M2) is decoded
/// to f16 pairs four elements at a time (decodeFloat8Word).
struct CacheElements {
  Type type;
  /// Whether the target converts fp8 pairs in one instruction
  /// (hasFloat8Conversions).
  bool hardwareConversion = false;

  bool isFloat8() const { return type.getIntOrFloatBitWidth() == 8; }
  int64_t bytes() const { return type.getIntOrFloatBitWidth() / 8; }
  /// The type the kernels address the cache in: i8 for fp8 (LLVM has no
  /// fp8 type), else the element type.
  Type addressType() const {
    return isFloat8() ? IntegerType::get(type.getContext(), 8) : type;
  }
  /// What the decoded values are short of the cache's by: 256 where E4M3
  /// is decoded by bit operations (its magnitude bits placed in an f16 are
  /// the value / 2^8, normal or subnormal), else 1. The kernels fold it into
  /// the scales.
  double decodeFactor() const {
    return isa<Float8E4M3FNType>(type) && !hardwareConversion ? 256.0 : 1.0;
  }
  /// What a tensor-core kernel multiplies P by beside per-token value scales
  /// before rounding it to the query's type, and divides the output by: a
  /// scale is about amax / 448 (E4M3) or amax / 57344 (E5M2), so P times it
  /// would lie among f16's subnormals or round to zero; times 2^8 (2^15)
  /// it is about P * amax / 2, as P * v is with an f16 cache.
  double probabilityFactor() const {
    return isa<Float8E5M2Type>(type) ? 32768.0 : 256.0;
  }
};

/// Decodes the four fp8 elements of `word` (an i32, element 0 in its low
/// byte) into two <2 x f16>: elements 0, 1 and 2, 3, each the element's
/// value / cache.decodeFactor(), exactly (NaN, infinities, zeros and
/// subnormals included): the packed form of buildFloat8ToF32's rule.
std::array<Value, 2> decodeFloat8Word(KernelEmitter &e,
                                      const CacheElements &cache, Value word);

/// decodeFloat8Word's pairs as <2 x bf16>, each the element's value /
/// cache.decodeFactor() exactly (every fp8 value is a bf16 too), by integer
/// operations and one bf16 multiply.
std::array<Value, 2> decodeFloat8WordToBFloat16(KernelEmitter &e,
                                                const CacheElements &cache,
                                                Value word);

/// The chunk [begin, end) of sequence `batch` that split `split` of
/// `numSplits` covers, and the sequence's extent (clamped length and query
/// tokens), per the semantics of fd.partial_attention.
struct ChunkBounds {
  SequenceExtent sequence;
  Value begin, end;
};

/// Reads sequence `batch`'s length from `seqLens`, with per-sequence query
/// lengths its query length from `queryLens`, and with a KV shard this
/// rank from `shardRank` (each null when absent): buildSequenceExtent.
SequenceExtent emitSequenceExtent(KernelEmitter &e, Value seqLens,
                                  Value queryLens, Value shardRank, Value batch,
                                  Value maxLength, const AttentionRules &rules);

ChunkBounds emitChunkBounds(KernelEmitter &e, const SequenceExtent &sequence,
                            Value split, int64_t numSplits,
                            std::optional<int64_t> chunkLength,
                            const AttentionRules &rules);

/// The online-softmax state of one query row in one lane group: running max
/// and sum of 2^(score - max), and the lane's slice of sum p * v.
struct RowState {
  Value max, sum;
  SmallVector<Value> accumulator;
};

/// The factor 2^(oldMax - newMax) a row's sum and accumulators are
/// rescaled by when its running max moves to `newMax`; 1 while nothing is
/// visible yet (newMax -inf: 2^(-inf - -inf) would be NaN), so the empty
/// state stays empty. A NaN max propagates.
Value buildRescale(KernelEmitter &e, Value oldMax, Value newMax);

/// Merges `other` into `state` (both partial softmaxes of the same row).
void combineStates(KernelEmitter &e, RowState &state, const RowState &other);

/// The global address of a contiguous memref's data, for a kernel argument.
Value globalPointer(OpBuilder &b, Location loc, Value memref);
/// The shared-memory address of a workgroup buffer's data.
Value sharedPointer(OpBuilder &b, Location loc, Value memref);

/// A kernel's parameters, in order, as one list: each one's name (the
/// runtime binds buffers by it: docs/KernelABI.md), its type in the kernel
/// and the value the launch passes. The kernel records the names
/// (kKernelParamsAttrName, FDToGPU.h), which the JIT writes into the
/// manifest: the ABI is stated once, where the launch is built.
struct KernelParameters {
  SmallVector<Attribute> names;
  SmallVector<Type> types;
  SmallVector<Value> values;

  /// A global pointer to `memref`'s data.
  void addPointer(OpBuilder &b, Location loc, StringRef name, Value memref);
  /// An i32 of the index `value`.
  void addI32(OpBuilder &b, Location loc, StringRef name, Value value);
};

/// The argument of `kernel` (made by createKernel) for parameter `name`, or
/// null when it has none.
Value getKernelArgument(gpu::GPUFuncOp kernel, StringRef name);

/// Creates `gpu.module @name { gpu.func @name kernel }` at the end of the
/// enclosing module, with `name` uniqued there, the parameters'
/// types and names, and a known block size unless `blockSize` is empty. One
/// module per kernel: each becomes its own PTX file and the runtime loads
/// what it launches.
gpu::GPUFuncOp createKernel(Operation *anchor, StringRef name,
                            const KernelParameters &parameters,
                            TypeRange workgroupBuffers,
                            ArrayRef<int32_t> blockSize,
                            PatternRewriter &rewriter);

/// One dimension of a kernel's grid: the value it is launched with and,
/// when that is not a number fixed at compile time, the manifest symbol the
/// runtime computes it from ("batch", or "batch/N" for ceil(batch / N));
/// a split count is fixed in the kernel yet named ("num_splits") so the
/// manifest says what it is.
struct GridDimension {
  Value value;
  std::string symbol = "";
};

/// Launches `kernel` on `grid` with `blockSize` threads, the parameters'
/// values and `dynamicSharedBytes` of dynamic shared memory, recording the
/// grid's symbols (kLaunchGridSymbolsAttrName).
void launchKernel(OpBuilder &b, Location loc, gpu::GPUFuncOp kernel,
                  ArrayRef<GridDimension> grid, ArrayRef<int64_t> blockSize,
                  const KernelParameters &parameters,
                  int64_t dynamicSharedBytes = 0);

/// Fails the match, with getReasonNotLowerableToGPU's reason, when `op`
/// cannot be lowered.
LogicalResult checkLowerable(Operation *op, PatternRewriter &rewriter);

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_KERNELBUILDER_H
