//===- WarpgroupMmaTest.cpp - fdemu's wgmma.mma_async ---------------------===//
//
// wgmma.mma_async in the form LLVM's NVPTX backend emits it (inline asm with
// its own scale-d predicate), on random f16 and bf16 matrices laid out in
// shared memory here from CUTLASS's canonical GMMA layouts as written in
// cute's notation ((shape):(stride), T = 8 elements of 16 bytes, the
// swizzle Swizzle<B,4,3> on byte addresses), every element of D checked
// against a float64 reference within a tolerance no misplaced element can
// meet; bytes no layout uses are NaN. Covered: every N class (8 to 256),
// A from registers and from shared memory K- and MN-major, B K- and
// MN-major, every swizzle, scale-d 0 and 1, imm-scale -1, two warpgroups
// (rows by warp index mod 4), and four chained k-steps that advance the
// descriptors 32 bytes inside a 128-byte swizzle atom, as FlashMLA and
// DeepGEMM step K. Then what the asynchrony forbids, each a clear error,
// and the counts the performance model takes.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"
#include "Multiplicands.h"

#include <cmath>

using namespace flashdecode::emutest;

namespace {

enum class Source { Registers, KMajor, MNMajor };

/// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: launches past 48 KB of
/// dynamic shared memory need it raised.
constexpr int kMaxDynamicSharedAttribute = 8;

struct Config {
  unsigned n = 64;
  bool bfloat = true;
  Source a = Source::KMajor, b = Source::KMajor;
  /// Swizzle widths in bytes (0: none).
  unsigned swizzleA = 0, swizzleB = 0;
  bool accumulate = true, negateA = false, negateB = false;
  unsigned warpgroups = 1;
  /// wgmma.mma_async chained on one accumulator, K = 16 each, the
  /// descriptors' start advanced 32 bytes a step (K-major, 128-byte
  /// swizzle only).
  unsigned steps = 1;
};

std::string describe(const Config &c) {
  auto source = [](Source s, unsigned swizzle) {
    std::string name = s == Source::Registers ? "registers"
                       : s == Source::KMajor  ? "K-major"
                                              : "MN-major";
    return s == Source::Registers
               ? name
               : name + " swizzle " + std::to_string(swizzle);
  };
  return "m64n" + std::to_string(c.n) + "k16 " + (c.bfloat ? "bf16" : "f16") +
         ", a " + source(c.a, c.swizzleA) + ", b " + source(c.b, c.swizzleB) +
         (c.accumulate ? ", scale-d 1" : ", scale-d 0") +
         (c.negateA ? ", -a" : "") + (c.negateB ? ", -b" : "") + ", " +
         std::to_string(c.warpgroups) + " warpgroup(s), " +
         std::to_string(c.steps) + " step(s)";
}

/// A cute layout ((rows):(strides)) x ((k):(strides)), strides in bytes,
/// coordinates colexicographic.
struct CuteLayout {
  std::vector<unsigned> rowShape, kShape;
  std::vector<uint32_t> rowStride, kStride;
  unsigned swizzleBits = 0;

  static uint32_t evaluate(unsigned index, const std::vector<unsigned> &shape,
                           const std::vector<uint32_t> &stride) {
    uint32_t offset = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      offset += index % shape[i] * stride[i];
      index /= shape[i];
    }
    return offset;
  }
  uint32_t operator()(unsigned row, unsigned k) const {
    uint32_t offset =
        evaluate(row, rowShape, rowStride) + evaluate(k, kShape, kStride);
    // Swizzle<B,4,3>: bits [7, 7 + B) into [4, 4 + B).
    uint32_t yyy = ((1u << swizzleBits) - 1) << 7;
    return offset ^ ((offset & yyy) >> 3);
  }
};

/// The canonical layout of an operand of `rows` rows and `k` columns
/// (elements of 2 bytes, T = 8), with its descriptor's byte offsets.
struct Operand {
  CuteLayout layout;
  uint32_t leading = 0, stride = 0;
  unsigned swizzleMode = 0;
};

