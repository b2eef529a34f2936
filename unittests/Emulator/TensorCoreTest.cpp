//===- TensorCoreTest.cpp - fdemu's mma.sync and ldmatrix -----------------===//
//
// mma.sync on random f16 and bf16 matrices, with the fragments packed here
// from the PTX ISA's layout tables and every element of D checked against a
// float64 reference, within a tolerance no misplaced element can meet: the
// same check fails when A is packed transposed, B's halves swapped or C's
// rows exchanged. Then the rounding rule fdemu shares with an H200, on
// three cases that tell it apart. ldmatrix on a tile of distinct values
// whose rows lie scattered in shared memory, every lane's registers checked
// for .x1, .x2 and .x4, with and without .trans; then ldmatrix feeding mma
// as MLIR's nvgpu lowering does. (What .aligned forbids:
// WarpMatrixErrorTest.cpp.)
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"
#include "Multiplicands.h"

#include <algorithm>
#include <cmath>

using namespace flashdecode::emutest;

namespace {

constexpr unsigned kLanes = 32;

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// How the test packs the fragments: as the ISA says, or one of the
/// mistakes the check must catch.
enum class Packing { Correct, TransposedA, SwappedBHalves, SwappedCRows };

/// A row-major m x k, k x 8 problem with its fragments.
struct MmaProblem {
  bool bfloat = false;
  unsigned k = 16;
  uint16_t a[16][16], b[16][8];
  float c[16][8];
  std::vector<uint32_t> aRegisters, bRegisters, cRegisters;

  /// Registers of lane `lane`, from the ISA's tables for m16n8k16 (and
  /// their first halves for m16n8k8): a_i is at row g (+8 for i % 4 >= 2),
  /// column 2t + i % 2 (+8 for i >= 4); b_i at row 2t + i % 2 (+8 for
  /// i >= 2), column g; c_i at row g (+8 for i >= 2), column 2t + i % 2.
  void pack(Packing packing) {
    unsigned aCount = k / 4, bCount = k / 8;
    aRegisters.assign(kLanes * aCount, 0);
    bRegisters.assign(kLanes * bCount, 0);
    cRegisters.assign(kLanes * 4, 0);
    for (unsigned lane = 0; lane < kLanes; ++lane) {
      unsigned g = lane / 4, t = lane % 4;
      for (unsigned i = 0; i < 2 * aCount; ++i) {
        unsigned row = g + (i % 4 >= 2 ? 8 : 0);
        unsigned column = 2 * t + i % 2 + (i >= 4 ? 8 : 0);
        uint16_t value =
            packing == Packing::TransposedA ? a[column][row] : a[row][column];
        aRegisters[lane * aCount + i / 2] |= uint32_t(value) << (16 * (i % 2));
      }
      for (unsigned i = 0; i < 2 * bCount; ++i) {
        unsigned r = i / 2;
        if (packing == Packing::SwappedBHalves)
          r = bCount - 1 - r;
        uint16_t value = b[2 * t + i % 2 + (i >= 2 ? 8 : 0)][g];
        bRegisters[lane * bCount + r] |= uint32_t(value) << (16 * (i % 2));
      }
      for (unsigned i = 0; i < 4; ++i) {
        unsigned row = g + (i >= 2 ? 8 : 0);
        if (packing == Packing::SwappedCRows)
          row ^= 8;
        cRegisters[lane * 4 + i] = floatBits(c[row][2 * t + i % 2]);
      }
    }
  }

  /// Random values of magnitude 2^-4 to 2^4 with every fraction bit used.
  void randomize(std::mt19937_64 &random) {
    auto multiplicand = [&] { return randomMultiplicand(random, bfloat); };
    for (auto &row : a)
      for (uint16_t &value : row)
        value = multiplicand();
    for (auto &row : b)
      for (uint16_t &value : row)
        value = multiplicand();
    std::uniform_real_distribution<float> uniform(-8, 8);
    for (auto &row : c)
      for (float &value : row)
        value = uniform(random);
  }

