//===- ControlFlowTest.cpp - fdemu's SIMT scheduling, barriers, indices ---===//
//
// Divergence (nested branches; loops that lanes leave at different
// iterations, then reconverge at a full-warp shuffle), independent thread
// scheduling (a branch body placed after the shfl.sync its lanes rejoin:
// the other lanes must wait at the shuffle), bar.sync across four warps
// reached through different paths, and the thread and CTA indices of a
// multi-CTA grid of 3-D blocks with a partial last warp.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

using namespace flashdecode::emutest;

namespace {

class EmulatorControlFlow : public EmulatorTest {
protected:
  std::vector<uint32_t> randomWords(size_t count, uint32_t limit) {
    std::vector<uint32_t> words(count);
    for (uint32_t &word : words)
      word = static_cast<uint32_t>(random() % limit);
    return words;
  }
};

/// Loads in[tid] into %v; %offset is tid * 4.
constexpr const char *kLoadValue = R"(
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %pointer, [in];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %v, [%pointer];
)";

/// Points %out at out[tid] of `bytes`-byte elements.
std::string outputAddress(int bytes) {
  return "  mul.wide.u32 %offset, %t, " + std::to_string(bytes) +
         ";\n"
         "  ld.param.u64 %out, [out];\n"
         "  cvta.to.global.u64 %out, %out;\n"
         "  add.s64 %out, %out, %offset;\n";
}

TEST_F(EmulatorControlFlow, NestedBranches) {
  std::string ptx = std::string(kPtxHeader) +
                    R"(
.visible .entry nested(.param .u64 in, .param .u64 out)
{
  .reg .pred %p;
  .reg .b32 %t, %v, %bit, %r;
  .reg .b64 %pointer, %offset, %out;
)" + kLoadValue + R"(
  and.b32 %bit, %v, 1;
  setp.ne.u32 %p, %bit, 0;
  @!%p bra EVEN;
  and.b32 %bit, %v, 2;
  setp.ne.u32 %p, %bit, 0;
  @%p bra ODD_TWO;
  add.u32 %r, %v, 5;
  bra DONE;
ODD_TWO:
  mul.lo.u32 %r, %v, 3;
  bra DONE;
EVEN:
  and.b32 %bit, %v, 4;
  setp.eq.u32 %p, %bit, 0;
  @%p bra EVEN_PLAIN;
  sub.u32 %r, %v, 7;
  bra DONE;
EVEN_PLAIN:
  xor.b32 %r, %v, 255;
DONE:
)" + outputAddress(4) +
                    R"(
  st.global.u32 [%out], %r;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "nested");
  std::vector<uint32_t> in = randomWords(96, 1u << 20);
  CUdeviceptr out = allocate(in.size() * 4);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {96}, KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, in.size());
  for (size_t t = 0; t < in.size(); ++t) {
    uint32_t v = in[t];
    uint32_t expected =
        v & 1 ? (v & 2 ? v * 3 : v + 5) : (v & 4 ? v - 7 : v ^ 255);
    EXPECT_EQ(got[t], expected) << "thread " << t << ", value " << v;
  }
}

/// The butterfly sum of %total over the warp (full mask), into %total.
constexpr const char *kWarpSum = R"(
  shfl.sync.bfly.b32 %r, %total, 16, 31, -1;
  add.u32 %total, %total, %r;
  shfl.sync.bfly.b32 %r, %total, 8, 31, -1;
  add.u32 %total, %total, %r;
  shfl.sync.bfly.b32 %r, %total, 4, 31, -1;
  add.u32 %total, %total, %r;
  shfl.sync.bfly.b32 %r, %total, 2, 31, -1;
  add.u32 %total, %total, %r;
  shfl.sync.bfly.b32 %r, %total, 1, 31, -1;
  add.u32 %total, %total, %r;
)";

