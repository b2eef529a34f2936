//===- KernelChoice.cpp - Which partial kernel a workload gets ------------===//

#include "fd/Planning/KernelChoice.h"

namespace flashdecode {

bool choosesTensorCores(int64_t queryElementBytes, int64_t headDim,
                        int64_t rows, int64_t minRows) {
  return queryElementBytes == 2 && (headDim == 64 || headDim == 128) &&
         rows >= minRows;
}

} // namespace flashdecode
