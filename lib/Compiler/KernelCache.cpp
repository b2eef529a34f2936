//===- KernelCache.cpp - Memory and disk cache of compiled kernels --------===//
//
// Keyed like Triton's cache: SHA-256 over the compiler version, the config and
// the pipeline options. Disk writes are atomic (temporary file + rename) and
// entries are self-checking, so concurrent processes and torn writes never
// hand out a damaged kernel.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Compiler/SplitKVOptions.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace flashdecode {

namespace {

/// Options of the lowering that are fixed in code; a change here must change
/// the key.
constexpr const char *kPipelineOptions =
    "fd-lower-to-ptx format=isa O=3 partial-threads=128";
constexpr llvm::StringLiteral kMagic = "FDKCACHE2";

std::string sha256Hex(llvm::StringRef data) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(data)),
                     /*LowerCase=*/true);
}

struct Counters {
  std::atomic<int64_t> memoryHits{0}, diskHits{0}, diskRejected{0},
      compilations{0};
};
Counters &counters() {
  static Counters instance;
  return instance;
}

using Shared = std::shared_ptr<const CompiledKernels>;
/// A finished or in-flight compilation: the kernels, or an error message.
using Outcome = std::pair<Shared, std::string>;

struct MemoryCache {
  std::mutex mutex;
  std::map<std::string, std::shared_future<Outcome>> entries;
};
MemoryCache &memoryCache() {
  static MemoryCache instance;
  return instance;
}

std::string serialize(const std::string &key, const CompiledKernels &kernels) {
  llvm::json::Array ptx;
  for (const auto &[name, text] : kernels.ptx)
    ptx.push_back(llvm::json::Array{name, text});
  std::string payload;
  llvm::raw_string_ostream(payload)
      << llvm::json::Value(llvm::json::Object{{"key", key},
                                              {"num_splits", kernels.numSplits},
                                              {"manifest", kernels.manifest},
                                              {"request", kernels.request},
                                              {"ptx", std::move(ptx)}});
  return (kMagic + "\n" + llvm::Twine(payload.size()) + "\n" +
          sha256Hex(payload) + "\n" + payload)
      .str();
}

/// The kernels of a disk entry, or nothing when it is missing, truncated,
/// corrupt or for another key.
std::optional<CompiledKernels> deserialize(llvm::StringRef entry,
                                           llvm::StringRef key) {
  auto [magic, rest] = entry.split('\n');
  auto [lengthText, rest2] = rest.split('\n');
  auto [checksum, payload] = rest2.split('\n');
  size_t length = 0;
  if (magic != kMagic || lengthText.getAsInteger(10, length) ||
      payload.size() != length || sha256Hex(payload) != checksum)
    return std::nullopt;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(payload);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object || object->getString("key") != key)
    return std::nullopt;
  CompiledKernels kernels;
  std::optional<int64_t> numSplits = object->getInteger("num_splits");
  std::optional<llvm::StringRef> manifest = object->getString("manifest");
  std::optional<llvm::StringRef> request = object->getString("request");
  const llvm::json::Array *ptx = object->getArray("ptx");
  if (!numSplits || !manifest || !request || !ptx)
    return std::nullopt;
  kernels.numSplits = *numSplits;
  kernels.manifest = manifest->str();
  kernels.request = request->str();
  for (const llvm::json::Value &item : *ptx) {
    const llvm::json::Array *pair = item.getAsArray();
    if (!pair || pair->size() != 2 || !(*pair)[0].getAsString() ||
        !(*pair)[1].getAsString())
      return std::nullopt;
    kernels.ptx.emplace_back((*pair)[0].getAsString()->str(),
                             (*pair)[1].getAsString()->str());
  }
  return kernels;
}

/// Writes `contents` to `path` atomically: a reader sees the old file, no
/// file, or the whole new one.
void writeAtomically(llvm::StringRef path, llvm::StringRef contents) {
  std::string temporary =
      (path + ".tmp." + llvm::Twine(llvm::sys::Process::getProcessId()) + "." +
       llvm::Twine(std::hash<std::thread::id>()(std::this_thread::get_id())))
          .str();
  {
    std::error_code error;
    llvm::raw_fd_ostream stream(temporary, error);
    if (error)
      return; // An unwritable cache only costs a recompile later.
    stream << contents;
    stream.close();
    if (stream.has_error()) {
      stream.clear_error();
      llvm::sys::fs::remove(temporary);
      return;
    }
  }
  if (llvm::sys::fs::rename(temporary, path))
    llvm::sys::fs::remove(temporary);
}