  /// Elements of `d` (row-major 16 x 8) further from the float64 result
  /// than 2^-17 of the sum of the magnitudes of their terms.
  unsigned countMismatches(const float (&d)[16][8]) const {
    unsigned mismatches = 0;
    for (unsigned row = 0; row < 16; ++row)
      for (unsigned column = 0; column < 8; ++column) {
        double exact = c[row][column], magnitude = std::fabs(exact);
        for (unsigned i = 0; i < k; ++i) {
          double product = multiplicandValue(a[row][i], bfloat) *
                           multiplicandValue(b[i][column], bfloat);
          exact += product;
          magnitude += std::fabs(product);
        }
        if (!(std::fabs(d[row][column] - exact) <= std::ldexp(magnitude, -17)))
          ++mismatches;
      }
    return mismatches;
  }
};

/// Each lane loads its a, b and c registers, runs one mma.sync and stores
/// d (registers in order, lane after lane).
std::string mmaKernel(unsigned k, bool bfloat) {
  unsigned aCount = k / 4, bCount = k / 8;
  auto list = [](const char *name, unsigned count) {
    std::string text = "{";
    for (unsigned i = 0; i < count; ++i)
      text += (i ? ", %" : "%") + std::string(name) + std::to_string(i);
    return text + "}";
  };
  // %p = param + tid * stride.
  auto pointer = [](const char *param, unsigned stride) {
    return "  ld.param.u64 %p, [" + std::string(param) +
           "];\n  cvta.to.global.u64 %p, %p;\n  mul.wide.u32 %offset, %t, " +
           std::to_string(stride) + ";\n  add.s64 %p, %p, %offset;\n";
  };
  auto load = [&](const char *name, unsigned count, const char *param) {
    std::string text = pointer(param, 4 * count);
    for (unsigned i = 0; i < count; ++i)
      text += "  ld.global.b32 %" + std::string(name) + std::to_string(i) +
              ", [%p+" + std::to_string(4 * i) + "];\n";
    return text;
  };
  std::string type = bfloat ? "bf16" : "f16";
  return std::string(kPtxHeader) +
         ".visible .entry mma(.param .u64 a, .param .u64 b, .param .u64 c, "
         ".param .u64 d)\n{\n  .reg .b32 %t, %a<4>, %b<2>, %c<4>;\n"
         "  .reg .b64 %p, %offset;\n  mov.u32 %t, %tid.x;\n" +
         load("a", aCount, "a") + load("b", bCount, "b") + load("c", 4, "c") +
         "  mma.sync.aligned.m16n8k" + std::to_string(k) + ".row.col.f32." +
         type + "." + type + ".f32\n    " + list("c", 4) + ",\n    " +
         list("a", aCount) + ",\n    " + list("b", bCount) + ",\n    " +
         list("c", 4) + ";\n" + pointer("d", 16) +
         "  st.global.v4.b32 [%p], {%c0, %c1, %c2, %c3};\n  ret;\n}\n";
}

class EmulatorTensorCore : public EmulatorTest {
protected:
  /// Runs `problem` packed as `packing` and returns D, unpacked with the
  /// ISA's accumulator layout.
  void runMma(MmaProblem &problem, Packing packing, float (&d)[16][8]) {
    problem.pack(packing);
    CUfunction kernel = getKernel(mmaKernel(problem.k, problem.bfloat), "mma");
    CUdeviceptr out = allocate(kLanes * 16);
    ASSERT_TRUE(launchSucceeds(
        kernel, {1}, {kLanes},
        KernelArguments(upload(problem.aRegisters), upload(problem.bRegisters),
                        upload(problem.cRegisters), out)));
    std::vector<uint32_t> registers = download<uint32_t>(out, kLanes * 4);
    for (unsigned lane = 0; lane < kLanes; ++lane)
      for (unsigned i = 0; i < 4; ++i)
        d[lane / 4 + (i >= 2 ? 8 : 0)][2 * (lane % 4) + i % 2] =
            bitsFloat(registers[lane * 4 + i]);
  }

