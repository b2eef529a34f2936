//===- WarpInstructionTest.cpp - fdemu's shfl.sync and vote.sync ----------===//
//
// Shuffles are checked against CUDA's description of __shfl_*_sync (a
// segment of `width` lanes; up/down/xor that would leave it, downward for
// xor only into earlier segments, return the lane's own value), with the
// `c` operand built as nvcc builds it, plus raw clamp values against the
// PTX ISA's definition. Votes against a ballot computed here, including two
// half-warps voting with different member masks at the same instruction.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include <cstdio>

using namespace flashdecode::emutest;

namespace {

constexpr unsigned kLanes = 32;

enum class Mode { Up, Down, Bfly, Idx };

/// The source lane CUDA's __shfl_*_sync(mask, value, b, width) reads for
/// `lane`, and whether it is a lane other than the reader's own choice.
struct Source {
  unsigned lane;
  bool inRange;
};

Source cudaShuffleSource(Mode mode, unsigned lane, unsigned b, unsigned width) {
  unsigned segmentStart = lane / width * width;
  unsigned segmentEnd = segmentStart + width;
  switch (mode) {
  case Mode::Up:
    if (int(lane) - int(b) < int(segmentStart))
      return {lane, false};
    return {lane - b, true};
  case Mode::Down:
    if (lane + b >= segmentEnd)
      return {lane, false};
    return {lane + b, true};
  case Mode::Bfly:
    if ((lane ^ b) >= segmentEnd)
      return {lane, false};
    return {lane ^ b, true};
  case Mode::Idx:
    return {segmentStart + b % width, true};
  }
  return {lane, false};
}

/// The PTX ISA's definition for a raw c operand (clamp in bits 0-4,
/// segment mask in bits 8-12).
Source ptxShuffleSource(Mode mode, unsigned lane, unsigned b, unsigned c) {
  b &= 31;
  unsigned clamp = c & 31, segmentMask = (c >> 8) & 31;
  int maxLane = int((lane & segmentMask) | (clamp & ~segmentMask));
  int minLane = int(lane & segmentMask);
  int source;
  bool inRange;
  switch (mode) {
  case Mode::Up:
    source = int(lane) - int(b);
    inRange = source >= maxLane;
    break;
  case Mode::Down:
    source = int(lane + b);
    inRange = source <= maxLane;
    break;
  case Mode::Bfly:
    source = int(lane ^ b);
    inRange = source <= maxLane;
    break;
  default:
    source = minLane | int(b & ~segmentMask);
    inRange = source <= maxLane;
  }
  return {inRange ? unsigned(source) : lane, inRange};
}

const char *kShufflePtx = R"(
.visible .entry shuffles(.param .u64 values, .param .u64 deltas,
                         .param .u64 controls, .param .u64 out)
{
  .reg .pred %p;
  .reg .b32 %t, %case, %index, %v, %b, %c, %r, %inRange;
  .reg .b64 %pointer, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %case, %ctaid.x;
  mad.lo.u32 %index, %case, 32, %t;
  mul.wide.u32 %offset, %index, 4;
  ld.param.u64 %pointer, [values];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %v, [%pointer];
  ld.param.u64 %pointer, [deltas];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %b, [%pointer];
  mul.wide.u32 %offset, %case, 4;
  ld.param.u64 %pointer, [controls];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %c, [%pointer];
  ld.param.u64 %pointer, [out];
  cvta.to.global.u64 %pointer, %pointer;
  mul.wide.u32 %offset, %index, 32;
  add.s64 %pointer, %pointer, %offset;
  shfl.sync.up.b32 %r|%p, %v, %b, %c, 0xffffffff;
  selp.u32 %inRange, 1, 0, %p;
  st.global.v2.u32 [%pointer], {%r, %inRange};
  shfl.sync.down.b32 %r|%p, %v, %b, %c, 0xffffffff;
  selp.u32 %inRange, 1, 0, %p;
  st.global.v2.u32 [%pointer+8], {%r, %inRange};
  shfl.sync.bfly.b32 %r|%p, %v, %b, %c, -1;
  selp.u32 %inRange, 1, 0, %p;
  st.global.v2.u32 [%pointer+16], {%r, %inRange};
  shfl.sync.idx.b32 %r|%p, %v, %b, %c, -1;
  selp.u32 %inRange, 1, 0, %p;
  st.global.v2.u32 [%pointer+24], {%r, %inRange};
  ret;
}
)";

class EmulatorWarp : public EmulatorTest {
protected:
  struct Case {
    std::vector<uint32_t> deltas; // per lane
    uint32_t control;
    /// Expected source per mode, per lane.
    std::vector<Source> sources[4];
  };

