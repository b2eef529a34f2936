//===- Compile.h - The in-process JIT: config -> PTX + manifest -*- C++ -*-===//
//
// flashdecode::compile builds the fd IR for a KernelConfig, runs
// fd-lower-to-ptx in this process (no nvcc, no subprocess) and returns one PTX
// text per kernel plus the manifest the runtime launches them from. Results are
// cached in memory and on disk (lib/Compiler/KernelCache.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FD_COMPILER_COMPILE_H
#define FD_COMPILER_COMPILE_H

#include "fd/Compiler/KernelConfig.h"
#include "fd/Compiler/Stage.h"
#include "fd/Namespace.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flashdecode {

/// The compiler's release, for people (in the manifest).
const char *getCompilerVersion();

/// The SHA-256 of the compiler's sources (lib/ and include/ of the dialect,
/// conversions, planner and compiler), computed at build time: part of every
/// cache key, so a changed compiler never reuses an old entry.
const char *getCompilerSourceHash();

/// What compiling a config produced.
struct CompiledKernels {
  /// (kernel name, PTX text), in launch order: partial attention, merge.
  std::vector<std::pair<std::string, std::string>> ptx;
  /// manifest.json: kernels, parameters, launch shapes, workspace, config.
  std::string manifest;
  int64_t numSplits = 0;
  /// The request the manifest's "config" records (KernelRequest::toString()).
  std::string request;
};

/// The most splits the automatic choice makes for `request`: its hints'
/// maxSplits, and with a fused merge no more than that merge can merge (their
/// weights within the partial kernel's static shared memory).
int64_t getAutomaticMaxSplits(const KernelRequest &request);

/// Compiles `request` without any cache. Fails with the unsupported field or
/// the diagnostics of the failing stage. The manifest's "config" is the
/// request's (recordRequest).
llvm::Expected<CompiledKernels> compileUncached(const KernelRequest &request);

/// `manifest` (one compileUncached wrote) with its "config" the fields of
/// `request`, one that resolves to the same kernels: how this request
/// planned them.
std::string recordRequest(llvm::StringRef manifest,
                          const KernelRequest &request);

/// The IR after `stage` (the fd.attention input for Stage::Input), or for
/// Stage::PTX the PTX of every kernel, each behind a `// kernel: NAME` line.
llvm::Expected<std::string> emitStage(const KernelRequest &request,
                                      Stage stage);

struct CompileOptions {
  bool useMemoryCache = true;
  bool useDiskCache = true;
  /// Empty: $FD_CACHE_DIR, else ~/.cache/flashdecode.
  std::string cacheDirectory;
};

/// Compiles `request` through the memory and disk caches; thread-safe, and
/// two threads asking for the same kernels compile them once. Requests that
/// resolve alike (resolve(), fd/Compiler/SplitKVOptions.h) share one entry;
/// each gets a manifest recording its own request.
///
/// Disk entries are `<cache dir>/<key>.fdk`, where the key is the SHA-256 of
/// the compiler version, `resolve(request).toString()` and the pipeline
/// options. They
/// are written to a temporary file and renamed into place, and carry the
/// length and SHA-256 of their payload: a truncated or corrupt entry is
/// detected, recompiled and replaced, never returned.
llvm::Expected<std::shared_ptr<const CompiledKernels>>
compile(const KernelRequest &request, const CompileOptions &options = {});

/// The cache key of the kernels `request` resolves to (64 hex digits).
std::string getCacheKey(const KernelRequest &request);

/// $FD_CACHE_DIR, else $HOME/.cache/flashdecode.
std::string getDefaultCacheDirectory();

/// Counters of what compile() did since the process started.
struct CacheStatistics {
  int64_t memoryHits = 0;
  int64_t diskHits = 0;
  /// Disk entries found corrupt or truncated (then rebuilt).
  int64_t diskRejected = 0;
  int64_t compilations = 0;
};
CacheStatistics getCacheStatistics();

/// Forgets the in-memory cache (the disk cache stays).
void clearMemoryCache();

} // namespace flashdecode

#endif // FD_COMPILER_COMPILE_H
