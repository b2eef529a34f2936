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
           "page_size", "bytes", "roofline_fraction", "kv_dtype", "kv_scale"]

# Bytes of a KV cache element: the query's type, or fp8.
CACHE_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "e4m3": 1, "e5m2": 1}


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
        kv_dtype, kv_scale = fields["kv_dtype"], fields["kv_scale"]
        fp8 = kv_dtype in ("e4m3", "e5m2")
        if kv_dtype not in CACHE_ELEMENT_BYTES or (
                not fp8 and kv_dtype != fields["dtype"]):
            errors.append(f"line {number}: kv_dtype {kv_dtype} is neither "
                          f"e4m3, e5m2 nor the dtype {fields['dtype']}")
            continue
        if kv_scale not in (("tensor", "token-head") if fp8 else ("none",)):
            errors.append(f"line {number}: kv_scale {kv_scale} for kv_dtype "
                          f"{kv_dtype}")
            continue
        tokens_heads = (int(fields["batch"]) * int(fields["max_len"]) *
                        int(fields["num_kv_heads"]))
        kv = (2 * CACHE_ELEMENT_BYTES[kv_dtype] * tokens_heads *
              int(fields["head_dim"]))
        if int(fields["kv_bytes"]) != kv:
            errors.append(f"line {number}: kv_bytes {fields['kv_bytes']}, "
                          f"expected {kv}")
        # k_scale and v_scale: a float each per tensor or per token and head.
        scales = (0 if not fp8 else 2 * 4 if kv_scale == "tensor"
                  else 2 * 4 * tokens_heads)
        if int(fields["bytes"]) <= kv + scales:
            errors.append(f"line {number}: bytes {fields['bytes']} must "
                          f"exceed the KV bytes {kv} and the scales' "
                          f"{scales}")
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
