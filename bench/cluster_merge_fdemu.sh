#!/usr/bin/env bash
# Modeled on fdemu (emulated H200): MLA's split-value tile on sm_90 with a
# chunk's blocks in a thread block cluster (cluster_ctas = C, merged in
# distributed shared memory) against one block a chunk, at B = 1 (and 16),
# L = 32k, pages of 64: DeepSeek's 16 heads in bf16 and e4m3, 32 and 128
# heads, Kimi K2's 64 (and on sm_90a's warpgroup tile Kimi K2 and 128
# heads, "-sm90a"). Rows "-c1": the planner's schedule written by hand
# (cluster_ctas = 1: the split count planned for one block a chunk);
# "-cCsS": C blocks a chunk at S splits, by hand; "-plan": the planner's own
# choice (automatic splits, clusters where it takes them). Each compiled
# with fd-compile -o and run by fd-bench --kernels DIR; the rows gathered
# in one CSV. Usage:
# bench/cluster_merge_fdemu.sh CSV [BUILD_DIR]
set -euo pipefail
csv=${1:?usage: bench/cluster_merge_fdemu.sh CSV [BUILD_DIR]}
build=${2:-build}
kernels=$(mktemp -d)
trap 'rm -rf "$kernels"' EXIT
mla="--head-dim 576 --v-head-dim 512 --shared-kv --num-kv-heads 1 --dtype bf16 --scale 0.0721687824 --page-size 64"
tile="form = tensor_cores, rows_per_tile = 16, threads = 128, min_blocks_per_sm = 2, held_query_steps = 9, stages = 4"
warpgroup="form = warpgroup_tensor_cores, rows_per_tile = 64, threads = 256, min_blocks_per_sm = 1, stages = 4"
# name | batch | heads | extra flags | row tiles | splits | cluster_ctas
# (empty: no schedule, the planner's)
runs=(
  "mla16-bf16-c1|1|16||1|auto|1"
  "mla16-bf16-c8s16|1|16||1|16|8"
  "mla16-bf16-c8s32|1|16||1|32|8"
  "mla16-bf16-c8s33|1|16||1|33|8"
  "mla16-bf16-c4s64|1|16||1|64|4"
  "mla16-bf16-plan|1|16||1|auto|"
  "mla16-e4m3-c1|1|16|--kv-dtype e4m3|1|auto|1"
  "mla16-e4m3-c8s32|1|16|--kv-dtype e4m3|1|32|8"
  "mla16-e4m3-c4s64|1|16|--kv-dtype e4m3|1|64|4"
  "mla16-e4m3-plan|1|16|--kv-dtype e4m3|1|auto|"
  "mla16-bf16-B16-c1|16|16||1|auto|1"
  "mla16-bf16-B16-c8s2|16|16||1|2|8"
  "mla16-bf16-B16-plan|16|16||1|auto|"
  "mla32-bf16-c1|1|32||2|auto|1"
  "mla32-bf16-plan|1|32||2|auto|"
  "kimi64-bf16-c1|1|64||4|auto|1"
  "kimi64-bf16-c2s33|1|64||4|33|2"
  "kimi64-bf16-c8s8|1|64||4|8|8"
  "kimi64-bf16-plan|1|64||4|auto|"
  "mla128-bf16-c1|1|128||8|auto|1"
  "mla128-bf16-c4s8|1|128||8|8|4"
  "kimi64-bf16-sm90a-c1|1|64|--arch sm_90a|1|auto|1"
  "kimi64-bf16-sm90a-c2s64|1|64|--arch sm_90a|1|64|2"
  "kimi64-bf16-sm90a-c4s32|1|64|--arch sm_90a|1|32|4"
  "kimi64-bf16-sm90a-c8s16|1|64|--arch sm_90a|1|16|8"
  "kimi64-bf16-sm90a-plan|1|64|--arch sm_90a|1|auto|"
  "mla128-bf16-sm90a-c1|1|128|--arch sm_90a|2|auto|1"
  "mla128-bf16-sm90a-c4s16|1|128|--arch sm_90a|2|16|4"
)
rm -f "$csv"
for run in "${runs[@]}"; do
  IFS='|' read -r name batch heads extra tiles splits cluster <<<"$run"
  schedule=()
  form=$tile
  if [[ "$extra" == *sm_90a* ]]; then form=$warpgroup; fi
  if [ -n "$cluster" ]; then
    schedule=(--schedule "$form, row_tiles = $tiles, cluster_ctas = $cluster")
  fi
  # shellcheck disable=SC2086 # the flags are words
  "$build/bin/fd-compile" $mla $extra --num-q-heads "$heads" --batch "$batch" \
    --max-len 32768 --num-splits "$splits" "${schedule[@]}" \
    -o "$kernels/$name" >/dev/null
  FD_CUDA_DRIVER="$build/lib/libfdemu.so" "$build/bin/fd-bench" \
    --kernels "$kernels/$name" --shapes "${batch}x32768" \
    --csv "$kernels/$name.csv" |
    grep "^| $name "
  if [ -f "$csv" ]; then tail -n +2 "$kernels/$name.csv" >>"$csv"
  else cp "$kernels/$name.csv" "$csv"; fi
done
