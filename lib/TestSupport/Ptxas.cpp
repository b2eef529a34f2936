//===- Ptxas.cpp - Assemble PTX with the CUDA toolkit's ptxas -------------===//

#include "fd/TestSupport/Ptxas.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

namespace flashdecode {

std::optional<std::string> findPtxas() {
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return std::string("/usr/local/cuda/bin/ptxas");
  if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  return std::nullopt;
}

llvm::Expected<PtxasReport> assembleWithPtxas(const std::string &ptxas,
                                              const std::string &ptx,
                                              const std::string &arch) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  llvm::SmallString<128> input, log;
  if (llvm::sys::fs::createTemporaryFile("fd-ptxas", "ptx", input) ||
      llvm::sys::fs::createTemporaryFile("fd-ptxas", "log", log))
    return fail("cannot create temporary files for ptxas");
  {
    std::error_code error;
    llvm::raw_fd_ostream stream(input, error);
    stream << ptx;
  }
  std::string archFlag = "-arch=" + arch;
  llvm::StringRef arguments[] = {ptxas, "-v", archFlag,
                                 input, "-o", "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  int code =
      llvm::sys::ExecuteAndWait(ptxas, arguments, std::nullopt, redirects);
  PtxasReport report;
  if (auto buffer = llvm::MemoryBuffer::getFile(log))
    report.log = (*buffer)->getBuffer().str();
  llvm::sys::fs::remove(input);
  llvm::sys::fs::remove(log);
  if (code != 0)
    return fail("ptxas rejected the PTX (exit " + llvm::Twine(code) + "):\n" +
                report.log);

  llvm::SmallVector<llvm::StringRef> spills, usage;
  if (!llvm::Regex("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
           .match(report.log, &spills) ||
      !llvm::Regex("Used ([0-9]+) registers(, used [0-9]+ barriers)?(, [0-9]+ "
                   "bytes cumulative stack size)?(, ([0-9]+) bytes smem)?")
           .match(report.log, &usage))
    return fail("unexpected ptxas report:\n" + report.log);
  spills[1].getAsInteger(10, report.spillStoreBytes);
  spills[2].getAsInteger(10, report.spillLoadBytes);
  usage[1].getAsInteger(10, report.registers);
  if (!usage[5].empty())
    usage[5].getAsInteger(10, report.sharedMemoryBytes);
  return report;
}

} // namespace flashdecode
