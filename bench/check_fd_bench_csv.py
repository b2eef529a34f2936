#!/usr/bin/env python3
"""Checks an fd-bench CSV: the contract columns are there, every row fills
them, and the values are plausible. Usage: check_fd_bench_csv.py FILE
[--modeled] [--dtype DTYPE] [--paged PAGE] [--mix MIX]: with --dtype every
row's dtype is DTYPE; with --paged every config has a row paged with PAGE
tokens; with --mix, MIX is fd-bench's --instruction-mix CSV of the same
run: its columns, rows only for FILE's (config, batch, max_len, mode), and
every row's classes non-negative, global loads among them, adding up to its
total."""
import argparse
import csv
import sys

COLUMNS = ["config", "batch", "max_len", "mode", "num_splits", "time_us",
           "kv_bytes", "tb_per_s", "pct_copy_bw", "max_rel_err",
           "step32_eager_us", "step32_graph_us", "source", "bound", "device",
           "modeled", "num_q_heads", "num_kv_heads", "head_dim", "dtype",
           "page_size", "bytes", "roofline_fraction", "kv_dtype", "kv_scale",
           "copy_fraction", "graph_us_per_layer", "v_head_dim", "shared_kv",
           "shared_prefix", "dram_load_bytes", "kernel_us"]

MIX_CLASSES = ["fp_arith", "special_fn", "conversion", "shuffle",
               "int_other", "global_ld", "global_st", "shared_ld",
               "shared_st", "barrier", "control", "tensor"]
MIX_COLUMNS = (["config", "batch", "max_len", "mode", "num_splits", "dtype",
                "kv_dtype"] + MIX_CLASSES + ["total"])

# Bytes of a KV cache element: the query's type, or fp8.
CACHE_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "e4m3": 1, "e5m2": 1}


