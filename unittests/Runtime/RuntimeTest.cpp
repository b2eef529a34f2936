//===- RuntimeTest.cpp - fdrt without a GPU -------------------------------===//
//
// The manifest reader, workspace sizing, the no-driver errors, and the rules
// of DecodePlan and Graph against a fake driver table that records calls.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

TEST(Manifest, ParsesWhatTheCompilerWrites) {
  Manifest manifest = Manifest::parse(kManifest);
  EXPECT_EQ(manifest.headDim, 64);
  EXPECT_EQ(manifest.numQueryHeads, 8);
  EXPECT_EQ(manifest.numKVHeads, 2);
  EXPECT_EQ(manifest.dtype, "f16");
  EXPECT_EQ(manifest.getElementBytes(), 2);
  EXPECT_TRUE(manifest.withLse);
  EXPECT_EQ(manifest.numSplits, 4);
  ASSERT_EQ(manifest.kernels.size(), 2u);
  const KernelSpec &partial = manifest.kernels[0];
  EXPECT_EQ(partial.name, "fd_partial_attention");
  ASSERT_EQ(partial.params.size(), 7u);
  EXPECT_EQ(partial.params[6].name, "max_len");
  EXPECT_EQ(partial.params[6].type, ParamType::I32);
  EXPECT_EQ(partial.grid[0].resolve(/*batch=*/3, /*numSplits=*/4), 4);
  EXPECT_EQ(partial.grid[1].resolve(3, 4), 2);
  EXPECT_EQ(partial.grid[2].resolve(3, 4), 3);
  EXPECT_EQ(partial.block[0], 128);
  EXPECT_EQ(partial.staticSharedMemoryBytes, 5248);
}

TEST(Manifest, ReadsTheClusterOfAChunk) {
  // One block a chunk where the schedule names no cluster (as manifests
  // before clusters); schedule.cluster_ctas where it does.
  EXPECT_EQ(Manifest::parse(kManifest).clusterCtas, 1);
  std::string clustered = kManifest;
  clustered.replace(clustered.find("\"num_splits\": 4"), 15,
                    "\"num_splits\": 4, \"schedule\": {\"cluster_ctas\": 8}");
  EXPECT_EQ(Manifest::parse(clustered).clusterCtas, 8);
  std::string none = kManifest;
  none.replace(none.find("\"num_splits\": 4"), 15,
               "\"num_splits\": 4, \"schedule\": {\"cluster_ctas\": 0}");
  try {
    Manifest::parse(none);
    ADD_FAILURE() << "cluster_ctas 0 accepted";
  } catch (const std::invalid_argument &error) {
    EXPECT_STREQ(error.what(),
                 "manifest: 'schedule.cluster_ctas' must be an integer >= 1");
  }
}

TEST(Manifest, SizesTheWorkspace) {
  Manifest manifest = Manifest::parse(kManifest);
  // B * Lq * Hq * S * (D + 1) * 4.
  EXPECT_EQ(manifest.getWorkspaceBytes(1), 8 * 4 * 65 * 4);
  EXPECT_EQ(manifest.getWorkspaceBytes(5), 5 * 8 * 4 * 65 * 4);
  EXPECT_EQ(manifest.workspace.getPartialLseOffset(1), 8 * 4 * 64 * 4);
}

