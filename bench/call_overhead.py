#!/usr/bin/env python3
"""Host-side cost of one flashdecode call on the CUDA path, kernel excluded.

Calls decode_attention(backend="cuda") and Decoder.run() in steady state on
fdemu (build/lib/libfdemu.so) for a tiny problem (B=1, L=16, Llama-3-8B
heads: Hq=32, Hkv=8, D=128, f16). fdemu interprets each kernel inside
cuLaunchKernel, so the script puts a small library (compiled here with cc)
in front of libfdemu.so that times cuLaunchKernel and, when asked, returns
from it without running the kernel. Two measurements per way of calling:

- kernels not run: the call's wall time with cuLaunchKernel returning at
  once, as the host sees it on a GPU, where the kernel runs elsewhere. This
  is the per-call figure (goal <= 30 us).
- kernels run: the wall time minus the time inside cuLaunchKernel, with
  fdemu interpreting the kernels (outputs checked against the CPU backend
  first). Larger: after milliseconds of interpretation the host code runs
  with cold caches.

Either way the figure holds everything the host does per call (argument
checks, device lookup, output allocation, kernel-cache lookup, rebinding,
the other driver calls, fdemu's, which cost less than libcuda's) and not
the driver's own launch cost on a GPU (the inside of cuLaunchKernel).

    python3 bench/call_overhead.py [--build-dir build] [--iterations N]
                                   [--run-iterations M] [--csv FILE]

Prints a table (median, p90 and mean us per call) and writes the rows to
FILE. Needs the build's Python module and libfdemu.so.
"""
import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

# Forwards cuLaunchKernel and cuLaunchKernelEx to the next library
# (libfdemu.so, linked in), or
# returns success at once when told to skip kernels, and adds up the
# nanoseconds it took; every other symbol resolves to libfdemu.so through
# this library's dependency.
TIMER_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

typedef int (*Launch)(void *, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, unsigned, void *, void **, void **);
static unsigned long long spentNanoseconds, launches;
static int skipKernels;

int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **params, void **extra) {
  static Launch next;
  if (!next)
    next = (Launch)dlsym(RTLD_NEXT, "cuLaunchKernel");
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int result = skipKernels ? 0
                           : next(function, gx, gy, gz, bx, by, bz, shared,
                                  stream, params, extra);
  clock_gettime(CLOCK_MONOTONIC, &end);
  spentNanoseconds += (end.tv_sec - start.tv_sec) * 1000000000ull +
                      end.tv_nsec - start.tv_nsec;
  ++launches;
  return result;
}

/* sm_90 kernels launch overlapped with the grid before them
   (programmatic dependent launch): timed alike. */
typedef int (*LaunchEx)(const void *, void *, void **, void **);
int cuLaunchKernelEx(const void *config, void *function, void **params,
                     void **extra) {
  static LaunchEx next;
  if (!next)
    next = (LaunchEx)dlsym(RTLD_NEXT, "cuLaunchKernelEx");
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int result = skipKernels ? 0 : next(config, function, params, extra);
  clock_gettime(CLOCK_MONOTONIC, &end);
  spentNanoseconds += (end.tv_sec - start.tv_sec) * 1000000000ull +
                      end.tv_nsec - start.tv_nsec;
  ++launches;
  return result;
}

unsigned long long launchTimerNanoseconds(void) { return spentNanoseconds; }
unsigned long long launchTimerCount(void) { return launches; }
void launchTimerSkipKernels(int skip) { skipKernels = skip; }
"""

BATCH, LENGTH, Q_HEADS, KV_HEADS, HEAD_DIM = 1, 16, 32, 8, 128


def build_timer(build_dir, directory):
    """Compiles the timing library against build_dir's libfdemu.so."""
    fdemu = os.path.join(build_dir, "lib", "libfdemu.so")
    if not os.path.exists(fdemu):
        sys.exit(f"call_overhead: {fdemu} not found: build the fdemu target")
    source = os.path.join(directory, "launch_timer.c")
    library = os.path.join(directory, "libfdemu-launch-timer.so")
    with open(source, "w") as file:
        file.write(TIMER_SOURCE)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source,
                    "-Wl,--no-as-needed", fdemu,
                    "-Wl,-rpath," + os.path.dirname(fdemu), "-ldl"],
                   check=True)
    return library


class LaunchTimer:
    def __init__(self, library):
        import ctypes
        timer = ctypes.CDLL(library)  # the handle fdrt's dlopen already has
        self.nanoseconds = timer.launchTimerNanoseconds
        self.nanoseconds.restype = ctypes.c_ulonglong
        self.count = timer.launchTimerCount
        self.count.restype = ctypes.c_ulonglong
        self.skip_kernels = timer.launchTimerSkipKernels


def measure(timer, call, iterations, warmup=20):
    """Per call: (host µs = wall minus inside cuLaunchKernel, µs inside
    cuLaunchKernel), and launches per call."""
    for _ in range(warmup):
        call()
    host, in_launch = [], []
    launches_before = timer.count()
    for _ in range(iterations):
        launch_before = timer.nanoseconds()
        start = time.perf_counter_ns()
        call()
        end = time.perf_counter_ns()
        launch_ns = timer.nanoseconds() - launch_before
        host.append((end - start - launch_ns) / 1000)
        in_launch.append(launch_ns / 1000)
    launches = (timer.count() - launches_before) / iterations
    return host, in_launch, launches


