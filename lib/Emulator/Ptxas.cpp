//===- Ptxas.cpp - Registers per thread, as ptxas allocates them ----------===//

#include "Ptxas.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

extern char **environ;

namespace flashdecode::emu {

namespace {

/// A temporary file, removed when this goes out of scope.
class TemporaryFile {
public:
  explicit TemporaryFile(const char *suffix) {
    const char *directory = std::getenv("TMPDIR");
    path = std::string(directory && *directory ? directory : "/tmp") +
           "/fdemu-XXXXXX" + suffix;
    int fd = mkstemps(path.data(), static_cast<int>(std::strlen(suffix)));
    if (fd < 0)
      path.clear();
    else
      close(fd);
  }
  ~TemporaryFile() {
    if (!path.empty())
      unlink(path.c_str());
  }
  TemporaryFile(const TemporaryFile &) = delete;
  TemporaryFile &operator=(const TemporaryFile &) = delete;

  std::string path;
};

/// Runs `arguments` (argv[0] searched on PATH unless it has a slash) with
/// stdout and stderr into `outputPath`; true when it exits with status 0.
bool run(const std::vector<std::string> &arguments,
         const std::string &outputPath) {
  std::vector<char *> argv;
  for (const std::string &argument : arguments)
    argv.push_back(const_cast<char *>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, outputPath.c_str(),
                                   O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int error =
      posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error)
    return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// $FDEMU_PTXAS (empty: none), else the CUDA toolkit's, else PATH's.
std::string findPtxas() {
  if (const char *configured = std::getenv("FDEMU_PTXAS"))
    return configured;
  const char *toolkit = "/usr/local/cuda/bin/ptxas";
  return access(toolkit, X_OK) == 0 ? toolkit : "ptxas";
}

/// Parses `ptxas -v` output: each "Compiling entry function 'NAME'" line,
/// then the "Used N registers" line that follows it.
std::map<std::string, unsigned> parsePtxasRegisters(const std::string &output) {
  std::map<std::string, unsigned> registers;
  std::istringstream lines(output);
  std::string line, entry;
  const std::string compiling = "Compiling entry function '";
  const std::string used = "Used ";
  while (std::getline(lines, line)) {
    size_t at = line.find(compiling);
    if (at != std::string::npos) {
      size_t begin = at + compiling.size();
      size_t end = line.find('\'', begin);
      entry = end == std::string::npos ? "" : line.substr(begin, end - begin);
      continue;
    }
    at = line.find(used);
    if (entry.empty() || at == std::string::npos ||
        line.find(" registers", at) == std::string::npos)
      continue;
    registers[entry] = static_cast<unsigned>(
        std::strtoul(line.c_str() + at + used.size(), nullptr, 10));
    entry.clear();
  }
  return registers;
}

std::map<std::string, unsigned> runPtxas(const std::string &ptx,
                                         const std::string &arch) {
  std::string ptxas = findPtxas();
  TemporaryFile input(".ptx"), output(".log");
  if (ptxas.empty() || input.path.empty() || output.path.empty())
    return {};
  {
    std::ofstream file(input.path, std::ios::binary);
    file << ptx;
    if (!file)
      return {};
  }
  if (!run({ptxas, "-arch=" + arch, "-v", input.path, "-o", "/dev/null"},
           output.path))
    return {};
  std::ifstream file(output.path);
  std::stringstream text;
  text << file.rdbuf();
  return parsePtxasRegisters(text.str());
}

} // namespace

std::map<std::string, unsigned> getPtxasRegisters(const std::string &ptx,
                                                  const std::string &arch) {
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, unsigned>> cache;
  std::string key = arch + '\n' + ptx;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found == cache.end())
    found = cache.emplace(key, runPtxas(ptx, arch)).first;
  return found->second;
}

} // namespace flashdecode::emu
