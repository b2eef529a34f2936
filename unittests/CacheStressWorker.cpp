//===- CacheStressWorker.cpp - One process of the cache stress test -------===//
//
//   cache_stress_worker CACHE_DIR WORKER OUTPUT START
//
// Waits until the file START exists (all workers started), then compiles the
// keys of WORKER (CacheStress.h) through the disk cache in CACHE_DIR, then
// again from the disk alone (its memory cache cleared), while the other
// workers do the same; writes one line per compilation to OUTPUT,
// `ROUND INDEX DIGEST` or `ROUND INDEX error: MESSAGE`.
// KernelCacheProcessesTest starts it and checks what it wrote.
//
//===----------------------------------------------------------------------===//

#include "CacheStress.h"

#include "llvm/Support/FileSystem.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace flashdecode;
using namespace flashdecode::test;

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s CACHE_DIR WORKER OUTPUT START\n", argv[0]);
    return 2;
  }
  // The test kills a worker that waits too long.
  while (!llvm::sys::fs::exists(argv[4]))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CompileOptions options;
  options.cacheDirectory = argv[1];
  int worker = std::atoi(argv[2]);
  std::FILE *output = std::fopen(argv[3], "w");
  if (!output) {
    std::fprintf(stderr, "cannot write %s\n", argv[3]);
    return 2;
  }
  for (int round = 0; round < 2; ++round) {
    clearMemoryCache();
    for (int index : getStressKeys(worker)) {
      auto kernels = compile(getStressConfig(index), options);
      if (!kernels)
        std::fprintf(output, "%d %d error: %s\n", round, index,
                     llvm::toString(kernels.takeError()).c_str());
      else
        std::fprintf(output, "%d %d %s\n", round, index,
                     getStressDigest(**kernels).c_str());
    }
  }
  // How often the workers collided: compilations past the own keys are
  // shared keys compiled while another worker was compiling them too.
  CacheStatistics statistics = getCacheStatistics();
  std::fprintf(stderr,
               "cache_stress_worker %d: %lld compilations, %lld disk hits, "
               "%lld entries rejected\n",
               worker, static_cast<long long>(statistics.compilations),
               static_cast<long long>(statistics.diskHits),
               static_cast<long long>(statistics.diskRejected));
  return std::fclose(output) == 0 ? 0 : 2;
}
