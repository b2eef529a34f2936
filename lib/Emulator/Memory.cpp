//===- Memory.cpp - Emulated device memory with initialization shadow -----===//

#include "fd/Emulator/Memory.h"

#include <cstdio>
#include <new>

namespace flashdecode::emu {

uint64_t DeviceMemory::allocate(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  auto allocation = std::make_unique<Allocation>();
  allocation->size = bytes;
  allocation->data.reset(new (std::nothrow) uint8_t[bytes ? bytes : 1]);
  allocation->initialized.reset(new (std::nothrow)
                                    uint8_t[bytes ? bytes : 1]());
  if (!allocation->data || !allocation->initialized)
    return 0;
  allocation->base = nextAddress;
  // 256-byte alignment like the driver, and at least 4 KiB of unmapped
  // space after each allocation so overruns never land in a neighbour.
  nextAddress += (bytes + 4096 + 255) / 256 * 256;
  bytesInUse += bytes;
  uint64_t base = allocation->base;
  allocations.emplace(base, std::move(allocation));
  return base;
}

bool DeviceMemory::free(uint64_t address) {
  std::lock_guard<std::mutex> lock(mutex);
  auto found = allocations.find(address);
  if (found == allocations.end())
    return false;
  bytesInUse -= found->second->size;
  allocations.erase(found);
  return true;
}

Allocation *DeviceMemory::find(uint64_t address, uint64_t bytes) {
  // Kernels call this from several threads while no allocation changes
  // (the driver lock is held for the whole launch): no lock needed, but
  // host-side callers hold the driver lock too.
  auto next = allocations.upper_bound(address);
  if (next == allocations.begin())
    return nullptr;
  Allocation *allocation = std::prev(next)->second.get();
  return allocation->contains(address, bytes) ? allocation : nullptr;
}

std::string DeviceMemory::describeNearest(uint64_t address) {
  char text[256];
  const Allocation *best = nullptr;
  uint64_t bestDistance = ~0ull;
  for (const auto &[base, allocation] : allocations) {
    uint64_t end = base + allocation->size;
    uint64_t distance = address < base   ? base - address
                        : address >= end ? address - end + 1
                                         : 0;
    if (distance < bestDistance) {
      bestDistance = distance;
      best = allocation.get();
    }
  }
  if (!best)
    return "no device memory is allocated";
  uint64_t end = best->base + best->size;
  std::snprintf(text, sizeof(text),
                "nearest allocation [0x%llx, 0x%llx) of %llu bytes; the "
                "address is %s",
                static_cast<unsigned long long>(best->base),
                static_cast<unsigned long long>(end),
                static_cast<unsigned long long>(best->size), "");
  std::string where;
  if (address < best->base)
    where = std::to_string(best->base - address) + " bytes before its start";
  else if (address >= end)
    where = std::to_string(address - end) + " bytes past its end";
  else
    where = "inside it at offset " + std::to_string(address - best->base);
  return text + where;
}

uint64_t DeviceMemory::getBytesInUse() const {
  std::lock_guard<std::mutex> lock(mutex);
  return bytesInUse;
}

} // namespace flashdecode::emu