TEST_F(EmulatorControlFlow, LoopsLeftAtDifferentIterations) {
  // Lane t sums i * v for i < limit[t], leaving early once the sum passes
  // 5000; then the warp reconverges at a full-mask butterfly reduction.
  std::string ptx = std::string(kPtxHeader) +
                    R"(
.visible .entry loops(.param .u64 in, .param .u64 limits, .param .u64 out)
{
  .reg .pred %p;
  .reg .b32 %t, %v, %limit, %i, %sum, %total, %r;
  .reg .b64 %pointer, %offset, %out;
)" + kLoadValue + R"(
  ld.param.u64 %pointer, [limits];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %limit, [%pointer];
  mov.u32 %i, 0;
  mov.u32 %sum, 0;
LOOP:
  setp.ge.u32 %p, %i, %limit;
  @%p bra AFTER;
  mad.lo.u32 %sum, %i, %v, %sum;
  setp.gt.u32 %p, %sum, 5000;
  @%p bra AFTER;
  add.u32 %i, %i, 1;
  bra LOOP;
AFTER:
  mov.u32 %total, %sum;
)" + kWarpSum + outputAddress(8) +
                    R"(
  st.global.v2.u32 [%out], {%sum, %total};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "loops");
  constexpr unsigned kThreads = 64;
  std::vector<uint32_t> in = randomWords(kThreads, 200);
  std::vector<uint32_t> limits = randomWords(kThreads, 40);
  CUdeviceptr out = allocate(kThreads * 8);
  ASSERT_TRUE(launchSucceeds(kernel, {1}, {kThreads},
                             KernelArguments(upload(in), upload(limits), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, kThreads * 2);
  std::vector<uint32_t> sums(kThreads);
  for (unsigned t = 0; t < kThreads; ++t)
    for (uint32_t i = 0; i < limits[t]; ++i) {
      sums[t] += i * in[t];
      if (sums[t] > 5000)
        break;
    }
  for (unsigned t = 0; t < kThreads; ++t) {
    uint32_t total = 0;
    for (unsigned lane = 0; lane < 32; ++lane)
      total += sums[t / 32 * 32 + lane];
    EXPECT_EQ(got[2 * t], sums[t]) << "thread " << t;
    EXPECT_EQ(got[2 * t + 1], total) << "thread " << t;
  }
}

TEST_F(EmulatorControlFlow, BranchBodyAfterTheShuffleItRejoins) {
  // Odd lanes branch forward to a body placed after the shuffle and jump
  // back to it; even lanes reach the shuffle first and must wait there for
  // the odd lanes' new values (sm_70+ independent thread scheduling).
  std::string ptx = std::string(kPtxHeader) +
                    R"(
.visible .entry rejoin(.param .u64 in, .param .u64 out)
{
  .reg .pred %odd;
  .reg .b32 %t, %v, %bit, %r;
  .reg .b64 %pointer, %offset, %out;
)" + kLoadValue + R"(
  and.b32 %bit, %t, 1;
  setp.ne.u32 %odd, %bit, 0;
  @%odd bra BODY;
JOIN:
  shfl.sync.bfly.b32 %r, %v, 1, 31, -1;
)" + outputAddress(4) +
                    R"(
  st.global.u32 [%out], %r;
  ret;
BODY:
  mul.lo.u32 %v, %v, 3;
  add.u32 %v, %v, 1;
  bra JOIN;
}
)";
  CUfunction kernel = getKernel(ptx, "rejoin");
  std::vector<uint32_t> in = randomWords(64, 1u << 30);
  CUdeviceptr out = allocate(in.size() * 4);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {64}, KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, in.size());
  for (size_t t = 0; t < in.size(); ++t) {
    size_t partner = t ^ 1;
    uint32_t value = partner % 2 ? in[partner] * 3 + 1 : in[partner];
    EXPECT_EQ(got[t], value) << "thread " << t;
  }
}

TEST_F(EmulatorControlFlow, BarrierAcrossFourWarps) {
  // Two exchange rounds through shared memory; warps 0 and 1 reach the
  // first barrier through a divergent loop, warps 2 and 3 straight.
  std::string ptx = std::string(kPtxHeader) +
                    R"(
.visible .entry exchange(.param .u64 in, .param .u64 out)
{
  .shared .align 4 .b32 first[128];
  .shared .align 4 .b32 second[128];
  .reg .pred %p;
  .reg .b32 %t, %v, %i, %index, %a, %b, %base, %address;
  .reg .b64 %pointer, %offset, %out;
)" + kLoadValue + R"(
  setp.ge.u32 %p, %t, 64;
  @%p bra STORE;
  and.b32 %i, %t, 7;
SPIN:
  add.u32 %v, %v, %i;
  sub.u32 %i, %i, 1;
  setp.ne.u32 %p, %i, 0xffffffff;
  @%p bra SPIN;
STORE:
  mov.u32 %base, first;
  mad.lo.u32 %address, %t, 4, %base;
  st.shared.u32 [%address], %v;
  bar.sync 0;
  sub.u32 %index, 127, %t;
  mad.lo.u32 %address, %index, 4, %base;
  ld.shared.u32 %a, [%address];
  add.u32 %index, %t, 32;
  and.b32 %index, %index, 127;
  mad.lo.u32 %address, %index, 4, %base;
  ld.shared.u32 %b, [%address];
  add.u32 %a, %a, %b;
  mov.u32 %base, second;
  mad.lo.u32 %address, %t, 4, %base;
  st.shared.u32 [%address], %a;
  barrier.sync.aligned 0;
  add.u32 %index, %t, 64;
  and.b32 %index, %index, 127;
  mad.lo.u32 %address, %index, 4, %base;
  ld.shared.u32 %a, [%address];
)" + outputAddress(4) +
                    R"(
  st.global.u32 [%out], %a;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "exchange");
  std::vector<uint32_t> in = randomWords(128, 1u << 30);
  CUdeviceptr out = allocate(in.size() * 4);
  ASSERT_TRUE(
      launchSucceeds(kernel, {2}, {128}, KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, in.size());
  std::vector<uint32_t> first(128), second(128);
  for (uint32_t t = 0; t < 128; ++t) {
    first[t] = in[t];
    if (t < 64)
      for (uint32_t i = t & 7; i != 0xffffffffu; --i)
        first[t] += i;
  }
  for (uint32_t t = 0; t < 128; ++t)
    second[t] = first[127 - t] + first[(t + 32) % 128];
  for (uint32_t t = 0; t < 128; ++t)
    EXPECT_EQ(got[t], second[(t + 64) % 128]) << "thread " << t;
}

