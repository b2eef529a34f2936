//===- Ptxas.h - Assemble PTX with the CUDA toolkit's ptxas -----*- C++ -*-===//
//
// For tests, the demo and benchmarks: checks that ptxas accepts a PTX and
// reads its resource report. In FDTestSupport, apart from the JIT
// (FDCompiler), which never runs a subprocess.
//
//===----------------------------------------------------------------------===//

#ifndef FD_TESTSUPPORT_PTXAS_H
#define FD_TESTSUPPORT_PTXAS_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace flashdecode {

/// /usr/local/cuda/bin/ptxas, else ptxas on PATH.
std::optional<std::string> findPtxas();

/// What `ptxas -v` reported for one kernel.
struct PtxasReport {
  int64_t registers = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t sharedMemoryBytes = 0;
  /// Everything ptxas printed.
  std::string log;
};

/// Assembles `ptx` (one kernel) for `arch`; fails with ptxas's output when
/// it rejects the PTX or its report cannot be read.
llvm::Expected<PtxasReport> assembleWithPtxas(const std::string &ptxas,
                                              const std::string &ptx,
                                              const std::string &arch);

} // namespace flashdecode

#endif // FD_TESTSUPPORT_PTXAS_H
