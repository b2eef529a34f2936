//===- CacheStress.h - The keys several processes compile at once -*- C++
//-*-===//
//
// What KernelCacheProcessesTest and its worker (cache_stress_worker) agree
// on: the configurations, which worker compiles which, and the digest a
// result is compared by.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_CACHESTRESS_H
#define FD_UNITTESTS_CACHESTRESS_H

#include "fd/Compiler/Compile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <string>
#include <vector>

namespace flashdecode::test {

constexpr int kStressWorkers = 4;
/// Keys every worker compiles, and each worker's own.
constexpr int kSharedStressKeys = 4;
constexpr int kOwnStressKeys = 2;
constexpr int kStressKeys = kSharedStressKeys + kStressWorkers * kOwnStressKeys;

/// Configuration `index` of the kStressKeys: a key of its own each.
inline KernelConfig getStressConfig(int index) {
  KernelConfig config;
  config.headDim = index % 2 ? 64 : 128;
  config.numQueryHeads = 8;
  config.numKVHeads = 2;
  config.numSplits = 1 + index / 2;
  config.withLse = index % 3 == 0;
  return config;
}

/// The keys of `worker`: the shared ones first, in the same order in every
/// worker, so that workers started together miss, compile and write each
/// one at the same time; then its own.
inline std::vector<int> getStressKeys(int worker) {
  std::vector<int> keys;
  for (int i = 0; i < kSharedStressKeys; ++i)
    keys.push_back(i);
  for (int i = 0; i < kOwnStressKeys; ++i)
    keys.push_back(kSharedStressKeys + worker * kOwnStressKeys + i);
  return keys;
}

/// SHA-256 over the kernels' split count, manifest and PTX.
inline std::string getStressDigest(const CompiledKernels &kernels) {
  std::string text =
      std::to_string(kernels.numSplits) + "\n" + kernels.manifest + "\n";
  for (const auto &[name, ptx] : kernels.ptx)
    text += name + "\n" + ptx + "\n";
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(text)),
                     /*LowerCase=*/true);
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_CACHESTRESS_H