TEST_F(EmulatorControlFlow, GridOf3DBlocks) {
  // Every thread writes its indices; 60 threads per block leave the second
  // warp short.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry indices(.param .u64 out)
{
  .reg .b32 %r<16>, %linear, %block, %threads;
  .reg .b64 %out, %offset;
  mov.u32 %r0, %tid.x;
  mov.u32 %r1, %tid.y;
  mov.u32 %r2, %tid.z;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %ntid.y;
  mov.u32 %r5, %ntid.z;
  mov.u32 %r6, %ctaid.x;
  mov.u32 %r7, %ctaid.y;
  mov.u32 %r8, %ctaid.z;
  mov.u32 %r9, %nctaid.x;
  mov.u32 %r10, %nctaid.y;
  mov.u32 %r11, %nctaid.z;
  mov.u32 %r12, %laneid;
  mov.u32 %r13, 0;
  mov.u32 %r14, 0;
  mov.u32 %r15, 0;
  mad.lo.u32 %block, %r8, %r10, %r7;
  mad.lo.u32 %block, %block, %r9, %r6;
  mul.lo.u32 %threads, %r3, %r4;
  mul.lo.u32 %threads, %threads, %r5;
  mad.lo.u32 %linear, %r2, %r4, %r1;
  mad.lo.u32 %linear, %linear, %r3, %r0;
  mad.lo.u32 %linear, %block, %threads, %linear;
  ld.param.u64 %out, [out];
  cvta.to.global.u64 %out, %out;
  mul.wide.u32 %offset, %linear, 64;
  add.s64 %out, %out, %offset;
  st.global.v4.u32 [%out], {%r0, %r1, %r2, %r3};
  st.global.v4.u32 [%out+16], {%r4, %r5, %r6, %r7};
  st.global.v4.u32 [%out+32], {%r8, %r9, %r10, %r11};
  st.global.v4.u32 [%out+48], {%r12, %r13, %r14, %r15};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "indices");
  constexpr unsigned kGrid[3] = {3, 2, 2}, kBlock[3] = {4, 3, 5};
  constexpr unsigned kThreads = 3 * 2 * 2 * 4 * 3 * 5;
  CUdeviceptr out = allocate(kThreads * 64);
  ASSERT_TRUE(launchSucceeds(kernel, {kGrid[0], kGrid[1], kGrid[2]},
                             {kBlock[0], kBlock[1], kBlock[2]},
                             KernelArguments(out)));
  std::vector<uint32_t> got = download<uint32_t>(out, kThreads * 16);
  unsigned linear = 0;
  for (unsigned bz = 0; bz < kGrid[2]; ++bz)
    for (unsigned by = 0; by < kGrid[1]; ++by)
      for (unsigned bx = 0; bx < kGrid[0]; ++bx)
        for (unsigned z = 0; z < kBlock[2]; ++z)
          for (unsigned y = 0; y < kBlock[1]; ++y)
            for (unsigned x = 0; x < kBlock[0]; ++x, ++linear) {
              unsigned inBlock = (z * kBlock[1] + y) * kBlock[0] + x;
              uint32_t expected[13] = {
                  x,  y,  z,        kBlock[0], kBlock[1], kBlock[2],   bx,
                  by, bz, kGrid[0], kGrid[1],  kGrid[2],  inBlock % 32};
              for (int k = 0; k < 13; ++k)
                EXPECT_EQ(got[linear * 16 + k], expected[k])
                    << "block (" << bx << ", " << by << ", " << bz
                    << "), thread (" << x << ", " << y << ", " << z
                    << "), value " << k;
            }
}

} // namespace
