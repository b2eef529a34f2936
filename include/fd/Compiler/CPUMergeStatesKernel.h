//===- CPUMergeStatesKernel.h - fd.merge_states on the CPU ------*- C++ -*-===//
//
// Compiles a MergeStatesConfig through the CPU lowering (convert-fd-to-loops,
// then LLVM) and runs it in process on host buffers: the executable
// specification of the merge, and flashdecode.merge_states on numpy arrays.
//
//===----------------------------------------------------------------------===//

#ifndef FD_COMPILER_CPUMERGESTATESKERNEL_H
#define FD_COMPILER_CPUMERGESTATESKERNEL_H

#include "fd/Compiler/MergeStates.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace flashdecode {

/// Host buffers of one merge, contiguous in the config's shapes.
struct MergeStatesBuffers {
  /// One [rows, N_i, H, D] array of the config's element type, and one
  /// [rows, N_i, H] float array, per states operand.
  std::vector<const void *> states;
  std::vector<const float *> stateLses;
  /// [rows, H, D] and [rows, H]; may be a one-state operand's memory (an
  /// in-place merge).
  void *output = nullptr;
  float *lse = nullptr;
  /// [rows] flags, exactly when the config has a mask.
  const int8_t *mask = nullptr;
  int64_t rows = 0;
};

class CPUMergeStatesKernel {
public:
  /// Builds, lowers and JIT-compiles the merge; fails with a message naming
  /// the unsupported field or the failing stage.
  static llvm::Expected<std::unique_ptr<CPUMergeStatesKernel>>
  compile(const MergeStatesConfig &config);
  ~CPUMergeStatesKernel();

  llvm::Error run(const MergeStatesBuffers &buffers) const;
  const MergeStatesConfig &getConfig() const { return config; }

private:
  CPUMergeStatesKernel() = default;

  MergeStatesConfig config;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

} // namespace flashdecode

#endif // FD_COMPILER_CPUMERGESTATESKERNEL_H
