//===- ClusterErrorTest.cpp - What thread block clusters forbid -----------===//
//
// Each a launch failure that names the rule and locates the instruction:
// reading another CTA's shared memory that nothing wrote; accesses of one
// byte from two CTAs with no cluster barrier between them; a CTA exiting
// while another may still access its shared memory, or an access after it
// exited; mapa outside the cluster or the CTA's memory; the barrier's
// arrive-then-wait rule and its .aligned form; a cluster barrier that can
// never complete. Then what a GPU refuses at launch (cluster sizes, the
// kernel's directives, a GPU without clusters) and what ptxas refuses at
// load time.
//
//===----------------------------------------------------------------------===//

#include "EmulatorErrorTest.h"

#include "fd/Emulator/PerformanceModel.h"

using namespace flashdecode::emutest;
using testing::HasSubstr;
namespace rt = flashdecode::rt;

namespace {

constexpr CUresult kNotSupported = 801;
constexpr CUresult kInvalidClusterSize = 912;

/// Clusters of two CTAs of 64 threads: each thread writes mine[t], the
/// cluster waits (`sync`), each reads mine[t] of the other CTA (`access`),
/// and the cluster waits again (`end`) before the CTAs exit.
struct Hooks {
  std::string target = "sm_90";
  std::string directives;
  std::string write = "st.shared.u32 [%a], %t;";
  std::string sync = "barrier.cluster.arrive;\n  barrier.cluster.wait;";
  std::string mapa = "mapa.shared::cluster.u32 %r, %a, %other;";
  std::string access = "ld.shared::cluster.u32 %v, [%r];";
  std::string end = "barrier.cluster.arrive;\n  barrier.cluster.wait;";
};

std::string clusterKernel(const Hooks &h) {
  return ".version 8.0\n.target " + h.target +
         "\n.address_size 64\n.visible .entry cluster_error()\n" +
         h.directives + R"(
{
  .shared .align 16 .b8 mine[256];
  .reg .pred %p, %r0;
  .reg .b32 %t, %rank, %other, %a, %r, %v;
  mov.u32 %t, %tid.x;
  mov.u32 %rank, %cluster_ctarank;
  xor.b32 %other, %rank, 1;
  setp.eq.u32 %r0, %rank, 0;
  mov.u32 %a, mine;
  mad.lo.u32 %a, %t, 4, %a;
  )" + h.write +
         "\n  " + h.sync + "\n  " + h.mapa + "\n  " + h.access + "\n  " +
         h.end + "\n  ret;\n}\n";
}

class EmulatorClusterError : public EmulatorError {
protected:
  /// The report of running `h` in one cluster of two CTAs, expecting a
  /// launch failure (`code`).
  std::string failure(const Hooks &h, CUresult code = kLaunchFailed) {
    CUfunction kernel = getKernel(clusterKernel(h), "cluster_error");
    if (!kernel)
      return "";
    EXPECT_EQ(launch(kernel, {2}, {64}, KernelArguments(), 0, Dim3{2, 1, 1}),
              code);
    return errorString(code);
  }
  /// The result of launching `h` over `grid` CTAs in clusters of
  /// `cluster` (none: cuLaunchKernel), the non-portable size allowed or
  /// not.
  CUresult launchResult(const Hooks &h, Dim3 grid, std::optional<Dim3> cluster,
                        bool nonPortable = false) {
    CUfunction kernel = getKernel(clusterKernel(h), "cluster_error");
    if (!kernel)
      return -1;
    if (nonPortable)
      EXPECT_EQ(driver->cuFuncSetAttribute(
                    kernel, rt::kFuncAttributeNonPortableClusterSizeAllowed, 1),
                kSuccess);
    return launch(kernel, grid, {64}, KernelArguments(), 0, cluster);
  }
  /// The JIT log of loading `h`, expecting a refusal.
  std::string refusal(const Hooks &h) {
    LoadResult loaded = tryLoad(clusterKernel(h));
    EXPECT_NE(loaded.result, kSuccess);
    return loaded.log;
  }
};

TEST_F(EmulatorClusterError, WellFormedKernelsRun) {
  EXPECT_EQ(launchResult(Hooks(), {4}, Dim3{2, 1, 1}), kSuccess);
  Hooks remoteWrites;
  remoteWrites.access = "st.shared::cluster.u32 [%r], %t;";
  EXPECT_EQ(launchResult(remoteWrites, {4}, Dim3{2, 1, 1}), kSuccess);
}

TEST_F(EmulatorClusterError, ReadingWhatNoThreadWrote) {
  Hooks h;
  h.sync = "";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("initcheck: shared::cluster load reads byte "
                                "0 of CTA rank 1, which no thread of the "
                                "cluster wrote"));
  expectLocated(report, "cluster_error", clusterKernel(h), "ld.shared::cluster",
                "0, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, ReadOfAWriteWithNoClusterBarrierBetween) {
  // Each CTA reads the other's mine[t] and then overwrites its own: CTA 1
  // reads what CTA 0 wrote in the same phase.
  Hooks h;
  h.access = "ld.shared::cluster.u32 %v, [%r];\n  st.shared.u32 [%a], %v;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("racecheck: read-after-write hazard on shared "
                                "byte 0 of CTA rank 0 between thread 0 of "
                                "CTA rank 1 and thread 0 of CTA rank 0 of "
                                "the cluster with no barrier.cluster in "
                                "between"));
  expectLocated(report, "cluster_error", clusterKernel(h), "ld.shared::cluster",
                "1, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, RemoteWriteOfAByteItsOwnerRead) {
  Hooks h;
  h.access = "st.shared::cluster.u32 [%r], %t;\n  ld.shared.u32 %v, [%a];";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("racecheck: write-after-read hazard on shared "
                                "byte 0 of CTA rank 0 between thread 0 of "
                                "CTA rank 1 and thread 0 of CTA rank 0"));
  expectLocated(report, "cluster_error", clusterKernel(h), "st.shared::cluster",
                "1, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, AWriteBetweenArriveAndWaitRacesWithTheNextPhase) {
  // Each CTA writes its mine[t] again after arriving: the arrive released
  // only what came before, so the other CTA's read after its wait races.
  Hooks h;
  h.sync = "barrier.cluster.arrive;\n  st.shared.u32 [%a], %rank;\n"
           "  barrier.cluster.wait;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("racecheck: read-after-write hazard on shared "
                                "byte 0 of CTA rank 1 between thread 0 of "
                                "CTA rank 0 and thread 0 of CTA rank 1"));
  expectLocated(report, "cluster_error", clusterKernel(h), "ld.shared::cluster",
                "0, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, TwoWarpsWritingAnotherCtasByte) {
  // Every thread of rank 0 writes rank 1's mine[0]: its two warps race
  // (lanes of one warp are ordered), no bar.sync of rank 0 between them.
  Hooks h;
  h.mapa = "mov.u32 %r, mine;\n  mapa.shared::cluster.u32 %r, %r, %other;";
  h.access = "@%r0 st.shared::cluster.u32 [%r], %t;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("racecheck: write-after-write hazard on "
                                "shared byte 0 of CTA rank 1 between thread "
                                "32 of CTA rank 0 and thread 31 of CTA rank "
                                "0"));
}

