#!/usr/bin/env bash
# Modeled on fdemu (emulated H200): the wide heads' decode at the shapes
# issue #33 names. MLA's absorbed decode (one latent cache, 576 / 512,
# DeepSeek's scale) at 16 heads, B = 1 and 16, L = 32k, pages of 64, bf16
# and e4m3 (one scale); at 128 heads, B = 64, L = 4k; Gemma 4's global
# layers (32 / 4 heads of 512), B = 1, L = 32k; then sm_90a's warpgroup
# (wgmma) tile at 128 heads, B = 64, L = 4k, and at Kimi K2's 64 and
# DeepSeek's 128 heads, B = 1, L = 32k, pages of 64. Each configuration compiled with
# fd-compile -o at its shape (automatic splits), run by fd-bench --kernels
# DIR, the rows gathered in one CSV. Usage:
# bench/wide_heads_fdemu.sh CSV [BUILD_DIR]
set -euo pipefail
csv=${1:?usage: bench/wide_heads_fdemu.sh CSV [BUILD_DIR]}
build=${2:-build}
kernels=$(mktemp -d)
trap 'rm -rf "$kernels"' EXIT
mla="--head-dim 576 --v-head-dim 512 --shared-kv --num-kv-heads 1 --dtype bf16 --scale 0.0721687824"
runs=(
  "mla16-bf16-p64-B1|1x32768|$mla --num-q-heads 16 --page-size 64"
  "mla16-bf16-p64-B16|16x32768|$mla --num-q-heads 16 --page-size 64"
  "mla16-e4m3-p64-B1|1x32768|$mla --num-q-heads 16 --page-size 64 --kv-dtype e4m3"
  "mla16-e4m3-p64-B16|16x32768|$mla --num-q-heads 16 --page-size 64 --kv-dtype e4m3"
  "mla128-bf16-B64|64x4096|$mla --num-q-heads 128"
  "gemma4-global-B1|1x32768|--head-dim 512 --num-q-heads 32 --num-kv-heads 4 --dtype bf16"
  "mla128-bf16-B64-sm90a|64x4096|$mla --num-q-heads 128 --arch sm_90a"
  "mla128-bf16-p64-B64-sm90a|64x4096|$mla --num-q-heads 128 --page-size 64 --arch sm_90a"
  "kimi64-bf16-p64-B1-sm90a|1x32768|$mla --num-q-heads 64 --page-size 64 --arch sm_90a"
  "mla128-bf16-p64-B1-sm90a|1x32768|$mla --num-q-heads 128 --page-size 64 --arch sm_90a"
)
rm -f "$csv"
for run in "${runs[@]}"; do
  IFS='|' read -r name shape flags <<<"$run"
  # shellcheck disable=SC2086 # the flags are words
  "$build/bin/fd-compile" $flags --batch "${shape%x*}" --max-len "${shape#*x}" \
    -o "$kernels/$name" >/dev/null
  FD_CUDA_DRIVER="$build/lib/libfdemu.so" "$build/bin/fd-bench" \
    --kernels "$kernels/$name" --shapes "$shape" --csv "$kernels/$name.csv" |
    grep "^| $name "
  if [ -f "$csv" ]; then tail -n +2 "$kernels/$name.csv" >>"$csv"
  else cp "$kernels/$name.csv" "$csv"; fi
done
