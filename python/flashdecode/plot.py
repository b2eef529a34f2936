"""Plots of fd-bench (and bench/peers.py) results.

    python3 -m flashdecode.plot RESULTS.csv [--peers PEERS.csv] --out DIR

writes bandwidth.png (effective TB/s against the context length, a line per
batch size and mode: auto splits, s1 one split, p16 paged with 16 tokens a
page, s8p64 ...; a panel per config), graph.png (the 32-layer decode step,
eager launches against one CUDA-graph replay, per config and shape) and,
with --peers, peers.png (RESULTS' auto rows over PyTorch's times for the
same shapes; the peers' own ``ours_us`` column is not read). Every title
says where the times come from: "modeled on fdemu (...)" or "measured on
<GPU>"; a CSV of both is refused, and so is a ratio of modeled times to
measured ones.
"""
import argparse
import csv
import math
import os
import re
import sys
from collections import defaultdict

# Figures stay under 2000 pixels wide.
_DPI = 100
_MAX_WIDTH_INCHES = 19.5


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def describe_source(rows):
    """"modeled on fdemu (emulated H200)" or "measured on NVIDIA H200": the
    rows' own ``modeled`` and ``device`` columns (ValueError when they mix
    modeled and measured rows)."""
    sources = {(row.get("modeled"), row.get("device")) for row in rows}
    kinds = {modeled for modeled, _ in sources}
    if kinds - {"true", "false"}:
        return "source not recorded (no modeled/device columns)"
    if len(kinds) > 1:
        raise ValueError("the results hold modeled and measured rows: plot "
                         "them apart")
    devices = ", ".join(sorted(device for _, device in sources))
    return ("modeled on " if kinds == {"true"} else "measured on ") + devices


def describe_mode(mode):
    """fd-bench's mode column in words: auto, s1, s8, p16, s8p64."""
    match = re.fullmatch(r"(auto|s(\d+))?(?:p(\d+))?", mode)
    if not match or not mode:
        return mode
    splits = ("auto splits" if match.group(1) in (None, "auto") else
              "1 split" if match.group(2) == "1" else
              f"{match.group(2)} splits")
    return splits + (f", pages of {match.group(3)}" if match.group(3) else "")


def plot_bandwidth(rows, path, source):
    plt = _pyplot()
    configs = sorted({row["config"] for row in rows})
    columns = min(3, len(configs))
    lines = math.ceil(len(configs) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(
        min(_MAX_WIDTH_INCHES, max(8, 6 * columns)), 4 * lines + 0.6),
        squeeze=False)
    for axis, config in zip(axes.flat, configs):
        series = defaultdict(list)
        for row in rows:
            if row["config"] == config:
                series[(int(row["batch"]), row["mode"])].append(
                    (int(row["max_len"]), float(row["tb_per_s"])))
        for (batch, mode), points in sorted(series.items()):
            points.sort()
            axis.plot([p[0] for p in points], [p[1] for p in points],
                      marker="o", linestyle="-" if mode == "auto" else "--",
                      label=f"B={batch}, {describe_mode(mode)} ({mode})")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("effective bandwidth (TB/s)")
        axis.set_title(config)
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(configs):]:
        axis.set_visible(False)
    figure.suptitle(f"KV-cache bandwidth, {source}")
    _save(plt, figure, path)