TEST_F(EmulatorClusterError, TwoWarpsWritingAnotherCtasByteInTurn) {
  // The same, with a bar.sync of rank 0 between its warps' writes: none.
  Hooks ordered;
  ordered.mapa =
      "mov.u32 %r, mine;\n  mapa.shared::cluster.u32 %r, %r, %other;";
  ordered.access = "setp.lt.u32 %p, %t, 32;\n"
                   "  @%p st.shared::cluster.u32 [%r], %t;\n  bar.sync 0;\n"
                   "  @!%p st.shared::cluster.u32 [%r], %t;";
  EXPECT_EQ(launchResult(ordered, {2}, Dim3{2, 1, 1}), kSuccess);
}

TEST_F(EmulatorClusterError, AClusterAddressOutsideAClusterOfOne) {
  // Without a cluster each CTA is its own: an address of rank 2 is none.
  Hooks h;
  h.mapa = "mov.u32 %r, 0x3000000;";
  CUfunction kernel = getKernel(clusterKernel(h), "cluster_error");
  EXPECT_EQ(launch(kernel, {2}, {64}, KernelArguments()), kIllegalAddress);
  EXPECT_THAT(errorString(kIllegalAddress),
              HasSubstr("shared::cluster access at 0x3000000, which is not "
                        "an address mapa gives in a cluster of 1 CTAs"));
}