  /// Runs every case in one launch (a CTA each) and compares all four
  /// modes with the expected sources.
  void checkShuffles(const std::vector<Case> &cases) {
    CUfunction kernel =
        getKernel(std::string(kPtxHeader) + kShufflePtx, "shuffles");
    std::vector<uint32_t> values(cases.size() * kLanes), deltas, controls;
    for (uint32_t &value : values)
      value = static_cast<uint32_t>(random());
    for (const Case &shuffle : cases) {
      deltas.insert(deltas.end(), shuffle.deltas.begin(), shuffle.deltas.end());
      controls.push_back(shuffle.control);
    }
    CUdeviceptr out = allocate(values.size() * 32);
    ASSERT_TRUE(launchSucceeds(kernel, {unsigned(cases.size())}, {kLanes},
                               KernelArguments(upload(values), upload(deltas),
                                               upload(controls), out)));
    std::vector<uint32_t> got = download<uint32_t>(out, values.size() * 8);
    static const char *names[] = {"up", "down", "bfly", "idx"};
    for (size_t k = 0; k < cases.size(); ++k)
      for (unsigned lane = 0; lane < kLanes; ++lane)
        for (int mode = 0; mode < 4; ++mode) {
          const Source &source = cases[k].sources[mode][lane];
          size_t at = ((k * kLanes + lane) * 4 + mode) * 2;
          EXPECT_EQ(got[at], values[k * kLanes + source.lane])
              << "shfl." << names[mode] << " b=" << cases[k].deltas[lane]
              << " c=0x" << std::hex << cases[k].control << std::dec << " lane "
              << lane << " should read lane " << source.lane;
          EXPECT_EQ(got[at + 1], uint32_t(source.inRange))
              << "predicate of shfl." << names[mode]
              << " b=" << cases[k].deltas[lane] << " c=0x" << std::hex
              << cases[k].control << std::dec << " lane " << lane;
        }
  }
};

TEST_F(EmulatorWarp, ShuffleAsCudaUsesIt) {
  // nvcc's c is (32 - width) << 8 | clamp, the clamp 0 for up and 31 for
  // the others. Each case runs all four modes with one c, so the modes it
  // is not nvcc's c for are checked against the ISA's definition.
  std::vector<Case> cases;
  for (unsigned width : {32u, 16u, 8u, 4u, 2u, 1u})
    for (unsigned b : {0u, 1u, 2u, 3u, 5u, 8u, 16u, 31u}) {
      for (uint32_t clamp : {0u, 31u}) {
        Case shuffle;
        shuffle.deltas.assign(kLanes, b);
        shuffle.control = (32 - width) << 8 | clamp;
        for (unsigned lane = 0; lane < kLanes; ++lane)
          for (int mode = 0; mode < 4; ++mode) {
            bool cudaForm = (Mode(mode) == Mode::Up) == (clamp == 0);
            shuffle.sources[mode].push_back(
                cudaForm
                    ? cudaShuffleSource(Mode(mode), lane, b, width)
                    : ptxShuffleSource(Mode(mode), lane, b, shuffle.control));
          }
        cases.push_back(std::move(shuffle));
      }
    }
  checkShuffles(cases);
}

TEST_F(EmulatorWarp, ShuffleRawControls) {
  // Per-lane b (an arbitrary permutation for idx) and clamps that are not
  // segment ends.
  std::vector<Case> cases;
  for (int k = 0; k < 64; ++k) {
    Case shuffle;
    for (unsigned lane = 0; lane < kLanes; ++lane)
      shuffle.deltas.push_back(static_cast<uint32_t>(random() % 40));
    uint32_t segmentMask = random() % 2 ? 0 : 0x1F & ~((1u << (k % 6)) - 1);
    shuffle.control = segmentMask << 8 | static_cast<uint32_t>(random() % 32);
    for (unsigned lane = 0; lane < kLanes; ++lane)
      for (int mode = 0; mode < 4; ++mode)
        shuffle.sources[mode].push_back(ptxShuffleSource(
            Mode(mode), lane, shuffle.deltas[lane], shuffle.control));
    cases.push_back(std::move(shuffle));
  }
  checkShuffles(cases);
}

