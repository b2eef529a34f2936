#!/usr/bin/env python3
"""Checks that a shared prefix is loaded from DRAM once, in fdemu's counts.
Usage: check_shared_prefix_loads.py SHARED.csv PLAIN.csv: fd-bench CSVs of
one shape, SHARED's kernels compiled with --shared-prefix, PLAIN's without.
SHARED's call loads its one sequence's KV bytes and at most half as much
again (query, partials); PLAIN's loads every sequence's."""
import csv
import sys


def read_row(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if len(rows) != 1:
        sys.exit(f"{path}: {len(rows)} rows, expected 1")
    return rows[0]


def main():
    shared, plain = read_row(sys.argv[1]), read_row(sys.argv[2])
    batch = int(shared["batch"])
    prefix_bytes = int(shared["kv_bytes"])
    shared_loads = float(shared["dram_load_bytes"])
    plain_loads = float(plain["dram_load_bytes"])
    print(f"B = {batch}: shared prefix {shared_loads:.0f} bytes loaded for "
          f"{prefix_bytes} KV bytes; plain {plain_loads:.0f}; ratio "
          f"{plain_loads / shared_loads:.1f}")
    problems = []
    if shared["shared_prefix"] != "true" or plain["shared_prefix"] != "false":
        problems.append("the first CSV must be the shared prefix's")
    if not prefix_bytes <= shared_loads <= 1.5 * prefix_bytes:
        problems.append(f"the shared prefix's loads are not its KV bytes "
                        f"{prefix_bytes} once")
    if plain_loads < batch * prefix_bytes:
        problems.append(f"plain decode loads less than {batch} sequences")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
