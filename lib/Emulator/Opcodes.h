//===- Opcodes.h - PTX opcode words into decoded instructions ---*- C++ -*-===//

#ifndef FD_EMULATOR_OPCODES_H
#define FD_EMULATOR_OPCODES_H

#include "fd/Emulator/Program.h"

#include <optional>
#include <string>
#include <vector>

namespace flashdecode::emu {

std::optional<Type> parseTypeName(const std::string &name);

/// Fills opcode, types and modifiers of `inst` from an opcode word such as
/// `cvt.rn.f16.f32`; returns an error message, empty on success.
std::string decodeOpcode(const std::string &word, Instruction &inst);

/// The modifiers of an opcode word: `cp.async.cg.shared.global` gives
/// {async, cg, shared, global}.
std::vector<std::string> splitModifiers(const std::string &word);

/// mma (`base` "mma") and ldmatrix (TensorCore.cpp): the forms fdemu runs,
/// decoded into `inst`; an error naming the accepted forms otherwise.
std::string decodeTensorCoreOpcode(const std::string &base,
                                   const std::vector<std::string> &modifiers,
                                   Instruction &inst);
/// wgmma.mma_async, fence, commit_group and wait_group (WarpgroupMma.cpp).
std::string decodeWarpgroupOpcode(const std::vector<std::string> &modifiers,
                                  Instruction &inst);
/// barrier.cluster.arrive / wait and mapa.shared::cluster (`base` "mapa" or
/// "barrier"; Cluster.cpp).
std::string decodeClusterOpcode(const std::string &base,
                                const std::vector<std::string> &modifiers,
                                Instruction &inst);
/// cp.async and its commit_group / wait_group / wait_all (AsyncCopy.cpp).
std::string decodeAsyncCopyOpcode(const std::vector<std::string> &modifiers,
                                  Instruction &inst);

/// The compute capability a .target names, major * 10 + minor ("sm_90a" is
/// 90); 0 for anything else.
unsigned parseSmVersion(const std::string &target);

/// Why ptxas would refuse `inst` for the module's .target (`target`, as
/// written, empty when absent) and .version (`ptxVersion`, 0 when absent);
/// empty when it would not. Only instructions that need a newer target than
/// fdemu's kernels otherwise use are checked (the packed fp8 cvt,
/// griddepcontrol, clusters, wgmma: sm_90a only).
std::string checkTargetFeatures(const Instruction &inst,
                                const std::string &target, unsigned ptxVersion);

/// Whether operand 0 of `opcode` is written (a destination) or read.
bool writesFirstOperand(Opcode opcode);

/// The counter class of a decoded instruction (ld/st of generic addresses
/// count as global).
InstructionClass classify(const Instruction &inst);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_OPCODES_H
