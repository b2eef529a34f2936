//===- KernelConfig.cpp - What a compiled attention kernel is for ---------===//

#include "fd/Compiler/KernelConfig.h"
#include "fd/Planning/Limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace flashdecode {

std::string KernelConfig::validate() const {
  auto text = [](int64_t value) { return std::to_string(value); };
  if (std::string dims =
          getReasonHeadDimsUnsupported(headDim, valueHeadDim, sharedKV);
      !dims.empty())
    return dims;
  if (numQueryHeads < 1)
    return "num_q_heads must be >= 1, got " + text(numQueryHeads);
  if (numKVHeads < 1)
    return "num_kv_heads must be >= 1, got " + text(numKVHeads);
  if (numQueryHeads % numKVHeads != 0)
    return "num_q_heads (" + text(numQueryHeads) +
           ") must be a multiple of num_kv_heads (" + text(numKVHeads) + ")";
  if (queryLength < 1 || queryLength > kMaxDecodeQueryLength)
    return "query_len " + text(queryLength) +
           " is not supported: expected 1 to " + text(kMaxDecodeQueryLength) +
           " query tokens per sequence";
  if (pageSize != 0 && !isSupportedPageSize(pageSize))
    return "page_size " + text(pageSize) +
           " is not supported: expected 0 (dense) or a " +
           describeSupportedPageSizes();
  if (numSplits < 0)
    return "num_splits must be >= 0 (0 = auto), got " + text(numSplits);
  if (chunkLength < 0)
    return "chunk_length must be >= 0 (0 = off), got " + text(chunkLength);
  if (scale && !(std::isfinite(*scale) && *scale > 0.0f))
    return "scale must be a positive finite number, got " +
           std::to_string(*scale);
  if (windowLeft < 0)
    return "window_left must be >= 0 (0 = no window), got " + text(windowLeft);
  if (logitsSoftCap &&
      !(std::isfinite(*logitsSoftCap) && *logitsSoftCap > 0.0f))
    return "logits_soft_cap must be a positive finite number, got " +
           std::to_string(*logitsSoftCap);
  if (std::string reason =
          getReasonKVShardFieldsInvalid(kvShardWorld, kvShardInterleave);
      !reason.empty())
    return reason;
  if (std::string reason = getReasonTopKInvalid(); !reason.empty())
    return reason;
  if (std::string reason = getReasonSharedPrefixInvalid(); !reason.empty())
    return reason;
  if (isKVSharded() && withSinks)
    return "with_sinks with kv_shard_world: each rank would count the sinks "
           "once more; merge the ranks' states, then join the sinks as one "
           "more state";
  if (std::string reason = getReasonArchUnsupported(arch); !reason.empty())
    return reason;
  const Chip *chip = findChip(arch);
  if (ptxVersion < chip->minimumPTXVersion)
    return "ptx_version " + std::to_string(ptxVersion) + " is too old for " +
           arch + ": expected at least " +
           std::to_string(chip->minimumPTXVersion);
  if (schedule) {
    if (!splitKV)
      return "schedule is the split partial kernel's: it needs split_kv";
    std::string reason =
        getReasonScheduleInvalid(getKernelProblem(), *schedule);
    if (reason.empty())
      reason = getReasonScheduleUnsupportedOnChip(getKernelSchedule(), *chip);
    if (!reason.empty())
      return "schedule: " + reason;
  }
  return "";
}

std::string KernelConfig::getReasonTopKInvalid() const {
  if (topK < 0)
    return "top_k must be >= 0 (0: dense attention), got " +
           std::to_string(topK);
  if (topK == 0)
    return "";
  // Each attends its own list of tokens, whose positions say nothing of
  // the rules over positions.
  const std::pair<bool, const char *> excluded[] = {
      {pageSize != 1, "page_size must be 1 (pages of one position: the "
                      "lists' slots)"},
      {queryLength != 1, "query_len must be 1 (each query token has a list "
                         "of its own: give them as sequences)"},
      {windowLeft != 0, "window_left must be 0 (a list's tokens have no "
                        "positions the window could count)"},
      {withAlibi, "with_alibi must be false (a list's tokens have no "
                  "positions ALiBi could count)"},
      {withQueryLens, "with_query_lens must be false (one query token)"},
      {isKVSharded(), "kv_shard_world must be 0 (the lists name the slots "
                      "of one cache)"},
      {cacheLayout != CacheLayout::NHD,
       "kv_layout must be NHD (a slot is a row of [slots, Hkv, D])"}};
  for (const auto &[violated, rule] : excluded)
    if (violated)
      return std::string("top_k ") + std::to_string(topK) + ": " + rule;
  return "";
}

std::string KernelConfig::getReasonSharedPrefixInvalid() const {
  if (!sharedPrefix)
    return "";
  // Every sequence continuing the prefix has queryLength query tokens, and
  // the prefix is one sequence of one cache.
  const std::pair<bool, const char *> excluded[] = {
      {withQueryLens, "with_query_lens must be false (every sequence has "
                      "query_len query tokens)"},
      {isKVSharded(), "kv_shard_world must be 0"},
      {topK != 0, "top_k must be 0"},
      {fusedMerge, "fused_merge must be false (a block holds the rows of "
                   "several sequences: the merge kernel merges them)"}};
  for (const auto &[violated, rule] : excluded)
    if (violated)
      return std::string("shared_prefix: ") + rule;
  return "";
}

