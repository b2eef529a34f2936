//===- MemoryAccess.h - One lane's checked access, counted ------*- C++ -*-===//
//
// Internal to the executor: the address resolution, initcheck and racecheck
// every memory instruction goes through (ld/st/atom, ldmatrix, cp.async),
// and the per-instruction count of global sectors and shared wavefronts.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_MEMORYACCESS_H
#define FD_EMULATOR_MEMORYACCESS_H

#include "WarpState.h"

#include <algorithm>
#include <cstring>

namespace flashdecode::emu {

/// Where one lane's access lands: host bytes and, for checks, its space
/// (Shared: the lane's own CTA's; SharedCluster: another CTA's, `owner`).
struct Target {
  StateSpace space;
  uint8_t *bytes;
  /// Global: the allocation; shared/local: the offset in that memory.
  Allocation *allocation = nullptr;
  uint64_t offset = 0;
  CtaState *owner = nullptr;
};

/// Where `bytes` at `address` in `space` (Generic: by the shared and local
/// windows) land for `lane`; throws the fault a GPU gives when the address
/// is not aligned to `alignment` or outside its memory.
Target resolve(StateSpace space, WarpState &warp, int lane, uint64_t address,
               unsigned bytes, unsigned alignment);

/// The little-endian value of the `bytes` (1, 2, 4 or 8) at `from`, read
/// at its width: a memcpy of a variable size into a zeroed word stalls
/// the load that follows it (store forwarding fails).
inline uint64_t loadValue(const uint8_t *from, unsigned bytes) {
  switch (bytes) {
  case 1:
    return *from;
  case 2: {
    uint16_t value;
    std::memcpy(&value, from, 2);
    return value;
  }
  case 4: {
    uint32_t value;
    std::memcpy(&value, from, 4);
    return value;
  }
  default: {
    uint64_t value;
    std::memcpy(&value, from, 8);
    return value;
  }
  }
}

/// Stores the low `bytes` (1, 2, 4 or 8) of `value` at `to`.
inline void storeValue(uint8_t *to, uint64_t value, unsigned bytes) {
  switch (bytes) {
  case 1:
    *to = static_cast<uint8_t>(value);
    return;
  case 2: {
    uint16_t narrow = static_cast<uint16_t>(value);
    std::memcpy(to, &narrow, 2);
    return;
  }
  case 4: {
    uint32_t narrow = static_cast<uint32_t>(value);
    std::memcpy(to, &narrow, 4);
    return;
  }
  default:
    std::memcpy(to, &value, 8);
  }
}

enum class Access { Read, Write, Atomic };

/// Initcheck and racecheck of one lane's access, then the shadow update.
/// Atomics read initialized memory but never race. A write that may have
/// happened at any time since barrier epoch `sinceEpoch` (a cp.async
/// landing; 0: now) races with accesses of other warps since then.
void checkAndRecord(const Target &target, unsigned bytes, Access access,
                    WarpState &warp, int lane, uint64_t address,
                    uint32_t sinceEpoch = 0);

/// Counts the distinct 32-byte sectors and, for shared memory, the
/// wavefronts of one warp instruction's accesses.
struct AccessCounter {
  uint64_t sectors[kWarpSize * 2];
  unsigned numSectors = 0;
  uint32_t sharedAddresses[kWarpSize];
  uint32_t sharedLaneMask = 0;

  void addGlobal(uint64_t address, unsigned bytes) {
    for (uint64_t sector = address >> 5; sector <= (address + bytes - 1) >> 5;
         ++sector)
      if (numSectors < kWarpSize * 2)
        sectors[numSectors++] = sector;
  }
  uint64_t distinctSectors() {
    // A coalesced access lists its sectors in order already.
    if (!std::is_sorted(sectors, sectors + numSectors))
      std::sort(sectors, sectors + numSectors);
    return std::unique(sectors, sectors + numSectors) - sectors;
  }
  /// distinctSectors() of a load, also added to the launch's load footprint
  /// and to the CTA's sectors; sets cta.lastLoadReread when the CTA had
  /// loaded every one of them before.
  uint64_t distinctLoadSectors(CtaState &cta) {
    uint64_t distinct = distinctSectors();
    cta.loadFootprint.add(sectors, distinct);
    if (!cta.tracksRereads)
      return distinct;
    bool reread = distinct > 0;
    for (uint64_t i = 0; i < distinct; ++i)
      reread &= !cta.sectorsLoadedByCta.insert(sectors[i]).second;
    cta.lastLoadReread = reread;
    return distinct;
  }
  /// Accesses wider than 4 bytes are served a group of lanes at a time
  /// (16 lanes for 8 bytes, 8 for 16); each group needs as many passes as
  /// the most distinct 4-byte words any of the 32 banks holds.
  uint64_t wavefronts(unsigned bytes, uint64_t &conflicts) {
    unsigned lanesPerPass = bytes <= 4 ? 32 : 128 / bytes;
    uint64_t passes = 0;
    for (unsigned first = 0; first < kWarpSize; first += lanesPerPass) {
      uint32_t words[kWarpSize * 4];
      unsigned numWords = 0;
      for (unsigned lane = first; lane < first + lanesPerPass; ++lane)
        if (sharedLaneMask >> lane & 1)
          for (unsigned word = 0; word < (bytes + 3) / 4; ++word)
            words[numWords++] = sharedAddresses[lane] / 4 + word;
      if (!numWords)
        continue;
      if (!std::is_sorted(words, words + numWords))
        std::sort(words, words + numWords);
      numWords = std::unique(words, words + numWords) - words;
      unsigned perBank[32] = {};
      unsigned worst = 0;
      for (unsigned i = 0; i < numWords; ++i)
        worst = std::max(worst, ++perBank[words[i] % 32]);
      passes += worst;
      conflicts += worst - 1;
    }
    return passes;
  }
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_MEMORYACCESS_H
