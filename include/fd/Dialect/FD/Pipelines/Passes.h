//===- Passes.h - fd pass pipelines -----------------------------*- C++ -*-===//
//
// The named pipelines from fd ops to PTX and to the LLVM dialect for the CPU,
// beside the dialect as upstream's GPU pipelines
// (mlir/Dialect/GPU/Pipelines/Passes.h), so that fd-opt registers them
// without linking the JIT.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_PIPELINES_PASSES_H
#define FD_DIALECT_FD_PIPELINES_PASSES_H

#include "fd/Dialect/FD/Pipelines/LowerToPTXStage.h"
#include "fd/Dialect/FD/Transforms/Passes.h"
#include "fd/Planning/Chip.h"

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace mlir::fd {

/// Options of the `fd-lower-to-ptx` pipeline: the target's, and
/// fd-split-kv's planning options under the pass's names and member names
/// with the pass's defaults (read with readSplitKVOptions). `chip` and
/// `fuse-merge` also choose the kernels convert-fd-to-gpu builds.
struct LowerToPTXOptions : PassPipelineOptions<LowerToPTXOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("Target GPU: sm_80, sm_86, sm_89, "
                                          "sm_90 or sm_90a"),
                           llvm::cl::init(FDSplitKVOptions().chip)};
  Option<int> ptxVersion{
      *this, "ptx-version",
      llvm::cl::desc("PTX ISA version times ten (78 = 7.8); at least 78 for "
                     "sm_90, 70 for sm_80"),
      llvm::cl::init(80)};
  Option<int64_t> numSplits{*this, "num-splits",
                            llvm::cl::desc("fd-split-kv num-splits"),
                            llvm::cl::init(FDSplitKVOptions().numSplits)};
  Option<int64_t> smCount{*this, "sm-count",
                          llvm::cl::desc("fd-split-kv sm-count"),
                          llvm::cl::init(FDSplitKVOptions().smCount)};
  Option<int64_t> blocksPerSM{*this, "blocks-per-sm",
                              llvm::cl::desc("fd-split-kv blocks-per-sm"),
                              llvm::cl::init(FDSplitKVOptions().blocksPerSM)};
  Option<int64_t> minChunkLength{
      *this, "min-chunk-length", llvm::cl::desc("fd-split-kv min-chunk-length"),
      llvm::cl::init(FDSplitKVOptions().minChunkLength)};
  Option<int64_t> maxSplits{*this, "max-splits",
                            llvm::cl::desc("fd-split-kv max-splits"),
                            llvm::cl::init(FDSplitKVOptions().maxSplits)};
  Option<int64_t> chunkLength{*this, "chunk-length",
                              llvm::cl::desc("fd-split-kv chunk-length"),
                              llvm::cl::init(FDSplitKVOptions().chunkLength)};
  Option<int64_t> batchHint{*this, "batch", llvm::cl::desc("fd-split-kv batch"),
                            llvm::cl::init(FDSplitKVOptions().batchHint)};
  Option<int64_t> maxLengthHint{
      *this, "max-len", llvm::cl::desc("fd-split-kv max-len"),
      llvm::cl::init(FDSplitKVOptions().maxLengthHint)};
  Option<bool> fusedMerge{
      *this, "fuse-merge",
      llvm::cl::desc("convert-fd-to-gpu fuse-merge (and fd-split-kv "
                     "fused-merge)"),
      llvm::cl::init(FDSplitKVOptions().fusedMerge)};
};

/// fd ops -> split (with `split`) -> GPU kernels -> NVVM -> PTX of
/// `ptxVersion`: the passes of the stages `firstStage` to `lastStage`. The
/// kernels are built for the chip the split is planned for
/// (`split.chip`), with the merge fused into the partial kernel when it is
/// planned so (`split.fusedMerge`): one source for both. Registered as
/// `fd-lower-to-ptx`.
void buildLowerToPTXPipeline(
    OpPassManager &pm, const FDSplitKVOptions &split, int ptxVersion,
    LowerToPTXStage firstStage = LowerToPTXStage::Split,
    LowerToPTXStage lastStage = LowerToPTXStage::PTX);

/// fd ops (split or not) -> loops -> LLVM dialect, ready for the CPU JIT or
/// mlir-runner. Registered as `fd-lower-to-cpu`.
void buildLowerToCPUPipeline(OpPassManager &pm);

/// Registers the fd dialect and the upstream dialects and translations the
/// pipelines produce or consume.
void registerFDDialects(DialectRegistry &registry);

/// Registers the fd passes and the named pipelines with the pass registry.
void registerFDPassesAndPipelines();

} // namespace mlir::fd

#endif // FD_DIALECT_FD_PIPELINES_PASSES_H
