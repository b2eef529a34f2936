"""One spelling table (fd/Planning/Spellings.h): every interface accepts
each spelling of a value and means the same by it; the manifest keeps the
canonical one; docs/Compiling.md's copy of the table is the table."""
import os
import re
import subprocess

import numpy as np
import pytest

import flashdecode
from flashdecode import _flashdecode as _native
from flashdecode import _installation

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KINDS = ("dtype", "fp8", "kv_scale", "kv_layout")


def spellings(kind):
    """(canonical, spelling) for every spelling of every value of kind."""
    return [(canonical, spelling)
            for canonical, python, others in _native.spellings(kind)
            for spelling in [canonical, python, *others]]


@pytest.mark.parametrize("canonical,spelling", spellings("dtype"))
def test_element_types(canonical, spelling):
    config = flashdecode.compile(64, 8, 2, dtype=spelling).manifest["config"]
    assert config["dtype"] == canonical
    planned = flashdecode.plan_splits(1, 2, 4096, num_q_heads=8, head_dim=64,
                                      dtype=spelling, kv_dtype=spelling)
    assert planned == flashdecode.plan_splits(
        1, 2, 4096, num_q_heads=8, head_dim=64, dtype=canonical,
        kv_dtype=canonical)


@pytest.mark.parametrize("canonical,spelling", spellings("fp8"))
def test_fp8_formats(canonical, spelling):
    config = flashdecode.compile(64, 8, 2, kv_dtype=spelling).manifest[
        "config"]
    assert config["kv_dtype"] == canonical
    k = np.random.default_rng().standard_normal((1, 8, 2, 64))
    k = k.astype(np.float32)
    python = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[canonical]
    for given, expected in zip(flashdecode.quantize_kv(k, k, spelling),
                               flashdecode.quantize_kv(k, k, python)):
        np.testing.assert_array_equal(given, expected)


@pytest.mark.parametrize("canonical,spelling", spellings("kv_scale"))
def test_scale_granularities(canonical, spelling):
    config = flashdecode.compile(64, 8, 2, kv_dtype="e4m3",
                                 kv_scale=spelling).manifest["config"]
    assert config["kv_scale"] == canonical
    k = np.ones((1, 8, 2, 64), np.float32)
    scales = flashdecode.quantize_kv(k, k, "e4m3", spelling)[2]
    assert scales.shape == ((1,) if canonical == "tensor" else (1, 8, 2))


@pytest.mark.parametrize("canonical,spelling", spellings("kv_layout"))
def test_cache_layouts(canonical, spelling):
    config = flashdecode.compile(64, 8, 2, kv_layout=spelling).manifest[
        "config"]
    assert config["kv_layout"] == canonical
    q = np.ones((1, 8, 64), np.float16)
    cache = np.ones((1, 16, 2, 64) if canonical == "NHD" else (1, 2, 16, 64),
                    np.float16)
    out = flashdecode.decode_attention(q, cache, cache,
                                       np.array([5], np.int32),
                                       kv_layout=spelling)
    np.testing.assert_array_equal(out, np.ones_like(q))


@pytest.mark.parametrize("kind,argument", [
    ("dtype", {"dtype": "f64"}), ("fp8", {"kv_dtype": "e4m3fnuz"}),
    ("kv_scale", {"kv_dtype": "e4m3", "kv_scale": "channel"}),
    ("kv_layout", {"kv_layout": "HDN"})])
def test_a_bad_name_lists_every_spelling(kind, argument):
    with pytest.raises(ValueError) as raised:
        flashdecode.compile(64, 8, 2, **argument)
    message = str(raised.value)
    for _, spelling in spellings(kind):
        assert re.search(rf"\b{re.escape(spelling)}\b", message), spelling


def test_the_tools_take_every_spelling(tmp_path):
    compile_tool = _installation.tool_path("fd-compile")
    canonical = subprocess.run(
        [compile_tool, "--no-cache", "--kv-dtype", "e5m2", "--kv-scale",
         "token-head", "--emit", "ptx"], capture_output=True, text=True)
    for kv_dtype, kv_scale in (("float8_e5m2", "token_head"),
                               ("fp8_e5m2", "per-token-head")):
        spelled = subprocess.run(
            [compile_tool, "--no-cache", "--kv-dtype", kv_dtype,
             "--kv-scale", kv_scale, "--emit", "ptx"], capture_output=True,
            text=True)
        assert spelled.returncode == 0, spelled.stderr
        assert spelled.stdout == canonical.stdout


def test_the_docs_table_is_the_table():
    with open(os.path.join(SOURCE, "docs", "Compiling.md")) as handle:
        text = handle.read()
    section = text[text.index("## Names"):]
    rows = [line for line in section.splitlines()[:40]
            if re.match(r"\| [^-k]", line) or line.startswith("| |")]
    documented = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        others = [name.strip(" `") for name in cells[3].split(",")
                  if name.strip()]
        documented.append((cells[1].strip("`"), cells[2].strip("`"),
                           others))
    table = [(canonical, python, list(others)) for kind in KINDS
             for canonical, python, others in _native.spellings(kind)]
    assert documented == table
