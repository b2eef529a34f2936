//===- OperandChecks.h - Shapes in the fd ops' verifiers --------*- C++ -*-===//
//
// Private to the dialect: how the verifiers compare operand shapes and name
// them in their messages, shared by FDOps.cpp and MergeStatesOp.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_DIALECT_FD_IR_OPERANDCHECKS_H
#define FD_LIB_DIALECT_FD_IR_OPERANDCHECKS_H

#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <string>

namespace mlir::fd::detail {

MemRefType memrefType(Value value);

/// Prints a shape as `[1, ?, 8, 128]`, the way the messages name shapes.
std::string formatShape(ArrayRef<int64_t> shape);

/// Two dimensions agree when equal or when either is only known at run time.
bool dimsAgree(int64_t lhs, int64_t rhs);
bool shapesAgree(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs);

/// Checks that `value` is a memref of `expectedShape` (dynamic entries match
/// anything) with element type `expectedElementType`; the message names the
/// operand `name` and what it must be (`meaning`).
LogicalResult verifyOperandShape(Operation *op, Value value, StringRef name,
                                 ArrayRef<int64_t> expectedShape,
                                 Type expectedElementType, StringRef meaning);

/// Checks that an attention op has `kv_shard` and `kv_shard_rank` together
/// and that the rank is a [1] i32 memref (KVShard.cpp).
LogicalResult verifyKVShard(AttentionOpInterface op);

} // namespace mlir::fd::detail

#endif // FD_LIB_DIALECT_FD_IR_OPERANDCHECKS_H
