//===- DriverCoverage.cpp - libfdemu.so: which instructions ran ----------===//
//
// FDEMU_COVERAGE=FILE records, per kernel, which instructions some lane
// executed and which guards (bra: directions) went each way, over every
// launch of the process, and appends it to FILE at exit: a header line per
// kernel, then one line per instruction, `LINE FLAGS TEXT`, FLAGS being `t`
// (some lane's guard true; unguarded: executed) or `-`, then `f` (some
// lane's guard false) or `-`. Two runs' files differ exactly where one ran
// a path of the kernels the other did not.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <cstdio>
#include <cstdlib>
#include <functional>

using namespace flashdecode::emu;

namespace {

struct KernelCoverage {
  std::shared_ptr<const Kernel> kernel;
  std::vector<uint8_t> reached;
};

/// By kernel name and a hash of its instructions: kernels of one name from
/// different modules are apart.
using CoverageMap = std::map<std::pair<std::string, size_t>, KernelCoverage>;

CoverageMap &coverageMap() {
  static CoverageMap *map = new CoverageMap; // read at exit
  return *map;
}

const char *coverageFile() {
  static const char *file = [] {
    const char *value = std::getenv("FDEMU_COVERAGE");
    return value && *value ? value : nullptr;
  }();
  return file;
}

void writeCoverage() {
  std::FILE *out = std::fopen(coverageFile(), "a");
  if (!out) {
    std::fprintf(stderr, "fdemu: FDEMU_COVERAGE: cannot open '%s'\n",
                 coverageFile());
    return;
  }
  for (const auto &[key, coverage] : coverageMap()) {
    const std::vector<Instruction> &code = coverage.kernel->code;
    std::fprintf(out, "fdemu coverage: kernel %s (%zu instructions)\n",
                 key.first.c_str(), code.size());
    for (size_t i = 0; i < code.size(); ++i)
      std::fprintf(out, "%u %c%c %s\n", code[i].line,
                   coverage.reached[i] & kReachedGuardTrue ? 't' : '-',
                   coverage.reached[i] & kReachedGuardFalse ? 'f' : '-',
                   code[i].text.c_str());
  }
  std::fclose(out);
}

} // namespace

std::vector<uint8_t> *Driver::coverageOf(std::shared_ptr<const Kernel> kernel) {
  if (!coverageFile())
    return nullptr;
  size_t hash = 0;
  for (const Instruction &inst : kernel->code)
    hash = hash * 31 + std::hash<std::string>()(inst.text);
  CoverageMap &map = coverageMap();
  if (map.empty())
    std::atexit(writeCoverage);
  KernelCoverage &coverage = map[{kernel->name, hash}];
  if (!coverage.kernel) {
    coverage.reached.assign(kernel->code.size(), 0);
    coverage.kernel = std::move(kernel);
  }
  return &coverage.reached;
}