TEST(Manifest, NamesWhatIsWrong) {
  auto message = [](const std::string &json) {
    try {
      Manifest::parse(json);
    } catch (const std::invalid_argument &error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  std::string noSplits = kManifest;
  noSplits.replace(noSplits.find("\"num_splits\": 4"), 15, "\"splits\": 4");
  EXPECT_EQ(message(noSplits), "manifest: 'num_splits' must be present");
  std::string badDtype = kManifest;
  badDtype.replace(badDtype.find("\"f16\""), 5, "\"f64\"");
  EXPECT_EQ(message(badDtype), "manifest: 'config.dtype' must be f16, bf16 "
                               "or f32");
  EXPECT_EQ(message("{\"compiler_version\": 1"),
            "manifest: invalid JSON at offset 22: expected '}'");
  EXPECT_EQ(message("[]"), "manifest: '(root)' must be an object");
  std::string lseOutside = kManifest;
  lseOutside.replace(lseOutside.find("\"partial_lse_offset_per_sequence\": "
                                     "8192"),
                     39, "\"partial_lse_offset_per_sequence\": 8324");
  EXPECT_EQ(message(lseOutside),
            "manifest: 'workspace.partial_lse_offset_per_sequence' must be an "
            "integer from 0 to workspace.bytes_per_sequence");
}

TEST(Manifest, ReadsTheCachesElementTypeAndScales) {
  // Absent (manifests that predate fp8 caches): the caches hold the dtype.
  for (const std::string &json :
       {std::string(kManifest), withFloat8Cache(kManifest, "f16", "none")}) {
    Manifest manifest = Manifest::parse(json);
    EXPECT_EQ(manifest.kvDtype, "f16");
    EXPECT_EQ(manifest.kvScale, "none");
    EXPECT_FALSE(manifest.hasFloat8Cache());
    EXPECT_FALSE(manifest.hasTokenHeadScales());
    EXPECT_EQ(manifest.getCacheElementBytes(), 2);
    EXPECT_EQ(manifest.getScaleElements(3 * 4096 * 2 * 64), 0);
  }
  std::string f32 = kManifest;
  replaceFirst(f32, "\"dtype\": \"f16\"", "\"dtype\": \"f32\"");
  EXPECT_EQ(Manifest::parse(f32).kvDtype, "f32");
  EXPECT_EQ(Manifest::parse(f32).getCacheElementBytes(), 4);

  Manifest tensor = Manifest::parse(withFloat8Cache(kManifest));
  EXPECT_EQ(tensor.kvDtype, "e4m3");
  EXPECT_EQ(tensor.kvScale, "tensor");
  EXPECT_TRUE(tensor.hasFloat8Cache());
  EXPECT_FALSE(tensor.hasTokenHeadScales());
  // One byte per cache element; q and the output keep the dtype's.
  EXPECT_EQ(tensor.getCacheElementBytes(), 1);
  EXPECT_EQ(tensor.getElementBytes(), 2);
  EXPECT_EQ(tensor.getScaleElements(3 * 4096 * 2 * 64), 1);
  EXPECT_EQ(tensor.kernels[0].params.size(), 9u);
  EXPECT_EQ(tensor.kernels[0].params[7].name, "k_scale");
  EXPECT_EQ(tensor.kernels[0].params[8].name, "v_scale");

  Manifest tokenHead =
      Manifest::parse(withFloat8Cache(kManifest, "e5m2", "token-head"));
  EXPECT_EQ(tokenHead.kvDtype, "e5m2");
  EXPECT_TRUE(tokenHead.hasFloat8Cache());
  EXPECT_TRUE(tokenHead.hasTokenHeadScales());
  EXPECT_EQ(tokenHead.getCacheElementBytes(), 1);
  // The caches' shape without the head dim (D = 64).
  EXPECT_EQ(tokenHead.getScaleElements(3 * 4096 * 2 * 64), 3 * 4096 * 2);
  replaceFirst(f32, "\"with_lse\"",
               "\"kv_dtype\": \"e4m3\", "
               "\"kv_scale\": \"tensor\", \"with_lse\"");
  EXPECT_EQ(Manifest::parse(f32).getCacheElementBytes(), 1);
  EXPECT_EQ(Manifest::parse(f32).getElementBytes(), 4);
}

TEST(Manifest, NamesWhatIsWrongWithTheCaches) {
  auto message = [](const std::string &json) {
    try {
      Manifest::parse(json);
    } catch (const std::invalid_argument &error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(withFloat8Cache(kManifest, "fp8", "tensor")),
            "manifest: 'config.kv_dtype' must be e4m3, e5m2 or the dtype "
            "(f16)");
  // A 16-bit cache of another type than the query's.
  EXPECT_EQ(message(withFloat8Cache(kManifest, "bf16", "none")),
            "manifest: 'config.kv_dtype' must be e4m3, e5m2 or the dtype "
            "(f16)");
  EXPECT_EQ(message(withFloat8Cache(kManifest, "e4m3", "channel")),
            "manifest: 'config.kv_scale' must be tensor or token-head "
            "(kv_dtype e4m3)");
  EXPECT_EQ(message(withFloat8Cache(kManifest, "e5m2", "none")),
            "manifest: 'config.kv_scale' must be tensor or token-head "
            "(kv_dtype e5m2)");
  EXPECT_EQ(message(withFloat8Cache(kManifest, "f16", "tensor")),
            "manifest: 'config.kv_scale' must be none (kv_dtype f16)");
  std::string noScale = withFloat8Cache(kManifest);
  replaceFirst(noScale, "\"kv_scale\": \"tensor\",", "");
  EXPECT_EQ(message(noScale), "manifest: 'config.kv_scale' must be present "
                              "with an fp8 kv_dtype");
  std::string number = kManifest;
  replaceFirst(number, "\"with_lse\"", "\"kv_dtype\": 8, \"with_lse\"");
  EXPECT_EQ(message(number), "manifest: 'config.kv_dtype' must be a string");
}

TEST(Manifest, BundleNamesAMissingFile) {
  try {
    KernelBundle::load("/nonexistent-fd-dir");
    FAIL() << "no error";
  } catch (const std::runtime_error &error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot read /nonexistent-fd-dir/manifest.json");
  }
}

TEST(Driver, MissingDriverIsAClearError) {
  try {
    loadDriver("libcuda-fd-test-missing.so.1");
    FAIL() << "no error";
  } catch (const CudaError &error) {
    EXPECT_EQ(std::string(error.what())
                  .rfind("no CUDA driver: libcuda-fd-test-missing.so.1 not "
                         "found (",
                         0),
              0u)
        << error.what();
    EXPECT_EQ(error.getResult(), -1);
  }
}

//===----------------------------------------------------------------------===//
// DecodePlan and Graph on the fake driver (FakeDriver.h)
//===----------------------------------------------------------------------===//

TEST_F(FakeRuntime, PlanLaunchesInManifestOrderWithBoundArguments) {
  DecodePlan plan(*device, bundle, buffers);
  ASSERT_EQ(state.allocations.size(), 1u);
  EXPECT_EQ(state.allocations[0].second, 3u * 8320);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const Launch &partial = state.launches[0];
  EXPECT_EQ(partial.kernel, "fd_partial_attention");
  EXPECT_EQ(partial.grid[0], 4u); // splits
  EXPECT_EQ(partial.grid[1], 2u); // KV heads
  EXPECT_EQ(partial.grid[2], 3u); // batch
  EXPECT_EQ(partial.block[0], 128u);
  CUdeviceptr workspace = state.allocations[0].first;
  EXPECT_EQ(partial.arguments,
            (std::vector<uint64_t>{0x1000, 0x2000, 0x3000, 0x4000, workspace,
                                   workspace + 3 * 8192, 4096}));
  const Launch &merge = state.launches[1];
  EXPECT_EQ(merge.kernel, "fd_merge");
  EXPECT_EQ(merge.grid[0], 8u);
  EXPECT_EQ(merge.grid[2], 3u);
  EXPECT_EQ(merge.block[0], 64u);
  EXPECT_EQ(
      merge.arguments,
      (std::vector<uint64_t>{workspace, workspace + 3 * 8192, 0x5000, 0x6000}));
}

TEST_F(FakeRuntime, PlanRejectsBadBuffers) {
  DecodeBuffers noLse = buffers;
  noLse.lse = 0;
  EXPECT_THROW(DecodePlan(*device, bundle, noLse), std::invalid_argument);
  DecodeBuffers noBatch = buffers;
  noBatch.batch = 0;
  EXPECT_THROW(DecodePlan(*device, bundle, noBatch), std::invalid_argument);
  DecodeBuffers noQuery = buffers;
  noQuery.query = 0;
  try {
    DecodePlan plan(*device, bundle, noQuery);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: query, keyCache, seqLens and output must be "
              "device addresses");
  }
}

// MLA's latent cache (config.shared_kv): the values are the key cache's
// first v_head_dim columns, so the partial kernel takes no value cache, and
// a plan given one says so rather than ignore it.
TEST_F(FakeRuntime, SharedKVKernelsTakeNoValueCache) {
  std::string shared = kManifest;
  replaceFirst(shared, "\"head_dim\": 64,",
               "\"head_dim\": 64, \"shared_kv\": true, \"v_head_dim\": 32,");
  replaceFirst(shared, "{\"name\": \"value_cache\", \"type\": \"ptr\"},\n", "");
  bundle.manifest = Manifest::parse(shared);
  EXPECT_TRUE(bundle.manifest.sharedKV);
  EXPECT_EQ(bundle.manifest.valueHeadDim, 32);
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: the kernels read the values from the key cache's "
            "first v_head_dim columns (config.shared_kv): valueCache must be "
            "0");
  state.partialParamCount = 6;
  DecodeBuffers latent = buffers;
  latent.valueCache = 0;
  DecodePlan plan(*device, bundle, latent);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const std::vector<uint64_t> &partial = state.launches[0].arguments;
  ASSERT_EQ(partial.size(), 6u);
  EXPECT_EQ(partial[1], latent.keyCache);
  EXPECT_EQ(partial[2], latent.seqLens);
  // Without shared_kv a value cache is required.
  bundle.manifest = Manifest::parse(kManifest);
  EXPECT_EQ(planError(*device, bundle, latent),
            "DecodePlan: valueCache must be a device address");
  // A latent cache's values are at most its rows.
  replaceFirst(shared, "\"v_head_dim\": 32", "\"v_head_dim\": 72");
  try {
    Manifest::parse(shared);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("config.v_head_dim"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(FakeRuntime, RebindingKeepsTheOutgrownWorkspaceForQueuedLaunches) {
  {
    DecodePlan plan(*device, bundle, buffers);
    plan.launch(stream);
    DecodeBuffers bigger = buffers;
    bigger.batch = 8;
    plan.setBuffers(bigger);
    EXPECT_EQ(state.allocations.size(), 2u);
    // The first launch may still be running on the GPU.
    EXPECT_EQ(count("cuMemFree"), 0u);
  }
  EXPECT_EQ(count("cuMemFree"), 2u);
}

TEST_F(FakeRuntime, PlanRejectsMisalignedBuffersBeforeLaunching) {
  for (CUdeviceptr DecodeBuffers::*member :
       {&DecodeBuffers::query, &DecodeBuffers::keyCache,
        &DecodeBuffers::valueCache, &DecodeBuffers::output,
        &DecodeBuffers::lse}) {
    DecodeBuffers misaligned = buffers;
    misaligned.*member += 2; // one f16 element into the buffer
    try {
      DecodePlan plan(*device, bundle, misaligned);
      FAIL() << "no error";
    } catch (const std::invalid_argument &error) {
      EXPECT_NE(std::string(error.what())
                    .find("-byte aligned (address mod 16 "
                          "= 2)"),
                std::string::npos)
          << error.what();
    }
  }
  DecodeBuffers misaligned = buffers;
  misaligned.keyCache = 0x2008;
  try {
    DecodePlan plan(*device, bundle, misaligned);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: keyCache address 0x2008 is not 16-byte aligned "
              "(address mod 16 = 8); the kernels access it 16 bytes at a "
              "time");
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST(Targets, ComputeCapabilityChoosesThePTXTarget) {
  EXPECT_EQ(getTargetForComputeCapability(8, 0), "sm_80");
  EXPECT_EQ(getTargetForComputeCapability(8, 6), "sm_86");
  EXPECT_EQ(getTargetForComputeCapability(8, 7), "sm_86");
  EXPECT_EQ(getTargetForComputeCapability(8, 9), "sm_89");
  EXPECT_EQ(getTargetForComputeCapability(9, 0), "sm_90");
  // Newer GPUs JIT the newest PTX the compiler emits.
  EXPECT_EQ(getTargetForComputeCapability(10, 0), "sm_90");
  EXPECT_EQ(getTargetForComputeCapability(12, 0), "sm_90");
  EXPECT_THROW(getTargetForComputeCapability(7, 5), std::invalid_argument);
}

TEST(Targets, PTXLoadsOnItsGPUAndNewer) {
  EXPECT_TRUE(canLoadTarget("sm_80", 8, 0));
  EXPECT_TRUE(canLoadTarget("sm_80", 9, 0));
  EXPECT_TRUE(canLoadTarget("sm_90", 10, 0));
  EXPECT_FALSE(canLoadTarget("sm_90", 8, 0));
  EXPECT_FALSE(canLoadTarget("sm_89", 8, 6));
  EXPECT_TRUE(canLoadTarget("sm_90a", 9, 0));
  EXPECT_FALSE(canLoadTarget("sm_90a", 10, 0));
  EXPECT_FALSE(canLoadTarget("compute_90", 9, 0));
}

TEST_F(FakeRuntime, PlanBindsTheCallersWorkspace) {
  DecodeBuffers shared = buffers;
  shared.workspace = 0x80000;
  DecodePlan plan(*device, bundle, shared);
  EXPECT_TRUE(state.allocations.empty());
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[0].arguments[4], 0x80000u);
  EXPECT_EQ(state.launches[0].arguments[5], 0x80000u + 3 * 8192);
  EXPECT_EQ(state.launches[1].arguments[0], 0x80000u);
  // Rebinding to a bigger batch allocates nothing either: the caller sized it.
  shared.batch = 8;
  plan.setBuffers(shared);
  EXPECT_TRUE(state.allocations.empty());
  shared.workspace = 0x80004;
  try {
    plan.setBuffers(shared);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: workspace address 0x80004 is not 16-byte aligned "
              "(address mod 16 = 4); the kernels access it 16 bytes at a "
              "time");
  }
}

TEST_F(FakeRuntime, StreamWorkspacesGrowWithoutFreeingQueuedMemory) {
  CUstream other = reinterpret_cast<CUstream>(0x9);
  StreamWorkspaces workspaces(*device);
  EXPECT_EQ(workspaces.getSize(stream), 0u);
  CUdeviceptr first = workspaces.get(stream, 1000);
  EXPECT_EQ(workspaces.get(stream, 600), first);
  EXPECT_NE(workspaces.get(other, 100), first);
  EXPECT_EQ(state.allocations.size(), 2u);
  EXPECT_EQ(count("cuStreamSynchronize"), 0u);
  // Growing: the stream's queued launches finish before the old buffer is
  // freed, and the new one at least doubles.
  workspaces.get(stream, 1500);
  EXPECT_EQ(workspaces.getSize(stream), 2000u);
  EXPECT_EQ(workspaces.getSize(other), 100u);
  auto synchronized =
      std::find(state.calls.begin(), state.calls.end(), "cuStreamSynchronize");
  auto freed = std::find(state.calls.begin(), state.calls.end(), "cuMemFree");
  ASSERT_NE(freed, state.calls.end());
  EXPECT_LT(synchronized, freed);
  EXPECT_EQ(count("cuStreamSynchronize"), 1u);
  EXPECT_EQ(count("cuMemFree"), 1u);
}

TEST_F(FakeRuntime, DeviceOfPointerAsksTheDriver) {
  CUdeviceptr address = DeviceBuffer(*device, 64).getAddress();
  EXPECT_EQ(getDeviceOfPointer(driver, address + 17), 3);
  EXPECT_EQ(getDeviceOfPointer(driver, 0x42), std::nullopt);
  try {
    getDeviceOfPointer(driver, 0xbad);
    FAIL() << "no error";
  } catch (const CudaError &error) {
    EXPECT_EQ(std::string(error.what()),
              "asking the driver which device holds an address: "
              "CUDA_ERROR_ILLEGAL_ADDRESS (fake)");
  }
}

TEST_F(FakeRuntime, BadPTXCarriesTheJITLog) {
  state.loadResult = 218;
  try {
    DecodePlan plan(*device, bundle, buffers);
    FAIL() << "no error";
  } catch (const CudaError &error) {
    EXPECT_EQ(std::string(error.what()),
              "loading the PTX of fd_partial_attention: "
              "CUDA_ERROR_INVALID_PTX (fake); JIT log: ptxas fatal: "
              "Unresolved extern function 'f'");
    EXPECT_EQ(error.getResult(), 218);
  }
}

TEST_F(FakeRuntime, LaunchFailureNamesTheKernelAndError) {
  DecodePlan plan(*device, bundle, buffers);
  state.launchResult = 700;
  try {
    plan.launch(stream);
    FAIL() << "no error";
  } catch (const CudaError &error) {
    EXPECT_EQ(std::string(error.what()),
              "launching fd_partial_attention: CUDA_ERROR_ILLEGAL_ADDRESS "
              "(fake)");
  }
}

TEST_F(FakeRuntime, GraphCapturesOnceAndReplays) {
  DecodePlan plan(*device, bundle, buffers);
  Graph graph = Graph::capture(*device, {&plan}, stream);
  EXPECT_EQ(count("cuStreamBeginCapture"), 1u);
  EXPECT_EQ(count("cuStreamEndCapture"), 1u);
  EXPECT_EQ(count("cuGraphInstantiate"), 1u);
  EXPECT_EQ(state.launches.size(), 2u);
  for (int i = 0; i < 3; ++i)
    graph.replay(stream);
  EXPECT_EQ(count("cuGraphLaunch"), 3u);
  // Replays launch nothing themselves: the graph holds the kernels.
  EXPECT_EQ(state.launches.size(), 2u);
  EXPECT_FALSE(graph.isStale());
}

TEST_F(FakeRuntime, GraphOfManyPlansRecordsThemInOrder) {
  DecodePlan first(*device, bundle, buffers);
  DecodeBuffers other = buffers;
  other.query = 0x9000;
  DecodePlan second(*device, bundle, other);
  Graph graph = Graph::capture(*device, {&first, &second}, stream);
  ASSERT_EQ(state.launches.size(), 4u);
  EXPECT_EQ(state.launches[0].arguments[0], 0x1000u);
  EXPECT_EQ(state.launches[2].arguments[0], 0x9000u);
}

TEST_F(FakeRuntime, CaptureIsEndedWhenALaunchFails) {
  DecodePlan plan(*device, bundle, buffers);
  state.launchResult = 700;
  EXPECT_THROW(Graph::capture(*device, {&plan}, stream), CudaError);
  EXPECT_EQ(count("cuStreamEndCapture"), 1u);
  EXPECT_FALSE(state.capturing);
  EXPECT_EQ(count("cuGraphInstantiate"), 0u);
  EXPECT_EQ(count("cuGraphDestroy"), 1u);
}

TEST_F(FakeRuntime, EmptyGraphIsRejected) {
  try {
    Graph::capture(*device, {}, stream);
    FAIL() << "no error";
  } catch (const CudaError &error) {
    EXPECT_EQ(std::string(error.what()),
              "captured an empty CUDA graph: no kernel was launched during "
              "the capture");
  }
  EXPECT_EQ(count("cuStreamEndCapture"), 1u);
  EXPECT_EQ(count("cuGraphInstantiate"), 0u);
}

TEST_F(FakeRuntime, DefaultStreamCannotBeCaptured) {
  DecodePlan plan(*device, bundle, buffers);
  EXPECT_THROW(Graph::capture(*device, {&plan}, nullptr),
               std::invalid_argument);
  EXPECT_EQ(count("cuStreamBeginCapture"), 0u);
}

TEST_F(FakeRuntime, RebindingMakesTheGraphStale) {
  DecodePlan plan(*device, bundle, buffers);
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers bigger = buffers;
  bigger.batch = 8;
  plan.setBuffers(bigger);
  EXPECT_TRUE(graph.isStale());
  try {
    graph.replay(stream);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "Graph::replay: a captured plan was rebound to other buffers or "
              "shapes since the capture; capture a new graph");
  }
  EXPECT_EQ(count("cuGraphLaunch"), 0u);
  // The workspace grew with the batch; a new capture replays.
  EXPECT_EQ(state.allocations.back().second, 8u * 8320);
  Graph fresh = Graph::capture(*device, {&plan}, stream);
  fresh.replay(stream);
  EXPECT_EQ(count("cuGraphLaunch"), 1u);
}

TEST_F(FakeRuntime, MovedFromGraphCannotReplay) {
  DecodePlan plan(*device, bundle, buffers);
  Graph graph = Graph::capture(*device, {&plan}, stream);
  Graph moved = std::move(graph);
  EXPECT_THROW(graph.replay(stream), std::invalid_argument);
  moved.replay(stream);
  EXPECT_EQ(count("cuGraphLaunch"), 1u);
}

TEST_F(FakeRuntime, PagedPlanPassesTheBlockTable) {
  std::string paged = kManifest;
  auto replace = [&](const std::string &from, const std::string &to) {
    paged.replace(paged.find(from), from.size(), to);
  };
  replace("\"kv_layout\": \"NHD\"",
          "\"kv_layout\": \"NHD\", \"page_size\": 16");
  replace("{\"name\": \"max_len\", \"type\": \"i32\"}",
          "{\"name\": \"max_len\", \"type\": \"i32\"}, "
          "{\"name\": \"block_table\", \"type\": \"ptr\"}, "
          "{\"name\": \"num_pages\", \"type\": \"i32\"}");
  bundle.manifest = Manifest::parse(paged);
  EXPECT_EQ(bundle.manifest.pageSize, 16);
  // A dense binding is refused, naming what is missing.
  try {
    DecodePlan plan(*device, bundle, buffers);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: the kernels read paged caches: blockTable "
              "required");
  }
  DecodeBuffers pagedBuffers = buffers;
  pagedBuffers.blockTable = 0x7000;
  pagedBuffers.maxLength = 4096; // 256 pages of 16
  // Without the pool's page count the kernels could not clamp the table's
  // entries: refused, naming it.
  try {
    DecodePlan plan(*device, bundle, pagedBuffers);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: paged caches: numPages (the pages in each pool) "
              "must be in [1, 2^31), got 0");
  }
  pagedBuffers.numPages = 300;
  state.partialParamCount = 9;
  DecodePlan plan(*device, bundle, pagedBuffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[0].arguments[6], 4096u);
  EXPECT_EQ(state.launches[0].arguments[7], 0x7000u);
  EXPECT_EQ(state.launches[0].arguments[8], 300u);
  pagedBuffers.maxLength = 4001; // not a whole number of pages
  EXPECT_THROW(plan.setBuffers(pagedBuffers), std::invalid_argument);
}

