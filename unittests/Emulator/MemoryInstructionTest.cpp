//===- MemoryInstructionTest.cpp - fdemu's loads, stores and state spaces -===//
//
// Hand-written kernels for each way PTX reaches memory: global vectors
// (with `_` sinks and immediate elements), non-coherent, cache-hinted and
// byte loads, every kind of .param, static
// shared memory at module and kernel scope, dynamic (`.extern`) shared
// memory beside static, generic addresses of shared and global memory
// (cvta and back), and per-thread local memory, directly and generically.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

using namespace flashdecode::emutest;

namespace {

class EmulatorMemory : public EmulatorTest {
protected:
  std::vector<uint32_t> randomWords(size_t count) {
    std::vector<uint32_t> words(count);
    for (uint32_t &word : words)
      word = static_cast<uint32_t>(random());
    return words;
  }
};

TEST_F(EmulatorMemory, GlobalVectors) {
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry vectors(.param .u64 in4, .param .u64 out4, .param .u64 in2,
                        .param .u64 out2, .param .u64 outSink,
                        .param .u64 outWide)
{
  .reg .b32 %t, %x, %y, %z, %w;
  .reg .b64 %offset, %in4, %out4, %in2, %out2, %outSink, %outWide, %a, %b;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 16;
  ld.param.u64 %in4, [in4];
  cvta.to.global.u64 %in4, %in4;
  add.s64 %in4, %in4, %offset;
  ld.param.u64 %out4, [out4];
  cvta.to.global.u64 %out4, %out4;
  add.s64 %out4, %out4, %offset;
  ld.param.u64 %in2, [in2];
  cvta.to.global.u64 %in2, %in2;
  add.s64 %in2, %in2, %offset;
  ld.param.u64 %out2, [out2];
  cvta.to.global.u64 %out2, %out2;
  add.s64 %out2, %out2, %offset;
  ld.param.u64 %outSink, [outSink];
  cvta.to.global.u64 %outSink, %outSink;
  add.s64 %outSink, %outSink, %offset;
  ld.param.u64 %outWide, [outWide];
  cvta.to.global.u64 %outWide, %outWide;
  add.s64 %outWide, %outWide, %offset;
  ld.global.v4.f32 {%x, %y, %z, %w}, [%in4];
  st.global.v4.f32 [%out4], {%w, %z, %y, %x};
  ld.global.nc.v2.u64 {%a, %b}, [%in2];
  st.global.v2.u64 [%out2], {%b, %a};
  ld.global.v4.u32 {_, %y, _, %w}, [%in4];
  st.global.v2.u32 [%outSink], {%w, 7};
  st.global.v2.u32 [%outSink+8], {-2, %y};
  // Immediate elements past the first 64 bits (LLVM writes known zeros so).
  st.global.v4.b32 [%outWide], {%w, 0, %y, -3};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "vectors");
  constexpr unsigned kThreads = 64;
  std::vector<uint32_t> in4 = randomWords(kThreads * 4);
  std::vector<uint64_t> in2(kThreads * 2);
  for (uint64_t &value : in2)
    value = random();
  CUdeviceptr out4 = allocate(in4.size() * 4), out2 = allocate(in2.size() * 8),
              outSink = allocate(kThreads * 16),
              outWide = allocate(kThreads * 16);
  ASSERT_TRUE(launchSucceeds(
      kernel, {1}, {kThreads},
      KernelArguments(upload(in4), out4, upload(in2), out2, outSink, outWide)));
  std::vector<uint32_t> got4 = download<uint32_t>(out4, in4.size());
  std::vector<uint64_t> got2 = download<uint64_t>(out2, in2.size());
  std::vector<uint32_t> gotSink = download<uint32_t>(outSink, kThreads * 4);
  std::vector<uint32_t> gotWide = download<uint32_t>(outWide, kThreads * 4);
  for (unsigned t = 0; t < kThreads; ++t) {
    for (unsigned i = 0; i < 4; ++i)
      EXPECT_EQ(got4[4 * t + i], in4[4 * t + 3 - i]) << "thread " << t;
    EXPECT_EQ(got2[2 * t], in2[2 * t + 1]) << "thread " << t;
    EXPECT_EQ(got2[2 * t + 1], in2[2 * t]) << "thread " << t;
    EXPECT_EQ(gotSink[4 * t], in4[4 * t + 3]) << "thread " << t;
    EXPECT_EQ(gotSink[4 * t + 1], 7u) << "thread " << t;
    EXPECT_EQ(gotSink[4 * t + 2], uint32_t(-2)) << "thread " << t;
    EXPECT_EQ(gotSink[4 * t + 3], in4[4 * t + 1]) << "thread " << t;
    EXPECT_EQ(gotWide[4 * t], in4[4 * t + 3]) << "thread " << t;
    EXPECT_EQ(gotWide[4 * t + 1], 0u) << "thread " << t;
    EXPECT_EQ(gotWide[4 * t + 2], in4[4 * t + 1]) << "thread " << t;
    EXPECT_EQ(gotWide[4 * t + 3], uint32_t(-3)) << "thread " << t;
  }
}

TEST_F(EmulatorMemory, GlobalLoadForms) {
  // The loads an fp8 cache's decoding uses: non-coherent and cache-hinted
  // vectors of 32-bit words, and single bytes zero- or sign-extended into
  // 16- and 32-bit registers.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry loads(.param .u64 in, .param .u64 out)
{
  .reg .b16 %byte16, %half;
  .reg .b32 %t, %x, %y, %z, %w, %byte, %signed, %wide, %halfWide;
  .reg .b64 %offset, %in, %out;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 16;
  ld.param.u64 %in, [in];
  cvta.to.global.u64 %in, %in;
  add.s64 %in, %in, %offset;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 64;
  add.s64 %out, %out, %offset;
  ld.global.nc.v4.u32 {%x, %y, %z, %w}, [%in];
  st.global.v4.u32 [%out], {%x, %y, %z, %w};
  ld.global.v2.u32 {%x, %y}, [%in+8];
  ld.global.v2.b32 {%z, %w}, [%in];
  st.global.v4.u32 [%out+16], {%x, %y, %z, %w};
  ld.global.nc.L1::no_allocate.v2.b32 {%x, %y}, [%in+8];
  ld.global.nc.v2.u32 {%z, %w}, [%in];
  st.global.v4.u32 [%out+32], {%x, %y, %z, %w};
  ld.global.u8 %byte16, [%in+3];
  ld.global.nc.u8 %byte, [%in+5];
  ld.global.s8 %signed, [%in+7];
  ld.global.nc.b16 %half, [%in+10];
  cvt.u32.u16 %wide, %byte16;
  cvt.u32.u16 %halfWide, %half;
  st.global.v4.u32 [%out+48], {%wide, %byte, %signed, %halfWide};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "loads");
  constexpr unsigned kThreads = 64;
  std::vector<uint32_t> in = randomWords(kThreads * 4);
  for (unsigned t = 0; t < kThreads; t += 2)
    in[4 * t + 1] |= 0x80808080; // negative bytes for the sign extension
  CUdeviceptr out = allocate(kThreads * 64);
  ASSERT_TRUE(launchSucceeds(kernel, {1}, {kThreads},
                             KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, kThreads * 16);
  for (unsigned t = 0; t < kThreads; ++t) {
    const uint32_t *words = &in[4 * t];
    auto byte = [&](unsigned i) {
      return (words[i / 4] >> (8 * (i % 4))) & 0xFF;
    };
    std::vector<uint32_t> expected = {
        words[0],      words[1], words[2],
        words[3],      words[2], words[3],
        words[0],      words[1], words[2],
        words[3],      words[0], words[1],
        byte(3),       byte(5),  uint32_t(int32_t(int8_t(byte(7)))),
        words[2] >> 16};
    EXPECT_EQ(std::vector<uint32_t>(&got[16 * t], &got[16 * t + 16]), expected)
        << "thread " << t;
  }
}

TEST_F(EmulatorMemory, Parameters) {
  // Each parameter at its natural alignment; the blob at 8.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry params(.param .u64 out, .param .u8 byte, .param .u16 half,
                       .param .u32 word, .param .f32 single,
                       .param .u64 dword, .param .f64 wide,
                       .param .align 8 .b8 blob[16], .param .s8 signedByte)
{
  .reg .b16 %h<3>;
  .reg .b32 %r<8>;
  .reg .b64 %out, %d<3>;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  ld.param.u8 %h1, [byte];
  cvt.u32.u16 %r1, %h1;
  st.global.u32 [%out], %r1;
  ld.param.u16 %h2, [half];
  cvt.u32.u16 %r2, %h2;
  st.global.u32 [%out+4], %r2;
  ld.param.u32 %r3, [word];
  st.global.u32 [%out+8], %r3;
  ld.param.f32 %r4, [single];
  st.global.f32 [%out+12], %r4;
  ld.param.u64 %d1, [dword];
  st.global.u64 [%out+16], %d1;
  ld.param.f64 %d2, [wide];
  st.global.f64 [%out+24], %d2;
  ld.param.u32 %r5, [blob];
  st.global.u32 [%out+32], %r5;
  ld.param.u32 %r5, [blob+4];
  st.global.u32 [%out+36], %r5;
  ld.param.v2.u32 {%r6, %r7}, [blob+8];
  st.global.v2.u32 [%out+40], {%r6, %r7};
  ld.param.s8 %h1, [signedByte];
  cvt.s32.s16 %r1, %h1;
  st.global.u32 [%out+48], %r1;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "params");
  struct Blob {
    uint32_t words[4];
  };
  Blob blob = {{0x11111111, 0x22222222, 0x33333333, 0x44444444}};
  CUdeviceptr out = allocate(52);
  ASSERT_TRUE(launchSucceeds(
      kernel, {1}, {1},
      KernelArguments(
          out, uint8_t(0xAB), uint16_t(0xBEEF), uint32_t(0xDEADBEEF), 1.5f,
          uint64_t(0x0123456789ABCDEFull), -2.25, blob, int8_t(-5))));
  std::vector<uint32_t> got = download<uint32_t>(out, 13);
  EXPECT_EQ(got[0], 0xABu);
  EXPECT_EQ(got[1], 0xBEEFu);
  EXPECT_EQ(got[2], 0xDEADBEEFu);
  float single;
  std::memcpy(&single, &got[3], 4);
  EXPECT_EQ(single, 1.5f);
  EXPECT_EQ(uint64_t(got[5]) << 32 | got[4], 0x0123456789ABCDEFull);
  double wide;
  std::memcpy(&wide, &got[6], 8);
  EXPECT_EQ(wide, -2.25);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(got[8 + i], blob.words[i]) << "blob word " << i;
  EXPECT_EQ(got[12], uint32_t(-5)) << "ld.param.s8 sign-extends";
}

TEST_F(EmulatorMemory, StaticShared) {
  // 4 warps exchange values through a module-scope and a kernel-scope
  // variable across a barrier.
  std::string ptx = std::string(kPtxHeader) + R"(
.shared .align 4 .b8 moduleScope[512];

.visible .entry staticShared(.param .u64 out)
{
  .shared .align 8 .b8 tile[1024];
  .reg .b32 %t, %next, %previous, %v, %base, %address;
  .reg .b64 %square, %read, %out, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %base, moduleScope;
  mad.lo.u32 %address, %t, 4, %base;
  mul.lo.u32 %v, %t, 3;
  st.shared.u32 [%address], %v;
  mov.u32 %base, tile;
  mad.lo.u32 %address, %t, 8, %base;
  mul.wide.u32 %square, %t, %t;
  st.shared.u64 [%address], %square;
  bar.sync 0;
  add.u32 %next, %t, 1;
  and.b32 %next, %next, 127;
  mov.u32 %base, moduleScope;
  mad.lo.u32 %address, %next, 4, %base;
  ld.shared.u32 %v, [%address];
  add.u32 %previous, %t, 127;
  and.b32 %previous, %previous, 127;
  mov.u32 %base, tile;
  mad.lo.u32 %address, %previous, 8, %base;
  ld.shared.u64 %read, [%address];
  ld.shared.u32 %next, [moduleScope+4];
  add.u32 %v, %v, %next;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 16;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %v;
  st.global.u64 [%out+8], %read;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "staticShared");
  CUdeviceptr out = allocate(128 * 16);
  ASSERT_TRUE(launchSucceeds(kernel, {2}, {128}, KernelArguments(out)));
  std::vector<uint64_t> got = download<uint64_t>(out, 256);
  for (uint64_t t = 0; t < 128; ++t) {
    EXPECT_EQ(uint32_t(got[2 * t]), (t + 1) % 128 * 3 + 3) << "thread " << t;
    uint64_t previous = (t + 127) % 128;
    EXPECT_EQ(got[2 * t + 1], previous * previous) << "thread " << t;
  }
}

TEST_F(EmulatorMemory, DynamicShared) {
  // The dynamic bytes follow the static variable; writing all of both and
  // reading them back shows they do not overlap.
  std::string ptx = std::string(kPtxHeader) + R"(
.extern .shared .align 16 .b8 dynamicBytes[];

.visible .entry dynamicShared(.param .u64 out)
{
  .shared .align 4 .b32 fixed[32];
  .reg .pred %first;
  .reg .b32 %t, %lane, %v, %address, %base;
  .reg .b64 %out, %offset;
  mov.u32 %t, %tid.x;
  and.b32 %lane, %t, 31;
  setp.lt.u32 %first, %t, 32;
  mul.lo.u32 %v, %t, 7;
  mov.u32 %base, fixed;
  mad.lo.u32 %address, %lane, 4, %base;
  @%first st.shared.u32 [%address], %v;
  add.u32 %v, %t, 1000;
  mov.u32 %base, dynamicBytes;
  mad.lo.u32 %address, %t, 4, %base;
  st.shared.u32 [%address], %v;
  bar.sync 0;
  sub.u32 %v, 255, %t;
  mad.lo.u32 %address, %v, 4, %base;
  ld.shared.u32 %v, [%address];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 8;
  add.s64 %out, %out, %offset;
  st.global.u32 [%out], %v;
  mov.u32 %base, fixed;
  mad.lo.u32 %address, %lane, 4, %base;
  ld.shared.u32 %v, [%address];
  st.global.u32 [%out+4], %v;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "dynamicShared");
  CUdeviceptr out = allocate(256 * 8);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {256}, KernelArguments(out), 256 * 4));
  std::vector<uint32_t> got = download<uint32_t>(out, 512);
  for (uint32_t t = 0; t < 256; ++t) {
    EXPECT_EQ(got[2 * t], 255 - t + 1000) << "thread " << t;
    EXPECT_EQ(got[2 * t + 1], t % 32 * 7) << "thread " << t;
  }
}

