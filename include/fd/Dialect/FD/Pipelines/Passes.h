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

/// Options of the `fd-lower-to-ptx` pipeline.
struct LowerToPTXOptions : PassPipelineOptions<LowerToPTXOptions> {
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target GPU: sm_80, sm_86, sm_89, "
                     "sm_90 or sm_90a"),
      llvm::cl::init(std::string(::flashdecode::kDefaultChipName))};
  Option<int> ptxVersion{
      *this, "ptx-version",
      llvm::cl::desc("PTX ISA version times ten (78 = 7.8); at least 78 for "
                     "sm_90, 70 for sm_80"),
      llvm::cl::init(80)};
  Option<int64_t> numSplits{*this, "num-splits",
                            llvm::cl::desc("fd-split-kv num-splits"),
                            llvm::cl::init(0)};
  Option<int64_t> smCount{
      *this, "sm-count", llvm::cl::desc("fd-split-kv sm-count"),
      llvm::cl::init(::flashdecode::SplitPlannerOptions().smCount)};
  Option<int64_t> blocksPerSM{
      *this, "blocks-per-sm", llvm::cl::desc("fd-split-kv blocks-per-sm"),
      llvm::cl::init(::flashdecode::SplitPlannerOptions().blocksPerSM)};
  Option<int64_t> minChunkLength{
      *this, "min-chunk-length", llvm::cl::desc("fd-split-kv min-chunk-length"),
      llvm::cl::init(::flashdecode::SplitPlannerOptions().minChunkLength)};
  Option<int64_t> maxSplits{
      *this, "max-splits", llvm::cl::desc("fd-split-kv max-splits"),
      llvm::cl::init(::flashdecode::SplitPlannerOptions().maxSplits)};
  Option<int64_t> chunkLength{*this, "chunk-length",
                              llvm::cl::desc("fd-split-kv chunk-length"),
                              llvm::cl::init(0)};
  Option<int64_t> batch{*this, "batch", llvm::cl::desc("fd-split-kv batch"),
                        llvm::cl::init(0)};
  Option<int64_t> maxLength{*this, "max-len",
                            llvm::cl::desc("fd-split-kv max-len"),
                            llvm::cl::init(0)};
  Option<bool> fuseMerge{*this, "fuse-merge",
                         llvm::cl::desc("convert-fd-to-gpu fuse-merge"),
                         llvm::cl::init(false)};
};

/// The GPU a PTX pipeline compiles for, and whether its kernels merge in
/// the partial kernel (convert-fd-to-gpu's fuse-merge).
struct PTXTarget {
  std::string chip = std::string(::flashdecode::kDefaultChipName);
  int ptxVersion = 80;
  bool fuseMerge = false;
};

/// fd ops -> split (with `split`) -> GPU kernels -> NVVM -> PTX for
/// `target`: the passes of the stages `firstStage` to `lastStage`.
/// Registered as `fd-lower-to-ptx`.
void buildLowerToPTXPipeline(
    OpPassManager &pm, const PTXTarget &target, const FDSplitKVOptions &split,
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
