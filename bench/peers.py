#!/usr/bin/env python3
"""Times PyTorch's decode attention on the shapes fd-bench times.

torch.nn.functional.scaled_dot_product_attention (flash backend) and
FlexAttention (which uses split-KV decoding for short queries), on random
f16 data in the same layouts, with CUDA events (median of many). With
--ours FILE (fd-bench's CSV) it prints our time over theirs per row.
Needs PyTorch with CUDA; runs on the GPU machine (bench/run_on_device.sh).
"""
import argparse
import csv
import statistics
import sys

CONFIGS = {"llama3-8b": (32, 8, 128), "mha": (32, 32, 128),
           "gqa8": (64, 8, 128), "mqa": (32, 1, 128)}
BATCHES = (1, 8, 64)
LENGTHS = (1024, 4096, 16384, 65536, 131072)


def median_us(torch, function, iterations=50, warmup=5):
    for _ in range(warmup):
        function()
    times = []
    for _ in range(iterations):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--ours", help="fd-bench's CSV, to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--configs", default="llama3-8b,mha",
                        help="of " + ", ".join(CONFIGS))
    parser.add_argument("--shapes", help="BxL pairs, e.g. 1x32768,16x4096, "
                        "instead of the grid")
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:
        print(f"peers: PyTorch is not available ({error})")
        return 2
    if not torch.cuda.is_available():
        print("peers: no CUDA device visible to PyTorch")
        return 2
    flex = None
    try:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    except Exception as error:  # FlexAttention is recent; report, go on.
        print(f"peers: FlexAttention unavailable ({error})")

    ours = {}
    if args.ours:
        with open(args.ours) as handle:
            for row in csv.DictReader(handle):
                if row["mode"] == "auto":
                    key = (row["config"], int(row["batch"]), int(row["max_len"]))
                    ours[key] = float(row["time_us"])

    batches = (1, 8) if args.quick else BATCHES
    lengths = (1024, 16384) if args.quick else LENGTHS
    shapes = [(b, l) for b in batches for l in lengths]
    if args.shapes:
        shapes = [tuple(int(n) for n in shape.split("x"))
                  for shape in args.shapes.split(",")]
    configs = args.configs.split(",")
    unknown = [name for name in configs if name not in CONFIGS]
    if unknown:
        print(f"peers: unknown config {unknown[0]!r} (of {', '.join(CONFIGS)})")
        return 2
    rows = []
    print("| config | B | L | SDPA flash us | Flex us | ours us | "
          "ours/SDPA | ours/Flex |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in configs:
        hq, hkv, d = CONFIGS[name]
        for batch, length in shapes:
            if 4 * batch * length * hkv * d > (100 << 30):
                continue
            q = torch.randn(batch, hq, 1, d, device="cuda",
                            dtype=torch.float16)
            k = torch.randn(batch, hkv, length, d, device="cuda",
                            dtype=torch.float16)
            v = torch.randn_like(k)
            try:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    sdpa = median_us(torch, lambda: F.scaled_dot_product_attention(
                        q, k, v, enable_gqa=hkv != hq))
            except RuntimeError as error:
                print(f"peers: SDPA flash failed for {name} B={batch} "
                      f"L={length}: {error}")
                sdpa = float("nan")
            flex_us = float("nan")
            if flex is not None:
                try:
                    flex_us = median_us(torch, lambda: flex(
                        q, k, v, enable_gqa=hkv != hq))
                except Exception as error:
                    print(f"peers: FlexAttention failed for {name} "
                          f"B={batch} L={length}: {error}")
            mine = ours.get((name, batch, length), float("nan"))
            rows.append((name, batch, length, sdpa, flex_us, mine))
            print(f"| {name} | {batch} | {length} | {sdpa:.1f} | "
                  f"{flex_us:.1f} | {mine:.1f} | {mine / sdpa:.2f} | "
                  f"{mine / flex_us:.2f} |", flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["config", "batch", "max_len", "sdpa_flash_us",
                             "flex_us", "ours_us"])
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