TEST_F(FakeRuntime, SharedPrefixPlanBindsTheSuffixesAndGroupsTheBatch) {
  std::string shared = kManifest;
  replaceFirst(shared, "\"with_lse\": true",
               "\"with_lse\": true, \"shared_prefix\": true");
  replaceFirst(shared, "{\"name\": \"max_len\", \"type\": \"i32\"}",
               "{\"name\": \"max_len\", \"type\": \"i32\"}, "
               "{\"name\": \"suffix_lens\", \"type\": \"ptr\"}, "
               "{\"name\": \"batch\", \"type\": \"i32\"}");
  replaceFirst(shared, "\"grid\": [\"num_splits\", 2, \"batch\"]",
               "\"grid\": [\"num_splits\", 2, \"batch/4\"]");
  bundle.manifest = Manifest::parse(shared);
  EXPECT_TRUE(bundle.manifest.sharedPrefix);
  // Without the suffixes the kernels could not place the queries: refused,
  // naming the buffer.
  try {
    DecodePlan plan(*device, bundle, buffers);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "DecodePlan: the kernels continue a shared prefix: suffixLens "
              "buffer (int32 [batch]) required");
  }
  DecodeBuffers sharedBuffers = buffers;
  sharedBuffers.suffixLens = 0x8000;
  sharedBuffers.batch = 9;
  state.partialParamCount = 9;
  DecodePlan plan(*device, bundle, sharedBuffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[0].arguments[7], 0x8000u);
  EXPECT_EQ(state.launches[0].arguments[8], 9u);
  // Nine sequences in blocks of four: three along z; the merge's rows are
  // the nine sequences'.
  EXPECT_EQ(state.launches[0].grid[2], 3u);
  EXPECT_EQ(state.launches[1].grid[2], 9u);
  // Kernels without a shared prefix take no suffixes.
  bundle.manifest = Manifest::parse(kManifest);
  EXPECT_THROW(DecodePlan(*device, bundle, sharedBuffers),
               std::invalid_argument);
}

