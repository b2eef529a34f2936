//===- RuntimeFusedMergeTest.cpp - A fused merge, without a GPU -----------===//
//
// Kernels compiled with a fused merge (config.fused_merge): one partial kernel
// that also merges, counting finished blocks in an int32 [batch,
// num_kv_heads] buffer ("merge_counters") that must be all zero before the
// first launch. In fdrt against the fake driver (FakeDriver.h): the
// manifest's fields, DecodePlan's counters (its own, zeroed, regrown with
// the batch, or the caller's) and StreamWorkspaces' zeroed buffers.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

// The manifest fd-compile --fused-merge writes for kManifest's kernel (D=64,
// Hq=8, Hkv=2, f16, 4 splits, lse): no fd_merge; the partial kernel takes
// the merge's output and lse and the counters after its own parameters.
const char *const kFusedManifest = R"json({
  "compiler_version": "flashdecode 0.1.0 (MLIR 22)",
  "config": {"arch": "sm_90", "chunk_length": 0, "dtype": "f16",
             "fused_merge": true, "head_dim": 64, "kv_layout": "NHD",
             "num_kv_heads": 2, "num_q_heads": 8, "planned_batch": 1,
             "planned_max_len": 4096, "ptx_version": 80, "query_len": 1,
             "sm_count": 132, "with_lse": true},
  "kernels": [
    {"block": [128, 1, 1], "dynamic_shared_memory_bytes": 0,
     "grid": ["num_splits", 2, "batch"], "name": "fd_partial_attention",
     "params": [{"name": "query", "type": "ptr"},
                {"name": "key_cache", "type": "ptr"},
                {"name": "value_cache", "type": "ptr"},
                {"name": "seq_lens", "type": "ptr"},
                {"name": "partial_output", "type": "ptr"},
                {"name": "partial_lse", "type": "ptr"},
                {"name": "max_len", "type": "i32"},
                {"name": "output", "type": "ptr"},
                {"name": "lse", "type": "ptr"},
                {"name": "merge_counters", "type": "ptr"}],
     "ptx": "fd_partial_attention.ptx", "static_shared_memory_bytes": 6272}],
  "num_splits": 4,
  "workspace": {"bytes_per_sequence": 8320, "formula": "batch * 8320",
                "merge_counter_bytes_per_sequence": 8,
                "partial_lse_offset_per_sequence": 8192,
                "partial_output_offset": 0}
})json";

/// Bytes of the counters per sequence: num_kv_heads int32s.
constexpr uint64_t kCounterBytes = 2 * 4;

/// The message of the std::invalid_argument Manifest::parse throws, or "no
/// error".
std::string parseError(const std::string &json) {
  try {
    Manifest::parse(json);
  } catch (const std::invalid_argument &error) {
    return error.what();
  }
  return "no error";
}

TEST(FusedMergeManifest, ReadsTheFlagAndTheCounterBytes) {
  Manifest manifest = Manifest::parse(kFusedManifest);
  EXPECT_TRUE(manifest.fusedMerge);
  EXPECT_EQ(manifest.workspace.mergeCounterBytesPerSequence, 8);
  EXPECT_EQ(manifest.getMergeCounterBytes(1), 8);
  EXPECT_EQ(manifest.getMergeCounterBytes(5), 40);
  // The workspace is the unfused one's.
  EXPECT_EQ(manifest.getWorkspaceBytes(3), 3 * 8320);
  ASSERT_EQ(manifest.kernels.size(), 1u);
  const std::vector<KernelParam> &params = manifest.kernels[0].params;
  ASSERT_EQ(params.size(), 10u);
  EXPECT_EQ(params[7].name, "output");
  EXPECT_EQ(params[8].name, "lse");
  EXPECT_EQ(params[9].name, "merge_counters");
  EXPECT_EQ(params[9].type, ParamType::Pointer);
}

