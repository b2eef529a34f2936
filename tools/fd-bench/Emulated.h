//===- Emulated.h - fd-bench on fdemu: modeled times ------------*- C++ -*-===//
//
// On fdemu (FD_CUDA_DRIVER=build/lib/libfdemu.so) a kernel's "time" is its
// performance model applied to the counters the interpreter collected, and
// interpreting a long cache takes minutes (~1e8 thread instructions per
// second). So fd-bench runs each plan with every sequence at two short live
// lengths, extrapolates every counter linearly to the shape's length, and
// models that. A real driver lacks fdemu's entry points: detect() is then
// null and fd-bench measures as usual.
//
//===----------------------------------------------------------------------===//

#ifndef FD_BENCH_EMULATED_H
#define FD_BENCH_EMULATED_H

#include "Measured.h"

#include "fd/Emulator/Emulator.h"
#include "fd/Runtime/Runtime.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace flashdecode::bench {

/// fdemu's extension entry points (fd/Emulator/Emulator.h), found in the
/// driver library fdrt loaded.
class Emulator {
public:
  /// Default t (fd-bench --tokens-per-split): a whole number of the partial
  /// kernel's token-loop steps (64 tokens on tensor cores, 32 or 64 on CUDA
  /// cores at D = 128 f16), so both short runs are in the steady state the
  /// long cache is in. Two steps, or one with --quick. Less than a step
  /// undercounts: the loads past a short chunk's end are clamped to its
  /// last key and touch fewer sectors than a full step's.
  static constexpr int64_t kShortTokensPerSplit = 128;
  static constexpr int64_t kQuickTokensPerSplit = 64;

  /// Null unless the loaded driver is fdemu.
  static std::unique_ptr<Emulator> detect();

  double getDramBytesPerSecond() const { return dramBytesPerSecond; }

  /// Models a call of the `bundle` (f16 queries; f16 or fp8 caches) over
  /// `batch` sequences of `length` tokens, and a kLayers step eager and as one
  /// graph: runs the call twice with every sequence at S * c1 and S * (c1 + t)
  /// tokens (S splits, t tokens per split, t <= c1 < 2t; see Emulated.cpp), or
  /// once at `length` when that is no longer or t is 0, and extrapolates each
  /// launch's counters to the full length; times the call and the steps on
  /// fdemu's stream clock (fdemuScheduleLaunch). Allocates only what the
  /// runs read.
  Timing model(const rt::Device &device, rt::CUstream stream,
               const rt::KernelBundle &bundle, int64_t batch, int64_t length,
               int64_t tokensPerSplit);

  /// Thread instructions the modeled runs interpreted, and the wall time
  /// they took.
  double getThreadInstructions() const { return threadInstructions; }
  double getInterpreterSeconds() const { return interpreterSeconds; }

private:
  Emulator() = default;
  /// Runs `plan` with each of the `sequences` lengths it reads (the
  /// batch's, or a shared prefix's one) at `liveLength`.
  std::vector<FdemuCounters> runAt(const rt::Device &device,
                                   rt::CUstream stream,
                                   const rt::DecodePlan &plan,
                                   rt::DeviceBuffer &lengths,
                                   int64_t sequences, int64_t liveLength);

  void (*recordLaunches)(int) = nullptr;
  int (*launchCount)() = nullptr;
  int (*getLaunchCounters)(int, FdemuCounters *) = nullptr;
  int (*modelTime)(const FdemuCounters *, double *, const char **) = nullptr;
  int (*scheduleLaunch)(FdemuStreamClock *, const FdemuCounters *, int,
                        int) = nullptr;
  int (*scheduleSubmission)(FdemuStreamClock *) = nullptr;
  double dramBytesPerSecond = 0;
  double threadInstructions = 0, interpreterSeconds = 0;
  std::mt19937 random{kInputsSeed};
};

/// Counters at `length`, on the line through `shortCounters` at
/// `shortLength` and `longCounters` at `longLength`: every class count,
/// sector and wavefront count and the CTAs' latency cycles, in total and
/// per SM (a CTA's token loop takes as many cycles per step at any length).
/// CTAs resident per SM and registers per thread are the long run's.
FdemuCounters extrapolate(const FdemuCounters &shortCounters,
                          int64_t shortLength,
                          const FdemuCounters &longCounters, int64_t longLength,
                          int64_t length);

} // namespace flashdecode::bench

#endif // FD_BENCH_EMULATED_H
