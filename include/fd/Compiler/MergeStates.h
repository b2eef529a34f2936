//===- MergeStates.h - Standalone merges of attention states ----*- C++ -*-===//
//
// What a fd.merge_states kernel is specialized on, and its IR: the exact
// log-sum-exp merge of attention states a user computed apart (two calls, a
// shared prefix and its suffixes, the shards of a cache on several GPUs).
//
//===----------------------------------------------------------------------===//

#ifndef FD_COMPILER_MERGESTATES_H
#define FD_COMPILER_MERGESTATES_H

#include "fd/Compiler/KernelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace flashdecode {

/// Name of the function buildMergeStatesModule creates.
constexpr const char *kMergeStatesFunctionName = "fd_merge_states";

/// A merge of states [T, N_i, H, D] (one operand per entry of
/// statesPerOperand) into [T, H, D]; T stays dynamic.
struct MergeStatesConfig {
  ElementType elementType = ElementType::F16;
  /// N_i of each states operand: {N} merges one [T, N, H, D] array, {1, 1}
  /// two [T, H, D] ones.
  std::vector<int64_t> statesPerOperand = {2};
  int64_t numHeads = 32;
  int64_t headDim = 128;
  /// The lses, in and out, are base 2 (FlashInfer's); else natural logs.
  bool lseBase2 = false;
  /// A [T] i8 mask: only rows whose flag is nonzero are written.
  bool withMask = false;

  /// An empty string when supported, otherwise a sentence naming the field
  /// and the accepted values.
  std::string validate() const;
  /// Every field as `name=value` pairs: equal strings, equal kernels.
  std::string toString() const;
};

/// A module with one function, `fd_merge_states`, taking (states...,
/// state_lses..., output, lse[, mask]) memrefs of dynamic T whose body is
/// one fd.merge_states; it carries `llvm.emit_c_interface`. The config must
/// be valid.
mlir::OwningOpRef<mlir::ModuleOp>
buildMergeStatesModule(mlir::MLIRContext &context,
                       const MergeStatesConfig &config);

struct CompiledKernels;

/// The kernel of `config` for `arch` (PTX ISA `ptxVersion`), without a cache:
/// one PTX text (one kernel, launched on (rows, H, 1) blocks:
/// getMergeStatesEntry) and a manifest of its ABI ("kernels": parameters
/// states_0.., state_lses_0.., output, lse[, mask], grid and block). Fails
/// naming the unsupported field.
llvm::Expected<CompiledKernels>
compileMergeStates(const MergeStatesConfig &config, const std::string &arch,
                   int ptxVersion);

/// What a launch of compileMergeStates' kernel needs, as its manifest says
/// (the lowering chose them): the kernel's name in the PTX and its block's
/// threads.
struct MergeStatesEntry {
  std::string name;
  int64_t threads = 0;
};
MergeStatesEntry getMergeStatesEntry(const CompiledKernels &kernels);

} // namespace flashdecode

#endif // FD_COMPILER_MERGESTATES_H
