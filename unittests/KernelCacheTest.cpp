//===- KernelCacheTest.cpp - The JIT's memory and disk caches -------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Compiler/SplitKVOptions.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>
#include <thread>

using namespace flashdecode;

namespace {

class KernelCache : public testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fd-cache-test", path));
    directory = std::string(path);
    options.cacheDirectory = directory;
    // Each test starts cold: the memory cache outlives a test in-process.
    clearMemoryCache();
    config.headDim = 64;
    config.numQueryHeads = 8;
    config.numKVHeads = 2;
    config.numSplits = 4;
  }
  void TearDown() override { llvm::sys::fs::remove_directories(directory); }

  std::shared_ptr<const CompiledKernels> compileOrFail() {
    auto kernels = compile(config, options);
    if (!kernels) {
      ADD_FAILURE() << llvm::toString(kernels.takeError());
      return nullptr;
    }
    return *kernels;
  }
  std::string entryPath() const {
    return directory + "/" + getCacheKey(config) + ".fdk";
  }
  void rewriteEntry(const std::function<std::string(std::string)> &change) {
    auto buffer = llvm::MemoryBuffer::getFile(entryPath());
    ASSERT_TRUE(static_cast<bool>(buffer));
    std::string contents = change((*buffer)->getBuffer().str());
    std::error_code error;
    llvm::raw_fd_ostream stream(entryPath(), error);
    ASSERT_FALSE(error);
    stream << contents;
  }

  std::string directory;
  CompileOptions options;
  KernelConfig config;
};

TEST_F(KernelCache, MissThenMemoryHitThenDiskHit) {
  CacheStatistics before = getCacheStatistics();
  auto first = compileOrFail();
  ASSERT_TRUE(first);
  EXPECT_EQ(getCacheStatistics().compilations, before.compilations + 1);
  EXPECT_TRUE(llvm::sys::fs::exists(entryPath()));
  ASSERT_EQ(first->ptx.size(), 2u);
  EXPECT_EQ(first->ptx[0].first, "fd_partial_attention");
  EXPECT_EQ(first->ptx[1].first, "fd_merge");
  EXPECT_EQ(first->numSplits, 4);

  auto second = compileOrFail();
  EXPECT_EQ(second, first); // The same object from memory.
  EXPECT_EQ(getCacheStatistics().memoryHits, before.memoryHits + 1);

  clearMemoryCache();
  auto third = compileOrFail();
  ASSERT_TRUE(third);
  EXPECT_EQ(getCacheStatistics().diskHits, before.diskHits + 1);
  EXPECT_EQ(getCacheStatistics().compilations, before.compilations + 1);
  EXPECT_EQ(third->ptx, first->ptx);
  EXPECT_EQ(third->manifest, first->manifest);
  EXPECT_EQ(third->numSplits, first->numSplits);
}

TEST_F(KernelCache, KeyChangesWithEveryField) {
  using Change = std::function<void(KernelConfig &)>;
  std::vector<std::pair<const char *, Change>> changes = {
      {"headDim", [](KernelConfig &c) { c.headDim = 128; }},
      {"numQueryHeads", [](KernelConfig &c) { c.numQueryHeads = 16; }},
      {"numKVHeads", [](KernelConfig &c) { c.numKVHeads = 1; }},
      {"queryLength", [](KernelConfig &c) { c.queryLength = 2; }},
      {"elementType",
       [](KernelConfig &c) { c.elementType = ElementType::BF16; }},
      {"cacheLayout",
       [](KernelConfig &c) { c.cacheLayout = CacheLayout::HND; }},
      {"splitKV", [](KernelConfig &c) { c.splitKV = false; }},
      {"numSplits", [](KernelConfig &c) { c.numSplits = 5; }},
      {"chunkLength", [](KernelConfig &c) { c.chunkLength = 64; }},
      {"scale", [](KernelConfig &c) { c.scale = 0.125f; }},
      {"pageSize", [](KernelConfig &c) { c.pageSize = 16; }},
      {"windowLeft", [](KernelConfig &c) { c.windowLeft = 128; }},
      {"logitsSoftCap", [](KernelConfig &c) { c.logitsSoftCap = 50.0f; }},
      {"withSinks", [](KernelConfig &c) { c.withSinks = true; }},
      {"withAlibi", [](KernelConfig &c) { c.withAlibi = true; }},
      {"withQueryLens", [](KernelConfig &c) { c.withQueryLens = true; }},
      {"withLse", [](KernelConfig &c) { c.withLse = true; }},
      {"kvCacheType",
       [](KernelConfig &c) { c.kvCacheType = KVCacheType::E4M3; }},
      {"kvScaleGranularity",
       [](KernelConfig &c) {
         c.kvCacheType = KVCacheType::E5M2;
         c.kvScaleGranularity = KVScaleGranularity::TokenHead;
       }},
      {"arch", [](KernelConfig &c) { c.arch = "sm_80"; }},
      {"ptxVersion", [](KernelConfig &c) { c.ptxVersion = 81; }},
  };
  std::set<std::string> keys = {getCacheKey(config)};
  for (auto &[field, change] : changes) {
    KernelConfig changed = config;
    change(changed);
    EXPECT_TRUE(keys.insert(getCacheKey(changed)).second)
        << "changing " << field << " left the key unchanged";
  }
  // Scales one bit apart are different kernels.
  KernelConfig a = config, b = config;
  a.scale = 0.125f;
  b.scale = std::nextafter(0.125f, 1.0f);
  EXPECT_NE(getCacheKey(a), getCacheKey(b));
  EXPECT_EQ(getCacheKey(config).size(), 64u);
  EXPECT_EQ(getCacheKey(config), getCacheKey(KernelConfig(config)));
}

