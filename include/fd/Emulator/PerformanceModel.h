//===- PerformanceModel.h - Counters into a modeled time --------*- C++ -*-===//
//
// A perfect-overlap roofline per SM: every unit (issue, FP32, special
// functions, conversions, shuffles, integer/other, load/store, shared-memory
// wavefronts, tensor cores, the SM's share of L2 bandwidth) works in
// parallel, so an SM takes as long as its busiest unit, but no less than its
// CTAs' latency: each CTA's dependency chains (LatencyModel.h), with as many
// CTAs at once as the SM holds. The launch takes as long as its busiest SM,
// or as DRAM needs for the distinct sectors it loads and every sector it
// stores (a sector loaded again is an L2 hit), whichever is longer, plus a
// fixed launch overhead. The constants and the assumptions behind them are in
// docs/Emulator.md.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_PERFORMANCEMODEL_H
#define FD_EMULATOR_PERFORMANCEMODEL_H

#include "fd/Emulator/Executor.h"
#include "fd/Emulator/LatencyModel.h"

#include <string>

namespace flashdecode::emu {

struct GpuModel {
  std::string name;       // "H200"
  std::string deviceName; // what cuDeviceGetName says
  int computeMajor = 9, computeMinor = 0;
  unsigned numSMs = 132;
  /// The SMs of each GPC (a cluster's CTAs share one); empty where the GPU
  /// has no clusters (before sm_90).
  std::vector<unsigned> smsPerGpc;
  double clockGHz = 1.98;
  /// What DRAM delivers to a streaming kernel: the bandwidth a device copy
  /// measures (the model's DRAM term), and the datasheet's (fd-bench's
  /// roofline_fraction).
  double dramBytesPerSecond = 4.8e12;
  double peakDramBytesPerSecond = 4.8e12;
  /// The DRAM bus, bits: with the peak, the memory clock fdemu reports.
  int memoryBusBits = 6144;
  size_t memoryBytes = 0;
  int l2Bytes = 0;
  /// Per SM per clock, in warp instructions (lanes per clock / 32).
  double issuePerClock = 4;
  double floatPerClock = 4;
  double specialFunctionPerClock = 0.5;
  double conversionPerClock = 0.5;
  double shufflePerClock = 1;
  double integerPerClock = 2;
  double loadStorePerClock = 1;
  /// Shared-memory wavefronts per clock per SM.
  double sharedWavefrontsPerClock = 1;
  /// mma.sync (m16n8k16 of f16 or bf16) per clock per SM, and how many of
  /// its products the tensor core sums with the accumulator at once.
  double tensorPerClock = 0.5;
  unsigned mmaProductsPerSum = 16;
  /// wgmma.mma_async's work in m16n8k16 steps per clock per SM (0: the GPU
  /// has no wgmma).
  double warpgroupTensorPerClock = 0;
  /// Bytes per clock one SM can move to or from L2.
  double smBytesPerClock = 64;
  /// The latency term's inputs.
  LatencyModel latencyModel;
  SmResources smResources;
  /// Cost per kernel launched eagerly behind other work, and per kernel node
  /// of a replayed graph, in microseconds; and what a launch (or a graph's)
  /// onto an idle stream waits besides, from the host's call to its start
  /// (docs/Emulator.md: eager from the H200's eager and graph steps, the
  /// submission from its single calls; the node is assumed).
  double eagerLaunchMicroseconds = 2.33;
  double graphNodeMicroseconds = 1.0;
  double submissionMicroseconds = 3.47;
};

/// The emulated GPU: FDEMU_GPU=h200 (default) or a100, with the constants
/// FDEMU_MODEL names set (applyModelOverrides). A GPU or override that is
/// not one fdemu knows leaves the H200 as it is; getGpuModelError says why.
const GpuModel &getGpuModel();
/// Why FDEMU_GPU or FDEMU_MODEL was not taken ("" when both were): cuInit
/// fails with it.
const std::string &getGpuModelError();
/// Sets the constants of `spec`, "NAME=VALUE,..." (docs/Emulator.md lists
/// the names), on `gpu`. Returns "" or what was wrong and what is accepted;
/// on an error `gpu` may be partly changed.
std::string applyModelOverrides(GpuModel &gpu, const std::string &spec);
/// A model by name ("h200", "a100"), or null.
const GpuModel *findGpuModel(const std::string &name);

struct ModeledTime {
  double microseconds = 0;
  /// The term that set the time: "issue", "fp32", "sfu", "conversion",
  /// "shuffle", "int", "ld/st", "shared", "sm-bandwidth", "latency",
  /// "dram", "tensor".
  std::string bound;
  double dramBytes = 0;
  /// From the kernel's start, when a dependent grid launched with
  /// programmatic stream serialization may launch: once every CTA has
  /// executed griddepcontrol.launch_dependents (the model: at its start,
  /// so when the last wave starts), else when the kernel ends.
  double triggerMicroseconds = 0;
};

/// The kernel's time without launch overhead.
ModeledTime modelLaunch(const LaunchCounters &counters, const GpuModel &gpu);

/// A stream's modeled clock (us): when its work ends, and from when the
/// next kernel, if launched with programmatic stream serialization, may
/// launch (the last kernel's trigger; the end after anything else).
struct StreamClock {
  double now = 0;
  double dependentsFrom = 0;
};

/// Advances `clock` past a kernel of modeled `time` with
/// `overheadMicroseconds` of launch overhead (eager or graph node). A kernel
/// launched in order starts `overheadMicroseconds` after the stream's work
/// ends. A programmatic launch (on a GPU that has it, sm_90+) spends its
/// overhead from the previous kernel's trigger instead, beside that
/// kernel's run, and its CTAs, waiting at griddepcontrol.wait, resume one
/// global-memory latency after that kernel ends (its stores made visible):
/// the kernel's whole modeled time counts from then.
void scheduleKernel(StreamClock &clock, const ModeledTime &time,
                    double overheadMicroseconds, bool programmatic,
                    const GpuModel &gpu);

/// The host submits work to an idle stream: its first launch, eager or a
/// graph's, starts the submission latency later (what a call timed by
/// events on an idle GPU pays before its first kernel).
void scheduleSubmission(StreamClock &clock, const GpuModel &gpu);
/// Advances `clock` past `microseconds` of work that is not a kernel (a
/// copy or memset): nothing overlaps it.
void scheduleTransfer(StreamClock &clock, double microseconds);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_PERFORMANCEMODEL_H
