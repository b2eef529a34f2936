#!/bin/bash
# Runs the Python suite (ctest's python/ tests) N times, each run with a
# fresh FD_TEST_SEED (python/tests/conftest.py), to find tests that fail by
# chance:
#
#   tools/repeat_python_tests.sh N [BUILD_DIR]
#
# Prints per run its seed and the tests that failed, then one line,
# `python suite: N runs, F with failures`; exits 1 when any run failed.
# Rerun a failure with the seed printed: FD_TEST_SEED=S ctest -R TEST. JOBS
# (default 2) tests run side by side; logs go to BUILD_DIR/repeat-python/.
set -uo pipefail
runs=${1:?usage: tools/repeat_python_tests.sh N [BUILD_DIR]}
build=$(cd "${2:-build}" && pwd)
logs=$build/repeat-python
mkdir -p "$logs"
failed=0
for run in $(seq 1 "$runs"); do
  seed=$(/usr/bin/python3 -c 'import secrets; print(secrets.randbits(63))')
  log=$logs/run$run-seed$seed.log
  FD_TEST_SEED=$seed ctest --test-dir "$build" -R '^python/' \
    -j "${JOBS:-2}" --output-on-failure > "$log" 2>&1
  failures=$(grep -E '^\s+[0-9]+ - python/' "$log" | grep -v '(Skipped)' |
    awk '{print $3}' | tr '\n' ' ')
  if [ -n "$failures" ]; then
    failed=$((failed + 1))
    echo "run $run FD_TEST_SEED=$seed: FAILED $failures($log)"
  else
    echo "run $run FD_TEST_SEED=$seed: $(grep -E 'tests passed' "$log")"
  fi
done
echo "python suite: $runs runs, $failed with failures"
[ "$failed" -eq 0 ]
