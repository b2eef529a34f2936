//===- KernelCacheProcessesTest.cpp - Processes sharing one disk cache ----===//
//
// kStressWorkers processes (cache_stress_worker) compile into one empty
// cache directory at once, every shared key by all of them at the same
// time (each misses, compiles and writes it), then read their keys back from
// the disk alone while the others still write: what serving engines running
// several workers on one FD_CACHE_DIR do. Every result must be the kernels an
// uncached compilation gives, the directory must end with one whole entry per
// key and no temporary file, and each entry must load without a recompilation.
//
//===----------------------------------------------------------------------===//

#include "CacheStress.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <map>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

extern char **environ;

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

/// Waits for `pid` until `deadline`; kills it past that. Its exit status,
/// or -1 when it was killed or did not exit normally.
int waitOrKill(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(KernelCacheProcesses, WorkersSharingADirectoryGetTheUncachedKernels) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fd-cache-stress", path));
  std::string directory(path);
  std::string cacheDirectory = directory + "/cache";
  std::string start = directory + "/start";

  std::vector<pid_t> workers;
  for (int worker = 0; worker < kStressWorkers; ++worker) {
    std::string index = std::to_string(worker);
    std::string output = directory + "/worker" + index + ".txt";
    const char *argv[] = {FD_CACHE_STRESS_WORKER, cacheDirectory.c_str(),
                          index.c_str(),          output.c_str(),
                          start.c_str(),          nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, FD_CACHE_STRESS_WORKER, nullptr, nullptr,
                          const_cast<char **>(argv), environ),
              0)
        << "cannot start " << FD_CACHE_STRESS_WORKER;
    workers.push_back(pid);
  }
  // Every worker has started (it may still be loading): they begin together.
  {
    std::error_code error;
    llvm::raw_fd_ostream(start, error);
    ASSERT_FALSE(error) << error.message();
  }
  // Each worker compiles six keys twice, a few seconds on 2 cores.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  for (int worker = 0; worker < kStressWorkers; ++worker)
    EXPECT_EQ(waitOrKill(workers[worker], deadline), 0)
        << "worker " << worker << " failed or ran past 240 s";

  std::map<int, std::string> expected;
  for (int index = 0; index < kStressKeys; ++index) {
    auto kernels = compileUncached(getStressConfig(index));
    ASSERT_TRUE(static_cast<bool>(kernels))
        << llvm::toString(kernels.takeError());
    expected[index] = getStressDigest(*kernels);
  }
  for (int worker = 0; worker < kStressWorkers; ++worker) {
    auto output = llvm::MemoryBuffer::getFile(directory + "/worker" +
                                              std::to_string(worker) + ".txt");
    ASSERT_TRUE(static_cast<bool>(output)) << "worker " << worker;
    llvm::SmallVector<llvm::StringRef> lines;
    (*output)->getBuffer().trim().split(lines, '\n');
    std::vector<int> keys = getStressKeys(worker);
    ASSERT_EQ(lines.size(), 2 * keys.size()) << "worker " << worker;
    for (size_t i = 0; i < lines.size(); ++i) {
      int index = keys[i % keys.size()];
      std::string line = std::to_string(i / keys.size()) + " " +
                         std::to_string(index) + " " + expected[index];
      EXPECT_EQ(lines[i], line) << "worker " << worker;
    }
  }

  // One whole entry per key, nothing else.
  int entries = 0;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator entry(cacheDirectory, error), end;
       !error && entry != end; entry.increment(error)) {
    EXPECT_TRUE(llvm::StringRef(entry->path()).ends_with(".fdk"))
        << entry->path();
    ++entries;
  }
  EXPECT_FALSE(error) << error.message();
  EXPECT_EQ(entries, kStressKeys);
  CompileOptions options;
  options.cacheDirectory = cacheDirectory;
  clearMemoryCache();
  CacheStatistics before = getCacheStatistics();
  for (int index = 0; index < kStressKeys; ++index) {
    auto kernels = compile(getStressConfig(index), options);
    ASSERT_TRUE(static_cast<bool>(kernels))
        << llvm::toString(kernels.takeError());
    EXPECT_EQ(getStressDigest(**kernels), expected[index]);
  }
  CacheStatistics after = getCacheStatistics();
  EXPECT_EQ(after.diskHits - before.diskHits, kStressKeys);
  EXPECT_EQ(after.diskRejected, before.diskRejected);
  EXPECT_EQ(after.compilations, before.compilations);
  llvm::sys::fs::remove_directories(directory);
}

} // namespace
