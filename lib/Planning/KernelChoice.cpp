//===- KernelChoice.cpp - Which partial kernel a workload gets ------------===//

#include "fd/Planning/KernelChoice.h"

namespace flashdecode {

bool choosesTensorCores(int64_t queryElementBytes, int64_t headDim,
                        int64_t rows) {
  return queryElementBytes == 2 && (headDim == 64 || headDim == 128) &&
         rows >= kTensorCoreMinRows;
}

} // namespace flashdecode
