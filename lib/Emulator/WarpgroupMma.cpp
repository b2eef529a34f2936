//===- WarpgroupMma.cpp - wgmma.mma_async and its fences, per warp --------===//
//
// The forms LLVM's NVPTX backend emits for MLIR's nvvm.wgmma ops (inline asm
// for wgmma.mma_async), decoded, checked at load time and executed (PTX ISA,
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions").
//
// A warpgroup is four consecutive warps whose first index is a multiple of
// four; warp r of it owns rows 16 r to 16 r + 15 of the 64-row A and D, in
// mma.m16n8k16's fragment layout repeated over N. Each warp's rows depend
// only on its own A rows and the whole B, so each warp computes them when
// it executes the instruction, exactly, as a GPU's four tensor cores would.
// Operands in shared memory are found through matrix descriptors (bits
// 0-13 the start address, 16-29 the leading, 32-45 the stride byte offset,
// each >> 4; 49-51 the base offset; 62-63 the swizzle: 0 none, 1 128-byte,
// 2 64-byte, 3 32-byte) over the canonical layouts (sharedOperandOffset).
// A swizzle is a function of the shared address: its 16-byte chunk bits
// [4, 4 + b) are XORed with bits [7, 7 + b), b = 3, 2, 1.
//
// Asynchrony: the results are in the registers when the instruction
// executes, but until a wgmma.wait_group retires it no instruction other
// than a wgmma.mma_async with the same accumulators may touch them, none
// may write its A fragment's registers (checkWarpgroupRegisters), and the
// shared memory it read must not change (compared when it retires); a warp
// may not exit with one pending. The first wgmma.mma_async after the warp
// starts or waits must follow a wgmma.fence (the form every wgmma kernel
// takes); PTX asks for a fence wherever registers a wgmma uses were
// accessed since the last, which fdemu checks only at that first wgmma.
// Not checked either: that the four warps of a warpgroup execute the same
// wgmma sequence (each warp's rows are exact on their own), and
// fence.proxy.async between generic-proxy shared writes and the wgmma that
// reads them (fdemu has one proxy).
//
//===----------------------------------------------------------------------===//

#include "FloatFormats.h"
#include "MemoryAccess.h"
#include "Opcodes.h"
#include "TensorCoreSum.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace flashdecode::emu {
namespace {

constexpr unsigned kWarpgroupK = 16;
/// The most groups a wgmma.wait_group may leave pending: fdemu's bound on
/// the immediate, far past what a kernel keeps in flight.
constexpr uint64_t kMostPendingGroups = 255;

/// A matrix descriptor's fields, in bytes.
struct MatrixDescriptor {
  uint32_t start, leadingBytes, strideBytes, baseOffset;
  /// The swizzle's width in bytes (32, 64, 128), 0 for none.
  unsigned swizzleBytes;
};

MatrixDescriptor decodeDescriptor(uint64_t bits) {
  static const unsigned widths[4] = {0, 128, 64, 32};
  return {static_cast<uint32_t>(bits & 0x3FFF) << 4,
          static_cast<uint32_t>(bits >> 16 & 0x3FFF) << 4,
          static_cast<uint32_t>(bits >> 32 & 0x3FFF) << 4,
          static_cast<uint32_t>(bits >> 49 & 7), widths[bits >> 62]};
}

/// The shared address of element (mn, k) of a 16-bit operand, mn its row
/// of A or column of B and k < 16, in the canonical layout its descriptor
/// and major-ness give (CUTLASS's make_gmma_desc, in elements, T = 8):
///   K-major, none:  ((8,m),(T,2)):((1T,SBO),(1,LBO))
///   K-major, W:     ((8,m),(T,2)):((W/2,SBO),(1,T))
///   MN-major, none: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
///   MN-major, W:    ((W/2,m),(8,k)):((1,LBO),(W/2,SBO))
/// then swizzled. A core matrix is 8 rows of 16 bytes.
uint32_t sharedOperandOffset(const MatrixDescriptor &d, unsigned mn, unsigned k,
                             bool mnMajor) {
  uint32_t offset;
  unsigned w = d.swizzleBytes;
  if (!mnMajor && !w)
    offset = (mn % 8) * 16 + (mn / 8) * d.strideBytes + (k % 8) * 2 +
             (k / 8) * d.leadingBytes;
  else if (!mnMajor)
    offset = (mn % 8) * w + (mn / 8) * d.strideBytes + k * 2;
  else if (!w)
    offset = (mn % 8) * 2 + (mn / 8) * d.strideBytes + (k % 8) * 16 +
             (k / 8) * d.leadingBytes;
  else
    offset = (mn % (w / 2)) * 2 + (mn / (w / 2)) * d.leadingBytes +
             (k % 8) * w + (k / 8) * d.strideBytes;
  uint32_t address = d.start + offset;
  if (w)
    address ^= (address >> 7 & (w / 16 - 1)) << 4;
  return address;
}

double multiplicandValue(uint16_t bits, Type type) {
  return type == Type::BF16 ? bfloat16BitsToDouble(bits)
                            : halfBitsToDouble(bits);
}

/// Reads an operand's 16-byte rows from shared memory once, with the
/// checks and counts of a load, remembering the bytes for the retirement
/// check.
class SharedOperandReader {
public:
  SharedOperandReader(WarpState &warp, PendingWarpgroupMma &pending)
      : warp(warp), pending(pending) {}

