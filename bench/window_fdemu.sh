#!/usr/bin/env bash
# What a sliding window costs, modeled on fdemu: Llama-3-8B's heads (32/8,
# D=128, f16) with a 128-key window (gpt-oss') over a 32k cache at B=1 and
# a 4k cache at B=16, against the same heads without a window over a
# 128-key cache and over the whole cache. (Windowed plans are interpreted
# at their full length: the cache is allocated, B=16 x 32k would be 2 GiB.) The splits cut only the window's keys
# (fd-split-kv plans for W + Lq - 1 keys), so the first should cost about
# what the second does, not the third.
# Usage: bench/window_fdemu.sh [h200|a100] [CSV]
# Expects a full build in $BUILD (default build): fd-compile, fd-bench, fdemu.
set -euo pipefail
gpu=${1:-h200}
csv=${2:-bench/out/fdemu-window-$gpu.csv}
build=${BUILD:-build}
case $gpu in
h200) arch=sm_90 sms=132 ;;
a100) arch=sm_80 sms=108 ;;
*)
  echo "window_fdemu.sh: unknown GPU '$gpu' (h200, a100)" >&2
  exit 2
  ;;
esac
source "$(dirname "$0")/plans.sh"
dir=$build/fdemu-window-kernels/$gpu
rm -rf "$dir"
compile_window_plans "$build/bin/fd-compile" "$dir" "$arch" "$sms"
mkdir -p "$(dirname "$csv")"
run() {
  FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_GPU=$gpu "$build/bin/fd-bench" \
    --kernels "$dir" --configs "$1" --shapes "$2" --csv "$3"
}
run llama3-8b-w128 1x32768,16x4096 "$csv"
run llama3-8b 1x128,16x128,1x32768,16x4096 "$csv.nowindow"
tail -n +2 "$csv.nowindow" >>"$csv" && rm "$csv.nowindow"
# time of the window over 32k / time of a 128-key cache, auto splits.
awk -F, '$4 == "auto" { t[$1 "," $2 "," $3] = $6 }
  END {
    for (b = 1; b <= 16; b += 15) {
      l = b == 1 ? 32768 : 4096
      printf "B=%d: 128-key window over L=%d %.1f us, 128-key cache %.1f " \
        "us (ratio %.2f), whole L=%d cache %.1f us\n", b, l,
        t["llama3-8b-w128," b "," l], t["llama3-8b," b ",128"],
        t["llama3-8b-w128," b "," l] / t["llama3-8b," b ",128"], l,
        t["llama3-8b," b "," l]
    }
  }' "$csv"
