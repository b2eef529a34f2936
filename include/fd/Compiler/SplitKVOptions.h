//===- SplitKVOptions.h - fd-split-kv's options for a config ----*- C++ -*-===//

#ifndef FD_COMPILER_SPLITKVOPTIONS_H
#define FD_COMPILER_SPLITKVOPTIONS_H

#include "fd/Compiler/KernelConfig.h"
#include "fd/Dialect/FD/Transforms/Passes.h"

namespace flashdecode {

/// fd-split-kv's options for a kernel request: the one mapping from a
/// KernelRequest to the pass, for the GPU and the CPU compilations alike.
mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelRequest &request);

/// The split count a valid `request` compiles with (its manifest's
/// num_splits): 1 without split-KV, a fixed count, or what fd-split-kv plans
/// with getSplitKVOptions(request) for the module the config builds, worked
/// out without building it.
int64_t resolveNumSplits(const KernelRequest &request);

/// The kernel a valid `request` asks for: its config with
/// resolveNumSplits(request) as the fixed count. Requests that plan the same
/// kernels resolve to equal configs (equal toString()), whatever batch and
/// length each planned for: the key under which the JIT caches kernels and
/// the runtime's users (Python's decode_attention and Decoder) share them.
KernelConfig resolve(const KernelRequest &request);

} // namespace flashdecode

#endif // FD_COMPILER_SPLITKVOPTIONS_H
