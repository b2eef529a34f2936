//===- SectorFootprint.h - The global sectors a launch loads ----*- C++ -*-===//
//
// The distinct 32-byte global sectors a launch's loads touch: what the
// performance model charges to DRAM, once each. A sector read again in the
// same launch is an L2 hit (the query every split reads, the per-token scales
// the KV heads of one token share, a chunk that several row tiles stream).
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_EMULATOR_SECTORFOOTPRINT_H
#define FD_LIB_EMULATOR_SECTORFOOTPRINT_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashdecode::emu {

/// Each worker thread of a launch keeps its own; they are merged when the
/// launch ends.
class SectorFootprint {
public:
  void add(const uint64_t *sectors, uint64_t count);
  /// Moves `other`'s sectors into this one, leaving it empty.
  void merge(SectorFootprint &other);
  uint64_t countDistinct();

private:
  /// Sorts and drops repeats once the list has doubled since the last time,
  /// so a worker holds at most about twice its distinct sectors.
  void compact();
  std::vector<uint64_t> sectors;
  size_t compactedSize = 0;
};

} // namespace flashdecode::emu

#endif // FD_LIB_EMULATOR_SECTORFOOTPRINT_H
