//===- Memory.h - Emulated device memory with initialization shadow -*- C++
//-*-===//
//
// Device allocations live in a fake address space (addresses that no host
// pointer has, 256-byte aligned like cuMemAlloc, with unmapped gaps between
// them) so that a host dereference of a device pointer, or a kernel access
// past an allocation, cannot silently hit something else. Every byte has a
// shadow byte saying whether anything (a copy, memset or store) wrote it
// since the allocation: a kernel's load of an unwritten byte is an error.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_MEMORY_H
#define FD_EMULATOR_MEMORY_H

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace flashdecode::emu {

/// Generic-address windows of a thread's shared and local memory
/// (cvta.shared / cvta.local); global allocations start at kGlobalBase.
constexpr uint64_t kSharedWindow = 0x0000'0100'0000'0000ull;
constexpr uint64_t kLocalWindow = 0x0000'0200'0000'0000ull;
constexpr uint64_t kWindowSize = 0x0000'0001'0000'0000ull;
constexpr uint64_t kGlobalBase = 0x0000'7000'0000'0000ull;

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;
  std::unique_ptr<uint8_t[]> data;
  /// 1 where the byte was written since cuMemAlloc.
  std::unique_ptr<uint8_t[]> initialized;

  bool contains(uint64_t address, uint64_t bytes) const {
    return address >= base && address - base <= size &&
           bytes <= size - (address - base);
  }
};

class DeviceMemory {
public:
  /// Returns 0 when `bytes` cannot be allocated.
  uint64_t allocate(uint64_t bytes);
  /// False when `address` is not the start of a live allocation.
  bool free(uint64_t address);
  /// The allocation holding [address, address + bytes), or null.
  Allocation *find(uint64_t address, uint64_t bytes);
  /// "nearest allocation [base, end) of N bytes, address is K bytes past its
  /// end" or "no allocations".
  std::string describeNearest(uint64_t address);
  uint64_t getBytesInUse() const;

private:
  mutable std::mutex mutex;
  std::map<uint64_t, std::unique_ptr<Allocation>> allocations;
  uint64_t nextAddress = kGlobalBase;
  uint64_t bytesInUse = 0;
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_MEMORY_H
