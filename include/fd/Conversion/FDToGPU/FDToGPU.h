//===- FDToGPU.h - fd split-KV ops to GPU kernels ---------------*- C++ -*-===//

#ifndef FD_CONVERSION_FDTOGPU_FDTOGPU_H
#define FD_CONVERSION_FDTOGPU_FDTOGPU_H

#include "fd/Planning/PartialKernelLayout.h"

#include "llvm/ADT/StringRef.h"

#include <string>

#include <cstdint>

namespace flashdecode {
struct Chip;
} // namespace flashdecode

namespace mlir {
class MLIRContext;
class Operation;
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd {

/// The attribute of each kernel (gpu.func) convert-fd-to-gpu makes: the
/// names of its parameters in order (docs/KernelABI.md), which the runtime
/// binds buffers by and the JIT writes into the manifest.
constexpr llvm::StringLiteral kKernelParamsAttrName = "fd.params";

/// The attribute of each gpu.launch_func convert-fd-to-gpu makes: for each
/// grid dimension, the manifest symbol the runtime computes it from
/// ("batch", "num_splits"), or "" where the dimension is the constant it is
/// launched with. With the launch's operands and the kernels' attributions it
/// is the ABI the JIT writes into the manifest (docs/KernelABI.md).
constexpr llvm::StringLiteral kLaunchGridSymbolsAttrName = "fd.grid_symbols";

/// The attribute of the partial kernel saying which units compute it,
/// "tensor_cores" or "cuda_cores" (the manifest's `math_units`).
constexpr llvm::StringLiteral kKernelMathUnitsAttrName = "fd.math_units";

/// The attribute of each kernel that waits for the grid before it on the
/// stream (griddepcontrol.wait, first thing) and lets the next one launch
/// (griddepcontrol.launch_dependents, right after): the manifest's
/// `programmatic_launch`, which fdrt launches with programmatic stream
/// serialization.
constexpr llvm::StringLiteral kProgrammaticLaunchAttrName =
    "fd.programmatic_launch";

/// The partial kernel's layout, as the planners see it
/// (fd/Planning/PartialKernelLayout.h).
using ::flashdecode::PartialKernelLayout;

/// Patterns replacing fd.partial_attention and fd.merge with launches of GPU
/// kernels, each in a `gpu.module` of its own name in the enclosing module:
///   partial: grid (S, Hkv * row tiles, B), block (128); args (q, k, v,
///            seq_lens, partial_output, partial_lse: !llvm.ptr<1>,
///            max_len: i32)
///   merge:   grid (Hq, Lq, B), block (D); args (partial_output,
///            partial_lse, output[, lse]: !llvm.ptr<1>)
/// The memrefs must be contiguous (identity layout). The kernels run on
/// `chip` (fd/Planning/Chip.h) and the GPUs it runs on.
/// With `fuseMerge` the partial kernel merges (FusedMerge.cpp) and no merge
/// kernel is made.
void populateFDToGPUConversionPatterns(RewritePatternSet &patterns,
                                       const ::flashdecode::Chip &chip,
                                       bool fuseMerge = false);

/// Why the patterns above cannot lower `op` (an fd op), or an empty string
/// when they can: the one statement of their preconditions, which the
/// patterns test and convert-fd-to-gpu reports.
std::string getReasonNotLowerableToGPU(Operation *op);

/// Why the patterns cannot lower `op` for `chip` though they could for
/// another: a schedule whose form the chip lacks (the warpgroup tile needs
/// wgmma, sm_90a); empty when they can.
std::string getReasonNotLowerableOnChip(Operation *op,
                                        const ::flashdecode::Chip &chip);

/// Why the fused merge cannot join `op` (an fd.partial_attention) when
/// fuse-merge asks for it, or an empty string when it can (any other op).
std::string getReasonMergeNotFusable(Operation *op);

} // namespace mlir::fd

#endif // FD_CONVERSION_FDTOGPU_FDTOGPU_H
