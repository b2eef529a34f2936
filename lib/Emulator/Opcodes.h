//===- Opcodes.h - PTX opcode words into decoded instructions ---*- C++ -*-===//

#ifndef FD_EMULATOR_OPCODES_H
#define FD_EMULATOR_OPCODES_H

#include "fd/Emulator/Program.h"

#include <optional>
#include <string>

namespace fd::emu {

std::optional<Type> parseTypeName(const std::string &name);

/// Fills opcode, types and modifiers of `inst` from an opcode word such as
/// `cvt.rn.f16.f32`; returns an error message, empty on success.
std::string decodeOpcode(const std::string &word, Instruction &inst);

/// The counter class of a decoded instruction (ld/st of generic addresses
/// count as global).
InstructionClass classify(const Instruction &inst);

} // namespace fd::emu

#endif // FD_EMULATOR_OPCODES_H