TEST_F(EmulatorMemory, GenericAddresses) {
  // Global memory through plain generic pointers; shared memory through
  // cvta.shared, generic ld/st and cvta.to.shared back.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry generic(.param .u64 in, .param .u64 out)
{
  .shared .align 4 .b32 buffer[64];
  .reg .b32 %t, %next, %v, %w;
  .reg .b64 %in, %out, %shared, %generic, %mine, %neighbour, %back, %offset;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %in, [in];
  add.s64 %in, %in, %offset;
  ld.u32 %v, [%in];
  mov.u64 %shared, buffer;
  cvta.shared.u64 %generic, %shared;
  add.s64 %mine, %generic, %offset;
  st.u32 [%mine], %v;
  bar.sync 0;
  add.u32 %next, %t, 1;
  and.b32 %next, %next, 63;
  mul.wide.u32 %offset, %next, 4;
  add.s64 %neighbour, %generic, %offset;
  cvta.to.shared.u64 %back, %neighbour;
  ld.shared.u32 %v, [%back];
  ld.u32 %w, [%neighbour];
  add.u32 %v, %v, %w;
  ld.param.u64 %out, [out];
  mul.wide.u32 %offset, %t, 4;
  add.s64 %out, %out, %offset;
  st.u32 [%out], %v;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "generic");
  std::vector<uint32_t> in = randomWords(64);
  CUdeviceptr out = allocate(64 * 4);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {64}, KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, 64);
  for (uint32_t t = 0; t < 64; ++t)
    EXPECT_EQ(got[t], 2 * in[(t + 1) % 64]) << "thread " << t;
}

