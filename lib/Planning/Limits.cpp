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

std::string getReasonHeadDimsUnsupported(int64_t headDim, int64_t valueHeadDim,
                                         bool sharedKV) {
  auto text = [](int64_t value) { return std::to_string(value); };
  const int64_t values = valueHeadDim ? valueHeadDim : headDim;
  if (!isSupportedKeyHeadDim(headDim))
    return "head_dim " + text(headDim) + " is not supported: expected a " +
           describeSupportedKeyHeadDims();
  if (valueHeadDim != 0 && !isSupportedValueHeadDim(valueHeadDim))
    return "v_head_dim " + text(valueHeadDim) +
           " is not supported: expected 0 (the head dim) or a " +
           describeSupportedValueHeadDims();
  if (!isSupportedValueHeadDim(values))
    return "head_dim " + text(headDim) +
           " is the value head dim too, which is at most " +
           text(kMaxValueHeadDim) + ": give v_head_dim, a " +
           describeSupportedValueHeadDims();
  if (sharedKV && values > headDim)
    return "shared_kv reads the values from the key cache's first v_head_dim "
           "columns: v_head_dim (" +
           text(values) + ") must be at most head_dim (" + text(headDim) + ")";
  return "";
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