Operand makeOperand(Source major, unsigned swizzle, unsigned rows, unsigned k) {
  Operand op;
  unsigned m = rows / 8;
  const uint32_t t = 16; // T elements, in bytes
  op.swizzleMode = swizzle == 128  ? 1
                   : swizzle == 64 ? 2
                   : swizzle == 32 ? 3
                                   : 0;
  if (major == Source::KMajor && !swizzle) {
    // ((8,m),(T,2)):((1T,SBO),(1,LBO)); K's halves far apart, row blocks
    // padded.
    op.stride = 256;
    op.leading = m * 256 + 64;
    op.layout = {{8, m}, {8, 2}, {t, op.stride}, {2, op.leading}, 0};
  } else if (major == Source::KMajor) {
    // ((8,m),(T,2k)):((xT,SBO),(1,T)), x T = the swizzle's width; atoms
    // spaced twice their size.
    op.stride = 16 * swizzle;
    op.leading = 16; // unused
    op.layout.rowShape = {8, m};
    op.layout.rowStride = {swizzle, op.stride};
    op.layout.kShape = {k};
    op.layout.kStride = {2};
  } else if (!swizzle) {
    // ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
    op.stride = 128;
    op.leading = m * 128 + 256;
    op.layout = {{8, 1, m}, {8, k / 8}, {2, t, op.stride}, {t, op.leading}, 0};
  } else {
    // ((T,x,m),(8,k)):((1,T,LBO),(xT,SBO)), x = width / 16; atoms along
    // MN twice the K groups' distance apart.
    unsigned x = swizzle / 16;
    op.stride = 8 * swizzle;
    op.leading = 2 * op.stride * (k / 8);
    unsigned atoms = std::max(1u, rows / (8 * x));
    op.layout.rowShape = {8, x, atoms};
    op.layout.rowStride = {2, t, op.leading};
    op.layout.kShape = {8, k / 8};
    op.layout.kStride = {swizzle, op.stride};
  }
  op.layout.swizzleBits = swizzle == 128  ? 3
                          : swizzle == 64 ? 2
                          : swizzle == 32 ? 1
                                          : 0;
  return op;
}

uint64_t descriptor(uint32_t start, const Operand &op) {
  return uint64_t(start >> 4 & 0x3FFF) |
         uint64_t(op.leading >> 4 & 0x3FFF) << 16 |
         uint64_t(op.stride >> 4 & 0x3FFF) << 32 |
         uint64_t(op.swizzleMode) << 62;
}

std::string kernelSource(const Config &c, const char *target = "sm_90a") {
  std::string s =
      ".version 8.0\n.target " + std::string(target) +
      "\n.address_size 64\n"
      ".extern .shared .align 1024 .b8 smem[];\n"
      ".visible .entry wgmma_case(.param .u64 p_image, .param "
      ".u32 p_bytes, .param .u64 p_descA, .param .u64 p_descB, "
      ".param .u64 p_aFrag, .param .u64 p_c, .param .u64 p_out, "
      ".param .u32 p_accumulate)\n{\n"
      ".reg .pred %p<3>;\n.reg .b32 %r<20>;\n.reg .b64 %rd<20>;\n"
      ".reg .f32 %f<130>;\n.reg .b32 %a<4>;\n"
      "ld.param.u64 %rd1, [p_image];\nld.param.u32 %r1, [p_bytes];\n"
      "mov.u32 %r2, %tid.x;\nmov.u32 %r3, %ntid.x;\n"
      "shl.b32 %r4, %r2, 2;\nshl.b32 %r5, %r3, 2;\n"
      "mov.u32 %r6, smem;\n"
      "$copy:\nsetp.ge.u32 %p1, %r4, %r1;\n@%p1 bra $copied;\n"
      "cvt.u64.u32 %rd2, %r4;\nadd.s64 %rd3, %rd1, %rd2;\n"
      "ld.global.u32 %r7, [%rd3];\nadd.u32 %r8, %r6, %r4;\n"
      "st.shared.u32 [%r8], %r7;\nadd.u32 %r4, %r4, %r5;\n"
      "bra $copy;\n$copied:\n"
      "fence.proxy.async.shared::cta;\nbar.sync 0;\n";
  unsigned count = c.n / 2;
  s += "ld.param.u64 %rd5, [p_c];\nmul.wide.u32 %rd6, %r2, " +
       std::to_string(4 * count) + ";\nadd.s64 %rd7, %rd5, %rd6;\n";
  for (unsigned i = 0; i < count; ++i)
    s += "ld.global.f32 %f" + std::to_string(i) + ", [%rd7+" +
         std::to_string(4 * i) + "];\n";
  s += "ld.param.u64 %rd8, [p_aFrag];\nmul.wide.u32 %rd9, %r2, 16;\n"
       "add.s64 %rd10, %rd8, %rd9;\n";
  for (unsigned i = 0; i < 4; ++i)
    s += "ld.global.u32 %a" + std::to_string(i) + ", [%rd10+" +
         std::to_string(4 * i) + "];\n";
  s += "ld.param.u64 %rd11, [p_descA];\nld.param.u64 %rd12, [p_descB];\n"
       "ld.param.u32 %r9, [p_accumulate];\nwgmma.fence.sync.aligned;\n";
  std::string d = "{";
  for (unsigned i = 0; i < count; ++i)
    d += (i ? ", %f" : "%f") + std::to_string(i);
  d += "}";
  std::string a = c.a == Source::Registers ? "{%a0, %a1, %a2, %a3}" : "%rd11";
  std::string type = c.bfloat ? "bf16" : "f16";
  for (unsigned step = 0; step < c.steps; ++step) {
    s += "{\n.reg .pred p;\nsetp.ne.b32 p, " + std::string(step ? "1" : "%r9") +
         ", 0;\n" + "wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.n) +
         "k16.f32." + type + "." + type + " " + d + ", " + a + ", %rd12, p, " +
         (c.negateA ? "-1" : "1") + ",  " + (c.negateB ? "-1" : "1") + ", " +
         (c.a == Source::Registers
              ? ""
              : std::string(c.a == Source::MNMajor ? "1" : "0") + ",  ") +
         (c.b == Source::MNMajor ? "1" : "0") + ";\n}\n";
    s += "add.s64 %rd11, %rd11, 2;\nadd.s64 %rd12, %rd12, 2;\n";
  }
  s += "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n"
       "ld.param.u64 %rd13, [p_out];\nadd.s64 %rd14, %rd13, %rd6;\n";
  for (unsigned i = 0; i < count; ++i)
    s += "st.global.f32 [%rd14+" + std::to_string(4 * i) + "], %f" +
         std::to_string(i) + ";\n";
  return s + "ret;\n}\n";
}

