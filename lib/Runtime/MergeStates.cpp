//===- MergeStates.cpp - Launch a merge of attention states ---------------===//

#include "fd/Runtime/MergeStates.h"

#include <limits>
#include <stdexcept>

namespace flashdecode::rt {

MergeStatesKernel::MergeStatesKernel(const Device &device,
                                     const std::string &ptx,
                                     const MergeStatesLaunch &launch)
    : device(device), module(device, ptx, launch.kernelName),
      function(module.getFunction(launch.kernelName)), shape(launch) {}

void MergeStatesKernel::launch(const std::vector<CUdeviceptr> &pointers,
                               int64_t rows, CUstream stream) const {
  const size_t expected = 2 * shape.operands + 2 + (shape.withMask ? 1 : 0);
  if (pointers.size() != expected)
    throw std::invalid_argument("the merge kernel takes " +
                                std::to_string(expected) +
                                " pointers (states, lses, output, lse" +
                                (shape.withMask ? ", mask" : "") + "), got " +
                                std::to_string(pointers.size()));
  if (rows < 0 || rows > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("rows must be in [0, 2^31), got " +
                                std::to_string(rows));
  // No rows: nothing read, whatever the (empty) buffers' addresses.
  if (rows == 0)
    return;
  for (CUdeviceptr pointer : pointers)
    if (!pointer)
      throw std::invalid_argument("a merge's buffers may not be null");
  std::vector<void *> arguments;
  for (const CUdeviceptr &pointer : pointers)
    arguments.push_back(const_cast<CUdeviceptr *>(&pointer));
  const DriverApi &driver = device.getDriverApi();
  device.makeCurrent();
  check(driver,
        driver.cuLaunchKernel(function, static_cast<unsigned>(rows),
                              static_cast<unsigned>(shape.heads), 1,
                              static_cast<unsigned>(shape.threads), 1, 1, 0,
                              stream, arguments.data(), nullptr),
        "launching " + shape.kernelName);
}

} // namespace flashdecode::rt