  void checkMma(unsigned k, bool bfloat) {
    MmaProblem problem;
    problem.k = k;
    problem.bfloat = bfloat;
    problem.randomize(random);
    float d[16][8];
    runMma(problem, Packing::Correct, d);
    EXPECT_EQ(problem.countMismatches(d), 0u);
    // A wrong layout puts other terms in nearly every element.
    for (Packing wrong : {Packing::TransposedA, Packing::SwappedBHalves,
                          Packing::SwappedCRows}) {
      if (wrong == Packing::SwappedBHalves && k == 8)
        continue; // one b register: no halves to swap
      runMma(problem, wrong, d);
      EXPECT_GT(problem.countMismatches(d), 100u)
          << "packing " << static_cast<int>(wrong) << " passed the check";
    }
  }
};

TEST_F(EmulatorTensorCore, MmaF16) { checkMma(16, false); }
TEST_F(EmulatorTensorCore, MmaBF16) { checkMma(16, true); }
TEST_F(EmulatorTensorCore, MmaK8F16) { checkMma(8, false); }
TEST_F(EmulatorTensorCore, MmaK8BF16) { checkMma(8, true); }

/// Every element of D is `expected` (bit for bit).
void expectAll(const float (&d)[16][8], float expected) {
  for (unsigned row = 0; row < 16; ++row)
    for (unsigned column = 0; column < 8; ++column)
      EXPECT_EQ(floatBits(d[row][column]), floatBits(expected))
          << row << ", " << column << ": " << d[row][column];
}

TEST_F(EmulatorTensorCore, AccumulationRoundsAsTheH200Does) {
  // The rule an H200 follows bit for bit (docs/Emulator.md): terms are cut
  // to multiples of 2^(E - 25), E the largest exponent (of c, and of each
  // product the sum of its factors' exponents). c = 1 and sixteen products
  // of 0.75 * 2^-24 give 1 + 16 * 2^-25, not the exact 1 + 24 * 2^-25 (the
  // H200 gave that).
  MmaProblem problem;
  auto fill = [&](uint16_t a, uint16_t b, float c) {
    for (auto &row : problem.a)
      for (uint16_t &value : row)
        value = a;
    for (auto &row : problem.b)
      for (uint16_t &value : row)
        value = b;
    for (auto &row : problem.c)
      for (float &value : row)
        value = c;
  };
  float d[16][8];
  fill(0x0C00, 0x0A00, 1.0f); // 2^-12, 0.75 * 2^-12
  runMma(problem, Packing::Correct, d);
  expectAll(d, 1.0f + 0x1p-21f);
  // A sum of zeros is +0, whatever their signs.
  fill(0x8000, 0x0000, -0.0f);
  runMma(problem, Packing::Correct, d);
  expectAll(d, 0.0f);
  // A subnormal factor (2^-20) counts with f16's smallest exponent, -14:
  // the product 1.5 * 2^-20 sets E = -14, which cuts c = 1.25 * 2^-41
  // away (with -20 it would stay).
  fill(0x0000, 0x3E00, 0x1.4p-41f);
  for (auto &row : problem.a)
    row[0] = 0x0010;
  runMma(problem, Packing::Correct, d);
  expectAll(d, 0x1.8p-20f);
}

/// The 32 threads copy a 512-byte tile of 32 rows of 16 bytes into shared
/// memory, then lane l loads the row at slot slots[l] with ldmatrix.
std::string ldmatrixKernel(unsigned matrices, bool transpose) {
  std::string registers = "{%r0";
  for (unsigned i = 1; i < matrices; ++i)
    registers += ", %r" + std::to_string(i);
  registers += "}";
  return std::string(kPtxHeader) + R"(
.visible .entry ldmatrix(.param .u64 tile, .param .u64 slots, .param .u64 out)
{
  .shared .align 16 .b8 smem[512];
  .reg .b32 %t, %slot, %base, %address, %r<4>;
  .reg .b64 %p, %offset;
  mov.u32 %t, %tid.x;
  ld.param.u64 %p, [tile];
  cvta.to.global.u64 %p, %p;
  mul.wide.u32 %offset, %t, 16;
  add.s64 %p, %p, %offset;
  ld.global.v4.b32 {%r0, %r1, %r2, %r3}, [%p];
  mov.u32 %base, smem;
  mad.lo.u32 %address, %t, 16, %base;
  st.shared.v4.b32 [%address], {%r0, %r1, %r2, %r3};
  bar.sync 0;
  ld.param.u64 %p, [slots];
  cvta.to.global.u64 %p, %p;
  mul.wide.u32 %offset, %t, 4;
  add.s64 %p, %p, %offset;
  ld.global.u32 %slot, [%p];
  mad.lo.u32 %address, %slot, 16, %base;
  ldmatrix.sync.aligned.m8n8.x)" +
         std::to_string(matrices) + (transpose ? ".trans" : "") +
         ".shared.b16 " + registers + R"(, [%address];
  ld.param.u64 %p, [out];
  cvta.to.global.u64 %p, %p;
  mul.wide.u32 %offset, %t, 16;
  add.s64 %p, %p, %offset;
  st.global.v4.b32 [%p], {%r0, %r1, %r2, %r3};
  ret;
}
)";
}

