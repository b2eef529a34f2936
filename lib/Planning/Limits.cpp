//===- Limits.cpp - The shapes the kernels are built for ------------------===//

#include "fd/Planning/Limits.h"

namespace flashdecode {

namespace {

bool isHeadDimUpTo(int64_t headDim, int64_t largest) {
  return headDim >= kMinHeadDim && headDim <= largest &&
         headDim % kHeadDimMultiple == 0;
}

std::string describeHeadDimsUpTo(int64_t largest) {
  return "multiple of " + std::to_string(kHeadDimMultiple) + " in [" +
         std::to_string(kMinHeadDim) + ", " + std::to_string(largest) + "]";
}

} // namespace

bool isSupportedKeyHeadDim(int64_t headDim) {
  return isHeadDimUpTo(headDim, kMaxKeyHeadDim);
}

bool isSupportedValueHeadDim(int64_t headDim) {
  return isHeadDimUpTo(headDim, kMaxValueHeadDim);
}

bool isSupportedPageSize(int64_t pageSize) {
  return pageSize >= 1 && pageSize <= kMaxPageSize &&
         (pageSize & (pageSize - 1)) == 0;
}

std::string describeSupportedKeyHeadDims() {
  return describeHeadDimsUpTo(kMaxKeyHeadDim);
}

std::string describeSupportedValueHeadDims() {
  return describeHeadDimsUpTo(kMaxValueHeadDim);
}

std::string describeSupportedPageSizes() {
  return "power of two from 1 to " + std::to_string(kMaxPageSize);
}

} // namespace flashdecode
