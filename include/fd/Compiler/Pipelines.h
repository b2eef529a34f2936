//===- Pipelines.h - Named flashdecode pipelines ----------------*- C++ -*-===//

#ifndef FD_COMPILER_PIPELINES_H
#define FD_COMPILER_PIPELINES_H

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace fd {

/// fd ops (split or not) -> loops -> LLVM dialect, ready for the CPU JIT or
/// mlir-runner. Registered as `fd-lower-to-cpu`.
void buildLowerToCPUPipeline(mlir::OpPassManager &pm);

/// Registers the fd dialect and the upstream dialects and translations the
/// pipelines produce or consume.
void registerFDDialects(mlir::DialectRegistry &registry);

/// Registers the fd passes and the named pipelines with the pass registry.
void registerFDPassesAndPipelines();

} // namespace fd

#endif // FD_COMPILER_PIPELINES_H
