//===- OperandChecks.cpp - Shapes in the fd ops' verifiers ----------------===//

#include "OperandChecks.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::fd;

MemRefType mlir::fd::detail::memrefType(Value value) {
  return cast<MemRefType>(value.getType());
}

std::string mlir::fd::detail::formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::interleave(
      shape,
      [&](int64_t dim) {
        text += ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
      },
      [&] { text += ", "; });
  return text + "]";
}

bool mlir::fd::detail::dimsAgree(int64_t lhs, int64_t rhs) {
  return lhs == rhs || ShapedType::isDynamic(lhs) || ShapedType::isDynamic(rhs);
}

bool mlir::fd::detail::shapesAgree(ArrayRef<int64_t> lhs,
                                   ArrayRef<int64_t> rhs) {
  return lhs.size() == rhs.size() &&
         llvm::all_of(llvm::zip_equal(lhs, rhs), [](auto pair) {
           return dimsAgree(std::get<0>(pair), std::get<1>(pair));
         });
}

LogicalResult mlir::fd::detail::verifyOperandShape(
    Operation *op, Value value, StringRef name, ArrayRef<int64_t> expectedShape,
    Type expectedElementType, StringRef meaning) {
  MemRefType type = memrefType(value);
  if (!shapesAgree(type.getShape(), expectedShape) ||
      type.getElementType() != expectedElementType)
    return op->emitOpError() << "'" << name << "' must be " << meaning << " "
                             << formatShape(expectedShape) << " of "
                             << expectedElementType << ", got " << type;
  return success();
}
