//===- KernelConfig.cpp - What a compiled attention kernel is for ---------===//

#include "fd/Compiler/KernelConfig.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"

#include <cmath>
#include <cstdio>

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
  if (pageSize < 0 || pageSize > 256 || (pageSize & (pageSize - 1)) != 0)
    return "page_size " + text(pageSize) +
           " is not supported: expected 0 (dense) or a power of two from 1 "
           "to 256";
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
  int minimumPTX = mlir::fd::getMinimumPTXVersion(arch);
  if (minimumPTX == 0)
    return "arch '" + arch +
           "' is not supported: expected sm_80, sm_86, sm_89, sm_90 or sm_90a";
  if (ptxVersion < minimumPTX)
    return "ptx_version " + std::to_string(ptxVersion) + " is too old for " +
           arch + ": expected at least " + std::to_string(minimumPTX);
  return "";
}

std::string KernelConfig::toString() const {
  std::string text;
  auto field = [&](const char *name, const std::string &value) {
    text += std::string(text.empty() ? "" : " ") + name + "=" + value;
  };
  field("head_dim", std::to_string(headDim));
  field("num_q_heads", std::to_string(numQueryHeads));
  field("num_kv_heads", std::to_string(numKVHeads));
  field("query_len", std::to_string(queryLength));
  field("dtype", getElementTypeName(elementType));
  field("kv_layout", getCacheLayoutName(cacheLayout));
  field("page_size", std::to_string(pageSize));
  field("split_kv", splitKV ? "1" : "0");
  field("num_splits", std::to_string(numSplits));
  field("chunk_length", std::to_string(chunkLength));
  // Hex float: exact, so two scales that differ in the last bit differ here.
  char scaleText[32] = "default";
  if (scale)
    std::snprintf(scaleText, sizeof(scaleText), "%a", *scale);
  field("scale", scaleText);
  field("with_lse", withLse ? "1" : "0");
  field("batch", std::to_string(batch));
  field("max_len", std::to_string(maxLength));
  field("sm_count", std::to_string(smCount));
  field("arch", arch);
  field("ptx_version", std::to_string(ptxVersion));
  return text;
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