TEST(Manifest, ReadsBatchGroupsOfTheGrid) {
  auto grid = [](const std::string &entry) {
    std::string text = kManifest;
    replaceFirst(text, "\"grid\": [\"num_splits\", 2, \"batch\"]",
                 "\"grid\": [\"num_splits\", 2, " + entry + "]");
    try {
      return std::to_string(
          Manifest::parse(text).kernels[0].grid[2].resolve(10, 4));
    } catch (const std::invalid_argument &error) {
      return std::string(error.what());
    }
  };
  EXPECT_EQ(grid("\"batch/4\""), "3");
  EXPECT_EQ(grid("\"batch/1\""), "10");
  const std::string refused =
      "manifest: 'kernels[fd_partial_attention].grid' must be a number, "
      "\"batch\", \"batch/N\" (N >= 1) or \"num_splits\"";
  EXPECT_EQ(grid("\"batch/0\""), refused);
  EXPECT_EQ(grid("\"batch/\""), refused);
  EXPECT_EQ(grid("\"batch/x2\""), refused);
  EXPECT_EQ(grid("\"batch/99999999999\""), refused);
}

TEST_F(FakeRuntime, ResourcesAreReleased) {
  {
    DecodePlan plan(*device, bundle, buffers);
    Graph graph = Graph::capture(*device, {&plan}, stream);
  }
  EXPECT_EQ(count("cuGraphExecDestroy"), 1u);
  EXPECT_EQ(count("cuGraphDestroy"), 1u);
  EXPECT_EQ(count("cuModuleUnload"), 2u);
  EXPECT_EQ(count("cuMemFree"), 1u);
}

} // namespace
