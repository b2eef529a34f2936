#!/usr/bin/env bash
# Does `auto` pick the fastest modeled split count? For each configuration
# and shape of the modeled table (bench/model_fdemu.sh), fd-bench on fdemu
# models the planner's choice and a sweep of fixed split counts, then a table
# says, per shape, the planner's split count and time, the fastest of the
# sweep and the ratio. Times are modeled (emulated H200), eager, µs.
# Usage: [SPLITS="1 2 4 ..."] bench/split_sweep.sh [CSV] [config:BxL ...]
# CSV default bench/out/split-sweep-h200.csv; default shapes: the modeled
# table's (bench/plans.sh: six configs at 1x32768 and 16x4096). SPLITS default: 1 2 4 8 16 24 32 48 64
# 96 128 192 256 384 512, each kept where the chunk holds 32 keys or more.
# CSV columns: config,batch,max_len,num_splits,planned,time_us,
# graph_us_per_layer,bound (planned: the planner's choice, true/false).
# Expects a full build in $BUILD (default build): fd-compile, fd-bench, fdemu.
set -euo pipefail
csv=${1:-bench/out/split-sweep-h200.csv}
shift $(($# < 1 ? $# : 1))
shapes=("$@")
source "$(dirname "$0")/plans.sh"
if [ ${#shapes[@]} -eq 0 ]; then
  for config in $model_configs; do
    for shape in $model_shapes; do
      shapes+=("$config:$shape")
    done
  done
fi
build=${BUILD:-build}
splits=${SPLITS:-1 2 4 8 16 24 32 48 64 96 128 192 256 384 512}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$csv")"
echo "config,batch,max_len,num_splits,planned,time_us,graph_us_per_layer,bound" >"$csv"

# model CONFIG BATCH LEN SPLITS: one fd-bench row of the kernels of SPLITS
# ("auto" or a count), fd-compile -o's one configuration, appended to the
# CSV.
model() {
  local config=$1 batch=$2 len=$3 count=$4 dir=$work/$4
  rm -rf "$dir"
  compile_plan "$build/bin/fd-compile" "$dir" "$config" "$batch" "$len" \
    "$count" sm_90 132
  FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_GPU=h200 "$build/bin/fd-bench" \
    --kernels "$dir" --shapes "${batch}x$len" --csv "$dir.csv" >/dev/null
  awk -F, -v config="$config" \
    -v planned="$([ "$count" = auto ] && echo true || echo false)" '
    NR == 1 { for (i = 1; i <= NF; ++i) column[$i] = i; next }
    { printf "%s,%s,%s,%s,%s,%s,%.3f,%s\n", config, $column["batch"],
             $column["max_len"], $column["num_splits"], planned,
             $column["time_us"], $column["step32_graph_us"] / 32,
             $column["bound"] }' "$dir.csv" >>"$csv"
}

for shape in "${shapes[@]}"; do
  config=${shape%%:*} size=${shape#*:}
  batch=${size%x*} len=${size#*x}
  heads "$config" >/dev/null
  model "$config" "$batch" "$len" auto
  for count in $splits; do
    if [ $((len / count)) -ge 32 ]; then
      model "$config" "$batch" "$len" "$count"
    fi
  done
done

# One line per shape: the planner's choice against the sweep's fastest.
awk -F, 'NR > 1 {
    key = $1 "," $2 "," $3
    if (!(key in order)) { order[key] = ++shapes; names[shapes] = key }
    if ($5 == "true") { planned[key] = $4; plannedTime[key] = $6 }
    else if (!(key in best) || $6 < best[key]) { best[key] = $6; bestSplits[key] = $4 }
  }
  END {
    printf "| config | B | L | auto S | auto µs | fastest S | fastest µs | auto / fastest |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
    for (i = 1; i <= shapes; ++i) {
      key = names[i]; split(key, part, ",")
      fastest = best[key] < plannedTime[key] ? best[key] : plannedTime[key]
      fastestSplits = best[key] < plannedTime[key] ? bestSplits[key] : planned[key]
      printf "| %s | %s | %s | %s | %.1f | %s | %.1f | %.3f |\n", part[1],
             part[2], part[3], planned[key], plannedTime[key], fastestSplits,
             fastest, plannedTime[key] / fastest
    }
  }' "$csv"
echo "(modeled on fdemu, emulated H200; CSV: $csv)"
