//===- Chip.h - The GPU targets the kernels are built for -------*- C++ -*-===//
//
// One table of the targets flashdecode emits PTX for, in standard C++ so
// that the lowering, the planners, the JIT's validation and the runtime's
// choice of target for a device all read the same facts. Every question of
// the form "does this target have X" is a field here; no other file
// compares target names.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_CHIP_H
#define FD_PLANNING_CHIP_H

#include <string>
#include <string_view>
#include <vector>

namespace flashdecode {

/// A PTX target (`.target`) and what the kernels may assume of the GPUs
/// that run it. Limits are those of NVIDIA's "Compute Capabilities" table
/// (CUDA C++ Programming Guide); the default SM count is that of the
/// product named first in `products`, used when no device is at hand.
struct Chip {
  /// The PTX target: "sm_90". An architecture-specific target ("sm_90a")
  /// runs on its own compute capability only.
  std::string_view name;
  /// major * 10 + minor of the compute capability: 90.
  int computeCapability;
  bool architectureSpecific;
  std::string_view products;
  /// The oldest PTX ISA (major * 10 + minor) that has this target.
  int minimumPTXVersion;
  int defaultSMCount;
  int registersPerSM;
  int maxRegistersPerBlock;
  int maxRegistersPerThread;
  int sharedMemoryBytesPerSM;
  /// With the opt-in launch attribute (above 48 KiB).
  int maxSharedMemoryBytesPerBlock;
  int maxBlocksPerSM;
  int maxWarpsPerSM;
  /// cp.async (global to shared without registers).
  bool hasAsyncCopy;
  /// mma.sync.m16n8k16 with f16/bf16 inputs and f32 accumulators.
  bool hasMmaM16N8K16;
  /// griddepcontrol (programmatic dependent launch).
  bool hasGridDependencyControl;
  /// cvt.rn.f16x2.{e4m3x2,e5m2x2} at this target's minimum PTX ISA: sm_89
  /// has them only from PTX ISA 8.1, so its kernels keep the bit
  /// operations and the 7.8 every other kernel needs there.
  bool hasFloat8Conversions;
  /// wgmma.mma_async (architecture-specific sm_90a).
  bool hasWarpgroupMma;
  /// Thread block clusters and their distributed shared memory.
  bool hasClusters;
};

/// The target every interface compiles for when none is named.
inline constexpr std::string_view kDefaultChipName = "sm_90";

/// Every target, oldest first.
const std::vector<Chip> &getChips();

/// The target named `name`, or null.
const Chip *findChip(std::string_view name);

/// findChip(kDefaultChipName).
const Chip &getDefaultChip();
/// The target named `name`, or the default for a name the table lacks
/// (for planning before the caller's own check reports the name).
const Chip &findChipOrDefault(std::string_view name);

/// The targets' names for an error message: "sm_80, sm_86, sm_89, sm_90
/// or sm_90a".
std::string getChipNameList();

/// "" when the table has a target named `arch`, else "arch 'NAME' is not
/// supported: expected " and the names.
std::string getReasonArchUnsupported(std::string_view arch);

/// The newest target that is not architecture-specific and runs on a device
/// of compute capability major.minor (a newer GPU than the table's runs the
/// newest target's PTX, compiled forward by its driver), or null below the
/// oldest target.
const Chip *getChipForComputeCapability(int major, int minor);

/// Whether PTX for `chip` loads on a device of compute capability
/// major.minor.
bool canRunOn(const Chip &chip, int major, int minor);

} // namespace flashdecode

#endif // FD_PLANNING_CHIP_H
