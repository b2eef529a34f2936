//===- TensorCoreSum.h - Tensor-core products and fused sums ---*- C++ -*-===//
//
// Internal to the executor: the arithmetic mma.sync (TensorCore.cpp) and
// wgmma.mma_async (WarpgroupMma.cpp) share.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_TENSORCORESUM_H
#define FD_EMULATOR_TENSORCORESUM_H

#include "fd/Emulator/Program.h"

namespace flashdecode::emu {

/// A product of two f16 or bf16 values, exact in double (their
/// significands have at most 11 bits), and the sum of the factors'
/// exponents, by which the tensor core aligns it (the product itself may be
/// up to 4 times larger).
struct Product {
  double value;
  int exponent;
};

/// x * y of two f16 (`type` F16) or bf16 (BF16) values.
Product tensorCoreProduct(double x, double y, Type type);

/// One fused addition of the tensor core, `accumulator` plus `count`
/// products, as an H200 computes it bit for bit: the terms are aligned to
/// the largest exponent, truncated, added exactly, and the sum is truncated
/// to f32; a zero sum is +0, whatever the signs of the zeros. NaN operands
/// or inf - inf give the canonical NaN; infinities otherwise propagate.
float fusedSum(float accumulator, const Product *products, unsigned count);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_TENSORCORESUM_H
