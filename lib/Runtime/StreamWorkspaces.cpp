//===- StreamWorkspaces.cpp - One device buffer per stream ----------------===//

#include "fd/Runtime/Runtime.h"

#include <algorithm>

namespace flashdecode::rt {

CUdeviceptr StreamWorkspaces::get(CUstream stream, size_t bytes) {
  auto found = buffers.find(stream);
  if (found != buffers.end() && found->second.getSize() >= bytes)
    return found->second.getAddress();
  size_t size = bytes;
  if (found != buffers.end()) {
    size = std::max(bytes, 2 * found->second.getSize());
    device.makeCurrent();
    check(device.getDriverApi(),
          device.getDriverApi().cuStreamSynchronize(stream),
          "waiting for the launches that use a workspace before replacing "
          "it");
    buffers.erase(found);
  }
  DeviceBuffer &buffer =
      buffers.emplace(stream, DeviceBuffer(device, size)).first->second;
  if (zeroed)
    buffer.zero();
  return buffer.getAddress();
}

size_t StreamWorkspaces::getSize(CUstream stream) const {
  auto found = buffers.find(stream);
  return found == buffers.end() ? 0 : found->second.getSize();
}

} // namespace flashdecode::rt
