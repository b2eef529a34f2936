#!/usr/bin/env bash
# The modeled table of bench/RESULTS.md, without a GPU: fd-bench on fdemu
# for the configs, shapes and page sizes of bench/plans.sh (Llama-3-8B 32/8,
# MHA 32/32, GQA-8 64/8, MQA 32/1 at D=128, gpt-oss 64/8 at D=64, Gemma-2-9B
# 16/8 at D=256; NHD; auto splits planned for the emulated GPU's SMs, one
# split, and paged with page 16) at B=1 L=32768 and B=16 L=4096. Times are
# modeled, extrapolated from two short lengths (fd-bench --tokens-per-split;
# 0 interprets the full length).
# Usage: [DTYPE=f16|bf16] [KV_DTYPE=e4m3|e5m2 [KV_SCALE=tensor|token-head]]
#        [MERGE=fused] bench/model_fdemu.sh [h200|a100] [CSV] [flags...]
# DTYPE=bf16 models bf16 queries and caches, its own kernel directory and
# default CSV (...-bf16). Beside CSV, CSV-mix.csv: the partial kernel's warp
# instructions per token and KV head by class (fd-bench --instruction-mix).
# KV_DTYPE models the same kernels over fp8 caches (bench/model_kernels.sh;
# KV_SCALE default tensor), into their own kernel directory and default CSV
# (fdemu-model-GPU-KV_DTYPE-KV_SCALE); unset, the caches hold f16.
# MERGE=fused models the fused merge (bench/model_kernels.sh), its own
# kernel directory and default CSV (...-fused).
# Expects a full build in $BUILD (default build): fd-compile, fd-bench, fdemu;
# the kernels go to KERNELS_DIR (default $BUILD/fdemu-model-kernels/GPU...).
set -euo pipefail
gpu=${1:-h200}
variant=
if [ "${DTYPE:-f16}" != f16 ]; then
  variant=-$DTYPE
fi
if [ -n "${KV_DTYPE:-}" ]; then
  export KV_SCALE=${KV_SCALE:-tensor}
  variant=$variant-$KV_DTYPE-$KV_SCALE
fi
if [ "${MERGE:-separate}" = fused ]; then
  variant=$variant-fused
fi
csv=${2:-bench/out/fdemu-model-$gpu$variant.csv}
shift $(($# < 2 ? $# : 2))
build=${BUILD:-build}
case $gpu in
h200) arch=sm_90 sms=132 ;;
a100) arch=sm_80 sms=108 ;;
*)
  echo "model_fdemu.sh: unknown GPU '$gpu' (h200, a100)" >&2
  exit 2
  ;;
esac
dir=${KERNELS_DIR:-$build/fdemu-model-kernels/$gpu$variant}
"$(dirname "$0")/model_kernels.sh" "$dir" "$arch" "$sms" "$build/bin/fd-compile"
source "$(dirname "$0")/plans.sh"
mkdir -p "$(dirname "$csv")"
# shellcheck disable=SC2086 # the lists are words
FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_GPU=$gpu "$build/bin/fd-bench" \
  --kernels "$dir" --configs "$(comma_list $model_configs)" \
  --shapes "$(comma_list $model_shapes)" \
  --page-sizes "$(comma_list $model_page_sizes)" --csv "$csv" \
  --instruction-mix "${csv%.csv}-mix.csv" "$@"