TEST_F(EmulatorClusterError, AccessToACtaThatExited) {
  Hooks h;
  h.end = "";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("shared::cluster access to CTA rank 0 of the "
                                "cluster, which has exited"));
  expectLocated(report, "cluster_error", clusterKernel(h), "ld.shared::cluster",
                "1, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, ExitingInThePhaseAnotherCtaAccessedIt) {
  // Only rank 0 reads rank 1's memory, and nothing keeps rank 1 from
  // exiting before that read.
  Hooks h;
  h.access = "@%r0 ld.shared::cluster.u32 %v, [%r];";
  h.end = "";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("CTA rank 1 of the cluster exits with no "
                                "barrier.cluster since CTA rank 0 accessed "
                                "its shared memory"));
  // Located at the exit of its last thread.
  expectLocated(report, "cluster_error", clusterKernel(h), "ret", "1, 0, 0",
                "32, 0, 0");
}

// (A fault is sticky in its context: one launch failure a test.)
TEST_F(EmulatorClusterError, MapaToARankOutsideTheCluster) {
  Hooks rank;
  rank.mapa = "mapa.shared::cluster.u32 %r, %a, 2;";
  std::string report = failure(rank);
  EXPECT_THAT(report,
              HasSubstr("mapa to CTA rank 2 of a cluster of 2 CTAs (ranks 0 "
                        "to 1)"));
  expectLocated(report, "cluster_error", clusterKernel(rank), "mapa", "0, 0, 0",
                "0, 0, 0");
}

TEST_F(EmulatorClusterError, MapaOfAnAddressOutsideSharedMemory) {
  Hooks address;
  address.mapa = "add.u32 %r, %a, 256;\n  mapa.shared::cluster.u32 %r, %r, "
                 "%other;";
  EXPECT_EQ(launchResult(address, {2}, Dim3{2, 1, 1}), kIllegalAddress);
  EXPECT_THAT(errorString(kIllegalAddress),
              HasSubstr("which is not an address in the 256 bytes of shared "
                        "memory of a CTA of the cluster"));
}

TEST_F(EmulatorClusterError, AccessPastAnotherCtasSharedMemory) {
  Hooks past;
  past.access = "ld.shared::cluster.u32 %v, [%r+256];";
  EXPECT_EQ(launchResult(past, {2}, Dim3{2, 1, 1}), kIllegalAddress);
  EXPECT_THAT(errorString(kIllegalAddress),
              HasSubstr("shared::cluster access of 4 bytes at offset 256 of "
                        "CTA rank 1 is outside its 256 bytes of shared "
                        "memory"));
}

TEST_F(EmulatorClusterError, ArrivingTwice) {
  Hooks twice;
  twice.sync = "barrier.cluster.arrive;\n  barrier.cluster.arrive;\n  "
               "barrier.cluster.wait;";
  EXPECT_THAT(failure(twice),
              HasSubstr("barrier.cluster.arrive twice without a "
                        "barrier.cluster.wait in between"));
}

