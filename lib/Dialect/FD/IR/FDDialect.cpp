//===- FDDialect.cpp - Flash-Decoding dialect -----------------------------===//

#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fd;

#include "fd/Dialect/FD/IR/FDOpsDialect.cpp.inc"

#include "fd/Dialect/FD/IR/FDEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fd/Dialect/FD/IR/FDAttrs.cpp.inc"

void FDDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fd/Dialect/FD/IR/FDOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fd/Dialect/FD/IR/FDAttrs.cpp.inc"
      >();
}
