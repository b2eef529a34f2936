#!/usr/bin/env bash
# fdemu's performance model against a GPU: compiles the exact plans of a
# measured fd-bench CSV (same config, batch, max_len and split count; the
# count is passed explicitly, so a planner change cannot move a row), runs
# fd-bench on fdemu over them and prints, per row, the measured time next to
# the modeled one. The H200 runs, each on the PTX that ran there (a table
# for kernels of another compiler version compares different code):
#   0.2.2  2026-11-29, commit fd4058c (CUDA cores)
#   0.2.6  2026-11-29, commit 9d894a9
#   tc1    2026-11-29, the first tensor-core kernels (that day's third run)
#   0.2.7  2026-11-30, commit a75688d (the default)
# docs/Emulator.md says which runs the model's constants were fitted on and
# which are held out to validate them.
# Usage: bench/calibrate_model.sh [--all] [MEASURED_CSV] [MODELED_CSV]
#   --all: every run (or those of RUNS), a table and a summary line each,
#     then one summary line over all of them.
# Environment: BUILD (default build): fd-compile, fd-bench, fdemu.
#   RUN=0.2.2|0.2.6|tc1|0.2.7: which run when no CSV is given: its CSV and
#     its archived kernels, bench/results/h200-measured-kernels-$RUN.tar.xz.
#   RUNS="R1 R2 ...": the runs --all covers (default: all four).
#   ROWS=REGEX: only the measured rows whose "config,batch,max_len,mode"
#     matches (ctest fdemu-calibration models a subset).
#   KERNELS=DIR: use the kernels in DIR/<config>/B<b>_L<len>_<mode> instead
#     of compiling them (their split counts must be the CSV's).
#   REUSE=1: print the table from MODELED_CSV again, without running.
#   FDEMU_MODEL: constants of fdemu's model to override (docs/Emulator.md),
#     passed on to fdemu: how a fit tries other values.
#   BOUNDS="GEO_LOW GEO_HIGH AUTO ALL": fail (exit 1) when a run's geometric
#     mean of measured / modeled leaves [GEO_LOW, GEO_HIGH], an auto-split
#     row's ratio leaves [1 - AUTO, 1 + AUTO], or any row's [1 - ALL, 1 + ALL].
# MODELED_CSV defaults to $BUILD/calibration/<run>/modeled.csv.
set -euo pipefail
here=$(dirname "$0")
build=${BUILD:-build}
all_runs="0.2.2 0.2.6 tc1 0.2.7"

measured_csv() {
  case "$1" in
  0.2.2) echo "$here/results/h200-measured-model-shapes-2026-11-29.csv" ;;
  0.2.6) echo "$here/results/h200-measured-model-shapes-0.2.6-2026-11-29.csv" ;;
  tc1) echo "$here/results/h200-measured-model-shapes-tc1-2026-11-29.csv" ;;
  0.2.7) echo "$here/results/h200-measured-model-shapes-0.2.7-2026-11-30.csv" ;;
  *)
    echo "calibrate_model.sh: run '$1': the measured runs are $all_runs" >&2
    return 2
    ;;
  esac
}

if [ "${1:-}" = --all ]; then
  shift
  [ $# -eq 0 ] || {
    echo "calibrate_model.sh: --all takes no CSV (RUNS selects the runs)" >&2
    exit 2
  }
  status=0
  summaries=$(mktemp)
  trap 'rm -f "$summaries"' EXIT
  for run in ${RUNS:-$all_runs}; do
    measured_csv "$run" >/dev/null
    echo "== run $run"
    RUN=$run "$0" | tee -a "$summaries" || status=1
  done
  # One line over every run's rows: the per-row ratios were printed in
  # column 8 of each table.
  awk '$8 ~ /^[0-9.]+$/ && NF >= 8 {
      ratio = $8; sum += log(ratio); n++
      if (n == 1 || ratio < low) low = ratio
      if (n == 1 || ratio > high) high = ratio
    }
    END {
      if (n)
        printf "all runs: measured / modeled: %.2f to %.2f, geometric mean " \
          "%.2f (%d rows)\n", low, high, exp(sum / n), n
    }' "$summaries"
  exit $status
fi

run=${RUN:-0.2.7}
default_csv=$(measured_csv "$run")
measured=${1:-$default_csv}
modeled=${2:-$build/calibration/$run/modeled.csv}
dir=${KERNELS:-$build/calibration/$run/kernels}
rows=${ROWS:-.}
if [ -z "${KERNELS:-}" ] && [ $# -eq 0 ] && [ "${REUSE:-0}" != 1 ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  tar xJf "$here/results/h200-measured-kernels-$run.tar.xz" -C "$dir" \
    --strip-components=1
  KERNELS=$dir
fi
# The measured CSVs are from an H200: sm_90, 132 SMs.
gpu=h200 arch=sm_90 sms=132

source "$here/plans.sh"

selected=$(mktemp)
trap 'rm -f "$selected"' EXIT
awk -F, -v rows="$rows" 'FNR == 1 || ($1 "," $2 "," $3 "," $4) ~ rows' \
  "$measured" >"$selected"

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
  done <"$selected"
  mkdir -p "$(dirname "$modeled")"
  FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_GPU=$gpu "$build/bin/fd-bench" \
    --kernels "$dir" --configs "$configs" --shapes "$shapes" \
    --csv "$modeled" >&2
fi

grep -ho '"compiler_version": "[^"]*"' "$dir"/*/*/manifest.json | sort -u |
  sed 's/.*: "\(.*\)"/kernels: \1/'
# Join on (config, batch, max_len, mode); both CSVs have fd-bench's columns.
read -r geo_low geo_high auto_tolerance all_tolerance <<<"${BOUNDS:-0 1e9 1e9 1e9}"
awk -F, -v run="$run" -v geo_low="$geo_low" -v geo_high="$geo_high" \
  -v auto_tolerance="$auto_tolerance" -v all_tolerance="$all_tolerance" '
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
    tolerance = $4 == "auto" ? auto_tolerance : all_tolerance
    outside = ratio < 1 - tolerance || ratio > 1 + tolerance
    printf "%-10s %3d %6d %-4s %4d %12.1f %12.1f %7.2f  %s%s\n", $1, $2, $3,
      $4, $5, $6, modeled[key], ratio, bound[key],
      outside ? "  OUTSIDE +-" tolerance : ""
    failed = failed || outside
    sum += log(ratio)
    if (!n++ || ratio < low) low = ratio
    if (n == 1 || ratio > high) high = ratio
  }
  END {
    if (!n) {
      print "calibrate_model.sh: no measured row selected" > "/dev/stderr"
      exit 1
    }
    geo = exp(sum / n)
    printf "measured / modeled: %.2f to %.2f, geometric mean %.2f " \
      "(%d rows)\n", low, high, geo, n
    if (geo < geo_low || geo > geo_high) {
      printf "run %s: geometric mean %.3f outside [%s, %s]\n", run, geo,
        geo_low, geo_high > "/dev/stderr"
      failed = 1
    }
    exit missing || failed
  }' "$modeled" "$selected"
