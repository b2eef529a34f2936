//===- SplitKVOptions.h - fd-split-kv's options for a config ----*- C++ -*-===//

#ifndef FD_COMPILER_SPLITKVOPTIONS_H
#define FD_COMPILER_SPLITKVOPTIONS_H

#include "fd/Compiler/KernelConfig.h"
#include "fd/Dialect/FD/Transforms/Passes.h"

namespace flashdecode {

/// fd-split-kv's options for a kernel configuration: the one mapping from
/// KernelConfig to the pass, for the GPU and the CPU compilations alike.
mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelConfig &config);

} // namespace flashdecode

#endif // FD_COMPILER_SPLITKVOPTIONS_H
