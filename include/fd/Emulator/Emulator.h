/*===- Emulator.h - fdemu's own entry points, beside the driver API -------===
 *
 * libfdemu.so exports the CUDA driver API (cuInit, cuLaunchKernel, ...) and,
 * for tools that know they run on it (fd-bench), these C functions: the
 * counters of recent launches and the performance model that turns them
 * into a modeled time. Find them with dlsym; on a real driver they are
 * absent. C and C++.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FD_EMULATOR_EMULATOR_H
#define FD_EMULATOR_EMULATOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FDEMU_NUM_CLASSES 12
#define FDEMU_MAX_SMS 256

/* The counter classes' names, in order (as described below): fdemu's
 * names for them and fd-bench's --instruction-mix columns. */
#define FDEMU_CLASS_NAMES                                                      \
  "fp_arith", "special_fn", "conversion", "shuffle", "int_other", "global_ld", \
      "global_st", "shared_ld", "shared_st", "barrier", "control", "tensor"

/* Counter classes, in FDEMU_CLASS_NAMES' order; tensor is mma.sync and
 * wgmma.mma_async (each warp's counts once).
 * cp.async counts as global_ld, ldmatrix as shared_ld,
 * cp.async.commit_group and wait_group as barrier. The tensor class made
 * FdemuClassCounts one counter longer: a tool compiled against the
 * 11-class header must be rebuilt (FDEMU_NUM_CLASSES says which it has). */
typedef struct FdemuClassCounts {
  uint64_t warpInstructions[FDEMU_NUM_CLASSES];
  uint64_t sharedWavefronts;
  uint64_t globalLoadSectors;
  uint64_t globalStoreSectors;
  /* wgmma.mma_async executed per warp (also in the tensor class), and their
   * work in m16n8k16 steps (N / 8 a warp). Appended: rebuild tools compiled
   * before. */
  uint64_t warpgroupMmas;
  uint64_t warpgroupMmaSteps;
  /* 32-byte sectors of other CTAs' shared memory a warp instruction
   * touched (.shared::cluster over the SM-to-SM network). Appended: rebuild
   * tools compiled before. */
  uint64_t distributedSharedSectors;
} FdemuClassCounts;

/* The latency model's work: CTAs run, and the sum of their latencies (a
 * CTA's is the latest clock of its warps at exit, in SM cycles); the
 * longest serial tail of a CTA (its cycles after its last global atomic:
 * the work of a block that waited on the others' counts). The tail made
 * FdemuLatencyCounts one counter longer: rebuild tools compiled before. */
typedef struct FdemuLatencyCounts {
  uint64_t ctas;
  uint64_t latencyCycles;
  uint64_t serialTailCycles;
  /* CTAs that executed griddepcontrol.launch_dependents. Appended: rebuild
   * tools compiled before. */
  uint64_t triggeredCtas;
  /* The CTAs' work in their serial tails (summed): also in the class
   * counts, charged to the tail alone by the model. Appended: rebuild
   * tools compiled before. */
  FdemuClassCounts serialTail;
} FdemuLatencyCounts;

typedef struct FdemuCounters {
  FdemuClassCounts total;
  /* CTA i runs on SM i mod numSMs; in a launch with clusters, each
   * cluster on SMs of one GPC (docs/Emulator.md). */
  FdemuClassCounts perSM[FDEMU_MAX_SMS];
  unsigned numSMs;
  uint64_t threadInstructions;
  uint64_t globalLoadBytes;
  uint64_t globalStoreBytes;
  uint64_t sharedBankConflicts;
  /* The latency model's work, per launch and per SM. */
  FdemuLatencyCounts totalLatency;
  FdemuLatencyCounts perSMLatency[FDEMU_MAX_SMS];
  /* CTAs one SM holds at once, from the registers per thread (ptxas's
   * count, or fdemu's default when registersAssumed is 1), the threads and
   * the shared memory of a CTA. */
  unsigned residentCtasPerSM;
  unsigned registersPerThread;
  int registersAssumed;
  /* The distinct 32-byte sectors the launch's loads touched, which the
   * model reads from DRAM once each (total.globalLoadSectors counts them per
   * warp instruction; the repeats are L2 hits). Appended: tools compiled
   * against the header without it must be rebuilt. */
  uint64_t dramLoadSectors;
} FdemuCounters;

/* Starts (clearing it) or stops the log of executed launches. */
void fdemuRecordLaunches(int enable);
/* Number of launches logged since recording started. */
int fdemuLaunchCount(void);
/* Counters of logged launch `index` (0 = oldest); 0 on success. */
int fdemuGetLaunchCounters(int index, FdemuCounters *counters);
/* The modeled time of a kernel with these counters on the emulated GPU,
 * without launch overhead; `bound` names the term that set it (static
 * string). 0 on success. */
int fdemuModelTime(const FdemuCounters *counters, double *microseconds,
                   const char **bound);
/* A stream's modeled clock (us): when its work ends, and from when a
 * kernel launched next with programmatic stream serialization may launch. */
typedef struct FdemuStreamClock {
  double now;
  double dependentsFrom;
} FdemuStreamClock;
/* Advances `clock` past a kernel with these counters as fdemu's streams do
 * (docs/Emulator.md): launched eagerly or as a graph node (`fromGraph`),
 * with or without programmatic stream serialization (`programmatic`). 0 on
 * success. Start a graph replay with dependentsFrom = now. */
int fdemuScheduleLaunch(FdemuStreamClock *clock, const FdemuCounters *counters,
                        int fromGraph, int programmatic);
/* Advances `clock` by the latency of submitting work to an idle stream
 * (before the first launch of a call or a graph replay timed from idle, as
 * fd-bench's GPU measurements are). 0 on success. */
int fdemuScheduleSubmission(FdemuStreamClock *clock);
/* Launch overheads the model adds: per eager launch, per graph node (us);
 * and the DRAM bandwidth the model streams at (bytes/s): the achievable
 * one, a device copy's (the datasheet's is the memory clock and bus width
 * cuDeviceGetAttribute reports). */
void fdemuGetModelConstants(double *eagerLaunchMicroseconds,
                            double *graphNodeMicroseconds,
                            double *dramBytesPerSecond);

#ifdef __cplusplus
}
#endif

#endif /* FD_EMULATOR_EMULATOR_H */