TEST_F(KernelCache, RequestsThatResolveAlikeShareOneEntry) {
  // A fixed count: no hint changes the key.
  PlanningHints other;
  other.batch = 7;
  other.maxLength = 100;
  other.planner.smCount = 108;
  other.planner.blocksPerSM = 1;
  other.planner.minChunkLength = 256;
  other.planner.maxSplits = 16;
  EXPECT_EQ(getCacheKey(config), getCacheKey({config, other}));
  // Automatic: the key is the planned count's, whatever batch planned it.
  config.numSplits = 0;
  PlanningHints three, four, many;
  three.batch = 3;
  four.batch = 4;
  many.batch = 64;
  ASSERT_EQ(resolveNumSplits({config, three}),
            resolveNumSplits({config, four}));
  ASSERT_NE(resolveNumSplits({config, three}),
            resolveNumSplits({config, many}));
  EXPECT_EQ(getCacheKey({config, three}), getCacheKey({config, four}));
  EXPECT_NE(getCacheKey({config, three}), getCacheKey({config, many}));

  CacheStatistics before = getCacheStatistics();
  auto first = compile({config, three}, options);
  auto second = compile({config, four}, options);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(getCacheStatistics().compilations, before.compilations + 1);
  EXPECT_EQ((*second)->ptx, (*first)->ptx);
  // Each manifest records its own request.
  EXPECT_NE((*first)->manifest.find("\"planned_batch\": 3"), std::string::npos);
  EXPECT_NE((*second)->manifest.find("\"planned_batch\": 4"),
            std::string::npos);
  EXPECT_NE((*second)->manifest.find("\"requested_num_splits\": 0"),
            std::string::npos);
  // The same request again: the entry itself.
  auto again = compile({config, three}, options);
  ASSERT_TRUE(static_cast<bool>(again));
  EXPECT_EQ(*again, *first);
  // From disk, recorded for the request that reads it.
  clearMemoryCache();
  auto fromDisk = compile({config, four}, options);
  ASSERT_TRUE(static_cast<bool>(fromDisk));
  EXPECT_EQ(getCacheStatistics().diskHits, before.diskHits + 1);
  EXPECT_EQ((*fromDisk)->manifest, (*second)->manifest);
  auto uncached = compileUncached({config, four});
  ASSERT_TRUE(static_cast<bool>(uncached));
  EXPECT_EQ(uncached->manifest, (*second)->manifest);
}

TEST_F(KernelCache, SinksReachTheManifestAndOnlyTheMerge) {
  // The merge alone takes the sinks (its last parameter); the manifest's
  // config says so; the entry is apart from the kernels without sinks.
  config.withLse = true;
  config.withSinks = true;
  auto kernels = compileOrFail();
  ASSERT_TRUE(kernels);
  const std::string &manifest = kernels->manifest;
  EXPECT_NE(manifest.find("\"with_sinks\": true"), std::string::npos);
  size_t merge = manifest.find("\"name\": \"fd_merge\"");
  size_t sinks = manifest.find("\"name\": \"sinks\"");
  ASSERT_NE(merge, std::string::npos);
  ASSERT_NE(sinks, std::string::npos);
  EXPECT_GT(sinks, merge) << manifest;
  EXPECT_GT(sinks, manifest.find("\"name\": \"lse\"", merge));
  // Once: no other kernel takes them.
  EXPECT_EQ(manifest.find("\"sinks\"", sinks + 16), std::string::npos);
  config.withSinks = false;
  auto without = compileOrFail();
  ASSERT_TRUE(without);
  EXPECT_NE(without->manifest.find("\"with_sinks\": false"), std::string::npos);
  EXPECT_EQ(without->manifest.find("\"name\": \"sinks\""), std::string::npos);
  EXPECT_EQ(without->ptx[0].second, kernels->ptx[0].second)
      << "the partial kernel must not change with sinks";
  EXPECT_NE(without->ptx[1].second, kernels->ptx[1].second);
}

