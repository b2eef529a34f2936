//===- ClusterTest.cpp - Thread block clusters on fdemu ------------------===//
//
// A cluster's CTAs share their shared memory: %cluster_* special registers,
// mapa, ld / st / atom .shared::cluster between CTAs, the cluster barrier's
// phases ordering them, launches with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
// or the kernel's .reqnctapercluster; and what the performance model makes
// of them: the SM-to-SM network's latency and bytes, the cluster barrier's
// latency, and clusters placed within GPCs.
//
//===----------------------------------------------------------------------===//

#include "EmulatorHarness.h"

#include "fd/Emulator/PerformanceModel.h"

using namespace flashdecode::emutest;
namespace rt = flashdecode::rt;
using flashdecode::emu::getGpuModel;
using flashdecode::emu::GpuModel;

namespace {

constexpr unsigned kWordsPerCta = 12;

/// 64 threads a CTA. Each thread stores in[its global thread] in `mine`;
/// after a cluster barrier it reads `mine` of CTA rank (rank + 1 + t) mod
/// size, stores its own value in `given` of rank (rank + 1) mod size, and
/// adds 1 to rank 0's `total` (an atomic); after a second barrier it writes
/// what it read and what it was given to out[2 * thread], out[2 * thread +
/// 1]. Thread 0 writes its CTA's cluster registers (and rank 0 the total)
/// to ids[12 * linear CTA].
std::string exchangeKernel(const std::string &directives = "") {
  return std::string(kPtxHeader) + R"(
.visible .entry exchange(.param .u64 in, .param .u64 out, .param .u64 ids)
)" + directives +
         R"(
{
  .shared .align 16 .b8 mine[256];
  .shared .align 16 .b8 given[256];
  .shared .align 4 .b8 total[4];
  .reg .pred %first, %leader;
  .reg .b32 %t, %rank, %size, %peer, %v, %w, %a, %r, %x, %y, %lin, %old;
  .reg .b64 %p, %off;
  mov.u32 %t, %tid.x;
  mov.u32 %rank, %cluster_ctarank;
  mov.u32 %size, %cluster_nctarank;
  mov.u32 %x, %ctaid.y;
  mov.u32 %y, %nctaid.x;
  mov.u32 %lin, %ctaid.x;
  mad.lo.u32 %lin, %x, %y, %lin;
  mad.lo.u32 %x, %lin, 64, %t;
  mul.wide.u32 %off, %x, 4;
  ld.param.u64 %p, [in];
  add.u64 %p, %p, %off;
  ld.global.u32 %v, [%p];
  mov.u32 %a, mine;
  mad.lo.u32 %a, %t, 4, %a;
  st.shared.u32 [%a], %v;
  setp.eq.u32 %first, %t, 0;
  @%first st.shared.u32 [total], 0;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  add.u32 %peer, %rank, 1;
  add.u32 %peer, %peer, %t;
  rem.u32 %peer, %peer, %size;
  mapa.shared::cluster.u32 %r, %a, %peer;
  ld.shared::cluster.u32 %w, [%r];
  add.u32 %peer, %rank, 1;
  rem.u32 %peer, %peer, %size;
  mov.u32 %a, given;
  mad.lo.u32 %a, %t, 4, %a;
  mapa.shared::cluster.u32 %r, %a, %peer;
  st.shared::cluster.u32 [%r], %v;
  mov.u32 %r, total;
  mapa.shared::cluster.u32 %r, %r, 0;
  atom.shared::cluster.add.u32 %old, [%r], 1;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ld.shared.u32 %y, [%a];
  mul.wide.u32 %off, %x, 8;
  ld.param.u64 %p, [out];
  add.u64 %p, %p, %off;
  st.global.v2.u32 [%p], {%w, %y};
  @!%first ret;
  mul.wide.u32 %off, %lin, 48;
  ld.param.u64 %p, [ids];
  add.u64 %p, %p, %off;
  mov.u32 %x, %cluster_ctaid.x;
  mov.u32 %y, %cluster_ctaid.y;
  st.global.v4.u32 [%p], {%rank, %size, %x, %y};
  mov.u32 %x, %clusterid.x;
  mov.u32 %y, %clusterid.y;
  mov.u32 %v, %nclusterid.x;
  mov.u32 %w, %nclusterid.y;
  st.global.v4.u32 [%p+16], {%x, %y, %v, %w};
  mov.u32 %x, %cluster_nctaid.x;
  mov.u32 %y, %cluster_nctaid.y;
  mov.u32 %v, %is_explicit_cluster;
  mov.u32 %w, 0xFFFFFFFF;
  setp.eq.u32 %leader, %rank, 0;
  @%leader ld.shared.u32 %w, [total];
  st.global.v4.u32 [%p+32], {%x, %y, %v, %w};
  ret;
}
)";
}

