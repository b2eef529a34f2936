#!/usr/bin/env bash
# Compiles, here (with MLIR), every kernel fd-bench and the GPU tests load on
# the device machine (which has no MLIR): DIR/<config>/B<b>_L<len>_<auto|s1>,
# DIR/paged/, DIR/tests/<name>, DIR/model/, DIR/model-e4m3/ (fp8 caches),
# DIR/model-fused/ (the fused merge) and DIR/model-bf16/
# (bench/model_kernels.sh) and
# DIR/window/ (the sliding-window plans of bench/plans.sh). Usage:
# bench/prepare_kernels.sh [--quick] [--arch TARGET] [--sm-count N] [DIR]
# [fd-compile]. With --quick, only what
# `fd-bench --quick` reads (make test runs that on fdemu); --arch (default
# sm_90) is the GPU's target: sm_80 for an A100, sm_86, sm_89, sm_90.
set -euo pipefail
batches="1 8 64" lengths="1024 4096 16384 65536 131072" quick= arch=sm_90 sms=132
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) batches="1 8" lengths="1024 16384" quick=1; shift ;;
    --arch) arch=${2:?--arch needs a target}; shift 2 ;;
    --sm-count) sms=${2:?--sm-count needs a number}; shift 2 ;;
    *) break ;;
  esac
done
dir=${1:-build/bench-kernels}
compile=${2:-build/bin/fd-compile}
rm -rf "$dir"
source "$(dirname "$0")/plans.sh"
for name in llama3-8b mha; do
  for batch in $batches; do
    for len in $lengths; do
      for mode in auto s1; do
        splits=$([ "$mode" = auto ] && echo auto || echo 1)
        compile_plan "$compile" "$dir/$name/B${batch}_L${len}_${mode}" \
          "$name" "$batch" "$len" "$splits" "$arch" "$sms"
      done
    done
  done
done
# Paged vs dense (fd-bench, --quick too): llama3-8b, auto splits.
for batch in 1 8; do
  for len in 16384 65536; do
    for page in 16 64; do
      "$compile" --no-cache --head-dim 128 --num-q-heads 32 --num-kv-heads 8 \
        --dtype f16 --arch "$arch" --sm-count "$sms" --page-size "$page" \
        --batch "$batch" --max-len "$len" \
        -o "$dir/paged/B${batch}_L${len}_p${page}" >/dev/null
    done
  done
done
# For RuntimeGPUTest, and nvcc's kernels of fdemu's driver-API program (run
# there on the real driver to compare with the emulator).
if [ -z "$quick" ]; then
  "$(dirname "$0")/test_kernels.sh" "$dir/tests" "$compile" "$arch"
  "$(dirname "$0")/model_kernels.sh" "$dir/model" "$arch" "$sms" "$compile"
  KV_DTYPE=e4m3 "$(dirname "$0")/model_kernels.sh" "$dir/model-e4m3" "$arch" \
    "$sms" "$compile"
  MERGE=fused "$(dirname "$0")/model_kernels.sh" "$dir/model-fused" "$arch" \
    "$sms" "$compile"
  DTYPE=bf16 "$(dirname "$0")/model_kernels.sh" "$dir/model-bf16" "$arch" \
    "$sms" "$compile"
  compile_window_plans "$compile" "$dir/window" "$arch" "$sms"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ]; then
    mkdir -p "$dir/emulator"
    "$nvcc" -ptx -arch=sm_80 "$(dirname "$0")/../unittests/Emulator/driver_api_kernels.cu" \
      -o "$dir/emulator/driver_api_kernels.ptx"
  fi
fi
echo "kernels in $dir: $(find "$dir" -name manifest.json | wc -l) configurations"