  /// Element (mn, k) of the operand `d` describes.
  uint16_t element(const MatrixDescriptor &d, unsigned mn, unsigned k,
                   bool mnMajor, const char *operand) {
    uint32_t address = sharedOperandOffset(d, mn, k, mnMajor);
    uint32_t chunk = address & ~15u;
    if (chunk != lastChunk) {
      Target target;
      try {
        target = resolve(StateSpace::Shared, warp, 0, chunk, 16, 16);
      } catch (ExecutionError &error) {
        error.message = std::string("wgmma.mma_async operand ") + operand +
                        " (descriptor start " + hexAddress(d.start) +
                        "): " + error.message;
        throw;
      }
      checkAndRecord(target, 16, Access::Read, warp, 0, chunk);
      lastChunk = chunk;
      lastBytes = target.bytes;
      pending.sharedOffsets.push_back(chunk);
      pending.sharedBytes.insert(pending.sharedBytes.end(), target.bytes,
                                 target.bytes + 16);
    }
    uint16_t bits;
    std::memcpy(&bits, lastBytes + (address & 15), 2);
    return bits;
  }

private:
  WarpState &warp;
  PendingWarpgroupMma &pending;
  uint32_t lastChunk = ~0u;
  const uint8_t *lastBytes = nullptr;
};

/// D's element from its accumulator `c`, A's row `a` and B's column `b`
/// (16 values each), summed `block` products at a time, as mma.sync's
/// tensor cores do (assumed for wgmma: not measured apart).
float accumulate(float c, const double *a, const double *b, unsigned block,
                 Type type) {
  Product products[kWarpgroupK];
  for (unsigned i = 0; i < kWarpgroupK; ++i)
    products[i] = tensorCoreProduct(a[i], b[i], type);
  for (unsigned first = 0; first < kWarpgroupK; first += block)
    c = fusedSum(c, products + first, block);
  return c;
}

/// Visits (mn, k) of an operand of `rows` rows and 16 columns, MN-major
/// (`mnMajor`) or K-major: consecutive visits in one 16-byte chunk.
template <typename Visit>
void forEachElement(unsigned rows, bool mnMajor, Visit visit) {
  for (unsigned outer = 0; outer < (mnMajor ? kWarpgroupK : rows); ++outer)
    for (unsigned inner = 0; inner < (mnMajor ? rows : kWarpgroupK); ++inner)
      mnMajor ? visit(inner, outer) : visit(outer, inner);
}

void executeWarpgroupMmaAsync(const Instruction &inst, WarpState &warp) {
  CtaState &cta = *warp.cta;
  if (warp.index / 4 * 4 + 4 > cta.warps.size() ||
      cta.warps[warp.index / 4 * 4 + 3].existingMask != ~0u) {
    uint32_t threads =
        cta.request->block[0] * cta.request->block[1] * cta.request->block[2];
    throw ExecutionError{kLaunchFailed,
                         "wgmma.mma_async needs a whole warpgroup (4 warps "
                         "of 32 threads), but warp " +
                             std::to_string(warp.index) +
                             "'s warpgroup is cut short by the CTA's " +
                             std::to_string(threads) + " threads"};
  }
  if (!warp.warpgroupFenced)
    throw ExecutionError{
        kLaunchFailed,
        "wgmma.mma_async without a wgmma.fence since the warp started or "
        "last executed wgmma.wait_group: its registers may be read before "
        "earlier writes to them land"};
  unsigned n = inst.warpgroupColumns;
  unsigned rank = warp.index % 4;
  Type type = inst.sourceType;
  const Operand &a = inst.operands[1];
  bool aInRegisters = a.kind == Operand::Kind::Vector;
  // Chained wgmma.mma_async may share pending accumulators; anything else
  // may not touch a pending one's.
  checkWarpgroupRegisters(inst, warp);

  PendingWarpgroupMma pending;
  pending.inst = &inst;
  pending.group = warp.committedWarpgroupGroups;
  SharedOperandReader reader(warp, pending);
  double matrixA[16][kWarpgroupK];
  if (aInRegisters) {
    for (int lane = 0; lane < kWarpSize; ++lane) {
      int g = lane / 4, t = lane % 4;
      for (unsigned r = 0; r < 4; ++r) {
        uint32_t bits = static_cast<uint32_t>(warp.reg(a.registers[r], lane));
        for (unsigned half = 0; half < 2; ++half)
          matrixA[g + 8 * (r % 2)][2 * t + half + 8 * (r / 2)] =
              multiplicandValue(static_cast<uint16_t>(bits >> (16 * half)),
                                type);
      }
    }
  } else {
    // Descriptors are warpgroup-uniform (PTX): lane 0's is the warp's.
    MatrixDescriptor descriptor = decodeDescriptor(warp.reg(a.registers[0], 0));
    if (descriptor.baseOffset)
      throw ExecutionError{kLaunchFailed,
                           "wgmma.mma_async descriptor a has base offset " +
                               std::to_string(descriptor.baseOffset) +
                               "; fdemu implements base offset 0"};
    // In the order the operand lies (a chunk holds 8 consecutive elements
    // along its major dimension), so that each chunk is read once.
    forEachElement(16, inst.transposeA, [&](unsigned row, unsigned k) {
      matrixA[row][k] = multiplicandValue(
          reader.element(descriptor, 16 * rank + row, k, inst.transposeA, "a"),
          type);
    });
  }
  MatrixDescriptor descriptorB =
      decodeDescriptor(warp.reg(inst.operands[2].registers[0], 0));
  if (descriptorB.baseOffset)
    throw ExecutionError{kLaunchFailed,
                         "wgmma.mma_async descriptor b has base offset " +
                             std::to_string(descriptorB.baseOffset) +
                             "; fdemu implements base offset 0"};
  std::vector<double> matrixB(static_cast<size_t>(n) * kWarpgroupK);
  forEachElement(n, inst.transposeB, [&](unsigned column, unsigned k) {
    matrixB[column * kWarpgroupK + k] =
        (inst.negateB ? -1 : 1) *
        multiplicandValue(
            reader.element(descriptorB, column, k, inst.transposeB, "b"), type);
  });
  if (inst.negateA)
    for (auto &row : matrixA)
      for (double &value : row)
        value = -value;

  const Operand &scaleD = inst.operands[3];
  bool accumulates = scaleD.kind == Operand::Kind::Immediate
                         ? scaleD.value != 0
                         : warp.reg(scaleD.registers[0], 0) != 0;
  unsigned block =
      std::max(1u, std::min(warp.cta->request->mmaProductsPerSum, kWarpgroupK));
  for (int lane = 0; lane < kWarpSize; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (unsigned i = 0; i < n / 2; ++i) {
      unsigned row = g + 8 * (i % 4 / 2);
      unsigned column = 8 * (i / 4) + 2 * t + i % 2;
      uint64_t &reg = warp.reg(inst.accumulators[i], lane);
      float c = accumulates ? bitsToFloat(static_cast<uint32_t>(reg)) : 0.0f;
      reg = floatToBits(accumulate(
          c, matrixA[row], &matrixB[column * kWarpgroupK], block, type));
    }
  }
  // Each warp reads its A rows (512 bytes); B is read once for the
  // warpgroup (N rows of 32 bytes), counted by its first warp.
  cta.counts.sharedWavefronts +=
      (aInRegisters ? 0 : 4) + (rank == 0 ? (n * 32 + 127) / 128 : 0);
  cta.counts.warpgroupMmaSteps += n / 8;
  ++cta.counts.warpgroupMmas;

  if (warp.registerLocks.empty())
    warp.registerLocks.assign(cta.kernel->numRegisters, kRegisterFree);
  for (uint32_t reg : inst.accumulators)
    warp.registerLocks[reg] = kRegisterNoAccess;
  if (aInRegisters)
    for (unsigned r = 0; r < 4; ++r)
      warp.registerLocks[a.registers[r]] =
          std::max(warp.registerLocks[a.registers[r]], kRegisterNoWrites);
  warp.pendingWarpgroupMmas.push_back(std::move(pending));
}

/// Retires the pending wgmma.mma_async of all but the newest `keep`
/// committed groups.
void retire(WarpState &warp, uint32_t keep) {
  CtaState &cta = *warp.cta;
  auto &pending = warp.pendingWarpgroupMmas;
  uint32_t committed = warp.committedWarpgroupGroups;
  auto retired = [&](const PendingWarpgroupMma &mma) {
    // Committed groups older than the newest `keep`.
    return mma.group < committed && committed - mma.group > keep;
  };
  for (const PendingWarpgroupMma &mma : pending) {
    if (!retired(mma))
      continue;
    for (size_t i = 0; i < mma.sharedOffsets.size(); ++i)
      if (std::memcmp(&cta.shared[mma.sharedOffsets[i]],
                      &mma.sharedBytes[16 * i], 16) != 0)
        throw ExecutionError{
            kLaunchFailed,
            "shared memory at " + hexAddress(mma.sharedOffsets[i]) +
                ", read by the wgmma.mma_async at PTX line " +
                std::to_string(mma.inst->line) +
                ", changed before wgmma.wait_group retired it (a GPU reads "
                "its operands at any time until then)"};
  }
  pending.erase(std::remove_if(pending.begin(), pending.end(), retired),
                pending.end());
  std::fill(warp.registerLocks.begin(), warp.registerLocks.end(),
            kRegisterFree);
  for (const PendingWarpgroupMma &mma : pending) {
    for (uint32_t reg : mma.inst->accumulators)
      warp.registerLocks[reg] = kRegisterNoAccess;
    const Operand &a = mma.inst->operands[1];
    if (a.kind == Operand::Kind::Vector)
      for (unsigned r = 0; r < 4; ++r)
        warp.registerLocks[a.registers[r]] =
            std::max(warp.registerLocks[a.registers[r]], kRegisterNoWrites);
  }
}

} // namespace

