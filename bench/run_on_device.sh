#!/usr/bin/env bash
# On the GPU machine (cmake, ninja and the driver; no MLIR): builds the
# runtime, fd-bench and their tests, then, most important first: the GPU
# tests, fdemu against the real driver, fd-bench on the shapes of the modeled
# table, compute-sanitizer on the GPU tests, the PyTorch peers on those
# shapes, and last the fd-bench grid (its 32-layer steps at B=64 take
# minutes: it stops at its limit, its CSV keeps the rows it finished). The PTX was compiled beforehand with bench/prepare_kernels.sh
# (first argument, default build/bench-kernels); GoogleTest's source is
# taken from build/device-deps/googletest when the machine has none (copy
# /usr/src/googletest there). Each step has its own time limit so the whole
# run ends within about 10 minutes (the first took 6.5); the logs land in $OUT (default bench/out):
# device.log (what is printed), build.log, ctest.log, sanitizer.log,
# clocks.csv (SM clock each second from the first fd-bench on),
# fd-bench.csv, fd-bench-model.csv, fd-bench-model-e4m3.csv,
# fd-bench-model-fused.csv, fd-bench-model-bf16.csv,
# fd-bench-model-serial.csv (the f16 kernels with FD_PROGRAMMATIC_LAUNCH=0),
# fd-bench-window*.csv, peers.csv.
# FD_SKIP_PEERS=1 leaves out the PyTorch peers (they do not change with our
# kernels), FD_SKIP_GRID=1 the grid, FD_BENCH_QUICK=1 runs the grid with
# fewer repetitions.
# For a dry run without a GPU: FD_CUDA_DRIVER=.../libfdemu.so.
set -uo pipefail
kernels=$(realpath "${1:-build/bench-kernels}")
out=$(mkdir -p "${OUT:-bench/out}" && realpath "${OUT:-bench/out}")
quick=${FD_BENCH_QUICK:+--quick}
export FD_TEST_KERNELS="$kernels/tests"
# The modeled table as prepare_kernels.sh compiled it, whatever this
# machine's environment narrows.
unset MODEL_CONFIGS MODEL_SHAPES
source "$(dirname "$0")/plans.sh"
exec > >(tee "$out/device.log") 2>&1
step() { echo "== $* ($(date -u +%T))"; }

step machine
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm \
  --format=csv,noheader
nproc

step build
prefix=()
if [ -d build/device-deps/googletest ]; then
  { cmake -S build/device-deps/googletest -B /tmp/gtest-build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
      -DCMAKE_INSTALL_PREFIX=/tmp/gtest &&
      cmake --build /tmp/gtest-build --target install; } >"$out/build.log" 2>&1 &&
    prefix=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
fi
timeout 240 cmake -S . -B build-device -G Ninja -DFD_RUNTIME_ONLY=ON \
  -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" >>"$out/build.log" 2>&1 &&
  timeout 240 cmake --build build-device >>"$out/build.log" 2>&1 ||
  { echo "build failed:"; tail -30 "$out/build.log"; exit 1; }
test -x build-device/unittests/RuntimeGPUTest ||
  echo "RuntimeGPUTest was not built (no GoogleTest): no kernel tests"

step "GPU tests (ctest)"
(cd build-device && timeout 120 ctest --output-on-failure -j 4) \
  >"$out/ctest.log" 2>&1
grep -E "tests passed|Failed|\*\*\*|SKIPPED" "$out/ctest.log" | head -30

# The same C driver-API program on nvcc's kernels, checked against C
# computations (exact, exp2f within 2 ulp), on the real driver and on the
# emulator built here. (A store just past a small allocation faults on fdemu
# but may land inside the GPU's allocation granule: that difference is
# expected.)
step "fdemu against the real driver"
if [ -f "$kernels/emulator/driver_api_kernels.ptx" ]; then
  cc -O2 -o build-device/driver_api_program \
    unittests/Emulator/driver_api_program.c -ldl -lm &&
    for driver in libcuda.so.1 build-device/lib/libfdemu.so; do
      echo "-- $driver"
      timeout 60 build-device/driver_api_program "$driver" \
        "$kernels/emulator/driver_api_kernels.ptx"
      echo "exit $?"
    done