TEST(FusedMergeManifest, OlderManifestsHaveNoCounters) {
  // Without either field (manifests that predate the fused merge).
  Manifest old = Manifest::parse(kManifest);
  EXPECT_FALSE(old.fusedMerge);
  EXPECT_EQ(old.workspace.mergeCounterBytesPerSequence, 0);
  EXPECT_EQ(old.getMergeCounterBytes(7), 0);
  // As fd-compile writes them now without --fused-merge.
  std::string unfused = kManifest;
  replaceFirst(unfused, "\"with_lse\": true",
               "\"with_lse\": true, \"fused_merge\": false");
  replaceFirst(unfused, "\"partial_lse_offset_per_sequence\"",
               "\"merge_counter_bytes_per_sequence\": 0, "
               "\"partial_lse_offset_per_sequence\"");
  Manifest current = Manifest::parse(unfused);
  EXPECT_FALSE(current.fusedMerge);
  EXPECT_EQ(current.workspace.mergeCounterBytesPerSequence, 0);
  EXPECT_EQ(current.kernels.size(), 2u);
}

TEST(FusedMergeManifest, NamesTheMissingCounterBytes) {
  const std::string expected =
      "manifest: 'workspace.merge_counter_bytes_per_sequence' must be a "
      "positive integer with config.fused_merge";
  std::string absent = kFusedManifest;
  replaceFirst(absent, "\"merge_counter_bytes_per_sequence\": 8,", "");
  EXPECT_EQ(parseError(absent), expected);
  for (const char *bytes : {"0", "-8"}) {
    std::string bad = kFusedManifest;
    replaceFirst(bad, "\"merge_counter_bytes_per_sequence\": 8",
                 std::string("\"merge_counter_bytes_per_sequence\": ") + bytes);
    EXPECT_EQ(parseError(bad), expected) << bytes;
  }
  std::string notABool = kFusedManifest;
  replaceFirst(notABool, "\"fused_merge\": true", "\"fused_merge\": 1");
  EXPECT_EQ(parseError(notABool),
            "manifest: 'config.fused_merge' must be a boolean");
}

//===----------------------------------------------------------------------===//
// DecodePlan and StreamWorkspaces on the fake driver
//===----------------------------------------------------------------------===//

/// A range of device memory the fake driver saw set to zero (a copy of
/// zeros from the host or a memset to 0).
struct Zeroing {
  CUdeviceptr address;
  size_t bytes;
};
/// What the running test's driver zeroed, and the other writes it saw.
std::vector<Zeroing> *zeroings = nullptr;
size_t *otherWrites = nullptr;

/// The fake runtime over kernels with a fused merge; the driver also
/// records host-to-device copies and memsets, which FakeDriver.h lacks.
class FakeRuntimeFusedMerge : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    zeroings = &zeroed;
    otherWrites = &writes;
    // The Device holds a reference to `driver`: this reaches it.
    driver.cuMemcpyHtoD = [](CUdeviceptr destination, const void *source,
                             size_t bytes) {
      const auto *data = static_cast<const uint8_t *>(source);
      if (std::all_of(data, data + bytes, [](uint8_t b) { return b == 0; }))
        zeroings->push_back({destination, bytes});
      else
        ++*otherWrites;
      return record("cuMemcpyHtoD");
    };
    driver.cuMemsetD8Async = [](CUdeviceptr destination, unsigned char value,
                                size_t count, CUstream) {
      if (value == 0)
        zeroings->push_back({destination, count});
      else
        ++*otherWrites;
      return record("cuMemsetD8Async");
    };
    bundle.manifest = Manifest::parse(kFusedManifest);
    bundle.ptx.erase("fd_merge");
    state.partialParamCount = 10;
  }
  void TearDown() override {
    zeroings = nullptr;
    otherWrites = nullptr;
    FakeRuntime::TearDown();
  }

  /// The address of the one allocation of `bytes` bytes (a failure if there
  /// is none or several).
  CUdeviceptr allocationOf(size_t bytes) const {
    CUdeviceptr found = 0;
    int matches = 0;
    for (const auto &[address, size] : state.allocations)
      if (size == bytes) {
        found = address;
        ++matches;
      }
    EXPECT_EQ(matches, 1) << bytes << " bytes";
    return found;
  }
  /// Whether the driver set [address, address + bytes) to zero.
  bool sawZeroed(CUdeviceptr address, size_t bytes) const {
    return std::any_of(zeroed.begin(), zeroed.end(), [&](const Zeroing &z) {
      return z.address <= address && address + bytes <= z.address + z.bytes;
    });
  }
  /// The calls that zero or copy to device memory.
  size_t writeCalls() const {
    return count("cuMemcpyHtoD") + count("cuMemsetD8Async");
  }

  std::vector<Zeroing> zeroed;
  size_t writes = 0;
};

