//===- SplitKVOptions.h - fd-split-kv's options for a config ----*- C++ -*-===//

#ifndef FD_COMPILER_SPLITKVOPTIONS_H
#define FD_COMPILER_SPLITKVOPTIONS_H

#include "fd/Compiler/KernelConfig.h"
#include "fd/Dialect/FD/Transforms/Passes.h"

namespace flashdecode {

/// fd-split-kv's options for a kernel configuration: the one mapping from
/// KernelConfig to the pass, for the GPU and the CPU compilations alike.
mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelConfig &config);

/// The split count the JIT compiles a valid `config` with (its manifest's
/// num_splits): 1 without split-KV, a fixed count, or what fd-split-kv
/// plans with getSplitKVOptions(config) for the module the config builds,
/// worked out without building it.
int64_t resolveNumSplits(const KernelConfig &config);

/// The kernels a valid `request` asks for, apart from how their split count
/// was planned: `request` with resolveNumSplits(request) as its fixed count
/// and its planning hints (batch, maxLength, smCount, blocksPerSM,
/// minChunkLength) at KernelConfig's defaults, maxSplits too unless the
/// count is over it (then the count). Requests that plan the same kernels
/// resolve to equal configs (equal toString()), whatever batch and length
/// each planned for: the key under which the runtime's users compile and
/// share kernels (Python's decode_attention and Decoder).
KernelConfig resolveKernelConfig(const KernelConfig &request);

} // namespace flashdecode

#endif // FD_COMPILER_SPLITKVOPTIONS_H