def check_kernel_times(field, modeled, call_us):
    """kernel_us: modeled, name:us:bound for each launch joined by ';',
    each time positive and within the call's; measured, '-'."""
    if not modeled:
        return [] if field == "-" else [f"kernel_us {field} on a measured row"]
    errors = []
    launches = field.split(";")
    if not launches[0].startswith("fd_partial_attention:"):
        errors.append(f"kernel_us {field}: the partial kernel launches first")
    for launch in launches:
        parts = launch.split(":")
        if len(parts) != 3 or not parts[0] or not parts[2]:
            errors.append(f"kernel_us entry {launch!r} is not name:us:bound")
            continue
        try:
            us = float(parts[1])
        except ValueError:
            errors.append(f"kernel_us entry {launch!r}: {parts[1]!r} is not "
                          "a time")
            continue
        if not 0 < us <= call_us:
            errors.append(f"kernel_us {launch}: not in (0, time_us {call_us}]")
    return errors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--modeled", action="store_true")
    parser.add_argument("--dtype")
    parser.add_argument("--paged", type=int)
    parser.add_argument("--mix")
    args = parser.parse_args()
    path, modeled = args.path, args.modeled
    rows, checked, errors = read_rows(path, COLUMNS)
    for number, fields in checked:
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
        # A shared prefix is one sequence, read once for the batch.
        prefix = fields["shared_prefix"] == "true"
        if fields["shared_prefix"] not in ("true", "false"):
            errors.append(f"line {number}: shared_prefix "
                          f"{fields['shared_prefix']}")
        sequences = 1 if prefix else int(fields["batch"])
        tokens_heads = (sequences * int(fields["max_len"]) *
                        int(fields["num_kv_heads"]))
        # A latent cache's rows once (shared_kv), else keys and values.
        shared = fields["shared_kv"] == "true"
        if fields["shared_kv"] not in ("true", "false"):
            errors.append(f"line {number}: shared_kv {fields['shared_kv']}")
        kv = (CACHE_ELEMENT_BYTES[kv_dtype] * tokens_heads *
              (int(fields["head_dim"]) +
               (0 if shared else int(fields["v_head_dim"]))))
        if int(fields["kv_bytes"]) != kv:
            errors.append(f"line {number}: kv_bytes {fields['kv_bytes']}, "
                          f"expected {kv}")
        # k_scale and v_scale (k_scale alone for a latent cache): a float
        # each per tensor or per token and head.
        arrays = 1 if shared else 2
        scales = (0 if not fp8 else arrays * 4 if kv_scale == "tensor"
                  else arrays * 4 * tokens_heads)
        if int(fields["bytes"]) <= kv + scales:
            errors.append(f"line {number}: bytes {fields['bytes']} must "
                          f"exceed the KV bytes {kv} and the scales' "
                          f"{scales}")
        # Against the datasheet's bandwidth and the achievable one (a
        # device copy's): the copy fraction is the larger, as the copy
        # reaches less than the datasheet.
        fraction = float(fields["roofline_fraction"])
        copy = float(fields["copy_fraction"])
        if not 0.0 < fraction <= 1.05:
            errors.append(f"line {number}: roofline_fraction {fraction}")
        if not fraction <= copy <= 1.05:
            errors.append(f"line {number}: copy_fraction {copy} not in "
                          f"[roofline_fraction {fraction}, 1.05]")
        # Modeled: the launches' DRAM loads hold the cache's bytes at least
        # (a shared prefix's once); measured rows have no such count.
        loads = float(fields["dram_load_bytes"])
        if (modeled and loads < 0.99 * kv) or (not modeled and loads != -1):
            errors.append(f"line {number}: dram_load_bytes {loads} for "
                          f"{'at least' if modeled else 'no count but'} "
                          f"{kv if modeled else -1}")
        errors.extend(f"line {number}: {error}" for error in
                      check_kernel_times(fields["kernel_us"], modeled,
                                         float(fields["time_us"])))
        graph = float(fields["graph_us_per_layer"])
        step = float(fields["step32_graph_us"])
        if (graph < 0) != (step < 0) or (
                step >= 0 and abs(graph * 32 - step) > 0.01 * step + 0.05):
            errors.append(f"line {number}: graph_us_per_layer {graph} for "
                          f"a 32-layer graph step of {step} us")
        # Paged modes end in p<page>: p16 (the grid's), s8p64 (one
        # configuration's kernels, fd-compile -o).
        mode = fields["mode"]
        if int(fields["page_size"]) != (int(mode.split("p")[1])
                                        if "p" in mode else 0):
            errors.append(f"line {number}: page_size {fields['page_size']} "
                          f"for mode {fields['mode']}")
        if args.dtype and fields["dtype"] != args.dtype:
            errors.append(f"line {number}: dtype {fields['dtype']}, expected "
                          f"{args.dtype}")
    if args.paged:
        configs = {row[0] for row in rows}
        paged = {row[0] for row in rows
                 if len(row) == len(COLUMNS) and
                 row[3].endswith(f"p{args.paged}")}
        for config in sorted(configs - paged):
            errors.append(f"config {config}: no row paged with "
                          f"{args.paged} tokens")
    if args.mix:
        errors += check_mix(args.mix, rows)
    for error in errors:
        print(f"{path}: {error}")
    print(f"{path}: {len(rows)} rows, {len(errors)} problems")
    return 1 if errors else 0


def read_rows(path, columns):
    """A CSV's rows as read, the (line number, fields) of those with every
    column, and the problems of its header, emptiness and row widths."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = list(reader)
    errors = []
    if header != columns:
        errors.append(f"header {header} is not {columns}")
    if not rows:
        errors.append("no rows")
    checked = []
    for number, row in enumerate(rows, 2):
        if len(row) != len(columns):
            errors.append(f"line {number}: {len(row)} fields, expected "
                          f"{len(columns)}")
            continue
        checked.append((number, dict(zip(columns, row))))
    return rows, checked, errors


def check_mix(path, rows):
    """The --instruction-mix CSV against the main CSV's rows."""
    _, checked, errors = read_rows(path, MIX_COLUMNS)
    keys = {tuple(row[:4]) for row in rows}
    for number, fields in checked:
        key = tuple(fields[name] for name in MIX_COLUMNS[:4])
        if key not in keys:
            errors.append(f"line {number}: {list(key)} is no row of the "
                          f"main CSV")
        counts = [float(fields[name]) for name in MIX_CLASSES]
        if min(counts) < 0 or float(fields["global_ld"]) <= 0 or \
                abs(sum(counts) - float(fields["total"])) > 0.01 * len(counts):
            errors.append(f"line {number}: classes {counts} and total "
                          f"{fields['total']}")
    return [f"{path}: {error}" for error in errors]


if __name__ == "__main__":
    sys.exit(main())
