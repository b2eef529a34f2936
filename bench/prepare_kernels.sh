#!/usr/bin/env bash
# Compiles, here (with MLIR), every kernel fd-bench and the GPU tests load on
# the device machine (which has no MLIR): DIR/<config>/B<b>_L<len>_<auto|s1>
# and DIR/tests/<name>. Usage: bench/prepare_kernels.sh [DIR] [fd-compile].
set -euo pipefail
dir=${1:-build/bench-kernels}
compile=${2:-build/bin/fd-compile}
rm -rf "$dir"
for config in "llama3-8b 32 8" "mha 32 32"; do
  read -r name hq hkv <<<"$config"
  for batch in 1 8 64; do
    for len in 1024 4096 16384 65536 131072; do
      for mode in auto s1; do
        splits=$([ "$mode" = auto ] && echo auto || echo 1)
        "$compile" --no-cache --head-dim 128 --num-q-heads "$hq" \
          --num-kv-heads "$hkv" --dtype f16 --kv-layout NHD --arch sm_90 \
          --num-splits "$splits" --batch "$batch" --max-len "$len" \
          -o "$dir/$name/B${batch}_L${len}_${mode}" >/dev/null
      done
    done
  done
done
# Paged vs dense (fd-bench): llama3-8b, auto splits.
for batch in 1 8; do
  for len in 16384 65536; do
    for page in 16 64; do
      "$compile" --no-cache --head-dim 128 --num-q-heads 32 --num-kv-heads 8 \
        --dtype f16 --arch sm_90 --page-size "$page" --batch "$batch" \
        --max-len "$len" -o "$dir/paged/B${batch}_L${len}_p${page}" >/dev/null
    done
  done
done
# For RuntimeGPUTest: GQA with lse (f16, bf16), HND, speculative decoding.
common="--no-cache --arch sm_90 --head-dim 128 --num-q-heads 8 --num-kv-heads 2"
"$compile" $common --dtype f16 --num-splits 5 --with-lse -o "$dir/tests/gqa_f16" >/dev/null
"$compile" $common --dtype bf16 --num-splits 5 --with-lse -o "$dir/tests/gqa_bf16" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --kv-layout HND --with-lse -o "$dir/tests/gqa_hnd" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --with-lse -o "$dir/tests/spec4" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --page-size 16 --with-lse -o "$dir/tests/paged16" >/dev/null
"$compile" $common --dtype bf16 --num-splits 6 --page-size 64 --kv-layout HND --query-len 8 --with-lse -o "$dir/tests/paged_spec" >/dev/null
echo "kernels in $dir: $(find "$dir" -name manifest.json | wc -l) configurations"