/// Disk lookup, else compilation (and a disk write).
Outcome compileThroughDisk(const KernelRequest &request, const std::string &key,
                           const CompileOptions &options) {
  std::string path;
  if (options.useDiskCache) {
    std::string directory = options.cacheDirectory.empty()
                                ? getDefaultCacheDirectory()
                                : options.cacheDirectory;
    path = (directory + "/" + key + ".fdk");
    if (auto buffer = llvm::MemoryBuffer::getFile(path)) {
      if (std::optional<CompiledKernels> kernels =
              deserialize((*buffer)->getBuffer(), key)) {
        ++counters().diskHits;
        return {std::make_shared<const CompiledKernels>(std::move(*kernels)),
                ""};
      }
      ++counters().diskRejected;
    }
    llvm::sys::fs::create_directories(directory);
  }
  ++counters().compilations;
  llvm::Expected<CompiledKernels> kernels = compileUncached(request);
  if (!kernels)
    return {nullptr, llvm::toString(kernels.takeError())};
  if (options.useDiskCache)
    writeAtomically(path, serialize(key, *kernels));
  return {std::make_shared<const CompiledKernels>(std::move(*kernels)), ""};
}

/// The outcome for `request`: its kernels with a manifest that records it
/// (the entry's may record another request that resolved alike).
llvm::Expected<Shared> toExpected(const Outcome &outcome,
                                  const KernelRequest &request) {
  if (!outcome.first)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   outcome.second);
  std::string asked = request.toString();
  if (outcome.first->request == asked)
    return outcome.first;
  auto recorded = std::make_shared<CompiledKernels>(*outcome.first);
  recorded->manifest = recordRequest(recorded->manifest, request);
  recorded->request = std::move(asked);
  return recorded;
}

} // namespace

std::string getCacheKey(const KernelRequest &request) {
  return sha256Hex((llvm::Twine(getCompilerVersion()) + "\n" +
                    getCompilerSourceHash() + "\n" +
                    resolve(request).toString() + "\n" + kPipelineOptions)
                       .str());
}

std::string getDefaultCacheDirectory() {
  if (std::optional<std::string> directory =
          llvm::sys::Process::GetEnv("FD_CACHE_DIR"))
    return *directory;
  llvm::SmallString<128> home;
  if (!llvm::sys::path::home_directory(home))
    home = llvm::sys::path::get_separator(); // No home: the root.
  llvm::sys::path::append(home, ".cache", "flashdecode");
  return std::string(home);
}

llvm::Expected<Shared> compile(const KernelRequest &request,
                               const CompileOptions &options) {
  std::string invalid = request.validate();
  if (!invalid.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), invalid);
  std::string key = getCacheKey(request);
  if (!options.useMemoryCache)
    return toExpected(compileThroughDisk(request, key, options), request);

  MemoryCache &cache = memoryCache();
  std::promise<Outcome> promise;
  std::unique_lock<std::mutex> lock(cache.mutex);
  auto found = cache.entries.find(key);
  if (found != cache.entries.end()) {
    std::shared_future<Outcome> entry = found->second;
    ++counters().memoryHits;
    // Waiting (for a compilation in flight) outside the lock lets other keys
    // proceed.
    lock.unlock();
    return toExpected(entry.get(), request);
  }
  cache.entries.emplace(key, promise.get_future().share());
  lock.unlock();
  Outcome outcome = compileThroughDisk(request, key, options);
  promise.set_value(outcome);
  if (!outcome.first) {
    // Do not remember failures: the next call tries again.
    lock.lock();
    cache.entries.erase(key);
  }
  return toExpected(outcome, request);
}

CacheStatistics getCacheStatistics() {
  CacheStatistics statistics;
  statistics.memoryHits = counters().memoryHits;
  statistics.diskHits = counters().diskHits;
  statistics.diskRejected = counters().diskRejected;
  statistics.compilations = counters().compilations;
  return statistics;
}

void clearMemoryCache() {
  std::lock_guard<std::mutex> lock(memoryCache().mutex);
  memoryCache().entries.clear();
}

} // namespace flashdecode