TEST_F(FakeRuntimeFusedMerge, PlanBindsItsOwnZeroedCounters) {
  DecodePlan plan(*device, bundle, buffers);
  // The workspace and the counters: batch * num_kv_heads int32s.
  ASSERT_EQ(state.allocations.size(), 2u);
  CUdeviceptr workspace = allocationOf(3 * 8320);
  CUdeviceptr counters = allocationOf(3 * kCounterBytes);
  EXPECT_TRUE(sawZeroed(counters, 3 * kCounterBytes));
  EXPECT_EQ(writes, 0u);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 1u);
  const Launch &fused = state.launches[0];
  EXPECT_EQ(fused.kernel, "fd_partial_attention");
  EXPECT_EQ(fused.grid[0], 4u);
  EXPECT_EQ(fused.grid[2], 3u);
  EXPECT_EQ(fused.arguments,
            (std::vector<uint64_t>{0x1000, 0x2000, 0x3000, 0x4000, workspace,
                                   workspace + 3 * 8192, 4096, 0x5000, 0x6000,
                                   counters}));
  // Zeroed before the launch, and once: launches leave them zero.
  auto zeroedAt = std::find_if(
      state.calls.begin(), state.calls.end(), [](const std::string &call) {
        return call == "cuMemcpyHtoD" || call == "cuMemsetD8Async";
      });
  auto launchedAt =
      std::find(state.calls.begin(), state.calls.end(), "cuLaunchKernelEx");
  EXPECT_LT(zeroedAt, launchedAt);
  plan.launch(stream);
  EXPECT_EQ(writeCalls(), 1u);
  EXPECT_EQ(state.launches[1].arguments[9], counters);
}

TEST_F(FakeRuntimeFusedMerge, PlanBindsTheCallersCounters) {
  DecodeBuffers shared = buffers;
  shared.workspace = 0x80000;
  shared.mergeCounters = 0x90000;
  DecodePlan plan(*device, bundle, shared);
  // The caller zeroed them: the plan neither allocates nor writes.
  EXPECT_TRUE(state.allocations.empty());
  EXPECT_EQ(writeCalls(), 0u);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 1u);
  EXPECT_EQ(state.launches[0].arguments[4], 0x80000u);
  EXPECT_EQ(state.launches[0].arguments[9], 0x90000u);
  // Also when the batch grows: the caller sized them.
  shared.batch = 8;
  shared.mergeCounters = 0xa0000;
  plan.setBuffers(shared);
  EXPECT_TRUE(state.allocations.empty());
  EXPECT_EQ(writeCalls(), 0u);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[1].arguments[9], 0xa0000u);

  // The caller's counters with the plan's own workspace: only the
  // workspace is allocated.
  state.allocations.clear();
  DecodeBuffers ownWorkspace = buffers;
  ownWorkspace.mergeCounters = 0x90000;
  DecodePlan other(*device, bundle, ownWorkspace);
  ASSERT_EQ(state.allocations.size(), 1u);
  EXPECT_EQ(state.allocations[0].second, 3u * 8320);
  other.launch(stream);
  EXPECT_EQ(state.launches.back().arguments[9], 0x90000u);
}

