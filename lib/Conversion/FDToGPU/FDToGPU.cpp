//===- FDToGPU.cpp - fd split-KV ops to GPU kernels -----------------------===//
//
// The Flash-Decoding kernels in the GPU dialect (with LLVM-dialect pointer
// arithmetic for 16-byte global loads), replacing the fd ops with their
// launches: the patterns of PartialAttentionKernel.cpp, MergeKernel.cpp and
// MergeStatesKernel.cpp
// (the partial kernel's layout is fd/Planning/PartialKernelLayout.h's),
// built from KernelBuilder.h. DESIGN §5 says what makes them fast; the
// comments in those files say how each piece maps onto the hardware.
//
//===----------------------------------------------------------------------===//

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "PartialKernelBuilder.h"
#include "PopulatePatterns.h"
#include "fd/Dialect/FD/IR/FD.h"

using namespace mlir;
using namespace mlir::fd;

void mlir::fd::populateFDToGPUConversionPatterns(
    RewritePatternSet &patterns, const ::flashdecode::Chip &chip,
    bool fuseMerge) {
  detail::populatePartialAttentionToGPUPatterns(patterns, chip, fuseMerge);
  detail::populateMergeToGPUPatterns(patterns);
  detail::populateMergeStatesToGPUPatterns(patterns);
}

std::string
mlir::fd::getReasonNotLowerableOnChip(Operation *op,
                                      const ::flashdecode::Chip &chip) {
  auto partial = dyn_cast<PartialAttentionOp>(op);
  if (!partial || !partial.getScheduleAttr())
    return "";
  std::string reason = ::flashdecode::getReasonScheduleUnsupportedOnChip(
      detail::getPartialKernelSchedule(partial), chip);
  return reason.empty() ? reason : "convert-fd-to-gpu: " + reason;
}

std::string mlir::fd::getReasonNotLowerableToGPU(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // fd-split-kv leaves prefill-shaped ops alone: advice to split would
    // fail the same way.
    int64_t queryLength = attention.getGeometry().queryLength;
    if (queryLength > kMaxDecodeQueryLength)
      return "convert-fd-to-gpu: " + std::to_string(queryLength) +
             " query tokens per sequence is prefill-shaped: the GPU kernels "
             "take 1 to " +
             std::to_string(kMaxDecodeQueryLength) +
             " (decode and speculative queries)";
    return "convert-fd-to-gpu: split it first with fd-split-kv (num-splits=1 "
           "for the unsplit kernel)";
  }
  if (auto partial = dyn_cast<PartialAttentionOp>(op);
      partial && !partial.getScheduleAttr())
    return "convert-fd-to-gpu: the op has no #fd.schedule (its kernel's "
           "tiling and launch bounds): fd-split-kv attaches the one it planned "
           "with, fd-schedule-kernels the planner's to split IR written by "
           "hand";
  // The kernels address every buffer as a dense row-major array.
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<MemRefType>(operand.getType());
        type && !type.getLayout().isIdentity())
      return "convert-fd-to-gpu: operands must be contiguous memrefs "
             "(identity layout)";
  return "";
}