TEST_F(KernelCache, AlibiReachesTheManifestAndOnlyThePartialKernel) {
  // The partial kernel alone takes the slopes (its last parameter); the
  // manifest's config says so; the merge is the one without ALiBi.
  config.withLse = true;
  config.withAlibi = true;
  auto kernels = compileOrFail();
  ASSERT_TRUE(kernels);
  const std::string &manifest = kernels->manifest;
  EXPECT_NE(manifest.find("\"with_alibi\": true"), std::string::npos);
  size_t merge = manifest.find("\"name\": \"fd_merge\"");
  size_t slopes = manifest.find("\"name\": \"alibi_slopes\"");
  ASSERT_NE(merge, std::string::npos);
  ASSERT_NE(slopes, std::string::npos);
  EXPECT_LT(slopes, merge) << manifest;
  EXPECT_GT(slopes, manifest.find("\"name\": \"max_len\""));
  // Last: the next parameter list entry closes the partial kernel's list.
  EXPECT_EQ(manifest.find("\"name\": \"", slopes + 10),
            manifest.find("\"name\": \"fd_merge\""))
      << manifest;
  EXPECT_EQ(manifest.find("\"alibi_slopes\"", slopes + 16), std::string::npos);
  config.withAlibi = false;
  auto without = compileOrFail();
  ASSERT_TRUE(without);
  EXPECT_NE(without->manifest.find("\"with_alibi\": false"), std::string::npos);
  EXPECT_EQ(without->manifest.find("alibi_slopes"), std::string::npos);
  EXPECT_NE(without->ptx[0].second, kernels->ptx[0].second);
  EXPECT_EQ(without->ptx[1].second, kernels->ptx[1].second)
      << "the merge must not change with ALiBi";
}

TEST_F(KernelCache, QueryLensReachTheManifestAndBothKernels) {
  // Both kernels take the query lengths, each as its last parameter (after
  // the ALiBi slopes; after the lse and the sinks); the manifest's config
  // says so; neither kernel is the one without them.
  config.queryLength = 4;
  config.withLse = true;
  config.withSinks = true;
  config.withAlibi = true;
  config.withQueryLens = true;
  auto kernels = compileOrFail();
  ASSERT_TRUE(kernels);
  const std::string &manifest = kernels->manifest;
  EXPECT_NE(manifest.find("\"with_query_lens\": true"), std::string::npos);
  size_t merge = manifest.find("\"name\": \"fd_merge\"");
  size_t partialParam = manifest.find("\"name\": \"query_lens\"");
  ASSERT_NE(merge, std::string::npos);
  ASSERT_NE(partialParam, std::string::npos);
  EXPECT_LT(partialParam, merge) << manifest;
  EXPECT_GT(partialParam, manifest.find("\"name\": \"alibi_slopes\""));
  // Last: the next name is the merge's, and none follows the merge's.
  EXPECT_EQ(manifest.find("\"name\": \"", partialParam + 10), merge)
      << manifest;
  size_t mergeParam = manifest.find("\"name\": \"query_lens\"", merge);
  ASSERT_NE(mergeParam, std::string::npos) << manifest;
  EXPECT_GT(mergeParam, manifest.find("\"name\": \"sinks\"", merge));
  EXPECT_EQ(manifest.find("\"name\": \"", mergeParam + 10), std::string::npos)
      << manifest;
  config.withQueryLens = false;
  auto without = compileOrFail();
  ASSERT_TRUE(without);
  EXPECT_NE(without->manifest.find("\"with_query_lens\": false"),
            std::string::npos);
  EXPECT_EQ(without->manifest.find("\"name\": \"query_lens\""),
            std::string::npos);
  EXPECT_NE(without->ptx[0].second, kernels->ptx[0].second);
  EXPECT_NE(without->ptx[1].second, kernels->ptx[1].second);
}