class EmulatorCluster : public EmulatorTest {
protected:
  /// Runs exchangeKernel over a grid of gridX x gridY CTAs in clusters of
  /// clusterX x clusterY (launched with the attribute when `attribute`, the
  /// kernel's .reqnctapercluster otherwise, no cluster at all when both
  /// are 1 and `attribute` is false) and checks every output against the
  /// rule above.
  void checkExchange(unsigned gridX, unsigned gridY, unsigned clusterX,
                     unsigned clusterY, bool attribute,
                     bool nonPortable = false) {
    SCOPED_TRACE("grid " + std::to_string(gridX) + " x " +
                 std::to_string(gridY) + ", cluster " +
                 std::to_string(clusterX) + " x " + std::to_string(clusterY) +
                 (attribute ? " (attribute)" : " (directive or none)"));
    bool named = attribute || clusterX * clusterY > 1;
    std::string directive =
        !attribute && named ? ".reqnctapercluster " + std::to_string(clusterX) +
                                  ", " + std::to_string(clusterY) + ", 1"
                            : "";
    unsigned ctas = gridX * gridY, size = clusterX * clusterY;
    std::vector<uint32_t> input(ctas * 64);
    for (uint32_t &word : input)
      word = static_cast<uint32_t>(random());
    CUdeviceptr in = upload(input), out = allocate(ctas * 64 * 8),
                ids = allocate(ctas * kWordsPerCta * 4);
    CUfunction kernel = getKernel(exchangeKernel(directive), "exchange");
    if (nonPortable)
      ASSERT_EQ(driver->cuFuncSetAttribute(
                    kernel, rt::kFuncAttributeNonPortableClusterSizeAllowed, 1),
                kSuccess);
    std::optional<Dim3> cluster;
    if (attribute)
      cluster = Dim3{clusterX, clusterY, 1};
    ASSERT_TRUE(launchSucceeds(kernel, {gridX, gridY}, {64},
                               KernelArguments(in, out, ids), 0, cluster));
    std::vector<uint32_t> values = download<uint32_t>(out, ctas * 64 * 2);
    std::vector<uint32_t> registers =
        download<uint32_t>(ids, ctas * kWordsPerCta);
    for (unsigned cy = 0; cy < gridY; ++cy)
      for (unsigned cx = 0; cx < gridX; ++cx) {
        unsigned linear = cx + gridX * cy;
        unsigned rank = cx % clusterX + clusterX * (cy % clusterY);
        auto ctaOfRank = [&](unsigned r) {
          return (cx / clusterX * clusterX + r % clusterX) +
                 gridX * (cy / clusterY * clusterY + r / clusterX);
        };
        for (unsigned t = 0; t < 64; ++t) {
          unsigned thread = linear * 64 + t;
          unsigned peer = (rank + 1 + t) % size;
          unsigned giver = (rank + size - 1) % size;
          ASSERT_EQ(values[2 * thread], input[ctaOfRank(peer) * 64 + t])
              << "CTA (" << cx << ", " << cy << ") thread " << t;
          ASSERT_EQ(values[2 * thread + 1], input[ctaOfRank(giver) * 64 + t])
              << "CTA (" << cx << ", " << cy << ") thread " << t;
        }
        std::vector<uint32_t> expected = {rank,
                                          size,
                                          cx % clusterX,
                                          cy % clusterY,
                                          cx / clusterX,
                                          cy / clusterY,
                                          gridX / clusterX,
                                          gridY / clusterY,
                                          clusterX,
                                          clusterY,
                                          named ? 1u : 0u,
                                          rank == 0 ? 64 * size : 0xFFFFFFFFu};
        EXPECT_EQ(std::vector<uint32_t>(
                      registers.begin() + linear * kWordsPerCta,
                      registers.begin() + (linear + 1) * kWordsPerCta),
                  expected)
            << "CTA (" << cx << ", " << cy << ")";
      }
  }
};

