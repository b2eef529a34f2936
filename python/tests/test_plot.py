"""plot.py turns fd-bench and peers CSVs into PNGs."""
import csv

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed")
from flashdecode import plot  # noqa: E402

FIELDS = ["config", "batch", "max_len", "mode", "num_splits", "time_us",
          "kv_bytes", "tb_per_s", "pct_copy_bw", "max_rel_err",
          "step32_eager_us", "step32_graph_us"]


def test_writes_the_plots(tmp_path):
    results = tmp_path / "fd-bench.csv"
    with open(results, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        for mode in ("auto", "s1"):
            for length in (1024, 4096):
                writer.writerow(["llama3-8b", 1, length, mode, 16, 10.0,
                                 1e6, 3.9, 90.0, 1e-3,
                                 400.0 if mode == "auto" else -1,
                                 300.0 if mode == "auto" else -1])
    peers = tmp_path / "peers.csv"
    with open(peers, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config", "batch", "max_len", "sdpa_flash_us",
                         "flex_us", "ours_us"])
        writer.writerow(["llama3-8b", 1, 1024, 12.0, 11.0, 10.0])
    out = tmp_path / "plots"
    assert plot.main([str(results), "--peers", str(peers), "--out", str(out)]) == 0
    for name in ("bandwidth.png", "graph.png", "peers.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000


def test_says_where_results_come_from(tmp_path, capsys):
    assert plot.main([str(tmp_path / "missing.csv")]) == 2
    assert "run bench/run_on_device.sh" in capsys.readouterr().out
