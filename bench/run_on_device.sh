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

timeout 300 build-device/bin/fd-bench --kernels "$kernels" $quick \
  --csv "$out/fd-bench.csv" 2>&1 | tee "$out/fd-bench.txt"

timeout 180 python3 bench/peers.py $quick --ours "$out/fd-bench.csv" \
  --csv "$out/peers.csv" 2>&1 | tee "$out/peers.txt"