TEST_F(EmulatorCluster, CtasExchangeThroughEachOthersSharedMemory) {
  checkExchange(4, 4, 2, 2, /*attribute=*/true);
  checkExchange(8, 2, 8, 1, /*attribute=*/true);
  checkExchange(6, 2, 3, 2, /*attribute=*/false);
}

TEST_F(EmulatorCluster, WithoutAClusterEachCtaIsItsOwn) {
  // PTX: a launch without clusters has implicit 1 x 1 x 1 ones; the
  // barrier and mapa to rank 0 work within the CTA.
  checkExchange(3, 2, 1, 1, /*attribute=*/false);
  checkExchange(3, 2, 1, 1, /*attribute=*/true);
}

TEST_F(EmulatorCluster, SixteenCtasWithTheNonPortableOptIn) {
  checkExchange(16, 2, 16, 1, /*attribute=*/true, /*nonPortable=*/true);
  checkExchange(4, 8, 2, 8, /*attribute=*/true, /*nonPortable=*/true);
}

TEST_F(EmulatorCluster, ThreeDimensionalClusters) {
  // Grid 4 x 4 x 4 in clusters of 2 x 2 x 2: each CTA's thread 0 stores
  // its linear index in shared memory, the cluster waits, and it writes its
  // cluster registers and what rank (rank + 1) mod 8 stored.
  std::string ptx = std::string(kPtxHeader) + R"(
.visible .entry three_d(.param .u64 out)
{
  .shared .align 4 .b32 mine;
  .reg .b32 %x, %y, %z, %lin, %rank, %next, %a, %r, %v, %w, %u, %s;
  .reg .b64 %p, %off;
  mov.u32 %x, %ctaid.x;
  mov.u32 %y, %ctaid.y;
  mov.u32 %z, %ctaid.z;
  mad.lo.u32 %lin, %z, 4, %y;
  mad.lo.u32 %lin, %lin, 4, %x;
  st.shared.u32 [mine], %lin;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  mov.u32 %rank, %cluster_ctarank;
  add.u32 %next, %rank, 1;
  rem.u32 %next, %next, 8;
  mov.u32 %a, mine;
  mapa.shared::cluster.u32 %r, %a, %next;
  ld.shared::cluster.u32 %v, [%r];
  mul.wide.u32 %off, %lin, 48;
  ld.param.u64 %p, [out];
  add.u64 %p, %p, %off;
  mov.u32 %x, %cluster_ctaid.x;
  mov.u32 %y, %cluster_ctaid.y;
  mov.u32 %z, %cluster_ctaid.z;
  st.global.v4.u32 [%p], {%rank, %x, %y, %z};
  mov.u32 %x, %clusterid.x;
  mov.u32 %y, %clusterid.y;
  mov.u32 %z, %clusterid.z;
  st.global.v4.u32 [%p+16], {%v, %x, %y, %z};
  mov.u32 %x, %nclusterid.x;
  mov.u32 %y, %nclusterid.y;
  mov.u32 %z, %nclusterid.z;
  mov.u32 %w, %cluster_nctaid.z;
  st.global.v4.u32 [%p+32], {%x, %y, %z, %w};
  barrier.cluster.arrive;
  barrier.cluster.wait;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "three_d");
  CUdeviceptr out = allocate(64 * 48);
  ASSERT_TRUE(launchSucceeds(kernel, {4, 4, 4}, {32}, KernelArguments(out),
                             0, Dim3{2, 2, 2}));
  std::vector<uint32_t> values = download<uint32_t>(out, 64 * 12);
  for (uint32_t z = 0; z < 4; ++z)
    for (uint32_t y = 0; y < 4; ++y)
      for (uint32_t x = 0; x < 4; ++x) {
        uint32_t linear = x + 4 * (y + 4 * z);
        uint32_t rank = x % 2 + 2 * (y % 2) + 4 * (z % 2);
        uint32_t next = (rank + 1) % 8;
        uint32_t nextX = x / 2 * 2 + next % 2,
                 nextY = y / 2 * 2 + next / 2 % 2,
                 nextZ = z / 2 * 2 + next / 4;
        std::vector<uint32_t> expected = {
            rank,  x % 2, y % 2, z % 2, nextX + 4 * (nextY + 4 * nextZ),
            x / 2, y / 2, z / 2, 2,     2,
            2,     2};
        EXPECT_EQ(std::vector<uint32_t>(values.begin() + 12 * linear,
                                        values.begin() + 12 * (linear + 1)),
                  expected)
            << "CTA (" << x << ", " << y << ", " << z << ")";
      }
}

