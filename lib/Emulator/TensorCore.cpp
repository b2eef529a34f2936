//===- TensorCore.cpp - mma.sync and ldmatrix, warp-wide -----------------===//
//
// The forms LLVM's NVPTX backend emits for MLIR's nvgpu.mma.sync and
// nvgpu.ldmatrix, decoded, checked at load time and executed for a whole
// warp with the PTX ISA's fragment layouts ("Matrix Fragments for
// mma.m16n8k16 with floating point type", "Warp-level matrix load
// instruction: ldmatrix"). Lane l is in group g = l / 4 at position
// t = l % 4 of it; a .b32 register holding two 16-bit elements has the
// lower-indexed one in its low half.
//
//===----------------------------------------------------------------------===//

#include "FloatFormats.h"
#include "MemoryAccess.h"
#include "Opcodes.h"
#include "TensorCoreSum.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace flashdecode::emu {
namespace {

/// Element `i` of a vector operand (a single register counts as one).
uint32_t elementRegister(const Operand &operand, unsigned i) {
  return operand.kind == Operand::Kind::Vector ? operand.registers[i]
                                               : operand.registers[0];
}

unsigned elementCount(const Operand &operand) {
  return operand.kind == Operand::Kind::Vector     ? operand.count
         : operand.kind == Operand::Kind::Register ? 1
                                                   : 0;
}

/// The 16-bit half `half` (0: low) of register `reg` of `lane` as a value.
double readMultiplicand(WarpState &warp, uint32_t reg, int lane, unsigned half,
                        Type type) {
  uint16_t bits = static_cast<uint16_t>(warp.reg(reg, lane) >> (16 * half));
  return type == Type::BF16 ? bfloat16BitsToDouble(bits)
                            : halfBitsToDouble(bits);
}

} // namespace

Product tensorCoreProduct(double x, double y, Type type) {
  // A subnormal's exponent is the format's smallest.
  int smallest = type == Type::BF16 ? -126 : -14;
  auto exponent = [&](double v) { return std::max(std::ilogb(v), smallest); };
  return {x * y, x == 0 || y == 0 ? INT_MIN : exponent(x) + exponent(y)};
}

/// Bits the aligned terms keep below the f32 ulp of the largest exponent.
constexpr int kGuardBits = 2;

// fusedSum's terms are truncated toward zero to a multiple of
// 2^(E - 23 - kGuardBits), E the largest of the accumulator's exponent and
// the products' exponent sums (measured: docs/Emulator.md).
float fusedSum(float accumulator, const Product *products, unsigned count) {
  double plain = accumulator;
  int largest = accumulator == 0 ? INT_MIN : std::ilogb(accumulator);
  for (unsigned i = 0; i < count; ++i) {
    plain += products[i].value;
    largest = std::max(largest, products[i].exponent);
  }
  if (!std::isfinite(plain))
    return std::isnan(plain) ? bitsToFloat(0x7FFFFFFF)
                             : static_cast<float>(plain);
  if (largest == INT_MIN)
    return 0.0f;
  int quantum = largest - 23 - kGuardBits;
  auto truncated = [&](double term) {
    return static_cast<int64_t>(std::trunc(std::ldexp(term, -quantum)));
  };
  int64_t sum = truncated(accumulator);
  for (unsigned i = 0; i < count; ++i)
    sum += truncated(products[i].value);
  return bitsToFloat(roundToFormat(
      std::ldexp(static_cast<double>(sum), quantum), Type::F32, Rounding::Rz));
}

std::string decodeTensorCoreOpcode(const std::string &base,
                                   const std::vector<std::string> &modifiers,
                                   Instruction &inst) {
  std::string form;
  for (const std::string &modifier : modifiers)
    form += "." + modifier;
  if (base == "mma") {
    static const char *accepted[] = {
        ".sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        ".sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        ".sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
        ".sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"};
    for (const char *candidate : accepted)
      if (form == candidate) {
        inst.opcode = Opcode::Mma;
        inst.type = Type::F32;
        inst.sourceType = modifiers[6] == "bf16" ? Type::BF16 : Type::F16;
        inst.shape = modifiers[2] == "m16n8k16" ? 16 : 8;
        return "";
      }
    return "unsupported mma form 'mma" + form +
           "': fdemu implements mma.sync.aligned.{m16n8k16,m16n8k8}.row.col."
           "f32.{f16.f16,bf16.bf16}.f32";
  }
  inst.opcode = Opcode::Ldmatrix;
  inst.type = Type::B16;
  size_t i = 0;
  auto next = [&](std::initializer_list<const char *> options) {
    for (const char *option : options)
      if (i < modifiers.size() && modifiers[i] == option) {
        ++i;
        return true;
      }
    return false;
  };
  bool valid = next({"sync"}) && next({"aligned"}) && next({"m8n8"});
  if (valid && next({"x1", "x2", "x4"}))
    inst.shape = static_cast<uint8_t>(modifiers[i - 1][1] - '0');
  else
    valid = false;
  inst.transpose = valid && next({"trans"});
  if (valid && next({"shared", "shared::cta"}))
    inst.space = StateSpace::Shared;
  if (!valid || !next({"b16"}) || i != modifiers.size())
    return "unsupported ldmatrix form 'ldmatrix" + form +
           "': fdemu implements ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}"
           "{.shared{::cta}}.b16";
  return "";
}