TEST_F(KernelCache, CorruptEntryIsRebuiltNotReturned) {
  auto original = compileOrFail();
  ASSERT_TRUE(original);
  // Flip one character of the PTX inside the entry.
  rewriteEntry([](std::string contents) {
    size_t position = contents.find(".entry");
    EXPECT_NE(position, std::string::npos);
    contents[position + 1] = 'E';
    return contents;
  });
  clearMemoryCache();
  CacheStatistics before = getCacheStatistics();
  auto rebuilt = compileOrFail();
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(getCacheStatistics().diskRejected, before.diskRejected + 1);
  EXPECT_EQ(getCacheStatistics().compilations, before.compilations + 1);
  EXPECT_EQ(rebuilt->ptx, original->ptx);
  // The rebuilt entry replaced the corrupt one.
  clearMemoryCache();
  ASSERT_TRUE(compileOrFail());
  EXPECT_EQ(getCacheStatistics().diskHits, before.diskHits + 1);
}

TEST_F(KernelCache, TruncatedOrForeignEntriesAreRebuilt) {
  auto original = compileOrFail();
  ASSERT_TRUE(original);
  std::vector<std::function<std::string(std::string)>> damages = {
      [](std::string c) { return c.substr(0, c.size() / 2); },
      [](std::string) { return std::string(); },
      [](std::string) { return std::string("FDKCACHE2\n12\nabc\nnot json"); },
      // An entry of the format before the request was recorded.
      [](std::string c) { return "FDKCACHE1" + c.substr(9); },
      [](std::string c) { return c + "trailing"; },
  };
  for (auto &damage : damages) {
    rewriteEntry(damage);
    clearMemoryCache();
    CacheStatistics before = getCacheStatistics();
    auto rebuilt = compileOrFail();
    ASSERT_TRUE(rebuilt);
    EXPECT_EQ(getCacheStatistics().diskRejected, before.diskRejected + 1);
    EXPECT_EQ(rebuilt->ptx, original->ptx);
  }
}

TEST_F(KernelCache, TwoThreadsCompileOneKeyOnce) {
  CacheStatistics before = getCacheStatistics();
  std::vector<std::shared_ptr<const CompiledKernels>> results(4);
  std::vector<std::thread> threads;
  for (auto &result : results)
    threads.emplace_back([&] { result = compileOrFail(); });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(getCacheStatistics().compilations, before.compilations + 1);
  for (auto &result : results)
    EXPECT_EQ(result, results.front());
  ASSERT_TRUE(results.front());
}

TEST_F(KernelCache, ThreadsCompileDifferentKeysConcurrently) {
  std::vector<std::shared_ptr<const CompiledKernels>> results(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      KernelConfig own = config;
      own.numSplits = 2 + static_cast<int64_t>(i);
      auto kernels = compile(own, options);
      ASSERT_TRUE(static_cast<bool>(kernels))
          << llvm::toString(kernels.takeError());
      results[i] = *kernels;
    });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i]);
    EXPECT_EQ(results[i]->numSplits, 2 + static_cast<int64_t>(i));
  }
}

TEST_F(KernelCache, InvalidConfigIsAnErrorNotAnEntry) {
  config.headDim = 100;
  auto kernels = compile(config, options);
  ASSERT_FALSE(static_cast<bool>(kernels));
  EXPECT_EQ(llvm::toString(kernels.takeError()),
            "head_dim 100 is not supported: expected a multiple of 8 in "
            "[32, 576]");
  std::error_code error;
  llvm::sys::fs::directory_iterator entries(directory, error);
  EXPECT_EQ(entries, llvm::sys::fs::directory_iterator());
}

// `fd` is the API's former namespace (Namespace.h): callers written against
// it still compile and get the same kernels.
TEST_F(KernelCache, FormerNamespaceNameStillWorks) {
  fd::KernelConfig same = config;
  auto viaAlias = fd::compile(same, options);
  ASSERT_TRUE(static_cast<bool>(viaAlias))
      << llvm::toString(viaAlias.takeError());
  std::shared_ptr<const CompiledKernels> kernels = compileOrFail();
  ASSERT_TRUE(kernels);
  EXPECT_EQ((*viaAlias)->ptx, kernels->ptx);
}

TEST_F(KernelCache, DirectoryFromTheEnvironment) {
  ::setenv("FD_CACHE_DIR", directory.c_str(), 1);
  EXPECT_EQ(getDefaultCacheDirectory(), directory);
  ::unsetenv("FD_CACHE_DIR");
  EXPECT_NE(getDefaultCacheDirectory().find(".cache/flashdecode"),
            std::string::npos);
}

} // namespace