/// Each thread writes mine[t], the cluster waits, and each reads mine[t] of
/// rank `peer` (`peer` "%rank" for its own CTA, "%other" for rank ^ 1)
/// through .shared::cluster, adds 1 and stores it. Rank 0 first runs a
/// chain of `chain` dependent adds.
std::string remoteReadKernel(const std::string &peer, unsigned chain) {
  std::string adds;
  for (unsigned i = 0; i < chain; ++i)
    adds += "  @%zero add.u32 %v, %v, 1;\n";
  return std::string(kPtxHeader) + R"(
.visible .entry remote_read(.param .u64 out)
{
  .shared .align 16 .b8 mine[256];
  .reg .pred %zero;
  .reg .b32 %t, %rank, %other, %v, %a, %r, %x;
  .reg .b64 %p, %off;
  mov.u32 %t, %tid.x;
  mov.u32 %rank, %cluster_ctarank;
  xor.b32 %other, %rank, 1;
  setp.eq.u32 %zero, %rank, 0;
  mov.u32 %v, %t;
)" + adds +
         R"(
  mov.u32 %a, mine;
  mad.lo.u32 %a, %t, 4, %a;
  st.shared.u32 [%a], %v;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  mapa.shared::cluster.u32 %r, %a, )" +
         peer + R"(;
  ld.shared::cluster.u32 %x, [%r];
  add.u32 %x, %x, 1;
  mov.u32 %v, %ctaid.x;
  mad.lo.u32 %v, %v, 64, %t;
  mul.wide.u32 %off, %v, 4;
  ld.param.u64 %p, [out];
  add.u64 %p, %p, %off;
  st.global.u32 [%p], %x;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  ret;
}
)";
}