TEST_F(FakeRuntimeFusedMerge, GrowingTheBatchReallocatesZeroedCounters) {
  {
    DecodePlan plan(*device, bundle, buffers);
    CUdeviceptr small = allocationOf(3 * kCounterBytes);
    plan.launch(stream);
    DecodeBuffers bigger = buffers;
    bigger.batch = 8;
    plan.setBuffers(bigger);
    // A new workspace and new counters, the latter zeroed; the old ones
    // live on for the launch that may still be running.
    ASSERT_EQ(state.allocations.size(), 4u);
    CUdeviceptr large = allocationOf(8 * kCounterBytes);
    EXPECT_NE(large, small);
    EXPECT_TRUE(sawZeroed(large, 8 * kCounterBytes));
    EXPECT_EQ(count("cuMemFree"), 0u);
    plan.launch(stream);
    ASSERT_EQ(state.launches.size(), 2u);
    EXPECT_EQ(state.launches[1].grid[2], 8u);
    EXPECT_EQ(state.launches[1].arguments[9], large);

    // Shrinking keeps them (they stay zero), as does growing back.
    size_t before = zeroed.size();
    for (int64_t batch : {2, 5, 8}) {
      DecodeBuffers resized = buffers;
      resized.batch = batch;
      plan.setBuffers(resized);
      EXPECT_EQ(state.allocations.size(), 4u) << batch;
      plan.launch(stream);
      EXPECT_EQ(state.launches.back().arguments[9], large) << batch;
    }
    EXPECT_EQ(zeroed.size(), before);
  }
  // Two workspaces and two sets of counters.
  EXPECT_EQ(count("cuMemFree"), 4u);
}

TEST_F(FakeRuntimeFusedMerge, UnfusedPlanAllocatesNoCounters) {
  bundle.manifest = Manifest::parse(kManifest);
  bundle.ptx["fd_merge"] = "// merge";
  state.partialParamCount = 7;
  DecodePlan plan(*device, bundle, buffers);
  ASSERT_EQ(state.allocations.size(), 1u);
  EXPECT_EQ(state.allocations[0].second, 3u * 8320);
  EXPECT_EQ(writeCalls(), 0u);
  DecodeBuffers bigger = buffers;
  bigger.batch = 8;
  plan.setBuffers(bigger);
  ASSERT_EQ(state.allocations.size(), 2u);
  EXPECT_EQ(state.allocations[1].second, 8u * 8320);
  EXPECT_EQ(writeCalls(), 0u);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[1].kernel, "fd_merge");
}

TEST_F(FakeRuntimeFusedMerge, StreamWorkspacesZeroNewBuffersWhenAsked) {
  CUstream other = reinterpret_cast<CUstream>(0x9);
  StreamWorkspaces counters(*device, /*zeroed=*/true);
  CUdeviceptr first = counters.get(stream, 24);
  ASSERT_EQ(state.allocations.size(), 1u);
  EXPECT_EQ(state.allocations[0].first, first);
  EXPECT_TRUE(sawZeroed(first, 24));
  // Reused as it is: launches leave it zero.
  EXPECT_EQ(counters.get(stream, 16), first);
  EXPECT_EQ(writeCalls(), 1u);
  CUdeviceptr second = counters.get(other, 8);
  EXPECT_TRUE(sawZeroed(second, 8));
  // Grown: the new buffer (at least doubled) is zeroed too.
  CUdeviceptr grown = counters.get(stream, 40);
  ASSERT_EQ(counters.getSize(stream), 48u);
  EXPECT_EQ(state.allocations.back().first, grown);
  EXPECT_TRUE(sawZeroed(grown, 48));
  EXPECT_EQ(writeCalls(), 3u);
  EXPECT_EQ(writes, 0u);

  // Workspaces (the default, or zeroed=false) are not written.
  StreamWorkspaces workspaces(*device);
  StreamWorkspaces unzeroed(*device, /*zeroed=*/false);
  workspaces.get(stream, 1000);
  workspaces.get(stream, 3000);
  unzeroed.get(other, 64);
  EXPECT_EQ(state.allocations.size(), 6u);
  EXPECT_EQ(writeCalls(), 3u);
}

} // namespace
