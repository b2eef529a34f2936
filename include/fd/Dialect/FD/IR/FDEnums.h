//===- FDEnums.h - The fd dialect's enums -----------------------*- C++ -*-===//
//
// The enums of the fd dialect's attributes (the KV cache layout), without the
// rest of the dialect: the JIT's KernelConfig names its cache layout with
// them, so that one enum serves the IR and the C++ API.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_IR_FDENUMS_H
#define FD_DIALECT_FD_IR_FDENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "fd/Dialect/FD/IR/FDEnums.h.inc"

#endif // FD_DIALECT_FD_IR_FDENUMS_H