std::string decodeWarpgroupOpcode(const std::vector<std::string> &modifiers,
                                  Instruction &inst) {
  std::string form;
  for (const std::string &modifier : modifiers)
    form += "." + modifier;
  if (form == ".fence.sync.aligned") {
    inst.opcode = Opcode::WarpgroupFence;
    return "";
  }
  if (form == ".commit_group.sync.aligned") {
    inst.opcode = Opcode::WarpgroupCommit;
    return "";
  }
  if (form == ".wait_group.sync.aligned") {
    inst.opcode = Opcode::WarpgroupWait;
    return "";
  }
  const char *accepted =
      "fdemu implements wgmma.fence.sync.aligned, "
      "wgmma.commit_group.sync.aligned, wgmma.wait_group.sync.aligned and "
      "wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16.f16,bf16.bf16} "
      "(N a multiple of 8 up to 256)";
  unsigned n = 0;
  bool valid = modifiers.size() == 7 && modifiers[0] == "mma_async" &&
               modifiers[1] == "sync" && modifiers[2] == "aligned" &&
               modifiers[4] == "f32" && modifiers[5] == modifiers[6] &&
               (modifiers[5] == "f16" || modifiers[5] == "bf16") &&
               std::sscanf(modifiers[3].c_str(), "m64n%uk16", &n) == 1 &&
               modifiers[3] == "m64n" + std::to_string(n) + "k16" &&
               n % 8 == 0 && n >= 8 && n <= 256;
  if (!valid)
    return "unsupported form 'wgmma" + form + "': " + accepted;
  inst.opcode = Opcode::WarpgroupMma;
  inst.type = Type::F32;
  inst.sourceType = modifiers[5] == "bf16" ? Type::BF16 : Type::F16;
  inst.warpgroupColumns = static_cast<uint16_t>(n);
  return "";
}