class EmulatorWarpgroupMma : public EmulatorTest {
protected:
  /// countMismatches launches with fdemu's counters into `counters`.
  bool counted = false;
  FdemuCounters counters{};

  /// Runs `c` and returns the elements of D off the reference.
  unsigned countMismatches(const Config &c) {
    unsigned k = 16 * c.steps, threads = 128 * c.warpgroups;
    std::vector<uint16_t> a(64 * k), b(c.n * k);
    for (uint16_t &v : a)
      v = randomMultiplicand(random, c.bfloat);
    for (uint16_t &v : b)
      v = randomMultiplicand(random, c.bfloat);
    // The shared image: A at 0, B at 32 KB, NaN where no layout points.
    constexpr uint32_t kBStart = 32 * 1024, kImageBytes = 96 * 1024;
    std::vector<uint16_t> image(kImageBytes / 2, 0xFFFF);
    auto place = [&](const Operand &op, uint32_t start, unsigned rows,
                     const std::vector<uint16_t> &values) {
      for (unsigned row = 0; row < rows; ++row)
        for (unsigned i = 0; i < k; ++i) {
          uint32_t at = start + op.layout(row, i);
          EXPECT_LT(at, kImageBytes);
          image[at / 2] = values[row * k + i];
        }
    };
    Operand opA = makeOperand(c.a == Source::Registers ? Source::KMajor : c.a,
                              c.swizzleA, 64, k);
    Operand opB = makeOperand(c.b, c.swizzleB, c.n, k);
    if (c.a != Source::Registers)
      place(opA, 0, 64, a);
    place(opB, kBStart, c.n, b);
    // A's fragments: thread 32 r + 4 g + t holds rows 16 r + g (+8) of
    // columns 2t, 2t + 1 (+8), as mma.m16n8k16's A.
    std::vector<uint32_t> fragments(threads * 4);
    for (unsigned thread = 0; thread < threads; ++thread) {
      unsigned r = thread / 32 % 4, g = thread % 32 / 4, t = thread % 4;
      for (unsigned i = 0; i < 4; ++i)
        for (unsigned half = 0; half < 2; ++half)
          fragments[thread * 4 + i] |=
              uint32_t(a[(16 * r + g + 8 * (i % 2)) * k + 2 * t + half +
                         8 * (i / 2)])
              << (16 * half);
    }
    std::uniform_real_distribution<float> uniform(-8, 8);
    std::vector<float> accumulators(threads * c.n / 2);
    for (float &v : accumulators)
      v = uniform(random);

    CUfunction kernel = getKernel(kernelSource(c), "wgmma_case");
    if (!kernel)
      return ~0u;
    EXPECT_EQ(driver->cuFuncSetAttribute(kernel, kMaxDynamicSharedAttribute,
                                         kImageBytes),
              kSuccess);
    CUdeviceptr out = allocate(accumulators.size() * 4);
    KernelArguments arguments(
        uploadBytes(image.data(), kImageBytes), kImageBytes, descriptor(0, opA),
        descriptor(kBStart, opB), upload(fragments), upload(accumulators), out,
        uint32_t(c.accumulate));
    if (counted)
      counters = launchCounted(kernel, {}, {threads}, std::move(arguments),
                               kImageBytes);
    else
      EXPECT_TRUE(launchSucceeds(kernel, {}, {threads}, std::move(arguments),
                                 kImageBytes))
          << describe(c);
    std::vector<float> d = download<float>(out, accumulators.size());
    unsigned mismatches = 0;
    for (unsigned thread = 0; thread < threads; ++thread) {
      unsigned r = thread / 32 % 4, g = thread % 32 / 4, t = thread % 4;
      for (unsigned i = 0; i < c.n / 2; ++i) {
        // D: rows 16 r + g (+8 for i % 4 >= 2), columns 8 (i / 4) + 2t +
        // i % 2.
        unsigned row = 16 * r + g + 8 * (i % 4 / 2);
        unsigned column = 8 * (i / 4) + 2 * t + i % 2;
        double exact = c.accumulate ? accumulators[thread * c.n / 2 + i] : 0;
        double magnitude = std::fabs(exact);
        for (unsigned j = 0; j < k; ++j) {
          double product = multiplicandValue(a[row * k + j], c.bfloat) *
                           multiplicandValue(b[column * k + j], c.bfloat) *
                           (c.negateA ? -1 : 1) * (c.negateB ? -1 : 1);
          exact += product;
          magnitude += std::fabs(product);
        }
        double got = d[thread * c.n / 2 + i];
        if (!(std::fabs(got - exact) <= std::ldexp(magnitude, -17)))
          ++mismatches;
      }
    }
    return mismatches;
  }
};