def scenarios(flashdecode, np):
    """(name, zero-argument call) for each way of calling."""
    from flashdecode import DeviceArray
    rng = np.random.default_rng(0)
    q = rng.normal(size=(BATCH, Q_HEADS, HEAD_DIM)).astype(np.float16)
    k = rng.normal(size=(BATCH, LENGTH, KV_HEADS, HEAD_DIM)).astype(np.float16)
    v = rng.normal(size=k.shape).astype(np.float16)
    q_d, k_d, v_d = (DeviceArray.from_numpy(a) for a in (q, k, v))
    lens = DeviceArray.from_numpy(np.array([LENGTH], np.int32))
    out = DeviceArray.empty(q.shape, "float16")
    lse = DeviceArray.empty((BATCH, Q_HEADS), "float32")

    class Foreign:
        """A __cuda_array_interface__ object, as CuPy or Numba arrays come:
        its device is asked of the driver (cuPointerGetAttribute)."""

        def __init__(self, array):
            self.array = array
            self.__cuda_array_interface__ = array.__cuda_array_interface__

    foreign = [Foreign(a) for a in (q_d, k_d, v_d, lens, out)]
    decoder = flashdecode.Decoder(q_d, k_d, v_d, lens, out)
    decode = flashdecode.decode_attention

    def check():
        """The timed path computes the right thing (kernels run)."""
        expected = decode(q, k, v, np.array([LENGTH], np.int32))
        actual = decode(q_d, k_d, v_d, lens, backend="cuda").numpy()
        error = np.abs(actual.astype(np.float32) - expected).max()
        if error > 1e-2 * np.abs(expected).max():
            sys.exit(f"call_overhead: GPU output off by {error}")

    return check, [
        ("decode_attention, DeviceArrays, new out",
         lambda: decode(q_d, k_d, v_d, lens, backend="cuda")),
        ("decode_attention, DeviceArrays, out=",
         lambda: decode(q_d, k_d, v_d, lens, backend="cuda", out=out)),
        ("decode_attention, DeviceArrays, out= lse=",
         lambda: decode(q_d, k_d, v_d, lens, backend="cuda", out=out,
                        lse=lse, return_lse=True)),
        ("decode_attention, __cuda_array_interface__, out=",
         lambda: decode(*foreign[:4], backend="cuda", out=foreign[4])),
        ("Decoder.run() (bound once; floor)", lambda: decoder.run(0)),
        # What decode_attention did per call before issue #10: compile-cache
        # lookup, PTX load, workspace and stream made and freed, synchronize.
        ("Decoder built per call (the old decode_attention)",
         lambda: flashdecode.Decoder(q_d, k_d, v_d, lens, out).run()),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    parser.add_argument("--iterations", type=int, default=2000,
                        help="calls per row with kernels not run")
    parser.add_argument("--run-iterations", type=int, default=200,
                        help="calls per row with kernels run by fdemu")
    parser.add_argument("--csv", help="write the rows here")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)

    with tempfile.TemporaryDirectory() as directory:
        library = build_timer(build_dir, directory)
        # Read by fdrt when it first loads the driver, below.
        os.environ["FD_CUDA_DRIVER"] = library
        sys.path.insert(0, os.path.join(build_dir, "python"))
        import numpy as np
        import flashdecode
        device = flashdecode._flashdecode.cuda_device_name()
        timer = LaunchTimer(library)
        check, calls = scenarios(flashdecode, np)
        check()
        rows = []
        for kernels, iterations in (("run by fdemu", args.run_iterations),
                                    ("not run", args.iterations)):
            timer.skip_kernels(kernels == "not run")
            for name, call in calls:
                host, in_launch, launches = measure(timer, call, iterations)
                rows.append({
                    "call": name, "kernels": kernels,
                    "iterations": iterations,
                    "host_us_median": round(statistics.median(host), 2),
                    "host_us_p90": round(
                        statistics.quantiles(host, n=10)[8], 2),
                    "host_us_mean": round(statistics.fmean(host), 2),
                    "launches_per_call": launches,
                    "in_launch_us_median": round(
                        statistics.median(in_launch), 1),
                    "device": device,
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                    "python": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d")})

    print(f"B={BATCH} L={LENGTH} Hq={Q_HEADS} Hkv={KV_HEADS} D={HEAD_DIM} f16 "
          f"on {device}; host = wall time minus the time inside "
          "cuLaunchKernel")
    print("| call | kernels | host µs median | p90 | mean | launches | "
          "in cuLaunchKernel µs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['call']} | {row['kernels']} | "
              f"{row['host_us_median']:.1f} | {row['host_us_p90']:.1f} | "
              f"{row['host_us_mean']:.1f} | {row['launches_per_call']:g} | "
              f"{row['in_launch_us_median']:.0f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
