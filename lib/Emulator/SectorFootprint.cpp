//===- SectorFootprint.cpp - The global sectors a launch loads ------------===//

#include "SectorFootprint.h"

#include <algorithm>

namespace flashdecode::emu {

void SectorFootprint::add(const uint64_t *first, uint64_t count) {
  sectors.insert(sectors.end(), first, first + count);
  if (sectors.size() >= 2 * compactedSize + (size_t(1) << 16))
    compact();
}

void SectorFootprint::merge(SectorFootprint &other) {
  add(other.sectors.data(), other.sectors.size());
  other.sectors.clear();
  other.compactedSize = 0;
}

uint64_t SectorFootprint::countDistinct() {
  compact();
  return sectors.size();
}

void SectorFootprint::compact() {
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  compactedSize = sectors.size();
}

} // namespace flashdecode::emu