TEST_F(EmulatorTensorCore, LdmatrixEveryShapeAndTranspose) {
  for (unsigned matrices : {1u, 2u, 4u})
    for (bool transpose : {false, true}) {
      SCOPED_TRACE("x" + std::to_string(matrices) +
                   (transpose ? ".trans" : ""));
      // Row r of matrix m holds 0x4000 | m << 8 | r << 4 | column, at a
      // random slot; lanes past the matrices point past shared memory,
      // which ldmatrix must not read.
      std::vector<uint32_t> slot(kLanes);
      for (unsigned i = 0; i < kLanes; ++i)
        slot[i] = i;
      std::shuffle(slot.begin(), slot.end(), random);
      std::vector<uint16_t> tile(kLanes * 8);
      for (unsigned row = 0; row < kLanes; ++row)
        for (unsigned column = 0; column < 8; ++column)
          tile[slot[row] * 8 + column] =
              0x4000 | (row / 8) << 8 | (row % 8) << 4 | column;
      std::vector<uint32_t> slots = slot;
      for (unsigned lane = 8 * matrices; lane < kLanes; ++lane)
        slots[lane] = 1000;
      CUfunction kernel =
          getKernel(ldmatrixKernel(matrices, transpose), "ldmatrix");
      CUdeviceptr out = allocate(kLanes * 16);
      ASSERT_TRUE(
          launchSucceeds(kernel, {1}, {kLanes},
                         KernelArguments(upload(tile), upload(slots), out)));
      std::vector<uint32_t> got = download<uint32_t>(out, kLanes * 4);
      for (unsigned lane = 0; lane < kLanes; ++lane)
        for (unsigned m = 0; m < matrices; ++m) {
          unsigned g = lane / 4, t = lane % 4;
          auto element = [&](unsigned row, unsigned column) {
            return uint32_t(0x4000 | m << 8 | row << 4 | column);
          };
          uint32_t expected =
              transpose ? element(2 * t, g) | element(2 * t + 1, g) << 16
                        : element(g, 2 * t) | element(g, 2 * t + 1) << 16;
          EXPECT_EQ(got[lane * 4 + m], expected)
              << "lane " << lane << ", register " << m;
        }
    }
}

