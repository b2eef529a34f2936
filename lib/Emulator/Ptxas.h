//===- Ptxas.h - Registers per thread, as ptxas allocates them --*- C++ -*-===//
//
// How many CTAs an SM holds depends on the registers a thread uses, which
// only the assembler knows. fdemu asks ptxas when a module is loaded:
// $FDEMU_PTXAS, else /usr/local/cuda/bin/ptxas, else `ptxas` on PATH, run as
// `ptxas -arch=sm_XX -v` on the PTX text. A missing or failing ptxas never
// fails the load: the kernels' counts are then absent and the caller
// assumes kAssumedRegistersPerThread.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_PTXAS_H
#define FD_EMULATOR_PTXAS_H

#include <map>
#include <string>

namespace flashdecode::emu {

/// Registers per thread of each .entry of `ptx` assembled for `arch`
/// ("sm_90"), from ptxas's "Used N registers"; empty when ptxas is missing
/// or fails. Cached per (arch, text), so loading a module again is free.
std::map<std::string, unsigned> getPtxasRegisters(const std::string &ptx,
                                                  const std::string &arch);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_PTXAS_H
