//===- CPUJit.h - JIT-compiling fd IR for the host CPU ----------*- C++ -*-===//
//
// Private to lib/Compiler: what the CPU kernels (CPUAttentionKernel,
// CPUMergeStatesKernel) share: fd-lower-to-cpu and MLIR's ExecutionEngine,
// and the memref descriptors their functions' C interface takes.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_COMPILER_CPUJIT_H
#define FD_LIB_COMPILER_CPUJIT_H

#include "DiagnosticCollector.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <string>

namespace flashdecode {

/// Lowers `module` (fd ops on memrefs, no split left to plan) with
/// fd-lower-to-cpu and JIT-compiles it for this CPU; failures carry what
/// `diagnostics` collected.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>>
compileForCPU(mlir::ModuleOp module, const DiagnosticCollector &diagnostics);

/// A ranked, contiguous memref descriptor as the C interface of MLIR
/// functions expects it: allocated and aligned pointers, offset, sizes,
/// strides (all 8 bytes).
llvm::SmallVector<int64_t> makeDescriptor(const void *data,
                                          llvm::ArrayRef<int64_t> shape);

/// Calls `_mlir_ciface_<function>` with one descriptor an argument.
llvm::Error
invokeWithDescriptors(mlir::ExecutionEngine &engine,
                      const std::string &function,
                      llvm::ArrayRef<llvm::SmallVector<int64_t>> descriptors);

} // namespace flashdecode

#endif // FD_LIB_COMPILER_CPUJIT_H
