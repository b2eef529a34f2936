//===- PopulatePatterns.h - The FDToGPU patterns, per kernel ----*- C++ -*-===//
//
// Private to the FDToGPU lowering: each kernel's file adds its pattern;
// populateFDToGPUConversionPatterns adds them all.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_CONVERSION_FDTOGPU_POPULATEPATTERNS_H
#define FD_LIB_CONVERSION_FDTOGPU_POPULATEPATTERNS_H

#include "llvm/ADT/StringRef.h"

namespace flashdecode {
struct Chip;
} // namespace flashdecode

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd::detail {

/// fd.partial_attention -> the partial kernel + its launch, for `chip`;
/// with `fuseMerge`, the fd.merge of its partials joins the kernel.
void populatePartialAttentionToGPUPatterns(RewritePatternSet &patterns,
                                           const ::flashdecode::Chip &chip,
                                           bool fuseMerge);

/// fd.merge -> the merge kernel + its launch.
void populateMergeToGPUPatterns(RewritePatternSet &patterns);

/// fd.merge_states -> its kernel + its launch.
void populateMergeStatesToGPUPatterns(RewritePatternSet &patterns);

} // namespace mlir::fd::detail

#endif // FD_LIB_CONVERSION_FDTOGPU_POPULATEPATTERNS_H
