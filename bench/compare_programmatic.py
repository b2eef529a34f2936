#!/usr/bin/env python3
"""Compares two fd-bench CSVs of the same kernels and shapes: OVERLAPPED
(kernels launched with programmatic stream serialization, the default) and
ORDERED (FD_PROGRAMMATIC_LAUNCH=0). Every split row (a partial kernel and a
merge) of ORDERED must be slower than OVERLAPPED's, eagerly and in its
graph step; ORDERED may cover fewer configs, but every row of it must be
in OVERLAPPED. Prints each row's saving and "N rows,
P problems"; exits 1 on a problem. Usage: compare_programmatic.py
OVERLAPPED.csv ORDERED.csv"""
import sys

from check_fd_bench_csv import COLUMNS, read_rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    problems = []

    def rows(path):
        # fd-bench's rows by shape, through the CSV checker's reader.
        _, checked, errors = read_rows(path, COLUMNS)
        problems.extend(f"{path}: {error}" for error in errors)
        return {(r["config"], r["batch"], r["max_len"], r["mode"],
                 r["page_size"]): r for _, r in checked}

    overlapped, ordered = rows(sys.argv[1]), rows(sys.argv[2])
    for key in sorted(ordered.keys() - overlapped.keys()):
        problems.append(f"{','.join(key)} is not in {sys.argv[1]}")
    compared = 0
    for key in sorted(overlapped.keys() & ordered.keys()):
        fast, slow = overlapped[key], ordered[key]
        if int(fast["num_splits"]) < 2:
            continue
        compared += 1
        for column in ("time_us", "step32_eager_us", "step32_graph_us"):
            a, b = float(fast[column]), float(slow[column])
            if a < 0 and b < 0:
                continue  # not timed
            print(f"{','.join(key)} {column}: {b:.2f} -> {a:.2f} "
                  f"({b - a:.2f} saved)")
            if not a < b:
                problems.append(f"{','.join(key)} {column}: overlapped {a} "
                                f"is not below ordered {b}")
    if not compared:
        problems.append("no split row to compare")
    for problem in problems:
        print("problem:", problem)
    print(f"{compared} rows, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
