#!/bin/bash
# Shows that the kernel matrix at its default heads (FD_MATRIX_MAX_KV_HEADS,
# unittests/KernelMatrix.h) runs every path of the kernels that it runs at
# MAX_KV_HEADS (default 32, the heads it had before): for each configuration,
# KernelMatrixOnGPUTest runs on fdemu at both with FDEMU_COVERAGE, and the
# two records must give every kernel the same guarded instructions (branches
# included), each guard true and false alike, and as many instructions
# never run.
#
#   tools/compare_matrix_coverage.sh [BUILD_DIR] [GTEST_FILTER]
#
# JOBS (default 2) runs configurations side by side. Prints each
# configuration whose coverage differs (and how), then one line:
# `coverage: N configurations, N differ`; exits 1 when any differs or a
# test failed.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
filter=${2:-*}
test=$build/unittests/KernelMatrixOnGPUTest
[ -x "$test" ] || { echo "no $test: build first (make build)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FD_CUDA_DRIVER=$build/lib/libfdemu.so FDEMU_PTXAS= FDEMU_THREADS=1
unset FD_MATRIX_MAX_KV_HEADS # "default": the matrix's own
export MAX_KV_HEADS=${MAX_KV_HEADS:-32} work test

compare_one() {
  name=$1
  dir=$work/$(echo "$name" | tr '/' '_')
  mkdir -p "$dir"
  for heads in default "$MAX_KV_HEADS"; do
    setting=()
    [ "$heads" = default ] || setting=(FD_MATRIX_MAX_KV_HEADS="$heads")
    env "${setting[@]}" FDEMU_COVERAGE="$dir/$heads" \
      "$test" --gtest_filter="$name" > "$dir/$heads.log" 2>&1 ||
      { echo "FAILED $name at $heads KV heads"; return; }
    # Per kernel its guarded instructions in order (branches included),
    # each with its opcode and flags, and how many instructions never ran:
    # the heads are constants of the PTX, whose arithmetic on them differs
    # by an instruction here and there, but not its guards.
    awk '/^fdemu coverage:/ { if (name) print name, "unreached", u
                              name = $4; u = 0; g = 0; next }
         $2 == "--" { ++u }
         substr($3, 1, 1) == "@" { print name, ++g, $4, $2 }
         END { if (name) print name, "unreached", u }' \
      "$dir/$heads" > "$dir/$heads.flags"
  done
  if ! diff -q "$dir/default.flags" "$dir/$MAX_KV_HEADS.flags" > /dev/null; then
    echo "DIFFERS $name:"
    diff "$dir/default.flags" "$dir/$MAX_KV_HEADS.flags" | head -20 |
      sed 's/^/    /'
  else
    echo "same $name"
  fi
}
export -f compare_one

"$test" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' |
  xargs -P "${JOBS:-2}" -I{} bash -c 'compare_one "$@"' _ {} > "$work/results"
grep -v '^same ' "$work/results" || true
total=$(grep -c '' "$work/results" || true)
bad=$(grep -vc '^same ' "$work/results" || true)
echo "coverage: $total configurations, $bad differ"
[ "$bad" -eq 0 ]