/// A (16 x 16) and B (16 x 8, k-major rows) row-major in shared memory,
/// loaded as MLIR's nvgpu lowering loads them: A with ldmatrix.x4 (lane l
/// points at row l % 16, column 8 (l / 16)), B with ldmatrix.x2.trans (lane
/// l at row l % 16), then one mma.sync from a zero accumulator.
std::string ldmatrixMmaKernel(bool bfloat) {
  std::string type = bfloat ? "bf16" : "f16";
  return std::string(kPtxHeader) + R"(
.visible .entry ldmatrixMma(.param .u64 a, .param .u64 b, .param .u64 d)
{
  .shared .align 16 .b8 tileA[512];
  .shared .align 16 .b8 tileB[256];
  .reg .pred %lower;
  .reg .b32 %t, %row, %address, %r<4>, %a<4>, %b<2>, %d<4>, %zero;
  .reg .b64 %p, %offset;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 16;
  ld.param.u64 %p, [a];
  cvta.to.global.u64 %p, %p;
  add.s64 %p, %p, %offset;
  ld.global.v4.b32 {%r0, %r1, %r2, %r3}, [%p];
  mov.u32 %address, tileA;
  mad.lo.u32 %address, %t, 16, %address;
  st.shared.v4.b32 [%address], {%r0, %r1, %r2, %r3};
  setp.lt.u32 %lower, %t, 16;
  @!%lower bra LOADED;
  ld.param.u64 %p, [b];
  cvta.to.global.u64 %p, %p;
  add.s64 %p, %p, %offset;
  ld.global.v4.b32 {%r0, %r1, %r2, %r3}, [%p];
  mov.u32 %address, tileB;
  mad.lo.u32 %address, %t, 16, %address;
  st.shared.v4.b32 [%address], {%r0, %r1, %r2, %r3};
LOADED:
  bar.sync 0;
  and.b32 %row, %t, 15;
  shr.u32 %address, %t, 4;
  mul.lo.u32 %address, %address, 16;
  mad.lo.u32 %address, %row, 32, %address;
  add.u32 %address, %address, tileA;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%address];
  mov.u32 %address, tileB;
  mad.lo.u32 %address, %row, 16, %address;
  ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16 {%b0, %b1}, [%address];
  mov.b32 %zero, 0;
  mma.sync.aligned.m16n8k16.row.col.f32.)" +
         type + "." + type + R"(.f32 {%d0, %d1, %d2, %d3},
    {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%zero, %zero, %zero, %zero};
  ld.param.u64 %p, [d];
  cvta.to.global.u64 %p, %p;
  add.s64 %p, %p, %offset;
  st.global.v4.b32 [%p], {%d0, %d1, %d2, %d3};
  ret;
}
)";
}

TEST_F(EmulatorTensorCore, LdmatrixFeedsMma) {
  for (bool bfloat : {false, true}) {
    SCOPED_TRACE(bfloat ? "bf16" : "f16");
    MmaProblem problem;
    problem.bfloat = bfloat;
    problem.randomize(random);
    for (auto &row : problem.c)
      for (float &value : row)
        value = 0;
    std::vector<uint16_t> a(&problem.a[0][0], &problem.a[0][0] + 256);
    std::vector<uint16_t> b(&problem.b[0][0], &problem.b[0][0] + 128);
    CUfunction kernel = getKernel(ldmatrixMmaKernel(bfloat), "ldmatrixMma");
    CUdeviceptr out = allocate(kLanes * 16);
    ASSERT_TRUE(launchSucceeds(kernel, {1}, {kLanes},
                               KernelArguments(upload(a), upload(b), out)));
    std::vector<uint32_t> registers = download<uint32_t>(out, kLanes * 4);
    float d[16][8];
    for (unsigned lane = 0; lane < kLanes; ++lane)
      for (unsigned i = 0; i < 4; ++i)
        d[lane / 4 + (i >= 2 ? 8 : 0)][2 * (lane % 4) + i % 2] =
            bitsFloat(registers[lane * 4 + i]);
    EXPECT_EQ(problem.countMismatches(d), 0u);
  }
}

} // namespace