std::string checkTensorCoreImplemented(const Instruction &inst) {
  auto registersOnly = [](const Operand &operand) {
    for (unsigned i = 0; i < elementCount(operand); ++i)
      if (elementRegister(operand, i) == kNoRegister)
        return false;
    return true;
  };
  if (inst.opcode == Opcode::Mma) {
    unsigned k16 = inst.shape == 16;
    unsigned expected[4] = {4, 2 + 2 * k16, 1 + k16, 4};
    bool valid = inst.numOperands == 4;
    for (unsigned i = 0; valid && i < 4; ++i)
      valid = elementCount(inst.operands[i]) == expected[i] &&
              registersOnly(inst.operands[i]);
    return valid ? ""
                 : "mma.sync.m16n8k" + std::to_string(inst.shape) +
                       " takes register vectors of " +
                       std::to_string(expected[0]) + ", " +
                       std::to_string(expected[1]) + ", " +
                       std::to_string(expected[2]) + " and " +
                       std::to_string(expected[3]) + " elements (d, a, b, c)";
  }
  if (inst.numOperands != 2 || elementCount(inst.operands[0]) != inst.shape ||
      inst.operands[1].kind != Operand::Kind::Address)
    return "ldmatrix .x" + std::to_string(inst.shape) + " takes a vector of " +
           std::to_string(inst.shape) + " registers and an address";
  return "";
}

void executeMma(const Instruction &inst, WarpState &warp) {
  const Operand &d = inst.operands[0], &a = inst.operands[1],
                &b = inst.operands[2], &c = inst.operands[3];
  unsigned k = inst.shape;
  Type type = inst.sourceType;
  // Every input is read before any output is written: d may name c.
  double matrixA[16][16], matrixB[16][8];
  float matrixC[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    int g = lane / 4, t = lane % 4;
    // a: registers 0 and 1 hold rows g and g + 8 of columns 2t, 2t + 1;
    // registers 2 and 3 (k = 16) the same rows 8 columns on.
    for (unsigned r = 0; r < k / 4; ++r)
      for (unsigned half = 0; half < 2; ++half)
        matrixA[g + 8 * (r % 2)][2 * t + half + 8 * (r / 2)] =
            readMultiplicand(warp, elementRegister(a, r), lane, half, type);
    // b: register r holds rows 2t, 2t + 1 (+ 8 r) of column g.
    for (unsigned r = 0; r < k / 8; ++r)
      for (unsigned half = 0; half < 2; ++half)
        matrixB[2 * t + half + 8 * r][g] =
            readMultiplicand(warp, elementRegister(b, r), lane, half, type);
    // c: registers 0, 1 are row g, columns 2t, 2t + 1; 2, 3 row g + 8.
    for (unsigned r = 0; r < 4; ++r)
      matrixC[g + 8 * (r / 2)][2 * t + r % 2] =
          bitsToFloat(warp.reg(elementRegister(c, r), lane));
  }
  unsigned block =
      std::max(1u, std::min(warp.cta->request->mmaProductsPerSum, k));
  float matrixD[16][8];
  for (int row = 0; row < 16; ++row)
    for (int column = 0; column < 8; ++column) {
      Product products[16];
      for (unsigned i = 0; i < k; ++i)
        products[i] =
            tensorCoreProduct(matrixA[row][i], matrixB[i][column], type);
      float sum = matrixC[row][column];
      for (unsigned first = 0; first < k; first += block)
        sum = fusedSum(sum, products + first, block);
      matrixD[row][column] = sum;
    }
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (unsigned r = 0; r < 4; ++r)
      warp.reg(elementRegister(d, r), lane) =
          floatToBits(matrixD[lane / 4 + 8 * (r / 2)][2 * (lane % 4) + r % 2]);
}

void executeLdmatrix(const Instruction &inst, WarpState &warp) {
  CtaState &cta = *warp.cta;
  const Operand &address = inst.operands[1];
  // Lanes 8m to 8m + 7 give the addresses of the rows of matrix m, 16
  // bytes each; the other lanes' addresses are not read.
  uint16_t rows[4][8][8];
  AccessCounter counter;
  for (int lane = 0; lane < 8 * inst.shape; ++lane) {
    uint64_t at = (address.registers[0] != kNoRegister
                       ? warp.reg(address.registers[0], lane)
                       : 0) +
                  address.value;
    Target target = resolve(inst.space, warp, lane, at, 16, 16);
    if (target.space != StateSpace::Shared)
      throw ExecutionError{kIllegalAddress,
                           "ldmatrix row address " + std::to_string(at) +
                               " of lane " + std::to_string(lane) +
                               " is not in shared memory (ldmatrix reads "
                               "only shared memory)",
                           lane};
    checkAndRecord(target, 16, Access::Read, warp, lane, at);
    std::memcpy(rows[lane / 8][lane % 8], target.bytes, 16);
    counter.sharedAddresses[lane] = static_cast<uint32_t>(target.offset);
    counter.sharedLaneMask |= 1u << lane;
  }
  // Lane l gets row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each
  // matrix; with .trans, of the transposed matrix.
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (unsigned m = 0; m < inst.shape; ++m) {
      uint32_t reg = elementRegister(inst.operands[0], m);
      if (reg == kNoRegister)
        continue;
      int g = lane / 4, t = lane % 4;
      uint16_t low = inst.transpose ? rows[m][2 * t][g] : rows[m][g][2 * t];
      uint16_t high =
          inst.transpose ? rows[m][2 * t + 1][g] : rows[m][g][2 * t + 1];
      warp.reg(reg, lane) = uint32_t(high) << 16 | low;
    }
  cta.counts.sharedWavefronts +=
      counter.wavefronts(16, cta.sharedBankConflicts);
}

} // namespace flashdecode::emu