def plot_graph(rows, path, source):
    plt = _pyplot()
    labels, eager, graph = [], [], []
    for row in rows:
        if row["mode"] == "auto" and float(row["step32_eager_us"]) > 0:
            labels.append(f"{row['config']}\nB={row['batch']} "
                          f"L={row['max_len']}")
            eager.append(float(row["step32_eager_us"]))
            graph.append(float(row["step32_graph_us"]))
    figure, axis = plt.subplots(figsize=(
        min(_MAX_WIDTH_INCHES, max(8, 0.9 * len(labels))), 4.5))
    positions = range(len(labels))
    axis.bar([p - 0.2 for p in positions], eager, 0.4, label="eager launches")
    axis.bar([p + 0.2 for p in positions], graph, 0.4,
             label="one CUDA-graph replay")
    # The replay's saving a layer, which a linear scale shows small.
    for position, slow, fast in zip(positions, eager, graph):
        axis.annotate(f"-{(slow - fast) / 32:.1f} µs\na layer",
                      (position + 0.2, fast), ha="center", va="bottom",
                      fontsize=7)
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=90, fontsize=7)
    axis.set_ylabel("32-layer decode step (µs)")
    axis.set_title(f"Launch cost of a decode step, {source}")
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    _save(plt, figure, path)


def peer_ratios(rows, peers):
    """(labels, ours / SDPA flash, ours / FlexAttention, unmatched peer
    shapes): ours is RESULTS' auto row of the same config, batch and
    length."""
    ours = {(row["config"], row["batch"], row["max_len"]): float(row["time_us"])
            for row in rows if row["mode"] == "auto"}
    labels, sdpa, flex, unmatched = [], [], [], []
    for peer in peers:
        key = (peer["config"], peer["batch"], peer["max_len"])
        if key not in ours:
            unmatched.append("/".join(key))
            continue
        labels.append(f"{key[0]}\nB={key[1]} L={key[2]}")
        sdpa.append(ours[key] / float(peer["sdpa_flash_us"]))
        flex.append(ours[key] / float(peer["flex_us"]))
    return labels, sdpa, flex, unmatched


def plot_peers(rows, peers, path, source):
    labels, sdpa, flex, unmatched = peer_ratios(rows, peers)
    if unmatched:
        print("plot: no auto row in the results for the peers' "
              + ", ".join(unmatched))
    if not labels:
        raise ValueError("no shape of the peers' CSV has an auto row in the "
                         "results")
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(
        min(_MAX_WIDTH_INCHES, max(8, 0.8 * len(labels))), 4.5))
    positions = range(len(labels))
    axis.bar([p - 0.2 for p in positions], sdpa, 0.4, label="ours / SDPA flash")
    axis.bar([p + 0.2 for p in positions], flex, 0.4,
             label="ours / FlexAttention")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=90, fontsize=7)
    axis.set_ylabel("time ratio (below 1: ours faster)")
    axis.set_title(f"flashdecode ({source}) over PyTorch (the peers' CSV)")
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    _save(plt, figure, path)


def _save(plt, figure, path):
    figure.tight_layout()
    figure.savefig(path, dpi=_DPI)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="fd-bench --csv output")
    parser.add_argument("--peers", help="bench/peers.py --csv output")
    parser.add_argument("--out", default="bench/plots")
    args = parser.parse_args(argv)
    if not os.path.exists(args.results):
        print(f"plot: no results at {args.results}: fd-bench --csv writes "
              "them (on a GPU, or on fdemu with FD_CUDA_DRIVER set to "
              "flashdecode.emulator_library(); `make demo` does the latter)")
        return 2
    rows = read_rows(args.results)
    if not rows:
        print(f"plot: {args.results} holds no rows")
        return 2
    try:
        source = describe_source(rows)
        peers = read_rows(args.peers) if args.peers else None
        if peers is not None and not source.startswith("measured on"):
            raise ValueError("the peers' times are measured and the results "
                             f"are not ({source}): no ratio of the two")
    except ValueError as error:
        print(f"plot: {args.results}: {error}")
        return 2
    os.makedirs(args.out, exist_ok=True)
    written = [os.path.join(args.out, "bandwidth.png"),
               os.path.join(args.out, "graph.png")]
    plot_bandwidth(rows, written[0], source)
    plot_graph(rows, written[1], source)
    if peers is not None:
        written.append(os.path.join(args.out, "peers.png"))
        try:
            plot_peers(rows, peers, written[-1], source)
        except ValueError as error:
            print(f"plot: {args.peers}: {error}")
            return 2
    print("plot: wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