std::string checkWarpgroupImplemented(const Instruction &inst) {
  if (inst.opcode == Opcode::WarpgroupWait)
    return inst.numOperands == 1 &&
                   inst.operands[0].kind == Operand::Kind::Immediate &&
                   inst.operands[0].value <= kMostPendingGroups
               ? ""
               : "wgmma.wait_group takes one immediate, the groups it may "
                 "leave pending (0 to " +
                     std::to_string(kMostPendingGroups) + ")";
  if (inst.opcode != Opcode::WarpgroupMma)
    return inst.numOperands == 0 ? "" : "takes no operands";
  const Operand &a = inst.operands[1], &b = inst.operands[2],
                &scaleD = inst.operands[3];
  auto isRegister = [](const Operand &operand) {
    return operand.kind == Operand::Kind::Register &&
           operand.registers[0] != kNoRegister;
  };
  bool aValid = isRegister(a) ||
                (a.kind == Operand::Kind::Vector && a.count == 4 &&
                 std::none_of(a.registers, a.registers + 4,
                              [](uint32_t r) { return r == kNoRegister; }));
  bool valid =
      inst.numOperands == 4 &&
      inst.accumulators.size() == inst.warpgroupColumns / 2u && aValid &&
      isRegister(b) &&
      (isRegister(scaleD) || scaleD.kind == Operand::Kind::Immediate) &&
      std::none_of(inst.accumulators.begin(), inst.accumulators.end(),
                   [](uint32_t r) { return r == kNoRegister; });
  return valid
             ? ""
             : "wgmma.mma_async.m64n" + std::to_string(inst.warpgroupColumns) +
                   "k16 takes a vector of " +
                   std::to_string(inst.warpgroupColumns / 2) +
                   " accumulator registers, a descriptor register or a "
                   "vector of 4 registers for a, a descriptor register for "
                   "b, a predicate or immediate scale-d, then "
                   "imm-scale-a, imm-scale-b, imm-trans-a (a descriptor "
                   "only) and imm-trans-b";
}

