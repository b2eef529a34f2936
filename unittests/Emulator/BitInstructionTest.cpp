//===- BitInstructionTest.cpp - fdemu's bit, logic and comparison forms ---===//
//
// Bit fields, permutes and counts against the PTX ISA's definitions written
// out bit by bit; logic (lop3 with every lookup table), selection and setp
// (signed, unsigned, combined with a predicate, and the complement output)
// against C++.
//
//===----------------------------------------------------------------------===//

#include "IntegerTest.h"

using namespace flashdecode::emutest;

namespace {

using EmulatorBits = IntegerTest;

/// bfe as the PTX ISA defines it: bit i of the result is bit pos + i of a
/// while i < len and pos + i is inside the type, else the sign bit of the
/// field (signed: a[min(pos + len - 1, msb)], unsigned: 0).
template <typename T> T extractField(T a, uint32_t position, uint32_t length) {
  unsigned bits = sizeof(T) * 8;
  position &= 0xFF;
  length &= 0xFF;
  using U = std::make_unsigned_t<T>;
  U value = static_cast<U>(a);
  bool sign = false;
  if (std::is_signed_v<T> && length != 0)
    sign = (value >> std::min(position + length - 1, bits - 1)) & 1;
  U result = 0;
  for (unsigned i = 0; i < bits; ++i) {
    bool bit = i < length && position + i < bits ? (value >> (position + i)) & 1
                                                 : sign;
    result |= U(bit) << i;
  }
  return static_cast<T>(result);
}

TEST_F(EmulatorBits, BfeU32) {
  check<u32>("bfe.u32 %d, %a, %b, %c;", extractField<u32>, values<u32>(),
             small<u32>(40), small<u32>(40));
}

TEST_F(EmulatorBits, BfeS32) {
  check<s32>("bfe.s32 %d, %a, %b, %c;", extractField<s32>, values<s32>(),
             small<u32>(40), small<u32>(40));
}

TEST_F(EmulatorBits, BfeU64) {
  check<u64>("bfe.u64 %d, %a, %b, %c;", extractField<u64>, values<u64>(),
             small<u32>(70), small<u32>(70));
}

TEST_F(EmulatorBits, BfeS64) {
  check<s64>("bfe.s64 %d, %a, %b, %c;", extractField<s64>, values<s64>(),
             small<u32>(70), small<u32>(70));
}

/// bfi: b with bits [pos, pos + len) replaced by a's low bits, clipped to
/// the type.
template <typename T>
T insertField(T a, T b, uint32_t position, uint32_t length) {
  unsigned bits = sizeof(T) * 8;
  T result = b;
  for (unsigned i = 0; i < length && position + i < bits; ++i) {
    T mask = T(1) << (position + i);
    result = (result & ~mask) | (((a >> i) & 1) ? mask : 0);
  }
  return result;
}

TEST_F(EmulatorBits, BfiB32) {
  // The position and length come packed in %c (8 bits each).
  std::vector<u32> fields = small<u32>(40 * 40);
  for (u32 &field : fields)
    field = field % 40 | (field / 40) << 8;
  check<u32>(
      "{ .reg .b32 %position, %length;\n"
      "  and.b32 %position, %c, 255;\n"
      "  shr.u32 %length, %c, 8;\n"
      "  bfi.b32 %d, %a, %b, %position, %length; }",
      [](u32 a, u32 b, u32 c) {
        return insertField<u32>(a, b, c & 255, c >> 8);
      },
      values<u32>(), values<u32>(), fields);
}

TEST_F(EmulatorBits, BfiB64) {
  std::vector<u32> fields = small<u32>(70 * 70);
  for (u32 &field : fields)
    field = field % 70 | (field / 70) << 8;
  check<u64>(
      "{ .reg .b32 %position, %length;\n"
      "  and.b32 %position, %c, 255;\n"
      "  shr.u32 %length, %c, 8;\n"
      "  bfi.b64 %d, %a, %b, %position, %length; }",
      [](u64 a, u64 b, u32 c) {
        return insertField<u64>(a, b, c & 255, c >> 8);
      },
      values<u64>(), values<u64>(), fields);
}

TEST_F(EmulatorBits, Prmt) {
  // Selector nibble i picks byte (nibble & 7) of {b, a} for result byte i;
  // with bit 3 set, that byte's sign fills the result byte.
  check<u32>(
      "prmt.b32 %d, %a, %b, %c;",
      [](u32 a, u32 b, u32 c) {
        uint8_t bytes[8];
        for (int i = 0; i < 4; ++i) {
          bytes[i] = a >> (8 * i);
          bytes[4 + i] = b >> (8 * i);
        }
        u32 result = 0;
        for (int i = 0; i < 4; ++i) {
          u32 selector = (c >> (4 * i)) & 15;
          uint8_t byte = bytes[selector & 7];
          if (selector & 8)
            byte = byte & 0x80 ? 0xFF : 0;
          result |= u32(byte) << (8 * i);
        }
        return result;
      },
      values<u32>(), values<u32>(), values<u32>());
}

TEST_F(EmulatorBits, Popc) {
  check<u32>(
      "popc.b32 %d, %a;", [](u32 a) { return u32(__builtin_popcount(a)); },
      values<u32>());
  check<u32>(
      "popc.b64 %d, %a;", [](u64 a) { return u32(__builtin_popcountll(a)); },
      values<u64>());
}

TEST_F(EmulatorBits, Clz) {
  check<u32>(
      "clz.b32 %d, %a;", [](u32 a) { return a ? u32(__builtin_clz(a)) : 32u; },
      values<u32>());
  check<u32>(
      "clz.b64 %d, %a;",
      [](u64 a) { return a ? u32(__builtin_clzll(a)) : 64u; }, values<u64>());
}

TEST_F(EmulatorBits, Brev) {
  auto reverse = [](auto a) {
    decltype(a) result = 0;
    for (unsigned i = 0; i < sizeof(a) * 8; ++i)
      if ((a >> i) & 1)
        result |= decltype(a)(1) << (sizeof(a) * 8 - 1 - i);
    return result;
  };
  check<u32>("brev.b32 %d, %a;", reverse, values<u32>());
  check<u64>("brev.b64 %d, %a;", reverse, values<u64>());
}

TEST_F(EmulatorBits, Logic) {
  check<u32>(
      "and.b32 %d, %a, %b;", [](u32 a, u32 b) { return a & b; }, values<u32>(),
      values<u32>());
  check<u64>(
      "or.b64 %d, %a, %b;", [](u64 a, u64 b) { return a | b; }, values<u64>(),
      values<u64>());
  check<u16>(
      "xor.b16 %d, %a, %b;", [](u16 a, u16 b) { return u16(a ^ b); },
      values<u16>(), values<u16>());
  check<u32>(
      "not.b32 %d, %a;", [](u32 a) { return ~a; }, values<u32>());
  check<u64>(
      "not.b64 %d, %a;", [](u64 a) { return ~a; }, values<u64>());
}

TEST_F(EmulatorBits, Lop3EveryLookupTable) {
  // One kernel applies all 256 tables (immLut must be an immediate) to the
  // thread's a, b, c; thread 0 gets the ISA's operand patterns 0xF0, 0xCC,
  // 0xAA in every byte, for which each result byte is the table itself.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry lop3(.param .u64 in, .param .u64 out)
{
  .reg .b32 %t, %a, %b, %c, %d;
  .reg .b64 %in, %out, %offset;
  mov.u32 %t, %tid.x;
  ld.param.u64 %in, [in];
  cvta.to.global.u64 %in, %in;
  mul.wide.u32 %offset, %t, 12;
  add.s64 %in, %in, %offset;
  ld.global.u32 %a, [%in];
  ld.global.u32 %b, [%in+4];
  ld.global.u32 %c, [%in+8];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 1024;
  add.s64 %out, %out, %offset;
)";
  for (int table = 0; table < 256; ++table)
    ptx += "  lop3.b32 %d, %a, %b, %c, " + std::to_string(table) +
           ";\n  st.global.u32 [%out+" + std::to_string(4 * table) + "], %d;\n";
  ptx += "  ret;\n}\n";
  constexpr unsigned kThreads = 128;
  std::vector<u32> inputs = {0xF0F0F0F0, 0xCCCCCCCC, 0xAAAAAAAA};
  while (inputs.size() < 3 * kThreads)
    inputs.push_back(static_cast<u32>(random()));
  CUdeviceptr out = allocate(kThreads * 256 * 4);
  ASSERT_TRUE(launchSucceeds(getKernel(ptx, "lop3"), {1}, {kThreads},
                             KernelArguments(upload(inputs), out)));
  std::vector<u32> got = download<u32>(out, kThreads * 256);
  size_t mismatches = 0;
  for (unsigned t = 0; t < kThreads; ++t) {
    u32 a = inputs[3 * t], b = inputs[3 * t + 1], c = inputs[3 * t + 2];
    for (u32 table = 0; table < 256; ++table) {
      // The table as a sum of minterms: bit 4a + 2b + c of the table says
      // whether the bits where a, b, c take those values are set.
      u32 expected = 0;
      for (u32 minterm = 0; minterm < 8; ++minterm)
        if ((table >> minterm) & 1)
          expected |= (minterm & 4 ? a : ~a) & (minterm & 2 ? b : ~b) &
                      (minterm & 1 ? c : ~c);
      if (t == 0) {
        EXPECT_EQ(expected, table * 0x01010101u) << "the reference";
      }
      if (got[256 * t + table] != expected && ++mismatches <= 8) {
        ADD_FAILURE() << "lop3.b32 table " << table << " on " << show(a) << ", "
                      << show(b) << ", " << show(c) << ": expected "
                      << show(expected) << ", got "
                      << show(got[256 * t + table]);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST_F(EmulatorBits, PredicateLogic) {
  std::vector<Pred> p, q;
  for (int i = 0; i < 64; ++i) {
    p.push_back({u32(i & 1)});
    q.push_back({u32(i >> 1 & 1)});
  }
  check<Pred>(
      "and.pred %d, %a, %b;",
      [](Pred a, Pred b) { return Pred{a.value & b.value}; }, p, q);
  check<Pred>(
      "or.pred %d, %a, %b;",
      [](Pred a, Pred b) { return Pred{a.value | b.value}; }, p, q);
  check<Pred>(
      "xor.pred %d, %a, %b;",
      [](Pred a, Pred b) { return Pred{a.value ^ b.value}; }, p, q);
  check<Pred>(
      "not.pred %d, %a;", [](Pred a) { return Pred{!a.value}; }, p);
  // A negated predicate operand.
  check<Pred>(
      "and.pred %d, !%a, %b;",
      [](Pred a, Pred b) { return Pred{!a.value && b.value}; }, p, q);
}

TEST_F(EmulatorBits, Selp) {
  std::vector<Pred> conditions;
  for (size_t i = 0; i < kCount + 10; ++i)
    conditions.push_back({u32(random() & 1)});
  check<s32>(
      "selp.s32 %d, %a, %b, %c;",
      [](s32 a, s32 b, Pred c) { return c.value ? a : b; }, values<s32>(),
      values<s32>(), conditions);
  check<u64>(
      "selp.b64 %d, %a, %b, %c;",
      [](u64 a, u64 b, Pred c) { return c.value ? a : b; }, values<u64>(),
      values<u64>(), conditions);
}

TEST_F(EmulatorBits, SetpSigned) {
  std::vector<s32> a = values<s32>(), b = values<s32>();
  // Equal pairs, so that eq/le/ge see both outcomes.
  for (size_t i = 0; i < a.size(); i += 5)
    b[i] = a[i];
  auto run = [&](const char *form, auto compare) {
    check<Pred>(
        std::string("setp.") + form + ".s32 %d, %a, %b;",
        [&](s32 x, s32 y) { return Pred{compare(x, y)}; }, a, b);
  };
  run("eq", [](s32 x, s32 y) { return x == y; });
  run("ne", [](s32 x, s32 y) { return x != y; });
  run("lt", [](s32 x, s32 y) { return x < y; });
  run("le", [](s32 x, s32 y) { return x <= y; });
  run("gt", [](s32 x, s32 y) { return x > y; });
  run("ge", [](s32 x, s32 y) { return x >= y; });
  std::vector<s64> c = values<s64>(), d = values<s64>();
  check<Pred>(
      "setp.lt.s64 %d, %a, %b;", [](s64 x, s64 y) { return Pred{x < y}; }, c,
      d);
  std::vector<s16> e = values<s16>(), f = values<s16>();
  check<Pred>(
      "setp.gt.s16 %d, %a, %b;", [](s16 x, s16 y) { return Pred{x > y}; }, e,
      f);
}

TEST_F(EmulatorBits, SetpUnsigned) {
  std::vector<u32> a = values<u32>(), b = values<u32>();
  for (size_t i = 0; i < a.size(); i += 5)
    b[i] = a[i];
  auto run = [&](const char *form, auto compare) {
    check<Pred>(
        std::string("setp.") + form + ".u32 %d, %a, %b;",
        [&](u32 x, u32 y) { return Pred{compare(x, y)}; }, a, b);
  };
  run("lo", [](u32 x, u32 y) { return x < y; });
  run("ls", [](u32 x, u32 y) { return x <= y; });
  run("hi", [](u32 x, u32 y) { return x > y; });
  run("hs", [](u32 x, u32 y) { return x >= y; });
  run("lt", [](u32 x, u32 y) { return x < y; });
  run("ge", [](u32 x, u32 y) { return x >= y; });
  std::vector<u64> c = values<u64>(), d = values<u64>();
  check<Pred>(
      "setp.hi.u64 %d, %a, %b;", [](u64 x, u64 y) { return Pred{x > y}; }, c,
      d);
}

TEST_F(EmulatorBits, SetpCombinedAndComplement) {
  std::vector<s32> a = values<s32>(), b = values<s32>();
  std::vector<Pred> c;
  for (size_t i = 0; i < a.size(); ++i)
    c.push_back({u32(random() & 1)});
  // setp.lt.and: p = (a < b) && c, q = !(a < b) && c.
  check<Pred>(
      "setp.lt.and.s32 %d, %a, %b, %c;",
      [](s32 x, s32 y, Pred z) { return Pred{x < y && z.value}; }, a, b, c);
  check<Pred>(
      "{ .reg .pred %p;\n"
      "  setp.lt.or.s32 %p|%d, %a, %b, %c; }",
      [](s32 x, s32 y, Pred z) { return Pred{!(x < y) || z.value}; }, a, b, c);
  check<Pred>(
      "setp.ge.xor.s32 %d, %a, %b, %c;",
      [](s32 x, s32 y, Pred z) { return Pred{(x >= y) != !!z.value}; }, a, b,
      c);
}

TEST_F(EmulatorBits, RegistersDeclaredWithoutPercent) {
  // nvcc's headers declare inline-asm registers such as `.reg .b32 c;`.
  check<u32>(
      "{ .reg .b32 sum;\n"
      "  .reg .pred larger;\n"
      "  add.u32 sum, %a, %b;\n"
      "  setp.gt.u32 larger, %a, %b;\n"
      "  mov.b32 %d, sum;\n"
      "  @larger shl.b32 %d, sum, 1; }",
      [](u32 a, u32 b) { return a > b ? (a + b) << 1 : a + b; }, values<u32>(),
      values<u32>());
}

} // namespace
