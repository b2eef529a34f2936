//===- Float8.h - exact FP8 codecs for the reference ------------*- C++ -*-===//
//
// Exact conversions between float and the two FP8 formats a KV cache may be
// stored in: MLIR's f8E4M3FN and f8E5M2 (ml_dtypes float8_e4m3fn and
// float8_e5m2, PTX e4m3 and e5m2). Every FP8 value is a float, so decoding is
// exact; encoding rounds to nearest even. Standard C++ only.
//
//===----------------------------------------------------------------------===//

#ifndef FD_REFERENCE_FLOAT8_H
#define FD_REFERENCE_FLOAT8_H

#include <cstdint>

namespace flashdecode::reference {

/// E4M3FN: bias 7, subnormals, no infinities, NaN only S.1111.111, max 448.
/// Encoding follows APFloat and ml_dtypes (what users quantize with, not PTX's
/// saturating cvt): anything that rounds past 448, and +-infinity, becomes
/// NaN of the same sign (0x7f / 0xff); NaN becomes NaN.
uint8_t floatToFloat8E4M3FN(float value);
float float8E4M3FNToFloat(uint8_t bits);

/// E5M2: IEEE-like, bias 15, subnormals, +-infinity, max 57344. Encoding
/// overflows to infinity like floatToHalf; NaN becomes the quiet NaN of the
/// same sign (0x7e / 0xfe).
uint8_t floatToFloat8E5M2(float value);
float float8E5M2ToFloat(uint8_t bits);

} // namespace flashdecode::reference

#endif // FD_REFERENCE_FLOAT8_H
