//===- AttentionModule.h - The fd IR of a kernel configuration --*- C++ -*-===//

#ifndef FD_COMPILER_ATTENTIONMODULE_H
#define FD_COMPILER_ATTENTIONMODULE_H

#include "fd/Compiler/KernelConfig.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace flashdecode {

/// The MLIR type of `type` (f16, bf16, f32).
mlir::Type getMLIRElementType(mlir::MLIRContext &context, ElementType type);

/// A module for a JIT: one function of `argumentTypes` carrying
/// `llvm.emit_c_interface` (its C interface takes memref descriptors), with
/// the builder at the start of its entry block.
struct FunctionModule {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Location loc;
  mlir::ValueRange arguments;
};
FunctionModule startFunctionModule(mlir::OpBuilder &builder,
                                   llvm::StringRef name,
                                   mlir::TypeRange argumentTypes);

/// Name of the function buildAttentionModule creates.
constexpr const char *kAttentionFunctionName = "fd_decode_attention";

/// A module with one function, `fd_decode_attention`, taking
/// (q, k_cache, v_cache, seq_lens, out[, lse][, block_table]) memrefs with
/// dynamic batch and cache length (page count for paged caches), whose body
/// is one `fd.attention`. It carries
/// `llvm.emit_c_interface` so a JIT can call it with memref descriptors.
/// The configuration must be valid (KernelConfig::validate).
mlir::OwningOpRef<mlir::ModuleOp>
buildAttentionModule(mlir::MLIRContext &context, const KernelConfig &config);

} // namespace flashdecode

#endif // FD_COMPILER_ATTENTIONMODULE_H
