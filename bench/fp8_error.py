#!/usr/bin/env python3
"""What an fp8 KV cache costs in accuracy: the error table of bench/RESULTS.md.

Quantizes f32 caches with flashdecode.quantize_kv (E4M3 and E5M2, one scale
per tensor or per token and KV head), runs decode_attention on them (the CPU
backend: the same semantics as the GPU kernels, tested equal on fdemu) and
reports the output's error against the float64 attention over the
*unquantized* caches, beside the same figure for an f16 cache (what fp8 adds
to what 16-bit storage already costs). Two kinds of data: normal caches, and
caches whose keys have outlier channels (4 of D channels 100x larger, as real
K caches have after RoPE; their queries smaller so that scores stay a few
units). Llama-3-8B's heads (Hq 32, Hkv 8, D 128), f16 queries, B=4,
L=1024 (the lengths vary); relative errors: max |out - ref| / max |ref| and
RMS(out - ref) / RMS(ref) over all outputs, mean over --seeds seeds.

    python3 bench/fp8_error.py [--build-dir build] [--seeds N] [--csv FILE]

Needs the build's Python module. Reported, not asserted: the tests check
the kernels against the reference on the dequantized caches.
"""
import argparse
import csv
import os
import platform
import sys

import numpy as np

HEADS, KV_HEADS, DIM = 32, 8, 128
BATCH, LENGTH = 4, 1024
OUTLIER_CHANNELS = (5, 37, 70, 101)


def caches(rng, outliers):
    """(q, k, v) in float32 / float16: unit-normal caches, keys with outlier
    channels when asked, queries scaled to scores of a few units."""
    k = rng.standard_normal((BATCH, LENGTH, KV_HEADS, DIM)).astype(np.float32)
    v = rng.standard_normal(k.shape).astype(np.float32)
    q = rng.standard_normal((BATCH, HEADS, DIM))
    if outliers:
        k[..., OUTLIER_CHANNELS] *= 100.0
        q *= 0.05
    return q.astype(np.float16), k, v


def errors(out, expected):
    out = out.astype(np.float64)
    difference = out - expected
    return (np.abs(difference).max() / np.abs(expected).max(),
            np.sqrt((difference ** 2).mean() / (expected ** 2).mean()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--csv", default="bench/out/fp8-error.csv")
    args = parser.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    sys.path.insert(0, os.path.join(build_dir, "python"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python", "tests"))
    import flashdecode
    import reference

    cache_kinds = [("f16", None, None)] + [
        (dtype, dtype, granularity)
        for dtype in ("float8_e4m3fn", "float8_e5m2")
        for granularity in ("tensor", "token_head")]
    rows = []
    for outliers in (False, True):
        totals = {kind: np.zeros(2) for kind in cache_kinds}
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            q, k, v = caches(rng, outliers)
            lens = rng.integers(LENGTH // 2, LENGTH + 1, BATCH).astype(
                np.int32)
            expected, _ = reference.attention(q.astype(np.float64), k, v,
                                              lens)
            for kind in cache_kinds:
                name, dtype, granularity = kind
                if dtype is None:
                    out = flashdecode.decode_attention(
                        q, k.astype(np.float16), v.astype(np.float16), lens,
                        backend="cpu")
                else:
                    k8, v8, k_scale, v_scale = flashdecode.quantize_kv(
                        k, v, dtype, granularity=granularity)
                    out = flashdecode.decode_attention(
                        q, k8, v8, lens, backend="cpu", kv_dtype=dtype,
                        k_scale=k_scale, v_scale=v_scale)
                totals[kind] += errors(np.asarray(out), expected)
        for kind in cache_kinds:
            name, dtype, granularity = kind
            max_error, rms_error = totals[kind] / args.seeds
            rows.append({"data": "outlier channels" if outliers else "normal",
                         "cache": name if dtype else "f16",
                         "scales": granularity or "-",
                         "max_rel_error": f"{max_error:.3g}",
                         "rms_rel_error": f"{rms_error:.3g}"})

    print(f"machine: {platform.node()} ({platform.machine()}), "
          f"{args.seeds} seeds, Hq {HEADS} Hkv {KV_HEADS} D {DIM}, "
          f"B {BATCH} L <= {LENGTH}, f16 queries")
    print(f"{'data':<18} {'cache':<15} {'scales':<11} "
          f"{'max rel err':>12} {'rms rel err':>12}")
    for row in rows:
        print(f"{row['data']:<18} {row['cache']:<15} {row['scales']:<11} "
              f"{row['max_rel_error']:>12} {row['rms_rel_error']:>12}")
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