fi

if [ -d "$kernels/model" ]; then
  # The SM clock while the kernels run (latency-bound rows scale with it):
# sampled every second into clocks.csv until the script ends.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw \
  --format=csv -l 1 >"$out/clocks.csv" 2>&1 &
clocks=$!
trap 'kill $clocks 2>/dev/null' EXIT
fi
# The modeled table's shapes, measured: f16, e4m3 caches, the fused merge,
# bf16 (each directory when prepare_kernels.sh made it).
for variant in model model-e4m3 model-fused model-bf16; do
  [ -d "$kernels/$variant" ] || continue
  step "fd-bench: the modeled table's shapes ($variant), measured"
  # shellcheck disable=SC2086 # plans.sh's lists are words
  timeout 120 build-device/bin/fd-bench --kernels "$kernels/$variant" \
    --configs "$(comma_list $model_configs)" \
    --shapes "$(comma_list $model_shapes)" \
    --page-sizes "$(comma_list $model_page_sizes)" \
    --csv "$out/fd-bench-$variant.csv"
  echo "fd-bench exit $?"
done
# The f16 kernels again in plain stream order (FD_PROGRAMMATIC_LAUNCH=0):
# against fd-bench-model.csv, what programmatic launch saves on this GPU,
# which calibrates fdemu's resume latency (docs/Emulator.md).
if [ -d "$kernels/model" ]; then
  step "fd-bench: the modeled table's shapes (model), in plain stream order"
  # shellcheck disable=SC2086 # plans.sh's lists are words
  FD_PROGRAMMATIC_LAUNCH=0 timeout 120 build-device/bin/fd-bench \
    --kernels "$kernels/model" --configs "$(comma_list $model_configs)" \
    --shapes "$(comma_list $model_shapes)" \
    --csv "$out/fd-bench-model-serial.csv"
  echo "fd-bench exit $?"
fi

if [ -d "$kernels/window" ]; then
  step "fd-bench: a 128-key sliding window, measured"
  timeout 60 build-device/bin/fd-bench --kernels "$kernels/window" \
    --configs llama3-8b-w128 --shapes 1x32768,16x4096 \
    --csv "$out/fd-bench-window.csv"
  timeout 60 build-device/bin/fd-bench --kernels "$kernels/window" \
    --configs llama3-8b --shapes 1x128,16x128 \
    --csv "$out/fd-bench-window-nowindow.csv"
  echo "fd-bench exit $?"
fi

step "compute-sanitizer on the GPU tests"
if command -v compute-sanitizer >/dev/null; then
  for test in RuntimeGPUTest RuntimeGPUFeaturesTest RuntimeGPUPerHeadTest \
    RuntimeGPUQueryLensTest RuntimeGPUFloat8Test; do
    [ -x "build-device/unittests/$test" ] || continue
    for tool in memcheck racecheck synccheck initcheck; do
      echo "-- $test: $tool"
      timeout 60 compute-sanitizer --tool "$tool" --error-exitcode 3 \
        "build-device/unittests/$test" >>"$out/sanitizer.log" 2>&1
      echo "exit $? (0: clean; 3: errors reported; 124: out of time)"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" \
        "$out/sanitizer.log" | tail -3
    done
  done
fi

if [ -z "${FD_SKIP_PEERS:-}" ]; then
  step "PyTorch peers on the modeled table's shapes"
  timeout 150 python3 bench/peers.py --configs llama3-8b,mha,gqa8,mqa \
    --shapes 1x32768,16x4096 --ours "$out/fd-bench-model.csv" \
    --csv "$out/peers.csv"
fi
if [ -z "${FD_SKIP_GRID:-}" ]; then
  step "fd-bench: the grid"
  timeout 300 build-device/bin/fd-bench --kernels "$kernels" $quick \
    --csv "$out/fd-bench.csv"
  echo "fd-bench exit $?"
fi

step done
