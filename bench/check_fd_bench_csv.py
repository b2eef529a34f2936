#!/usr/bin/env python3
"""Checks an fd-bench CSV: the contract columns are there, every row fills
them, and the values are plausible. Usage: check_fd_bench_csv.py FILE
[--modeled]"""
import csv
import sys

COLUMNS = ["config", "batch", "max_len", "mode", "num_splits", "time_us",
           "kv_bytes", "tb_per_s", "pct_copy_bw", "max_rel_err",
           "step32_eager_us", "step32_graph_us", "source", "bound", "device",
           "modeled", "num_q_heads", "num_kv_heads", "head_dim", "dtype",
           "page_size", "bytes", "roofline_fraction"]


def main():
    path = sys.argv[1]
    modeled = "--modeled" in sys.argv[2:]
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = list(reader)
    errors = []
    if header != COLUMNS:
        errors.append(f"header {header} is not {COLUMNS}")
    if not rows:
        errors.append("no rows")
    for number, row in enumerate(rows, 2):
        if len(row) != len(COLUMNS):
            errors.append(f"line {number}: {len(row)} fields, expected "
                          f"{len(COLUMNS)}")
            continue
        fields = dict(zip(COLUMNS, row))
        if fields["modeled"] != ("true" if modeled else "false"):
            errors.append(f"line {number}: modeled={fields['modeled']}")
        kv = (4 * int(fields["batch"]) * int(fields["max_len"]) *
              int(fields["num_kv_heads"]) * int(fields["head_dim"]))
        if int(fields["kv_bytes"]) != kv:
            errors.append(f"line {number}: kv_bytes {fields['kv_bytes']}, "
                          f"expected {kv}")
        if int(fields["bytes"]) <= kv:
            errors.append(f"line {number}: bytes {fields['bytes']} must "
                          f"exceed the KV bytes {kv}")
        fraction = float(fields["roofline_fraction"])
        if not 0.0 < fraction <= 1.05:
            errors.append(f"line {number}: roofline_fraction {fraction}")
        if int(fields["page_size"]) != (int(fields["mode"][1:])
                                        if fields["mode"].startswith("p")
                                        else 0):
            errors.append(f"line {number}: page_size {fields['page_size']} "
                          f"for mode {fields['mode']}")
    for error in errors:
        print(f"{path}: {error}")
    print(f"{path}: {len(rows)} rows, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