KernelProblem KernelConfig::getKernelProblem() const {
  KernelProblem problem;
  problem.headDim = headDim;
  problem.valueHeadDim = getValueHeadDim();
  problem.valuesFromKeys = sharedKV;
  problem.queryElementBytes = getElementTypeSize(elementType);
  problem.cacheElementBytes = hasFloat8Cache() ? 1 : problem.queryElementBytes;
  problem.bfloat16Queries = elementType == ElementType::BF16;
  problem.float8TokenScales =
      hasFloat8Cache() && kvScaleGranularity == KVScaleGranularity::TokenHead;
  problem.groupSize = numQueryHeads / numKVHeads;
  problem.queryLength = queryLength;
  problem.alibi = withAlibi;
  problem.sharedPrefix = sharedPrefix;
  problem.features.paged = pageSize > 0;
  problem.features.window = windowLeft > 0;
  problem.features.softCap = logitsSoftCap.has_value();
  problem.features.queryLens = withQueryLens;
  return problem;
}

const Chip &KernelConfig::getChip() const { return findChipOrDefault(arch); }

KernelSchedule KernelConfig::getKernelSchedule() const {
  return findPartialKernelSchedule(getKernelProblem(), schedule, getChip());
}

std::string PlanningHints::validate(const KernelConfig &config) const {
  auto text = [](int64_t value) { return std::to_string(value); };
  if (batch < 1)
    return "batch (for planning) must be >= 1, got " + text(batch);
  if (maxLength < 0)
    return "max_len (for planning) must be >= 0, got " + text(maxLength);
  // The planner's limits, stated once (by the planner), under the manifest's
  // field names.
  std::string inputs =
      validateSplitPlannerInputs(batch, config.numKVHeads, maxLength, planner,
                                 /*wordSeparator=*/'_');
  if (!inputs.empty())
    return inputs;
  return validateFixedSplitCount(config.numSplits, planner.maxSplits, '_');
}

void PlanningHints::forEachField(
    const std::function<void(const char *, int64_t)> &visit) const {
  visit("planned_batch", batch);
  visit("planned_max_len", maxLength);
  visit("sm_count", planner.smCount);
  visit("blocks_per_sm", planner.blocksPerSM);
  visit("min_chunk_length", planner.minChunkLength);
  visit("max_splits", planner.maxSplits);
}

KernelRequest::KernelRequest(KernelConfig resolved)
    : config(std::move(resolved)) {
  hints.planner.maxSplits = std::max(hints.planner.maxSplits, config.numSplits);
}

std::string KernelRequest::validate() const {
  std::string invalid = config.validate();
  return invalid.empty() ? hints.validate(config) : invalid;
}

std::string KernelRequest::toString() const {
  std::string text = config.toString();
  hints.forEachField([&](const char *name, int64_t value) {
    text += std::string(" ") + name + "=" + std::to_string(value);
  });
  return text;
}

void KernelConfig::forEachField(
    const std::function<void(const char *, const FieldValue &)> &visit) const {
  visit("head_dim", headDim);
  visit("v_head_dim", getValueHeadDim());
  visit("shared_kv", sharedKV);
  visit("num_q_heads", numQueryHeads);
  visit("num_kv_heads", numKVHeads);
  visit("query_len", queryLength);
  visit("dtype", std::string(getElementTypeName(elementType)));
  visit("kv_layout", std::string(getCacheLayoutName(cacheLayout)));
  visit("page_size", pageSize);
  visit("split_kv", splitKV);
  visit("requested_num_splits", numSplits);
  visit("chunk_length", chunkLength);
  visit("scale", scale);
  visit("window_left", windowLeft);
  visit("logits_soft_cap", logitsSoftCap);
  visit("with_sinks", withSinks);
  visit("with_alibi", withAlibi);
  visit("with_query_lens", withQueryLens);
  visit("kv_shard_world", kvShardWorld);
  visit("kv_shard_interleave", kvShardInterleave);
  visit("top_k", topK);
  visit("shared_prefix", sharedPrefix);
  visit("with_lse", withLse);
  visit("kv_dtype", getKVCacheTypeName(*this));
  visit("kv_scale", std::string(getKVScaleName(*this)));
  visit("fused_merge", fusedMerge);
  visit("requested_schedule",
        schedule ? formatScheduleChoice(*schedule) : std::string());
  visit("arch", arch);
  visit("ptx_version", static_cast<int64_t>(ptxVersion));
}

std::string KernelConfig::toString() const {
  std::string text;
  forEachField([&](const char *name, const FieldValue &value) {
    std::string printed;
    if (auto *integer = std::get_if<int64_t>(&value))
      printed = std::to_string(*integer);
    else if (auto *flag = std::get_if<bool>(&value))
      printed = *flag ? "1" : "0";
    else if (auto *string = std::get_if<std::string>(&value))
      printed = *string;
    else if (auto &number = std::get<std::optional<float>>(value)) {
      // Hex float: exact, so two values that differ in the last bit differ.
      char hex[32];
      std::snprintf(hex, sizeof(hex), "%a", *number);
      printed = hex;
    } else {
      printed = "default";
    }
    text += std::string(text.empty() ? "" : " ") + name + "=" + printed;
  });
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

std::string getKVCacheTypeName(const KernelConfig &config) {
  switch (config.kvCacheType) {
  case KVCacheType::SameAsQuery:
    return getElementTypeName(config.elementType);
  case KVCacheType::E4M3:
    return "e4m3";
  case KVCacheType::E5M2:
    return "e5m2";
  }
  return "unknown";
}

const char *getKVScaleName(const KernelConfig &config) {
  if (!config.hasFloat8Cache())
    return "none";
  return config.kvScaleGranularity == KVScaleGranularity::Tensor ? "tensor"
                                                                 : "token-head";
}

const char *getCacheLayoutName(CacheLayout layout) {
  // The generated stringifier returns the enumerants' literals.
  return mlir::fd::stringifyKVLayout(layout).data();
}

int64_t getElementTypeSize(ElementType type) {
  return type == ElementType::F32 ? 4 : 2;
}

} // namespace flashdecode
