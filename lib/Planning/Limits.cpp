//===- Limits.cpp - The shapes the kernels are built for ------------------===//

#include "fd/Planning/Limits.h"

namespace flashdecode {

bool isSupportedHeadDim(int64_t headDim) {
  return headDim >= kMinHeadDim && headDim <= kMaxHeadDim &&
         headDim % kHeadDimMultiple == 0;
}

bool isSupportedPageSize(int64_t pageSize) {
  return pageSize >= 1 && pageSize <= kMaxPageSize &&
         (pageSize & (pageSize - 1)) == 0;
}

std::string describeSupportedHeadDims() {
  return "multiple of " + std::to_string(kHeadDimMultiple) + " in [" +
         std::to_string(kMinHeadDim) + ", " + std::to_string(kMaxHeadDim) + "]";
}

std::string describeSupportedPageSizes() {
  return "power of two from 1 to " + std::to_string(kMaxPageSize);
}

} // namespace flashdecode
