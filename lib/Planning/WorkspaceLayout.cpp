//===- WorkspaceLayout.cpp - Where split kernels keep their partials ------===//

#include "fd/Planning/WorkspaceLayout.h"

namespace flashdecode {

WorkspaceLayout WorkspaceLayout::get(int64_t queryLength, int64_t numQueryHeads,
                                     int64_t numKVHeads, int64_t numSplits,
                                     int64_t valueHeadDim, bool fusedMerge) {
  constexpr int64_t kF32Bytes = 4, kCounterBytes = 4;
  int64_t partialRows = queryLength * numQueryHeads * numSplits;
  WorkspaceLayout layout;
  layout.partialOutputBytesPerSequence = partialRows * valueHeadDim * kF32Bytes;
  layout.partialLseBytesPerSequence = partialRows * kF32Bytes;
  layout.mergeCounterBytesPerSequence =
      fusedMerge ? numKVHeads * kCounterBytes : 0;
  return layout;
}

} // namespace flashdecode
