//===- KernelConfig.h - What a compiled attention kernel is for -*- C++ -*-===//

#ifndef FD_COMPILER_KERNELCONFIG_H
#define FD_COMPILER_KERNELCONFIG_H

#include "fd/Dialect/FD/IR/FDEnums.h"
#include "fd/Planning/Chip.h"
#include "fd/Planning/KVShard.h"
#include "fd/Planning/KernelPlan.h"
#include "fd/Planning/SplitPlanner.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace flashdecode {

enum class ElementType { F16, BF16, F32 };
/// The KV cache layout: the dialect's (fd.attention's `kv_layout`), one enum
/// for the IR and the C++ API.
using CacheLayout = mlir::fd::KVLayout;

/// The KV cache's elements: the query's type, or 8-bit floats (MLIR's
/// f8E4M3FN and f8E5M2) scaled by k_scale / v_scale.
enum class KVCacheType { SameAsQuery, E4M3, E5M2 };
/// What one scale of an fp8 cache covers: the whole tensor ([1]) or one
/// (token, KV head) (the cache's shape without the head dim).
enum class KVScaleGranularity { Tensor, TokenHead };

/// Everything a decode-attention kernel is specialized on: what it is, the
/// JIT cache's key. Batch size and cache length stay dynamic in the
/// generated code; an automatic split count (numSplits = 0) is planned with
/// a request's PlanningHints and resolved to a fixed one (resolve(), in
/// fd/Compiler/SplitKVOptions.h) before anything is compiled.
struct KernelConfig {
  /// D, the queries' and keys'.
  int64_t headDim = 128;
  /// D_v, the values' and outputs'; 0: headDim.
  int64_t valueHeadDim = 0;
  /// The values are the first D_v columns of the key cache (MLA's latent
  /// cache): no value cache and no v_scale (k_scale scales both).
  bool sharedKV = false;
  int64_t numQueryHeads = 32;
  int64_t numKVHeads = 8;
  /// Query tokens per sequence (1..8); 1 gives [B, Hq, D] queries, more give
  /// [B, Lq, Hq, D].
  int64_t queryLength = 1;
  ElementType elementType = ElementType::F16;
  CacheLayout cacheLayout = CacheLayout::NHD;
  /// Positions per page of a paged cache (a power of two up to 256), read
  /// through a block table; 0 for dense caches.
  int64_t pageSize = 0;
  /// Rewrite into split-KV form (fd-split-kv); false lowers fd.attention
  /// directly (the unsplit reference).
  bool splitKV = true;
  /// 0 = automatic (planned with a request's PlanningHints).
  int64_t numSplits = 0;
  /// fd-split-kv's chunk-length mode: splits of at least this many attended
  /// keys (the partial op carries it: part of the kernel); 0 = off.
  int64_t chunkLength = 0;
  std::optional<float> scale;
  /// Sliding window: a query at position p sees keys p - W < j <= p; 0 = no
  /// window (every earlier key).
  int64_t windowLeft = 0;
  /// Logit soft-capping: score x -> c * tanh(x / c); absent = off.
  std::optional<float> logitsSoftCap;
  /// Attention sinks: an f32 [Hq] buffer of one logit per query head joins
  /// every row's softmax denominator (gpt-oss).
  bool withSinks = false;
  /// ALiBi: an f32 [Hq] buffer of slopes; each score of head h for key j
  /// gains slope_h * (j - p), p the query's position (BLOOM, MPT).
  bool withAlibi = false;
  /// Per-sequence query lengths: an i32 [batch] buffer; sequence b has
  /// query_lens[b] <= queryLength query tokens (its last), the rows of the
  /// others are padding (zeros, lse -inf). Speculative decoding.
  bool withQueryLens = false;
  /// A KV cache sharded by token over kvShardWorld ranks (0: not sharded),
  /// kvShardInterleave tokens at a time (fd/Planning/KVShard.h): the cache
  /// holds one rank's share of each sequence, the lengths are global, and
  /// an i32 [1] buffer says which rank (so one kernel serves every rank).
  int64_t kvShardWorld = 0;
  int64_t kvShardInterleave = 1;
  /// Top-k sparse decode (0: off): each sequence attends the tokens an
  /// int32 [batch, topK] list names, flat slots of the caches' first two
  /// dimensions (-1: none), the first seq_lens[b] of them: a paged cache of
  /// pages of one position (pageSize 1) whose negative entries are holes.
  /// One query token, no window, ALiBi, query lengths or shard.
  int64_t topK = 0;
  /// A shared prefix (cascade decode): the caches hold one sequence (batch
  /// 1, one length) that each of the batch's query sequences continues by
  /// the tokens an i32 [batch] buffer of suffix lengths says; the rows of
  /// several sequences stream the prefix together. Merged with each
  /// sequence's own suffix, it is attention over the concatenation. No
  /// query lengths, shard, top-k or fused merge.
  bool sharedPrefix = false;
  bool withLse = false;
  /// FP8 caches: the element type and the scales' granularity (the scales
  /// are f32 buffers, one for K and one for V).
  KVCacheType kvCacheType = KVCacheType::SameAsQuery;
  KVScaleGranularity kvScaleGranularity = KVScaleGranularity::Tensor;
  /// GPU: the partial kernel merges (the last block of each sequence and KV
  /// head to finish), with no merge kernel; the runtime keeps a zeroed
  /// counter per (sequence, KV head) (docs/KernelABI.md). The CPU path
  /// ignores it.
  bool fusedMerge = false;
  /// The partial kernel's schedule written by hand (docs/KernelABI.md,
  /// "Schedules"); absent: planKernel's on `arch`. Part of what the kernel
  /// is: the split count is planned with it.
  std::optional<ScheduleChoice> schedule;
  /// GPU target of the PTX: sm_80, sm_86, sm_89, sm_90, sm_90a.
  std::string arch = std::string(kDefaultChipName);
  /// PTX ISA version times ten; at least what `arch` needs (78 for sm_90).
  int ptxVersion = 80;

