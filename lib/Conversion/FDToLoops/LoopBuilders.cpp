//===- LoopBuilders.cpp - Building blocks of the fd loop lowering ---------===//

#include "LoopBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;

Value mlir::fd::detail::indexConstant(OpBuilder &b, Location loc,
                                      int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value mlir::fd::detail::f32Constant(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value mlir::fd::detail::negativeInfinity(OpBuilder &b, Location loc) {
  return f32Constant(b, loc, -std::numeric_limits<float>::infinity());
}

Value mlir::fd::detail::loadAsF32(OpBuilder &b, Location loc, Value memref,
                                  ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, memref, indices);
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

void mlir::fd::detail::storeFromF32(OpBuilder &b, Location loc, Value value,
                                    Value memref, ValueRange indices) {
  Type elementType = cast<MemRefType>(memref.getType()).getElementType();
  if (elementType != value.getType())
    value = arith::TruncFOp::create(b, loc, elementType, value);
  memref::StoreOp::create(b, loc, value, memref, indices);
}

Value mlir::fd::detail::allocateScratch(OpBuilder &b, Operation *op,
                                        MemRefType type) {
  OpBuilder::InsertionGuard guard(b);
  if (Operation *scope =
          op->getParentWithTrait<OpTrait::AutomaticAllocationScope>())
    b.setInsertionPointToStart(&scope->getRegion(0).front());
  return memref::AllocaOp::create(b, op->getLoc(), type);
}

Value mlir::fd::detail::reciprocalOrZero(OpBuilder &b, Location loc,
                                         SoftmaxState state) {
  Value zero = f32Constant(b, loc, 0.0f);
  Value reciprocal =
      arith::DivFOp::create(b, loc, f32Constant(b, loc, 1.0f), state.sum);
  return arith::SelectOp::create(b, loc, buildSawKeys(b, loc, state.max),
                                 reciprocal, zero);
}

Value mlir::fd::detail::logSumExp(OpBuilder &b, Location loc,
                                  SoftmaxState state) {
  Value hasKeys = buildSawKeys(b, loc, state.max);
  Value lse = arith::AddFOp::create(b, loc, state.max,
                                    math::LogOp::create(b, loc, state.sum));
  return arith::SelectOp::create(b, loc, hasKeys, lse,
                                 negativeInfinity(b, loc));
}
