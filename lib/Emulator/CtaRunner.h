//===- CtaRunner.h - Run a launch's CTAs one at a time ----------*- C++ -*-===//
//
// Internal to the executor: runs one CTA of a launch at a time on the
// calling thread. Its warps take turns: each runs until it exits or waits
// (at a barrier or a .sync warp instruction), and a barrier is released
// once every live thread of the CTA waits at it. The CTA's counts, its
// latency and its serial tail (the work after its last global atomic) are
// left in `cta` for executeLaunch to add up per SM.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_CTARUNNER_H
#define FD_EMULATOR_CTARUNNER_H

#include "Timeline.h"
#include "WarpState.h"

#include "fd/Emulator/Executor.h"

#include <string>

namespace flashdecode::emu {

/// An error with its location, ready to report.
struct LocatedError {
  int code;
  std::string report;
};

/// Runs the CTAs of one launch, one at a time, on the calling thread.
class CtaRunner {
public:
  CtaRunner(const LaunchRequest &request, DeviceMemory &memory,
            const Timeline &timeline);

  /// Runs CTA `linear` (x fastest); throws LocatedError.
  void run(uint64_t linear);

  /// A CTA's shared memory: the static variables, then the dynamic bytes.
  static uint32_t getSharedBytes(const LaunchRequest &request);

  CtaState cta;
  /// The CTAs' coverage of the kernel's instructions (LaunchRequest::coverage),
  /// when the launch records it; empty otherwise.
  std::vector<uint8_t> coverage;

private:
  void startWarp(WarpState &warp, uint32_t index);

  /// All running lanes leave the converged state: their pcs are explicit.
  static void materialize(WarpState &warp);

  static void setPc(WarpState &warp, uint32_t lanes, uint32_t pc);

  static void leave(WarpState &warp, uint32_t lanes, LaneState state,
                    uint32_t pc);

  [[noreturn]] void fail(const ExecutionError &error, const WarpState &warp,
                         const Instruction &inst, uint32_t mask);

  void runWarp(WarpState &warp);

  void execute(const Instruction &inst, WarpState &warp, uint32_t pc,
               uint32_t mask, uint32_t active);

  /// The lanes of `active` wait at the .sync instruction at `pc` until it
  /// can complete.
  void arriveAtWarpSync(const Instruction &inst, WarpState &warp, uint32_t pc,
                        uint32_t active);

  /// Runs the .sync instruction at `pc` for the lanes waiting there once
  /// every non-exited lane of each one's member mask is among them.
  void completeWarpSync(WarpState &warp, uint32_t pc);

  /// Lanes exited: lanes waiting at a .sync instruction for them may go on.
  void completeWarpSyncsAfterExit(WarpState &warp);

  /// Called when no warp can run: releases a barrier every live thread
  /// waits at, returns false when every thread exited, and reports a
  /// deadlock (what a GPU would hang on) otherwise.
  bool releaseBarrier();

  const LaunchRequest &request;
  const Kernel &kernel;
  const Timeline &timeline;
  uint32_t threads = 0;
  uint64_t smId = 0, linearCta = 0;
  bool tracing = false;
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_CTARUNNER_H