  /// An empty string when the configuration is supported, otherwise a
  /// sentence naming the field and the accepted values.
  std::string validate() const;
  /// validate()'s rules of topK: "" when it is 0 or its config can be
  /// top-k sparse.
  std::string getReasonTopKInvalid() const;
  /// validate()'s rules of sharedPrefix: "" when it is off or its config
  /// can continue a shared prefix.
  std::string getReasonSharedPrefixInvalid() const;

  /// What the partial kernel's schedule depends on (fd/Planning/KernelPlan.h),
  /// as fd::getKernelProblem reads it off the op this config builds.
  KernelProblem getKernelProblem() const;
  /// `schedule`, else planKernel of that problem on `arch` (an unknown arch,
  /// which validate() reports, on the default chip).
  KernelSchedule getKernelSchedule() const;
  int64_t getValueHeadDim() const {
    return valueHeadDim ? valueHeadDim : headDim;
  }
  /// The chip of `arch` (an unknown arch, which validate() reports: the
  /// default).
  const Chip &getChip() const;

  /// A field's value: integers, flags, names, and optional floats (the
  /// scale, absent: the default 1/sqrt(D); the soft-cap, absent: off).
  using FieldValue =
      std::variant<int64_t, bool, std::string, std::optional<float>>;
  /// Every field, in a fixed order, under its manifest name: the one list
  /// that toString() (the JIT cache key) and the manifest's "config" are
  /// written from, so a new field reaches both. (The manifest's "config"
  /// adds the PlanningHints' fields, and "requested_num_splits" there is
  /// the request's count, 0 for automatic.)
  void forEachField(
      const std::function<void(const char *name, const FieldValue &value)>
          &visit) const;

  bool hasFloat8Cache() const {
    return kvCacheType != KVCacheType::SameAsQuery;
  }
  bool isKVSharded() const { return kvShardWorld != 0; }
  /// The KV shard (valid when isKVSharded()).
  KVShard getKVShard() const { return {kvShardWorld, kvShardInterleave}; }

  /// Every field as `name=value` pairs in a fixed order: equal strings mean
  /// equal configurations (the JIT cache hashes it).
  std::string toString() const;
};

/// How an automatic split count is planned: inputs of the planning, not of
/// the kernel. Two requests whose hints plan the same count get one kernel.
struct PlanningHints {
  /// The batch and cache length the count is planned for.
  int64_t batch = 1;
  int64_t maxLength = 4096;
  /// The split planner's knobs, defaults and meaning its own
  /// (fd/Planning/SplitPlanner.h); maxSplits also bounds a fixed count.
  SplitPlannerOptions planner;

  /// An empty string when `config` can be planned with these hints,
  /// otherwise a sentence naming the field and the accepted values.
  std::string validate(const KernelConfig &config) const;

  /// Every field under its manifest name (the manifest's "config" records
  /// how its split count was planned).
  void forEachField(
      const std::function<void(const char *name, int64_t value)> &visit) const;
};

/// A kernel asked for: what it is, and how to plan what it leaves
/// automatic. What compile() and the CPU kernels take.
struct KernelRequest {
  KernelConfig config;
  PlanningHints hints;

  KernelRequest() = default;
  KernelRequest(KernelConfig config, PlanningHints hints)
      : config(std::move(config)), hints(hints) {}
  /// `config` with the default hints, and a maxSplits that admits its fixed
  /// count: a resolved config asks for itself.
  KernelRequest(KernelConfig config);

  /// config.validate(), then hints.validate(config).
  std::string validate() const;
  /// The config's fields, then the hints': `name=value` pairs.
  std::string toString() const;
};

const char *getElementTypeName(ElementType type);
/// The cache's element type name: the query's ("f16", "bf16", "f32"), or
/// "e4m3", "e5m2".
std::string getKVCacheTypeName(const KernelConfig &config);
/// "none" (not fp8), "tensor" or "token-head".
const char *getKVScaleName(const KernelConfig &config);
/// "NHD" or "HND", as the dialect spells it.
const char *getCacheLayoutName(CacheLayout layout);
/// Bytes of one element.
int64_t getElementTypeSize(ElementType type);

} // namespace flashdecode

#endif // FD_COMPILER_KERNELCONFIG_H
