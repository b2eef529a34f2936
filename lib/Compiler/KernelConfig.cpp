//===- KernelConfig.cpp - What a compiled attention kernel is for ---------===//

#include "fd/Compiler/KernelConfig.h"

#include <cmath>

namespace fd {

std::string KernelConfig::validate() const {
  auto text = [](int64_t value) { return std::to_string(value); };
  if (headDim < 32 || headDim > 256 || headDim % 8 != 0)
    return "head_dim " + text(headDim) +
           " is not supported: expected a multiple of 8 in [32, 256]";
  if (numQueryHeads < 1)
    return "num_q_heads must be >= 1, got " + text(numQueryHeads);
  if (numKVHeads < 1)
    return "num_kv_heads must be >= 1, got " + text(numKVHeads);
  if (numQueryHeads % numKVHeads != 0)
    return "num_q_heads (" + text(numQueryHeads) +
           ") must be a multiple of num_kv_heads (" + text(numKVHeads) + ")";
  if (queryLength < 1 || queryLength > 8)
    return "query_len " + text(queryLength) +
           " is not supported: expected 1 to 8 query tokens per sequence";
  if (numSplits < 0)
    return "num_splits must be >= 0 (0 = auto), got " + text(numSplits);
  if (chunkLength < 0)
    return "chunk_length must be >= 0 (0 = off), got " + text(chunkLength);
  if (scale && !(std::isfinite(*scale) && *scale > 0.0f))
    return "scale must be a positive finite number, got " +
           std::to_string(*scale);
  if (batch < 1)
    return "batch (for planning) must be >= 1, got " + text(batch);
  if (maxLength < 0)
    return "max_len (for planning) must be >= 0, got " + text(maxLength);
  if (smCount < 1)
    return "sm_count must be >= 1, got " + text(smCount);
  return "";
}

const char *getElementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F32:
    return "f32";
  }
  return "unknown";
}

const char *getCacheLayoutName(CacheLayout layout) {
  return layout == CacheLayout::NHD ? "NHD" : "HND";
}

int64_t getElementTypeSize(ElementType type) {
  return type == ElementType::F32 ? 4 : 2;
}

} // namespace fd
