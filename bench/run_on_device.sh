#!/usr/bin/env bash
# On the GPU machine (cmake, ninja and the driver; no MLIR): builds the
# runtime, fd-bench and their tests, runs the GPU tests, fd-bench and the
# PyTorch peers, and leaves the logs and CSVs in $OUT. The PTX was compiled
# beforehand with bench/prepare_kernels.sh and carried along (first argument,
# default build/bench-kernels). Meant to finish well under 8 minutes.
set -uo pipefail
kernels=$(realpath "${1:-build/bench-kernels}")
out=${OUT:-bench/out}
mkdir -p "$out"
quick=${FD_BENCH_QUICK:+--quick}

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader; } >"$out/machine.txt" 2>&1
cmake -S . -B build-device -G Ninja -DFD_RUNTIME_ONLY=ON \
  -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1 &&
  cmake --build build-device >>"$out/build.log" 2>&1 ||
  { echo "build failed:"; tail -20 "$out/build.log"; exit 1; }

# Kernel numerics on the GPU (graph replay with growing lengths included).
(cd build-device && FD_TEST_KERNELS="$kernels/tests" \
  timeout 120 ctest --output-on-failure) >"$out/ctest.log" 2>&1
tail -3 "$out/ctest.log"

# fdemu against the GPU: the same C driver-API program on nvcc's kernels,
# checked against C computations (exact, exp2f within 2 ulp), once on the
# real driver and once on the emulator built here; where they differ is
# recorded. (A store just past a small allocation faults on fdemu but may
# land inside the GPU's allocation granule: that difference is expected.)
if [ -f "$kernels/emulator/driver_api_kernels.ptx" ]; then
  cc -O2 -o build-device/driver_api_program \
    unittests/Emulator/driver_api_program.c -ldl -lm &&
    for driver in libcuda.so.1 build-device/lib/libfdemu.so; do
      echo "== $driver"
      timeout 60 build-device/driver_api_program "$driver" \
        "$kernels/emulator/driver_api_kernels.ptx" 2>&1
      echo "exit $?"
    done >"$out/fdemu-vs-gpu.txt" 2>&1
  cat "$out/fdemu-vs-gpu.txt"
fi

timeout 300 build-device/bin/fd-bench --kernels "$kernels" $quick \
  --csv "$out/fd-bench.csv" 2>&1 | tee "$out/fd-bench.txt"

timeout 180 python3 bench/peers.py $quick --ours "$out/fd-bench.csv" \
  --csv "$out/peers.csv" 2>&1 | tee "$out/peers.txt"