TEST_F(EmulatorClusterError, WaitingWithoutArriving) {
  Hooks unannounced;
  unannounced.sync = "barrier.cluster.wait;";
  std::string report = failure(unannounced);
  EXPECT_THAT(report, HasSubstr("barrier.cluster.wait without a "
                                "barrier.cluster.arrive before it"));
  expectLocated(report, "cluster_error", clusterKernel(unannounced),
                "barrier.cluster.wait", "0, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, AlignedBarrierInPartOfAWarp) {
  Hooks h;
  h.sync = "setp.lt.u32 %p, %t, 16;\n  @%p barrier.cluster.arrive.aligned;\n"
           "  barrier.cluster.wait;";
  std::string report = failure(h);
  EXPECT_THAT(report, HasSubstr("barrier.cluster .aligned executed by lanes "
                                "0x0000ffff of live lanes 0xffffffff"));
  expectLocated(report, "cluster_error", clusterKernel(h),
                "@%p barrier.cluster.arrive.aligned", "0, 0, 0", "0, 0, 0");
}

TEST_F(EmulatorClusterError, ClusterBarrierThatCannotComplete) {
  // Thread 0 waits at bar.sync for the CTA's other threads, which wait at
  // the cluster barrier for thread 0.
  Hooks h;
  h.sync = "setp.eq.u32 %p, %t, 0;\n  @%p bar.sync 0;\n"
           "  barrier.cluster.arrive;\n  barrier.cluster.wait;";
  EXPECT_THAT(failure(h),
              HasSubstr("deadlock: this thread waits at barrier.cluster.wait "
                        "for threads of the cluster that neither arrive nor "
                        "exit"));
}

TEST_F(EmulatorClusterError, LaunchesAGpuRefuses) {
  Hooks h;
  // The grid must be whole clusters; clusters have 1 to 8 CTAs, 16 with the
  // opt-in.
  EXPECT_EQ(launchResult(h, {3}, Dim3{2, 1, 1}), kInvalidClusterSize);
  EXPECT_EQ(launchResult(h, {2}, Dim3{0, 1, 1}), kInvalidClusterSize);
  EXPECT_EQ(launchResult(h, {16}, Dim3{16, 1, 1}), kInvalidClusterSize);
  EXPECT_EQ(launchResult(h, {16}, Dim3{16, 1, 1}, /*nonPortable=*/true),
            kSuccess);
  EXPECT_EQ(launchResult(h, {34}, Dim3{17, 1, 1}, /*nonPortable=*/true),
            kInvalidClusterSize);
  EXPECT_EQ(launchResult(h, {8, 2}, Dim3{8, 2, 1}, /*nonPortable=*/true),
            kSuccess);
  // The kernel's directives: its cluster, a cluster required, a limit.
  Hooks required;
  required.directives = ".reqnctapercluster 2, 1, 1";
  EXPECT_EQ(launchResult(required, {4}, std::nullopt), kSuccess);
  EXPECT_EQ(launchResult(required, {4}, Dim3{2, 1, 1}), kSuccess);
  EXPECT_EQ(launchResult(required, {4}, Dim3{4, 1, 1}), kInvalidClusterSize);
  Hooks explicitCluster;
  explicitCluster.directives = ".explicitcluster";
  EXPECT_EQ(launchResult(explicitCluster, {4}, std::nullopt),
            kInvalidClusterSize);
  EXPECT_EQ(launchResult(explicitCluster, {4}, Dim3{2, 1, 1}), kSuccess);
  Hooks limited;
  limited.directives = ".maxclusterrank 2";
  EXPECT_EQ(launchResult(limited, {4}, Dim3{4, 1, 1}), kInvalidClusterSize);
  EXPECT_EQ(launchResult(limited, {4}, Dim3{2, 1, 1}), kSuccess);
}

TEST_F(EmulatorClusterError, ClustersNeedAGpuThatHasThem) {
  // An sm_80 kernel launched in clusters: it runs on the H200 and is
  // refused on the A100 (ctest runs this again with FDEMU_GPU=a100:
  // EmulatorErrorTest.a100).
  bool clusters = !flashdecode::emu::getGpuModel().smsPerGpc.empty();
  CUfunction kernel = getKernel(".version 8.0\n.target sm_80\n"
                                ".address_size 64\n"
                                ".visible .entry plain()\n{\n  ret;\n}\n",
                                "plain");
  EXPECT_EQ(launch(kernel, {2}, {32}, KernelArguments(), 0, Dim3{2, 1, 1}),
            clusters ? kSuccess : kNotSupported);
  EXPECT_EQ(launch(kernel, {2}, {32}, KernelArguments()), kSuccess);
}

TEST_F(EmulatorClusterError, FormsPtxasOrFdemuRefuse) {
  Hooks older;
  older.target = "sm_80";
  EXPECT_THAT(refusal(older),
              HasSubstr("Feature 'thread block clusters' requires .target "
                        "sm_90 or higher (the module's is sm_80)"));
  Hooks relaxed;
  relaxed.sync = "barrier.cluster.arrive.relaxed;\n  barrier.cluster.wait;";
  EXPECT_THAT(refusal(relaxed), HasSubstr(".relaxed releases nothing"));
  Hooks generic;
  generic.mapa = "mapa.u32 %r, %a, %other;";
  EXPECT_THAT(refusal(generic), HasSubstr("unsupported form of mapa"));
  Hooks zero;
  zero.directives = ".reqnctapercluster 0";
  EXPECT_THAT(refusal(zero), HasSubstr(".reqnctapercluster takes whole "
                                       "numbers of at least 1, not '0'"));
}

} // namespace