TEST_F(EmulatorMemory, LocalMemory) {
  // Each thread fills its own 16-word array (a loop with a register index)
  // and reads two words back, one generically (cvta.local) and one with
  // ld.local: threads sharing a warp must not see each other's arrays.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry localArray(.param .u64 in, .param .u64 out)
{
  .local .align 4 .b8 depot[64];
  .reg .pred %more;
  .reg .b32 %t, %seed, %k, %next, %v, %i, %j, %a, %b;
  .reg .b64 %SPL, %SP, %in, %out, %offset, %p;
  mov.u64 %SPL, depot;
  cvta.local.u64 %SP, %SPL;
  mov.u32 %t, %tid.x;
  ld.param.u64 %in, [in];
  cvta.to.global.u64 %in, %in;
  mul.wide.u32 %offset, %t, 4;
  add.s64 %in, %in, %offset;
  ld.global.u32 %seed, [%in];
  mov.u32 %k, 0;
FILL:
  add.u32 %next, %k, 1;
  mul.lo.u32 %v, %seed, %next;
  mul.wide.u32 %offset, %k, 4;
  add.s64 %p, %SPL, %offset;
  st.local.u32 [%p], %v;
  mov.u32 %k, %next;
  setp.lt.u32 %more, %k, 16;
  @%more bra FILL;
  rem.u32 %i, %seed, 16;
  mul.wide.u32 %offset, %i, 4;
  add.s64 %p, %SP, %offset;
  ld.u32 %a, [%p];
  sub.u32 %j, 15, %i;
  mul.wide.u32 %offset, %j, 4;
  add.s64 %p, %SPL, %offset;
  ld.local.u32 %b, [%p];
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %t, 8;
  add.s64 %out, %out, %offset;
  st.global.v2.u32 [%out], {%a, %b};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "localArray");
  std::vector<uint32_t> seeds = randomWords(96);
  CUdeviceptr out = allocate(96 * 8);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {96}, KernelArguments(upload(seeds), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, 192);
  for (uint32_t t = 0; t < 96; ++t) {
    uint32_t i = seeds[t] % 16;
    EXPECT_EQ(got[2 * t], seeds[t] * (i + 1)) << "thread " << t;
    EXPECT_EQ(got[2 * t + 1], seeds[t] * (16 - i)) << "thread " << t;
  }
}

} // namespace
