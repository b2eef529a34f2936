"""compile, plan_splits, and agreement with the compiler's tools."""
import os
import re
import subprocess

import numpy as np
import pytest

import flashdecode

BUILD = os.environ.get("FD_BUILD_DIR", "build")


def test_compile_returns_ptx_and_manifest():
    kernel = flashdecode.compile(128, 32, 8, dtype="float16", num_splits="auto",
                                 kv_layout="NHD", arch="sm_90", batch=1,
                                 max_len=32768)
    assert kernel.num_splits == 63
    assert set(kernel.ptx) == {"fd_partial_attention", "fd_merge"}
    assert ".target sm_90" in kernel.ptx["fd_partial_attention"]
    assert kernel.manifest["num_splits"] == 63
    assert kernel.manifest["config"]["dtype"] == "f16"
    names = [k["name"] for k in kernel.manifest["kernels"]]
    assert names == ["fd_partial_attention", "fd_merge"]
    fixed = flashdecode.compile(64, 8, 8, dtype="bfloat16", num_splits=3,
                                kv_layout="HND", arch="sm_80")
    assert fixed.num_splits == 3
    assert ".target sm_80" in fixed.ptx["fd_merge"]


@pytest.mark.parametrize("batch,kv_heads,max_len", [
    (1, 8, 32768), (4, 1, 4096), (16, 8, 131072), (140, 1, 32768), (1, 32, 512)])
def test_plan_splits_agrees_with_fd_opt(tmp_path, batch, kv_heads, max_len):
    ir = tmp_path / "attention.mlir"
    q = f"memref<{batch}x32x128xf16>"
    cache = f"memref<{batch}x{max_len}x{kv_heads}x128xf16>"
    ir.write_text(
        f"func.func @f(%q: {q}, %k: {cache}, %v: {cache}, "
        f"%l: memref<{batch}xi32>, %o: {q}) {{\n"
        f"  fd.attention %q, %k, %v, %l into %o : {q}, {cache}, {cache}, "
        f"memref<{batch}xi32> into {q}\n  return\n}}\n")
    result = subprocess.run(
        [os.path.join(BUILD, "bin", "fd-opt"), str(ir),
         "-fd-split-kv=report=true", "-o", os.devnull],
        capture_output=True, text=True, check=True)
    printed = int(re.search(r"splits=(\d+)", result.stderr).group(1))
    assert flashdecode.plan_splits(batch, kv_heads, max_len) == printed


def test_planner_knobs_reach_the_plan_and_the_manifest():
    # One block per SM per wave is the classic plan: 16 splits at B=1 L=32k.
    assert flashdecode.plan_splits(1, 8, 32768) == 63
    assert flashdecode.plan_splits(1, 8, 32768, blocks_per_sm=1) == 16
    assert flashdecode.plan_splits(1, 8, 32768, max_splits=8) == 8
    assert flashdecode.plan_splits(1, 8, 1024, min_chunk_length=512) <= 2
    kernel = flashdecode.compile(128, 32, 8, batch=1, max_len=32768,
                                 blocks_per_sm=1, max_splits=64)
    assert kernel.num_splits == 16
    config = kernel.manifest["config"]
    assert (config["blocks_per_sm"], config["max_splits"],
            config["min_chunk_length"]) == (1, 64, 128)
    # Same configuration but for the knobs: a different cache entry.
    assert flashdecode.compile(128, 32, 8, batch=1,
                               max_len=32768).num_splits == 63


@pytest.mark.parametrize("knob", ["blocks_per_sm", "min_chunk_length",
                                  "max_splits"])
def test_planner_knobs_are_checked(knob):
    with pytest.raises(ValueError, match=f"{knob} must be >= 1, got 0"):
        flashdecode.compile(128, 32, 8, **{knob: 0})
    with pytest.raises(ValueError, match=f"{knob} must be >= 1, got 0"):
        flashdecode.plan_splits(1, 8, 4096, **{knob: 0})


def test_decode_attention_takes_the_planner_knobs():
    # The CPU backend plans with them: one block per SM per wave gives 16
    # splits at B=1 L=32k, and max_splits caps it; the result is the same
    # attention either way.
    rng = np.random.default_rng()
    q = rng.normal(size=(1, 32, 64)).astype(np.float32)
    k = rng.normal(size=(1, 2048, 8, 64)).astype(np.float32)
    v = rng.normal(size=(1, 2048, 8, 64)).astype(np.float32)
    lens = np.array([2000], np.int32)
    default = flashdecode.decode_attention(q, k, v, lens)
    for knobs in ({"blocks_per_sm": 1}, {"max_splits": 2},
                  {"min_chunk_length": 1024}):
        out = flashdecode.decode_attention(q, k, v, lens, **knobs)
        np.testing.assert_allclose(out, default, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="max_splits must be >= 1, got 0"):
        flashdecode.decode_attention(q, k, v, lens, max_splits=0)
