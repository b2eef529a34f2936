//===- ModelConfigs.h - fd-bench's model configurations ---------*- C++ -*-===//
//
// The heads of the models fd-bench runs (--configs), and the bytes a call
// over them must move.
//
//===----------------------------------------------------------------------===//

#ifndef FD_BENCH_MODELCONFIGS_H
#define FD_BENCH_MODELCONFIGS_H

#include "fd/Runtime/Manifest.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace flashdecode::bench {

struct ModelConfig {
  const char *name;
  int64_t numQueryHeads, numKVHeads, headDim;
  /// The sliding window the kernels were compiled with; 0 for none.
  int64_t windowLeft = 0;
  /// D_v (0: headDim), and whether the values are the key cache's first
  /// D_v columns (no value cache; MLA's latent cache).
  int64_t valueHeadDim = 0;
  bool sharedKV = false;

  /// The heads of `manifest`'s kernels, named `name` (which must outlive
  /// the config).
  static ModelConfig fromManifest(const rt::Manifest &manifest,
                                  const char *name) {
    return {name,
            manifest.numQueryHeads,
            manifest.numKVHeads,
            manifest.headDim,
            manifest.windowLeft,
            manifest.valueHeadDim,
            manifest.sharedKV};
  }
  int64_t getValueHeadDim() const {
    return valueHeadDim ? valueHeadDim : headDim;
  }

  /// The keys a query attends to in a sequence of `length`.
  int64_t getAttended(int64_t length) const {
    return windowLeft ? std::min(length, windowLeft) : length;
  }
  /// The bytes of K and V a call must read for `batch` sequences of
  /// `length`: the keys a query attends to, of `elementBytes` each (1 for
  /// fp8 caches); a latent cache's once.
  size_t getKVBytes(int64_t batch, int64_t length,
                    int64_t elementBytes = 2) const {
    return size_t(elementBytes) * batch * getAttended(length) * numKVHeads *
           (headDim + (sharedKV ? 0 : getValueHeadDim()));
  }
  /// The bytes of k_scale and v_scale the call reads with `manifest`'s fp8
  /// caches: one float each per tensor, or per attended token and KV head.
  size_t getScaleBytes(const rt::Manifest &manifest, int64_t batch,
                       int64_t length) const {
    return (sharedKV ? 1 : 2) * sizeof(float) *
           manifest.getScaleElements(batch * getAttended(length) * numKVHeads *
                                     manifest.headDim);
  }
};
// The first two run by default; --configs picks others (bench/model_fdemu.sh,
// bench/window_fdemu.sh: Llama-3-8B's heads with gpt-oss' 128-key window).
// bench/plans.sh knows the same heads.
inline const ModelConfig kConfigs[] = {{"llama3-8b", 32, 8, 128},
                                       {"mha", 32, 32, 128},
                                       {"gqa8", 64, 8, 128},
                                       {"mqa", 32, 1, 128},
                                       {"llama3-8b-w128", 32, 8, 128, 128},
                                       {"gpt-oss", 64, 8, 64},
                                       {"gemma2-9b", 16, 8, 256}};

/// kConfigs' names, comma separated.
inline std::string getConfigNames() {
  std::string names;
  for (const ModelConfig &config : kConfigs)
    names += (names.empty() ? "" : ", ") + std::string(config.name);
  return names;
}

} // namespace flashdecode::bench

#endif // FD_BENCH_MODELCONFIGS_H
