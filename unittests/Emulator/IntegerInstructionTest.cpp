//===- IntegerInstructionTest.cpp - fdemu's integer arithmetic forms ------===//
//
// Each test runs one PTX form over random bit patterns and the edge values
// of its type, and compares with C++ (128-bit where the PTX result needs
// it). Division skips the divisors PTX leaves unspecified (zero, and -1
// with the most negative dividend).
//
//===----------------------------------------------------------------------===//

#include "IntegerTest.h"

#include <algorithm>

using namespace flashdecode::emutest;

namespace {

using EmulatorInteger = IntegerTest;

TEST_F(EmulatorInteger, AddS32) {
  check<s32>(
      "add.s32 %d, %a, %b;", [](s32 a, s32 b) { return s32(u32(a) + u32(b)); },
      values<s32>(), values<s32>());
}

TEST_F(EmulatorInteger, AddU64) {
  check<u64>(
      "add.u64 %d, %a, %b;", [](u64 a, u64 b) { return a + b; }, values<u64>(),
      values<u64>());
}

TEST_F(EmulatorInteger, AddSatS32) {
  check<s32>(
      "add.sat.s32 %d, %a, %b;",
      [](s32 a, s32 b) {
        s64 sum = s64(a) + b;
        return s32(std::clamp<s64>(sum, INT32_MIN, INT32_MAX));
      },
      values<s32>(), values<s32>());
}

TEST_F(EmulatorInteger, SubU16) {
  check<u16>(
      "sub.u16 %d, %a, %b;", [](u16 a, u16 b) { return u16(a - b); },
      values<u16>(), values<u16>());
}

TEST_F(EmulatorInteger, SubS64) {
  check<s64>(
      "sub.s64 %d, %a, %b;", [](s64 a, s64 b) { return s64(u64(a) - u64(b)); },
      values<s64>(), values<s64>());
}

TEST_F(EmulatorInteger, MulLoS32) {
  check<s32>(
      "mul.lo.s32 %d, %a, %b;",
      [](s32 a, s32 b) { return s32(u32(a) * u32(b)); }, values<s32>(),
      values<s32>());
}

TEST_F(EmulatorInteger, MulHiS32) {
  check<s32>(
      "mul.hi.s32 %d, %a, %b;",
      [](s32 a, s32 b) { return s32((s64(a) * b) >> 32); }, values<s32>(),
      values<s32>());
}

TEST_F(EmulatorInteger, MulHiU32) {
  check<u32>(
      "mul.hi.u32 %d, %a, %b;",
      [](u32 a, u32 b) { return u32((u64(a) * b) >> 32); }, values<u32>(),
      values<u32>());
}

TEST_F(EmulatorInteger, MulHiS64) {
  check<s64>(
      "mul.hi.s64 %d, %a, %b;",
      [](s64 a, s64 b) { return s64((s128(a) * b) >> 64); }, values<s64>(),
      values<s64>());
}

TEST_F(EmulatorInteger, MulHiU64) {
  check<u64>(
      "mul.hi.u64 %d, %a, %b;",
      [](u64 a, u64 b) { return u64((u128(a) * b) >> 64); }, values<u64>(),
      values<u64>());
}

TEST_F(EmulatorInteger, MulWideS32) {
  check<s64>(
      "mul.wide.s32 %d, %a, %b;", [](s32 a, s32 b) { return s64(a) * b; },
      values<s32>(), values<s32>());
}

TEST_F(EmulatorInteger, MulWideU32) {
  check<u64>(
      "mul.wide.u32 %d, %a, %b;", [](u32 a, u32 b) { return u64(a) * b; },
      values<u32>(), values<u32>());
}

TEST_F(EmulatorInteger, MulWideS16) {
  check<s32>(
      "mul.wide.s16 %d, %a, %b;", [](s16 a, s16 b) { return s32(a) * b; },
      values<s16>(), values<s16>());
}

TEST_F(EmulatorInteger, MadLoS32) {
  check<s32>(
      "mad.lo.s32 %d, %a, %b, %c;",
      [](s32 a, s32 b, s32 c) { return s32(u32(a) * u32(b) + u32(c)); },
      values<s32>(), values<s32>(), values<s32>());
}

TEST_F(EmulatorInteger, MadHiU32) {
  check<u32>(
      "mad.hi.u32 %d, %a, %b, %c;",
      [](u32 a, u32 b, u32 c) { return u32(((u64(a) * b) >> 32) + c); },
      values<u32>(), values<u32>(), values<u32>());
}

TEST_F(EmulatorInteger, MadWideS32) {
  check<s64>(
      "mad.wide.s32 %d, %a, %b, %c;",
      [](s32 a, s32 b, s64 c) { return s64(u64(s64(a) * b) + u64(c)); },
      values<s32>(), values<s32>(), values<s64>());
}

TEST_F(EmulatorInteger, DivS32) {
  std::vector<s32> a = values<s32>();
  check<s32>(
      "div.s32 %d, %a, %b;", [](s32 a, s32 b) { return a / b; }, a,
      divisors(a));
}

TEST_F(EmulatorInteger, DivU32) {
  std::vector<u32> a = values<u32>();
  check<u32>(
      "div.u32 %d, %a, %b;", [](u32 a, u32 b) { return a / b; }, a,
      divisors(a));
}

TEST_F(EmulatorInteger, DivS64) {
  std::vector<s64> a = values<s64>();
  check<s64>(
      "div.s64 %d, %a, %b;", [](s64 a, s64 b) { return a / b; }, a,
      divisors(a));
}

TEST_F(EmulatorInteger, RemS32) {
  std::vector<s32> a = values<s32>();
  check<s32>(
      "rem.s32 %d, %a, %b;", [](s32 a, s32 b) { return a % b; }, a,
      divisors(a));
}

TEST_F(EmulatorInteger, RemU64) {
  std::vector<u64> a = values<u64>();
  check<u64>(
      "rem.u64 %d, %a, %b;", [](u64 a, u64 b) { return a % b; }, a,
      divisors(a));
}

TEST_F(EmulatorInteger, MinMaxSigned) {
  check<s32>(
      "min.s32 %d, %a, %b;", [](s32 a, s32 b) { return std::min(a, b); },
      values<s32>(), values<s32>());
  check<s16>(
      "max.s16 %d, %a, %b;", [](s16 a, s16 b) { return std::max(a, b); },
      values<s16>(), values<s16>());
  check<s64>(
      "max.s64 %d, %a, %b;", [](s64 a, s64 b) { return std::max(a, b); },
      values<s64>(), values<s64>());
}

TEST_F(EmulatorInteger, MinMaxUnsigned) {
  check<u32>(
      "min.u32 %d, %a, %b;", [](u32 a, u32 b) { return std::min(a, b); },
      values<u32>(), values<u32>());
  check<u32>(
      "max.u32 %d, %a, %b;", [](u32 a, u32 b) { return std::max(a, b); },
      values<u32>(), values<u32>());
  check<u64>(
      "min.u64 %d, %a, %b;", [](u64 a, u64 b) { return std::min(a, b); },
      values<u64>(), values<u64>());
}

TEST_F(EmulatorInteger, Shl) {
  // Shift amounts at and past the width give zero.
  check<u32>(
      "shl.b32 %d, %a, %b;", [](u32 a, u32 b) { return b >= 32 ? 0 : a << b; },
      values<u32>(), small<u32>(40));
  check<u64>(
      "shl.b64 %d, %a, %b;", [](u64 a, u32 b) { return b >= 64 ? 0 : a << b; },
      values<u64>(), small<u32>(70));
  check<u16>(
      "shl.b16 %d, %a, %b;",
      [](u16 a, u32 b) { return u16(b >= 16 ? 0 : a << b); }, values<u16>(),
      small<u32>(20));
}

TEST_F(EmulatorInteger, ShrUnsigned) {
  check<u32>(
      "shr.u32 %d, %a, %b;", [](u32 a, u32 b) { return b >= 32 ? 0 : a >> b; },
      values<u32>(), small<u32>(40));
  check<u64>(
      "shr.b64 %d, %a, %b;", [](u64 a, u32 b) { return b >= 64 ? 0 : a >> b; },
      values<u64>(), small<u32>(70));
}

TEST_F(EmulatorInteger, ShrSigned) {
  // Arithmetic: past the width every bit is the sign.
  check<s32>(
      "shr.s32 %d, %a, %b;", [](s32 a, u32 b) { return a >> std::min(b, 31u); },
      values<s32>(), small<u32>(40));
  check<s64>(
      "shr.s64 %d, %a, %b;", [](s64 a, u32 b) { return a >> std::min(b, 63u); },
      values<s64>(), small<u32>(70));
}

} // namespace