TEST_F(EmulatorWarp, ButterflyReductionWithImmediates) {
  // The reduction every attention kernel ends with, as nvcc writes it.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry warpSum(.param .u64 in, .param .u64 out)
{
  .reg .b32 %t, %v, %r;
  .reg .b64 %pointer, %offset;
  mov.u32 %t, %tid.x;
  mul.wide.u32 %offset, %t, 4;
  ld.param.u64 %pointer, [in];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %v, [%pointer];
  shfl.sync.bfly.b32 %r, %v, 16, 31, -1;
  add.u32 %v, %v, %r;
  shfl.sync.bfly.b32 %r, %v, 8, 31, -1;
  add.u32 %v, %v, %r;
  shfl.sync.bfly.b32 %r, %v, 4, 31, -1;
  add.u32 %v, %v, %r;
  shfl.sync.bfly.b32 %r, %v, 2, 31, -1;
  add.u32 %v, %v, %r;
  shfl.sync.bfly.b32 %r, %v, 1, 31, -1;
  add.u32 %v, %v, %r;
  ld.param.u64 %pointer, [out];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  st.global.u32 [%pointer], %v;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "warpSum");
  std::vector<uint32_t> in(64);
  for (uint32_t &value : in)
    value = static_cast<uint32_t>(random() % 1000);
  CUdeviceptr out = allocate(64 * 4);
  ASSERT_TRUE(
      launchSucceeds(kernel, {1}, {64}, KernelArguments(upload(in), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, 64);
  for (unsigned warp = 0; warp < 2; ++warp) {
    uint32_t sum = 0;
    for (unsigned lane = 0; lane < kLanes; ++lane)
      sum += in[warp * kLanes + lane];
    for (unsigned lane = 0; lane < kLanes; ++lane)
      EXPECT_EQ(got[warp * kLanes + lane], sum) << "warp " << warp;
  }
}

TEST_F(EmulatorWarp, Votes) {
  // Each CTA votes on one pattern; lanes 0-15 and 16-31 also vote as two
  // groups (member masks 0x0000ffff and 0xffff0000) at one instruction.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry votes(.param .u64 predicates, .param .u64 out)
{
  .reg .pred %p, %q;
  .reg .b32 %t, %index, %word, %members, %result<8>;
  .reg .b64 %pointer, %offset;
  mov.u32 %t, %tid.x;
  mov.u32 %index, %ctaid.x;
  mad.lo.u32 %index, %index, 32, %t;
  mul.wide.u32 %offset, %index, 4;
  ld.param.u64 %pointer, [predicates];
  cvta.to.global.u64 %pointer, %pointer;
  add.s64 %pointer, %pointer, %offset;
  ld.global.u32 %word, [%pointer];
  setp.ne.u32 %p, %word, 0;
  vote.sync.ballot.b32 %result0, %p, 0xffffffff;
  vote.sync.all.pred %q, %p, 0xffffffff;
  selp.u32 %result1, 1, 0, %q;
  vote.sync.any.pred %q, %p, -1;
  selp.u32 %result2, 1, 0, %q;
  vote.sync.uni.pred %q, %p, -1;
  selp.u32 %result3, 1, 0, %q;
  vote.sync.ballot.b32 %result4, !%p, -1;
  setp.lt.u32 %q, %t, 16;
  selp.u32 %members, 0x0000ffff, 0xffff0000, %q;
  vote.sync.ballot.b32 %result5, %p, %members;
  vote.sync.all.pred %q, %p, %members;
  selp.u32 %result6, 1, 0, %q;
  vote.sync.any.pred %q, %p, %members;
  selp.u32 %result7, 1, 0, %q;
  ld.param.u64 %pointer, [out];
  cvta.to.global.u64 %pointer, %pointer;
  mul.wide.u32 %offset, %index, 32;
  add.s64 %pointer, %pointer, %offset;
  st.global.v4.u32 [%pointer], {%result0, %result1, %result2, %result3};
  st.global.v4.u32 [%pointer+16], {%result4, %result5, %result6, %result7};
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "votes");
  std::vector<uint32_t> ballots = {0,          ~0u,        1,         ~1u,
                                   0x0000FFFF, 0xFFFF0000, 0x80000000};
  for (int i = 0; i < 16; ++i)
    ballots.push_back(static_cast<uint32_t>(random()));
  std::vector<uint32_t> predicates;
  for (uint32_t ballot : ballots)
    for (unsigned lane = 0; lane < kLanes; ++lane)
      predicates.push_back(ballot >> lane & 1);
  CUdeviceptr out = allocate(predicates.size() * 32);
  ASSERT_TRUE(launchSucceeds(kernel, {unsigned(ballots.size())}, {kLanes},
                             KernelArguments(upload(predicates), out)));
  std::vector<uint32_t> got = download<uint32_t>(out, predicates.size() * 8);
  for (size_t k = 0; k < ballots.size(); ++k) {
    uint32_t ballot = ballots[k];
    for (unsigned lane = 0; lane < kLanes; ++lane) {
      const uint32_t *result = &got[(k * kLanes + lane) * 8];
      uint32_t members = lane < 16 ? 0x0000FFFFu : 0xFFFF0000u;
      char trace[64];
      std::snprintf(trace, sizeof(trace), "ballot 0x%08x, lane %u", ballot,
                    lane);
      SCOPED_TRACE(trace);
      EXPECT_EQ(result[0], ballot);
      EXPECT_EQ(result[1], uint32_t(ballot == ~0u));
      EXPECT_EQ(result[2], uint32_t(ballot != 0));
      EXPECT_EQ(result[3], uint32_t(ballot == 0 || ballot == ~0u));
      EXPECT_EQ(result[4], ~ballot);
      EXPECT_EQ(result[5], ballot & members) << "ballot over its group";
      EXPECT_EQ(result[6], uint32_t((ballot & members) == members));
      EXPECT_EQ(result[7], uint32_t((ballot & members) != 0));
    }
  }
}

} // namespace
