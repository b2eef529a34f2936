//===- FDToLoops.h - fd ops to loops ----------------------------*- C++ -*-===//

#ifndef FD_CONVERSION_FDTOLOOPS_FDTOLOOPS_H
#define FD_CONVERSION_FDTOLOOPS_FDTOLOOPS_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd {

/// Patterns lowering fd.attention, fd.partial_attention and fd.merge to
/// scf/arith/math/memref loop nests.
void populateFDToLoopsConversionPatterns(RewritePatternSet &patterns);

} // namespace mlir::fd

#endif // FD_CONVERSION_FDTOLOOPS_FDTOLOOPS_H
