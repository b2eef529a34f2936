//===- MergeStates.h - Launch a merge of attention states -------*- C++ -*-===//
//
// fdrt's half of fd.merge_states on a GPU: the PTX that compileMergeStates
// (fd/Compiler/MergeStates.h) made, loaded once and launched on a caller's
// stream (graph-capturable: one kernel launch, no allocation).
//
//===----------------------------------------------------------------------===//

#ifndef FD_RUNTIME_MERGESTATES_H
#define FD_RUNTIME_MERGESTATES_H

#include "fd/Runtime/Runtime.h"

#include <string>
#include <vector>

namespace flashdecode::rt {

/// How a merge kernel is launched: (rows, heads, 1) blocks of `threads`.
struct MergeStatesLaunch {
  /// The kernel's name in the PTX.
  std::string kernelName;
  int64_t heads = 0;
  int64_t threads = 0;
  /// Its parameters: `operands` states pointers, as many lses pointers, the
  /// output, the lse, and the mask when `withMask`.
  int64_t operands = 0;
  bool withMask = false;
};

class MergeStatesKernel {
public:
  /// Loads `ptx` on `device`; throws CudaError with the JIT's log when the
  /// driver rejects it.
  MergeStatesKernel(const Device &device, const std::string &ptx,
                    const MergeStatesLaunch &launch);

  /// Merges `rows` rows: `pointers` are the kernel's parameters in order
  /// (states, lses, output, lse[, mask]), each aligned to its element's
  /// size; none may be 0 unless there are no rows, for which nothing is
  /// launched. Throws std::invalid_argument for a wrong count.
  void launch(const std::vector<CUdeviceptr> &pointers, int64_t rows,
              CUstream stream) const;

  const MergeStatesLaunch &getLaunch() const { return shape; }

private:
  const Device &device;
  Module module;
  CUfunction function;
  MergeStatesLaunch shape;
};

} // namespace flashdecode::rt

#endif // FD_RUNTIME_MERGESTATES_H
