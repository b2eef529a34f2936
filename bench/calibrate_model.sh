#!/usr/bin/env bash
# fdemu's performance model against a GPU: compiles the exact plans of a
# measured fd-bench CSV (same config, batch, max_len and split count; the
# count is passed explicitly, so a planner change cannot move a row), runs
# fd-bench on fdemu over them and prints, per row, the measured time next to
# the modeled one. Default: one of the H200 runs (RUN=0.2.7, the default,
# 2026-11-30, commit a75688d; of 2026-11-29: RUN=0.2.6, commit 9d894a9;
# RUN=0.2.2, commit fd4058c; RUN=tc1), each on the PTX
# that ran there: a table for kernels of another compiler version compares
# different code.
# Usage: bench/calibrate_model.sh [MEASURED_CSV] [MODELED_CSV]
# Environment: BUILD (default build): fd-compile, fd-bench, fdemu.
#   RUN=0.2.2|0.2.6|tc1|0.2.7: which run (tc1: the first tensor-core kernels,
#     commit 5 of this date's third run) when no CSV is given: its CSV and
#     its archived kernels, bench/h200-measured-kernels-$RUN.tar.xz.
#   KERNELS=DIR: use the kernels in DIR/<config>/B<b>_L<len>_<mode> instead
#     of compiling them (their split counts must be the CSV's).
#   REUSE=1: print the table from MODELED_CSV again, without running.
# MODELED_CSV defaults to $BUILD/calibration/modeled.csv.
set -euo pipefail
run=${RUN:-0.2.7}
case "$run" in
0.2.2) default_csv=bench/h200-measured-model-shapes-2026-11-29.csv ;;
0.2.6) default_csv=bench/h200-measured-model-shapes-0.2.6-2026-11-29.csv ;;
tc1) default_csv=bench/h200-measured-model-shapes-tc1-2026-11-29.csv ;;
0.2.7) default_csv=bench/h200-measured-model-shapes-0.2.7-2026-11-30.csv ;;
*) echo "calibrate_model.sh: RUN=$run: the measured runs are 0.2.2, 0.2.6, tc1, 0.2.7" >&2
  exit 2 ;;
esac
measured=${1:-$default_csv}
build=${BUILD:-build}
modeled=${2:-$build/calibration/modeled.csv}
dir=${KERNELS:-$build/calibration/kernels}
if [ -z "${KERNELS:-}" ] && [ $# -eq 0 ] && [ "${REUSE:-0}" != 1 ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  tar xJf "$(dirname "$0")/h200-measured-kernels-$run.tar.xz" -C "$dir" \
    --strip-components=1
  KERNELS=$dir
fi
# The measured CSVs are from an H200: sm_90, 132 SMs.
gpu=h200 arch=sm_90 sms=132

source "$(dirname "$0")/plans.sh"

if [ "${REUSE:-0}" != 1 ]; then
  [ -n "${KERNELS:-}" ] || rm -rf "$dir"
  configs=
  shapes=
  while IFS=, read -r config batch len mode splits _; do
    [ "$config" = config ] && continue
    plan=$dir/$config/B${batch}_L${len}_$mode
    if [ -z "${KERNELS:-}" ]; then
      compile_plan "$build/bin/fd-compile" "$plan" "$config" "$batch" "$len" \
        "$splits" "$arch" "$sms"
    elif ! grep -q "\"num_splits\": $splits," "$plan/manifest.json"; then
      echo "calibrate_model.sh: $plan does not have $splits splits" >&2
      exit 2
    fi
    case ",$configs," in
    *",$config,"*) ;;
    *) configs=${configs:+$configs,}$config ;;
    esac
    case ",$shapes," in
    *",${batch}x$len,"*) ;;
    *) shapes=${shapes:+$shapes,}${batch}x$len ;;
    esac
  done <"$measured"
  mkdir -p "$(dirname "$modeled")"
  FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_GPU=$gpu "$build/bin/fd-bench" \
    --kernels "$dir" --configs "$configs" --shapes "$shapes" \
    --csv "$modeled" >&2
fi

grep -ho '"compiler_version": "[^"]*"' "$dir"/*/*/manifest.json | sort -u |
  sed 's/.*: "\(.*\)"/kernels: \1/'
# Join on (config, batch, max_len, mode); both CSVs have fd-bench's columns.
awk -F, '
  BEGIN {
    printf "%-10s %3s %6s %-4s %4s %12s %12s %7s  %s\n", "config", "B", "L",
      "mode", "S", "measured us", "modeled us", "ratio", "bound"
  }
  FNR == 1 { next }
  NR == FNR {
    key = $1 "," $2 "," $3 "," $4
    modeled[key] = $6
    bound[key] = $14
    next
  }
  {
    key = $1 "," $2 "," $3 "," $4
    if (!(key in modeled)) {
      printf "no modeled row for %s\n", key > "/dev/stderr"
      missing = 1
      next
    }
    ratio = $6 / modeled[key]
    printf "%-10s %3d %6d %-4s %4d %12.1f %12.1f %7.2f  %s\n", $1, $2, $3,
      $4, $5, $6, modeled[key], ratio, bound[key]
    sum += log(ratio)
    if (!n++ || ratio < low) low = ratio
    if (n == 1 || ratio > high) high = ratio
  }
  END {
    if (n)
      printf "measured / modeled: %.2f to %.2f, geometric mean %.2f " \
        "(%d rows)\n", low, high, exp(sum / n), n
    exit missing
  }' "$modeled" "$measured"