void executeWarpgroup(const Instruction &inst, WarpState &warp) {
  switch (inst.opcode) {
  case Opcode::WarpgroupFence:
    warp.warpgroupFenced = true;
    return;
  case Opcode::WarpgroupCommit:
    // An empty group is a group too: wait_group counts it.
    ++warp.committedWarpgroupGroups;
    return;
  case Opcode::WarpgroupWait:
    if (!warp.pendingWarpgroupMmas.empty())
      retire(warp, static_cast<uint32_t>(inst.operands[0].value));
    warp.warpgroupFenced = false;
    return;
  default:
    executeWarpgroupMmaAsync(inst, warp);
  }
}

void checkWarpgroupRegisters(const Instruction &inst, WarpState &warp) {
  if (warp.pendingWarpgroupMmas.empty())
    return;
  auto fail = [&](uint32_t reg, const char *what) {
    const PendingWarpgroupMma *owner = nullptr;
    for (const PendingWarpgroupMma &mma : warp.pendingWarpgroupMmas) {
      const Operand &a = mma.inst->operands[1];
      bool inA = a.kind == Operand::Kind::Vector &&
                 std::count(a.registers, a.registers + 4, reg);
      if (inA || std::count(mma.inst->accumulators.begin(),
                            mma.inst->accumulators.end(), reg))
        owner = &mma;
    }
    throw ExecutionError{kLaunchFailed,
                         std::string(what) +
                             (warp.registerLocks[reg] == kRegisterNoAccess
                                  ? " an accumulator register"
                                  : " an A fragment register") +
                             " of the wgmma.mma_async at PTX line " +
                             std::to_string(owner ? owner->inst->line : 0) +
                             ", which no wgmma.wait_group has retired"};
  };
  auto check = [&](uint32_t reg, bool written) {
    if (reg == kNoRegister || reg >= warp.registerLocks.size())
      return;
    uint8_t lock = warp.registerLocks[reg];
    if (lock == kRegisterNoAccess || (lock == kRegisterNoWrites && written))
      fail(reg, written ? "writes" : "reads");
  };
  if (inst.opcode == Opcode::WarpgroupMma) {
    // Its accumulators: free, or exactly a pending one's (a chain).
    bool chains = false;
    for (const PendingWarpgroupMma &mma : warp.pendingWarpgroupMmas)
      chains |= mma.inst->accumulators == inst.accumulators;
    if (!chains)
      for (uint32_t reg : inst.accumulators)
        if (warp.registerLocks[reg] != kRegisterFree)
          fail(reg, "writes");
    // A's fragment or descriptor, B's descriptor, scale-d and the guard
    // are read.
    for (unsigned i = 1; i < inst.numOperands; ++i)
      for (unsigned r = 0; r < inst.operands[i].getNumRegisters(); ++r)
        check(inst.operands[i].registers[r], /*written=*/false);
    check(inst.guard, false);
    return;
  }
  bool writesFirst = writesFirstOperand(inst.opcode);
  for (unsigned i = 0; i < inst.numOperands; ++i) {
    const Operand &operand = inst.operands[i];
    bool written =
        i == 0 && writesFirst && operand.kind != Operand::Kind::Address;
    for (unsigned r = 0; r < operand.getNumRegisters(); ++r)
      check(operand.registers[r], written);
  }
  check(inst.guard, false);
  check(inst.secondDestination, true);
}

void checkNoPendingWarpgroupMma(const WarpState &warp) {
  if (warp.pendingWarpgroupMmas.empty())
    return;
  throw ExecutionError{
      kLaunchFailed,
      "the warp exits with the wgmma.mma_async at PTX line " +
          std::to_string(warp.pendingWarpgroupMmas.front().inst->line) +
          " pending: no wgmma.wait_group retired it"};
}

} // namespace flashdecode::emu
