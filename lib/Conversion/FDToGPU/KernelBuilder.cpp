//===- KernelBuilder.cpp - Building blocks of the fd GPU kernels ----------===//

#include "KernelBuilder.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace mlir::fd::detail {

SequenceExtent emitSequenceExtent(KernelEmitter &e, Value seqLens,
                                  Value queryLens, Value shardRank, Value batch,
                                  Value maxLength,
                                  const AttentionRules &rules) {
  Type i32 = e.b.getI32Type();
  auto loadIndex = [&](Value pointer, Value position) -> Value {
    return arith::IndexCastOp::create(e.b, e.loc, e.b.getIndexType(),
                                      e.load(i32, pointer, i32, position, 4));
  };
  Value length = loadIndex(seqLens, batch);
  Value rank = shardRank ? loadIndex(shardRank, e.index(0)) : Value();
  SequenceExtent sequence =
      buildSequenceExtent(e.b, e.loc, length, maxLength, rules, rank);
  Value queryLen = queryLens ? e.load(i32, queryLens, i32, batch, 4) : Value();
  sequence.queryLength =
      buildQueryLength(e.b, e.loc, queryLen, rules.queryLength);
  return sequence;
}

ChunkBounds emitChunkBounds(KernelEmitter &e, const SequenceExtent &sequence,
                            Value split, int64_t numSplits,
                            std::optional<int64_t> chunkLength,
                            const AttentionRules &rules) {
  KeyRange attended = buildAttendedKeys(e.b, e.loc, sequence, rules);
  ChunkRange range = buildChunkRange(e.b, e.loc, attended.begin, attended.end,
                                     split, numSplits, chunkLength);
  return {sequence, range.begin, range.end};
}

Value buildRescale(KernelEmitter &e, Value oldMax, Value newMax) {
  return e.select(e.isNegInf(newMax), e.f32(1.0),
                  e.exp2(e.sub(oldMax, newMax)));
}

void combineStates(KernelEmitter &e, RowState &state, const RowState &other) {
  Value newMax = e.max(state.max, other.max);
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

void KernelParameters::addPointer(OpBuilder &b, Location loc, StringRef name,
                                  Value memref) {
  names.push_back(b.getStringAttr(name));
  values.push_back(globalPointer(b, loc, memref));
  types.push_back(values.back().getType());
}

void KernelParameters::addI32(OpBuilder &b, Location loc, StringRef name,
                              Value value) {
  names.push_back(b.getStringAttr(name));
  values.push_back(arith::IndexCastOp::create(b, loc, b.getI32Type(), value));
  types.push_back(b.getI32Type());
}

Value getKernelArgument(gpu::GPUFuncOp kernel, StringRef name) {
  auto names = kernel->getAttrOfType<ArrayAttr>(kKernelParamsAttrName);
  for (auto [index, parameter] : llvm::enumerate(names))
    if (cast<StringAttr>(parameter).getValue() == name)
      return kernel.getArgument(index);
  return Value();
}

gpu::GPUFuncOp createKernel(Operation *anchor, StringRef name,
                            const KernelParameters &parameters,
                            TypeRange workgroupBuffers,
                            ArrayRef<int32_t> blockSize,
                            PatternRewriter &rewriter) {
  auto module = anchor->getParentOfType<ModuleOp>();
  rewriter.modifyOpInPlace(module, [&] {
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    rewriter.getUnitAttr());
  });
  std::string uniqueName = name.str();
  for (int suffix = 1; module.lookupSymbol(uniqueName); ++suffix)
    uniqueName = (name + "_" + Twine(suffix)).str();

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  auto kernels =
      gpu::GPUModuleOp::create(rewriter, anchor->getLoc(), uniqueName);
  rewriter.setInsertionPointToStart(kernels.getBody());
  auto kernel = gpu::GPUFuncOp::create(
      rewriter, anchor->getLoc(), uniqueName,
      rewriter.getFunctionType(parameters.types, {}), workgroupBuffers);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  rewriter.getUnitAttr());
  kernel->setAttr(kKernelParamsAttrName,
                  rewriter.getArrayAttr(parameters.names));
  // The kernels move workgroup memory 16 bytes at a time (.v4): align every
  // buffer to that, not just to its element.
  for (unsigned i = 0; i < workgroupBuffers.size(); ++i)
    kernel.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                       rewriter.getI64IntegerAttr(16));
  if (!blockSize.empty())
    kernel.setKnownBlockSizeAttr(rewriter.getDenseI32ArrayAttr(blockSize));
  return kernel;
}

void launchKernel(OpBuilder &b, Location loc, gpu::GPUFuncOp kernel,
                  ArrayRef<GridDimension> grid, ArrayRef<int64_t> blockSize,
                  const KernelParameters &parameters,
                  int64_t dynamicSharedBytes) {
  assert(grid.size() == 3 && blockSize.size() == 3 && "three dimensions");
  KernelEmitter e{b, loc};
  SmallVector<Attribute> symbols;
  for (const GridDimension &dimension : grid)
    symbols.push_back(b.getStringAttr(dimension.symbol));
  auto launch = gpu::LaunchFuncOp::create(
      b, loc, kernel,
      gpu::KernelDim3{grid[0].value, grid[1].value, grid[2].value},
      gpu::KernelDim3{e.index(blockSize[0]), e.index(blockSize[1]),
                      e.index(blockSize[2])},
      dynamicSharedBytes ? e.i32(dynamicSharedBytes) : Value(),
      parameters.values);
  launch->setAttr(kLaunchGridSymbolsAttrName, b.getArrayAttr(symbols));
}

namespace {
Value pointerTo(OpBuilder &b, Location loc, Value memref,
                unsigned addressSpace) {
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  address = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), addressSpace),
      address);
}
} // namespace

Value globalPointer(OpBuilder &b, Location loc, Value memref) {
  return pointerTo(b, loc, memref, kGlobalAddressSpace);
}

Value sharedPointer(OpBuilder &b, Location loc, Value memref) {
  return pointerTo(b, loc, memref, kSharedAddressSpace);
}

LogicalResult checkLowerable(Operation *op, PatternRewriter &rewriter) {
  std::string reason = getReasonNotLowerableToGPU(op);
  if (!reason.empty())
    return rewriter.notifyMatchFailure(op, reason);
  return success();
}

} // namespace mlir::fd::detail
