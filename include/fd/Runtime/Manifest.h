//===- Manifest.h - What fd-compile wrote, read back ------------*- C++ -*-===//

#ifndef FD_RUNTIME_MANIFEST_H
#define FD_RUNTIME_MANIFEST_H

#include "fd/Planning/WorkspaceLayout.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flashdecode::rt {

enum class ParamType { Pointer, I32 };

struct KernelParam {
  std::string name;
  ParamType type;
};

/// A grid dimension: a number, or a value known at launch.
struct LaunchDim {
  enum class Symbol { None, NumSplits, Batch };
  int64_t value = 1;
  Symbol symbol = Symbol::None;
  /// "batch/N": ceil(batch / N), a block per N sequences (a shared
  /// prefix's groups of sequences); 1 for "batch".
  int64_t batchDivisor = 1;

  int64_t resolve(int64_t batch, int64_t numSplits) const {
    return symbol == Symbol::Batch ? (batch + batchDivisor - 1) / batchDivisor
           : symbol == Symbol::NumSplits ? numSplits
                                         : value;
  }
};

struct KernelSpec {
  std::string name;
  std::string ptxFile;
  std::vector<KernelParam> params;
  std::array<LaunchDim, 3> grid;
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t staticSharedMemoryBytes = 0;
  int64_t dynamicSharedMemoryBytes = 0;
  /// The kernel waits (griddepcontrol.wait) before its first global access
  /// (`programmatic_launch`): fdrt launches it with programmatic stream
  /// serialization, so it may launch while the kernel before it runs.
  bool programmaticLaunch = false;
};

/// manifest.json (docs/KernelABI.md).
struct Manifest {
  std::string compilerVersion;
  /// D, the queries' and keys'.
  int64_t headDim = 0;
  /// D_v, the values' and the output's (config.v_head_dim; manifests that
  /// predate it: headDim).
  int64_t valueHeadDim = 0;
  /// Whether the values are the key cache's first D_v columns
  /// (config.shared_kv, MLA's latent cache): no value cache, no v_scale.
  bool sharedKV = false;
  int64_t numQueryHeads = 0;
  int64_t numKVHeads = 0;
  int64_t queryLength = 1;
  /// The query's (and output's) element type: "f16", "bf16" or "f32".
  std::string dtype;
  std::string kvLayout;
  /// The KV caches' element type: the dtype, or an fp8 format ("e4m3",
  /// "e5m2": one byte per element, scaled by k_scale / v_scale). Manifests
  /// that predate fp8 caches lack it: the dtype.
  std::string kvDtype;
  /// What one fp8 scale covers: "tensor" ([1]) or "token-head" (the
  /// caches' shape without the head dim); "none" without fp8 caches.
  std::string kvScale = "none";
  /// The PTX target, e.g. "sm_90" ("" in manifests that predate it).
  std::string arch;
  /// Positions per page of paged caches; 0 for dense caches.
  int64_t pageSize = 0;
  /// The sliding window (keys a query sees: itself and W - 1 before it); 0
  /// for none.
  int64_t windowLeft = 0;
  /// Logit soft-capping c (scores x -> c tanh(x / c)); 0 for none.
  double logitsSoftCap = 0;
  /// The softmax scale the kernels were compiled with (config.scale); 0:
  /// the default, 1 / sqrt(head_dim).
  double scale = 0;
  /// Whether the kernels read attention sinks (a "sinks" parameter).
  bool withSinks = false;
  /// Whether the kernels read ALiBi slopes (an "alibi_slopes" parameter).
  bool withAlibi = false;
  /// Whether the kernels read per-sequence query lengths (a "query_lens"
  /// parameter of both kernels).
  bool withQueryLens = false;
  /// A KV cache sharded by token over kvShardWorld ranks (0: not sharded),
  /// kvShardInterleave tokens at a time: the lengths are global and the
  /// partial kernel reads its rank ("kv_shard_rank").
  int64_t kvShardWorld = 0;
  int64_t kvShardInterleave = 1;
  /// Top-k sparse decode (config.top_k; 0: off): the block table holds each
  /// sequence's list of K slots (pages of one position), whose negative
  /// entries the kernels skip.
  int64_t topK = 0;
  /// A shared prefix (config.shared_prefix): the caches, seq_lens ([1]) and
  /// block table (one row) hold one sequence that each query sequence
  /// continues by its entry of `suffix_lens`, int32 [batch].
  bool sharedPrefix = false;
  bool withLse = false;
  int64_t numSplits = 0;
  /// The blocks a chunk's thread block cluster holds (schedule.cluster_ctas;
  /// 1 where the schedule has none, as manifests before clusters).
  int64_t clusterCtas = 1;
  /// Whether the partial kernel merges (config.fused_merge): it then counts
  /// finished blocks in `merge_counters`, int32 [batch, num_kv_heads].
  bool fusedMerge = false;
  /// The workspace and, with a fused merge, its counters ("workspace").
  WorkspaceLayout workspace;
  /// In launch order.
  std::vector<KernelSpec> kernels;

  /// Throws std::invalid_argument naming the missing or malformed field.
  static Manifest parse(const std::string &json);

  int64_t getWorkspaceBytes(int64_t batch) const {
    return workspace.getBytes(batch);
  }
  int64_t getMergeCounterBytes(int64_t batch) const {
    return workspace.getMergeCounterBytes(batch);
  }
  /// Bytes of one q/output element (2 for f16/bf16, 4 for f32).
  int64_t getElementBytes() const { return dtype == "f32" ? 4 : 2; }
  /// Whether the caches hold fp8 (kvDtype "e4m3" or "e5m2"): the partial
  /// kernel then reads k_scale and (with a value cache) v_scale.
  bool hasFloat8Cache() const { return kvDtype == "e4m3" || kvDtype == "e5m2"; }
  /// Whether an fp8 cache has a scale per token and KV head (else one per
  /// tensor).
  bool hasTokenHeadScales() const { return kvScale == "token-head"; }
  /// Bytes of one k/v cache element: 1 for fp8, else getElementBytes().
  int64_t getCacheElementBytes() const {
    return hasFloat8Cache() ? 1 : getElementBytes();
  }
  /// Floats in each of k_scale and v_scale for caches of `cacheElements`
  /// elements each: the caches' shape without the head dim (per token and
  /// KV head), 1 (per tensor), or 0 without fp8 caches.
  int64_t getScaleElements(int64_t cacheElements) const {
    return !hasFloat8Cache()      ? 0
           : hasTokenHeadScales() ? cacheElements / headDim
                                  : 1;
  }
};

/// A manifest and the PTX of its kernels.
struct KernelBundle {
  Manifest manifest;
  /// Kernel name -> PTX text.
  std::map<std::string, std::string> ptx;

  /// Reads DIR/manifest.json and the PTX files it names; throws
  /// std::runtime_error naming the file that is missing or malformed.
  static KernelBundle load(const std::string &directory);
};

} // namespace flashdecode::rt

#endif // FD_RUNTIME_MANIFEST_H
