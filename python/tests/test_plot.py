"""plot.py turns fd-bench and peers CSVs into PNGs, labelled with where
their times come from."""
import csv
import struct

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed")
from flashdecode import plot  # noqa: E402

FIELDS = ["config", "batch", "max_len", "mode", "num_splits", "time_us",
          "kv_bytes", "tb_per_s", "pct_copy_bw", "max_rel_err",
          "step32_eager_us", "step32_graph_us", "device", "modeled"]


def write_results(path, modeled="false", device="NVIDIA H200",
                  modes=("auto", "s1", "p16")):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        for mode in modes:
            for length in (1024, 4096):
                timed = mode == "auto"
                writer.writerow(["llama3-8b", 1, length, mode, 16,
                                 10.0 * length / 1024, 1e6, 3.9, 90.0, 1e-3,
                                 400.0 if timed else -1,
                                 300.0 if timed else -1, device, modeled])


def write_peers(path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config", "batch", "max_len", "sdpa_flash_us",
                         "flex_us", "ours_us"])
        # ours_us is stale: the ratio must come from the results (40 us).
        writer.writerow(["llama3-8b", 1, 4096, 80.0, 20.0, 999.0])
        writer.writerow(["mqa", 1, 4096, 80.0, 20.0, 999.0])


def png_size(path):
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    return struct.unpack(">II", data[16:24])


def test_writes_the_plots_within_2000_pixels(tmp_path, capsys):
    results, peers = tmp_path / "fd-bench.csv", tmp_path / "peers.csv"
    write_results(results)
    write_peers(peers)
    out = tmp_path / "plots"
    assert plot.main([str(results), "--peers", str(peers), "--out",
                      str(out)]) == 0
    assert "no auto row in the results for the peers' mqa/1/4096" in (
        capsys.readouterr().out)
    for name in ("bandwidth.png", "graph.png", "peers.png"):
        width, height = png_size(out / name)
        assert 400 <= width <= 2000 and height >= 300


def test_peer_ratios_read_the_results_not_the_peers_ours_column(tmp_path):
    results, peers = tmp_path / "fd-bench.csv", tmp_path / "peers.csv"
    write_results(results)
    write_peers(peers)
    labels, sdpa, flex, unmatched = plot.peer_ratios(
        plot.read_rows(results), plot.read_rows(peers))
    assert labels == ["llama3-8b\nB=1 L=4096"]
    assert sdpa == [0.5] and flex == [2.0]
    assert unmatched == ["mqa/1/4096"]


def test_every_mode_is_named():
    assert plot.describe_mode("auto") == "auto splits"
    assert plot.describe_mode("s1") == "1 split"
    assert plot.describe_mode("s8") == "8 splits"
    assert plot.describe_mode("p16") == "auto splits, pages of 16"
    assert plot.describe_mode("s8p64") == "8 splits, pages of 64"


def test_titles_say_modeled_or_measured(tmp_path):
    results = tmp_path / "fd-bench.csv"
    write_results(results, "true", "fdemu (emulated H200)")
    assert plot.describe_source(plot.read_rows(results)) == (
        "modeled on fdemu (emulated H200)")
    write_results(results)
    assert plot.describe_source(plot.read_rows(results)) == (
        "measured on NVIDIA H200")


def test_refuses_mixed_sources_and_modeled_over_measured(tmp_path, capsys):
    results, peers = tmp_path / "fd-bench.csv", tmp_path / "peers.csv"
    write_results(results, "true", "fdemu (emulated H200)")
    write_peers(peers)
    assert plot.main([str(results), "--peers", str(peers), "--out",
                      str(tmp_path / "plots")]) == 2
    assert "the peers' times are measured and the results are not" in (
        capsys.readouterr().out)
    rows = plot.read_rows(results)
    rows[0]["modeled"] = "false"
    with pytest.raises(ValueError, match="modeled and measured rows"):
        plot.describe_source(rows)


def test_says_how_to_make_results(tmp_path, capsys):
    assert plot.main([str(tmp_path / "missing.csv")]) == 2
    assert "fd-bench --csv writes them" in capsys.readouterr().out
