"""Plots of fd-bench (and bench/peers.py) results.

    python3 -m flashdecode.plot bench/out/fd-bench.csv \
        [--peers bench/out/peers.csv] --out bench/plots

writes bandwidth.png (effective TB/s vs context length, auto splits vs one
split, per batch size), graph.png (32-layer decode step, eager launches vs
CUDA-graph replay) and, with --peers, peers.png (our time over PyTorch's).
"""
import argparse
import csv
import os
import sys
from collections import defaultdict


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_bandwidth(rows, path):
    plt = _pyplot()
    configs = sorted({row["config"] for row in rows})
    figure, axes = plt.subplots(1, len(configs), figsize=(6 * len(configs), 4),
                                squeeze=False)
    for axis, config in zip(axes[0], configs):
        series = defaultdict(list)
        for row in rows:
            if row["config"] == config:
                series[(int(row["batch"]), row["mode"])].append(
                    (int(row["max_len"]), float(row["tb_per_s"])))
        for (batch, mode), points in sorted(series.items()):
            points.sort()
            axis.plot([p[0] for p in points], [p[1] for p in points],
                      marker="o", linestyle="-" if mode == "auto" else "--",
                      label=f"B={batch} {'auto splits' if mode == 'auto' else '1 split'}")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("effective bandwidth (TB/s)")
        axis.set_title(config)
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_graph(rows, path):
    plt = _pyplot()
    labels, eager, graph = [], [], []
    for row in rows:
        if row["mode"] == "auto" and float(row["step32_eager_us"]) > 0:
            labels.append(f"{row['config']}\nB={row['batch']} L={row['max_len']}")
            eager.append(float(row["step32_eager_us"]))
            graph.append(float(row["step32_graph_us"]))
    figure, axis = plt.subplots(figsize=(max(6, len(labels) * 0.5), 4))
    positions = range(len(labels))
    axis.bar([p - 0.2 for p in positions], eager, 0.4, label="eager launches")
    axis.bar([p + 0.2 for p in positions], graph, 0.4, label="CUDA graph")
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=90, fontsize=6)
    axis.set_yscale("log")
    axis.set_ylabel("32-layer step (us)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_peers(rows, path):
    plt = _pyplot()
    labels, sdpa, flex = [], [], []
    for row in rows:
        ours = float(row["ours_us"])
        labels.append(f"{row['config']}\nB={row['batch']} L={row['max_len']}")
        sdpa.append(ours / float(row["sdpa_flash_us"]))
        flex.append(ours / float(row["flex_us"]))
    figure, axis = plt.subplots(figsize=(max(6, len(labels) * 0.5), 4))
    positions = range(len(labels))
    axis.bar([p - 0.2 for p in positions], sdpa, 0.4, label="ours / SDPA flash")
    axis.bar([p + 0.2 for p in positions], flex, 0.4, label="ours / FlexAttention")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=90, fontsize=6)
    axis.set_ylabel("time ratio (lower is better for us)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="fd-bench --csv output")
    parser.add_argument("--peers", help="bench/peers.py --csv output")
    parser.add_argument("--out", default="bench/plots")
    args = parser.parse_args(argv)
    if not os.path.exists(args.results):
        print(f"plot: no results at {args.results} yet: run "
              "bench/run_on_device.sh on a GPU machine first; the plots "
              f"would go to {args.out}/")
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows = read_rows(args.results)
    written = [os.path.join(args.out, "bandwidth.png"),
               os.path.join(args.out, "graph.png")]
    plot_bandwidth(rows, written[0])
    plot_graph(rows, written[1])
    if args.peers:
        written.append(os.path.join(args.out, "peers.png"))
        plot_peers(read_rows(args.peers), written[-1])
    print("plot: wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
