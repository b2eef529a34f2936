//===- Chip.cpp - The GPU targets the kernels are built for ---------------===//

#include "fd/Planning/Chip.h"

#include <cstdlib>

namespace flashdecode {

namespace {

constexpr int kKiB = 1024;

// The minimum PTX ISA of each target is the version that introduced it
// (PTX ISA "Release History"); ptxas 13.0 refuses sm_90a below 8.0.
std::vector<Chip> makeChips() {
  Chip ampere;
  ampere.name = "sm_80";
  ampere.computeCapability = 80;
  ampere.architectureSpecific = false;
  ampere.products = "A100";
  ampere.minimumPTXVersion = 70;
  ampere.defaultSMCount = 108;
  ampere.registersPerSM = 65536;
  ampere.maxRegistersPerBlock = 65536;
  ampere.maxRegistersPerThread = 255;
  ampere.sharedMemoryBytesPerSM = 164 * kKiB;
  ampere.maxSharedMemoryBytesPerBlock = 163 * kKiB;
  ampere.maxBlocksPerSM = 32;
  ampere.maxWarpsPerSM = 64;
  ampere.hasAsyncCopy = true;
  ampere.hasMmaM16N8K16 = true;
  ampere.hasGridDependencyControl = false;
  ampere.hasFloat8Conversions = false;
  ampere.hasWarpgroupMma = false;
  ampere.hasClusters = false;
  Chip ampereGA10x = ampere;
  ampereGA10x.name = "sm_86";
  ampereGA10x.computeCapability = 86;
  ampereGA10x.products = "A10, A40, RTX 30";
  ampereGA10x.minimumPTXVersion = 71;
  ampereGA10x.defaultSMCount = 72;
  ampereGA10x.sharedMemoryBytesPerSM = 100 * kKiB;
  ampereGA10x.maxSharedMemoryBytesPerBlock = 99 * kKiB;
  ampereGA10x.maxBlocksPerSM = 16;
  ampereGA10x.maxWarpsPerSM = 48;
  Chip ada = ampereGA10x;
  ada.name = "sm_89";
  ada.computeCapability = 89;
  ada.products = "L40S, L4, RTX 40";
  ada.minimumPTXVersion = 78;
  ada.defaultSMCount = 142;
  ada.maxBlocksPerSM = 24;
  Chip hopper = ampere;
  hopper.name = "sm_90";
  hopper.computeCapability = 90;
  hopper.products = "H100 SXM, H200";
  hopper.minimumPTXVersion = 78;
  hopper.defaultSMCount = 132;
  hopper.sharedMemoryBytesPerSM = 228 * kKiB;
  hopper.maxSharedMemoryBytesPerBlock = 227 * kKiB;
  hopper.hasGridDependencyControl = true;
  hopper.hasFloat8Conversions = true;
  hopper.hasClusters = true;
  Chip hopperSpecific = hopper;
  hopperSpecific.name = "sm_90a";
  hopperSpecific.architectureSpecific = true;
  hopperSpecific.minimumPTXVersion = 80;
  hopperSpecific.hasWarpgroupMma = true;
  return {ampere, ampereGA10x, ada, hopper, hopperSpecific};
}

} // namespace

const std::vector<Chip> &getChips() {
  static const std::vector<Chip> chips = makeChips();
  return chips;
}

const Chip *findChip(std::string_view name) {
  for (const Chip &chip : getChips())
    if (chip.name == name)
      return &chip;
  return nullptr;
}

const Chip &getDefaultChip() {
  // Read by the default initializers of the config and option structs.
  static const Chip &chip = *findChip(kDefaultChipName);
  return chip;
}

std::string getReasonArchUnsupported(std::string_view arch) {
  if (findChip(arch))
    return "";
  return "arch '" + std::string(arch) + "' is not supported: expected " +
         getChipNameList();
}

const Chip &findChipOrDefault(std::string_view name) {
  const Chip *chip = findChip(name);
  return chip ? *chip : getDefaultChip();
}

std::string getChipNameList() {
  const std::vector<Chip> &chips = getChips();
  std::string list;
  for (size_t i = 0; i < chips.size(); ++i) {
    if (i)
      list += i + 1 == chips.size() ? " or " : ", ";
    list += chips[i].name;
  }
  return list;
}

const Chip *getChipForComputeCapability(int major, int minor) {
  const Chip *newest = nullptr;
  for (const Chip &chip : getChips())
    if (!chip.architectureSpecific && canRunOn(chip, major, minor))
      newest = &chip;
  return newest;
}

bool canRunOn(const Chip &chip, int major, int minor) {
  int capability = major * 10 + minor;
  return chip.architectureSpecific ? chip.computeCapability == capability
                                   : chip.computeCapability <= capability;
}

} // namespace flashdecode
