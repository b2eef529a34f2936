#!/usr/bin/env bash
# The kernels of the modeled table (bench/model_fdemu.sh) and of its measured
# twin on a GPU (bench/run_on_device.sh): plans.sh's model_configs
# (Llama-3-8B 32/8, MHA 32/32, GQA-8 64/8 and MQA 32/1 at D=128, gpt-oss
# 64/8 at D=64, Gemma-2-9B 16/8 at D=256; NHD), auto splits planned for the
# GPU's SMs and one split, at B=1 L=32768 and B=16 L=4096, and paged (page
# 16, auto splits) at both.
# Usage: [DTYPE=f16|bf16] [KV_DTYPE=e4m3|e5m2 [KV_SCALE=tensor|token-head]]
#        [MERGE=fused] bench/model_kernels.sh DIR TARGET SMS [fd-compile]
# DTYPE is the queries' and (without KV_DTYPE) the caches' type; default f16.
# KV_DTYPE compiles every plan for fp8 caches (fd-compile --kv-dtype, and
# --kv-scale KV_SCALE, default tensor); unset, the caches hold f16.
# MERGE=fused merges in the partial kernel (fd-compile --fused-merge);
# unset or "separate", a merge kernel follows it.
set -euo pipefail
dir=${1:?usage: bench/model_kernels.sh DIR TARGET SMS [fd-compile]}
arch=${2:?missing TARGET (sm_80, sm_90)}
sms=${3:?missing the SM count of the GPU}
fd_compile=${4:-build/bin/fd-compile}
case ${DTYPE:=f16} in
f16 | bf16) export DTYPE ;;
*)
  echo "model_kernels.sh: unknown DTYPE '$DTYPE' (f16, bf16)" >&2
  exit 2
  ;;
esac
kv_flags=()
case ${KV_DTYPE:-} in
"")
  if [ -n "${KV_SCALE:-}" ]; then
    echo "model_kernels.sh: KV_SCALE needs KV_DTYPE (e4m3 or e5m2)" >&2
    exit 2
  fi
  ;;
e4m3 | e5m2)
  case ${KV_SCALE:=tensor} in
  tensor | token-head) ;;
  *)
    echo "model_kernels.sh: unknown KV_SCALE '$KV_SCALE' (tensor, token-head)" >&2
    exit 2
    ;;
  esac
  kv_flags=(--kv-dtype "$KV_DTYPE" --kv-scale "$KV_SCALE")
  ;;
*)
  echo "model_kernels.sh: unknown KV_DTYPE '$KV_DTYPE' (e4m3, e5m2)" >&2
  exit 2
  ;;
esac
merge_flags=()
case ${MERGE:-separate} in
separate) ;;
fused) merge_flags=(--fused-merge) ;;
*)
  echo "model_kernels.sh: unknown MERGE '$MERGE' (separate, fused)" >&2
  exit 2
  ;;
esac
# compile_plan (plans.sh) runs this with the plan's flags; it adds the
# caches' and the merge's.
compile_with_kv_flags() {
  "$fd_compile" "$@" ${kv_flags[@]+"${kv_flags[@]}"} \
    ${merge_flags[@]+"${merge_flags[@]}"}
}
compile=compile_with_kv_flags
source "$(dirname "$0")/plans.sh"
rm -rf "$dir"
for name in $model_configs; do
  for shape in $model_shapes; do
    batch=${shape%x*} len=${shape#*x}
    for mode in auto s1; do
      splits=$([ "$mode" = auto ] && echo auto || echo 1)
      compile_plan "$compile" "$dir/$name/B${batch}_L${len}_${mode}" \
        "$name" "$batch" "$len" "$splits" "$arch" "$sms"
    done
    for page in $model_page_sizes; do
      compile_plan "$compile" "$dir/$name/B${batch}_L${len}_p$page" \
        "$name" "$batch" "$len" auto "$arch" "$sms" "$page"
    done
  done
done