TEST_F(EmulatorCluster, TheSmToSmNetworkCountsItsSectorsAndLatency) {
  const GpuModel &gpu = getGpuModel();
  CUdeviceptr out = allocate(2 * 64 * 4);
  FdemuCounters remote =
      launchCounted(getKernel(remoteReadKernel("%other", 0), "remote_read"),
                    {2}, {64}, KernelArguments(out), 0, Dim3{2, 1, 1});
  std::vector<uint32_t> values = download<uint32_t>(out, 128);
  for (unsigned i = 0; i < 128; ++i)
    ASSERT_EQ(values[i], i % 64 + 1) << i;
  FdemuCounters own =
      launchCounted(getKernel(remoteReadKernel("%rank", 0), "remote_read"), {2},
                    {64}, KernelArguments(out), 0, Dim3{2, 1, 1});
  // Two CTAs, two warps each, 128 contiguous bytes a warp: 4 sectors.
  EXPECT_EQ(remote.total.distributedSharedSectors, 16u);
  EXPECT_EQ(own.total.distributedSharedSectors, 0u);
  EXPECT_EQ(remote.total.sharedWavefronts + 4, own.total.sharedWavefronts);
  // Both read at the SM-to-SM network's latency (fdemu cannot tell a
  // mapped address of its own CTA apart before running).
  EXPECT_EQ(remote.totalLatency.latencyCycles, own.totalLatency.latencyCycles);
  EXPECT_GT(gpu.latencyModel.distributedShared, gpu.latencyModel.sharedLoad);
}

TEST_F(EmulatorCluster, AWaitGoesOnAClusterBarrierLatencyAfterTheLastArrival) {
  const GpuModel &gpu = getGpuModel();
  CUdeviceptr out = allocate(2 * 64 * 4);
  CUfunction late = getKernel(remoteReadKernel("%other", 200), "remote_read");
  CUfunction early = getKernel(remoteReadKernel("%other", 0), "remote_read");
  FdemuCounters slow =
      launchCounted(late, {2}, {64}, KernelArguments(out), 0, Dim3{2, 1, 1});
  FdemuCounters fast =
      launchCounted(early, {2}, {64}, KernelArguments(out), 0, Dim3{2, 1, 1});
  // Rank 0 (SM 0) arrives 200 dependent adds later (the first overlaps
  // what comes before it); rank 1 (SM 1) waits for it: both CTAs take that
  // much longer, not rank 0 alone.
  double chain = 200.0 * gpu.latencyModel.alu;
  for (unsigned sm = 0; sm < 2; ++sm)
    EXPECT_NEAR(double(slow.perSMLatency[sm].latencyCycles) -
                    double(fast.perSMLatency[sm].latencyCycles),
                chain, gpu.latencyModel.alu)
        << "SM " << sm;
  EXPECT_EQ(slow.perSMLatency[0].ctas, 1u);
  EXPECT_EQ(slow.perSMLatency[1].ctas, 1u);
  // Two phases, each at least the barrier's latency.
  EXPECT_GE(fast.perSMLatency[1].latencyCycles,
            2u * gpu.latencyModel.clusterBarrier);
}

TEST_F(EmulatorCluster, ClustersRunOnTheSmsOfOneGpc) {
  const GpuModel &gpu = getGpuModel();
  ASSERT_EQ(gpu.smsPerGpc.size(), 8u);
  ASSERT_EQ(gpu.smsPerGpc[0], 18u);
  // 150 KB of dynamic shared memory: one CTA an SM. A GPC of 18 SMs holds
  // two clusters of 8, leaving 2 SMs idle; 16 clusters fill the GPU once.
  std::string ptx = std::string(kPtxHeader) + R"(
.extern .shared .align 16 .b8 dynamic[];
.visible .entry wide()
{
  barrier.cluster.arrive;
  barrier.cluster.wait;
  ret;
}
)";
  CUfunction kernel = getKernel(ptx, "wide");
  unsigned bytes = 150 * 1024;
  ASSERT_EQ(driver->cuFuncSetAttribute(kernel, 8, bytes), kSuccess);
  FdemuCounters counters = launchCounted(kernel, {256}, {32}, KernelArguments(),
                                         bytes, Dim3{8, 1, 1});
  EXPECT_EQ(counters.residentCtasPerSM, 1u);
  for (unsigned sm = 0; sm < gpu.numSMs; ++sm) {
    unsigned inGpc = sm < 36 ? sm % 18 : (sm - 36) % 16;
    EXPECT_EQ(counters.perSMLatency[sm].ctas, sm < 36 && inGpc >= 16 ? 0u : 2u)
        << "SM " << sm;
  }
}

} // namespace