TEST_F(EmulatorWarpgroupMma, EveryOperandLayout) {
  for (Source a : {Source::Registers, Source::KMajor, Source::MNMajor})
    for (Source b : {Source::KMajor, Source::MNMajor})
      for (unsigned swizzle : {0u, 32u, 64u, 128u}) {
        Config c;
        c.a = a;
        c.b = b;
        c.swizzleA = swizzle;
        c.swizzleB = 128 - swizzle % 128; // every pairing, B's apart
        if (c.swizzleB == 96)
          c.swizzleB = 0;
        c.bfloat = swizzle % 64 == 0;
        EXPECT_EQ(countMismatches(c), 0u) << describe(c);
      }
}

TEST_F(EmulatorWarpgroupMma, EveryWidthScaleAndSign) {
  for (unsigned n : {8u, 16u, 24u, 128u, 256u})
    for (unsigned variant = 0; variant < 3; ++variant) {
      Config c;
      c.n = n;
      c.swizzleA = 128;
      c.swizzleB = n % 64 == 0 ? 64 : 0;
      c.b = variant == 1 ? Source::MNMajor : Source::KMajor;
      c.accumulate = variant != 2;
      c.negateA = variant == 1;
      c.negateB = variant == 2;
      c.bfloat = variant != 0;
      EXPECT_EQ(countMismatches(c), 0u) << describe(c);
    }
}

TEST_F(EmulatorWarpgroupMma, TwoWarpgroupsTakeRowsByWarpInGroup) {
  Config c;
  c.warpgroups = 2;
  c.a = Source::Registers;
  EXPECT_EQ(countMismatches(c), 0u) << describe(c);
  c.a = Source::MNMajor;
  c.swizzleA = 64;
  EXPECT_EQ(countMismatches(c), 0u) << describe(c);
}

TEST_F(EmulatorWarpgroupMma, ChainedStepsAdvanceInsideTheSwizzleAtom) {
  Config c;
  c.steps = 4;
  c.n = 64;
  c.swizzleA = c.swizzleB = 128;
  EXPECT_EQ(countMismatches(c), 0u) << describe(c);
  c.accumulate = false;
  EXPECT_EQ(countMismatches(c), 0u) << describe(c);
}

TEST_F(EmulatorWarpgroupMma, CountsAndLatencyForTheModel) {
  // One warpgroup, m64n64k16 chained 2 and 4 times: each warp counts each
  // as one tensor instruction of 64 / 8 m16n8k16 steps, and each chained
  // step waits for the one before's N / 2 cycles of multiply-adds.
  Config c;
  c.n = 64;
  c.swizzleA = c.swizzleB = 128;
  counted = true;
  c.steps = 2;
  ASSERT_EQ(countMismatches(c), 0u) << describe(c);
  FdemuCounters two = counters;
  c.steps = 4;
  ASSERT_EQ(countMismatches(c), 0u) << describe(c);
  FdemuCounters four = counters;
  EXPECT_EQ(four.total.warpgroupMmas, 16u);
  EXPECT_EQ(four.total.warpgroupMmaSteps, 16u * 64 / 8);
  EXPECT_EQ(four.total.warpInstructions[FDEMU_NUM_CLASSES - 1], 16u);
  EXPECT_EQ(four.totalLatency.latencyCycles - two.totalLatency.latencyCycles,
            2u * 64 / 2);
  // Shared memory: per wgmma, 4 wavefronts of A per warp and B's 64 rows of
  // 32 bytes once (16 wavefronts).
  EXPECT_EQ(four.total.sharedWavefronts - two.total.sharedWavefronts,
            2u * (4 * 4 + 16));
}

} // namespace
