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
    assert kernel.num_splits == 19
    assert set(kernel.ptx) == {"fd_partial_attention", "fd_merge"}
    assert ".target sm_90" in kernel.ptx["fd_partial_attention"]
    assert kernel.manifest["num_splits"] == 19
    assert kernel.manifest["config"]["dtype"] == "f16"
    names = [k["name"] for k in kernel.manifest["kernels"]]
    assert names == ["fd_partial_attention", "fd_merge"]
    fixed = flashdecode.compile(64, 8, 8, dtype="bfloat16", num_splits=3,
                                kv_layout="HND", arch="sm_80")
    assert fixed.num_splits == 3
    assert ".target sm_80" in fixed.ptx["fd_merge"]


@pytest.mark.parametrize("page_size", [1, 16, np.int64(256)])
def test_compile_for_paged_caches_is_fd_compiles_page_size(tmp_path,
                                                           page_size):
    """compile(page_size=N): the paged kernels, byte for byte those of
    fd-compile --page-size N; the partial kernel reads the block table."""
    kernel = flashdecode.compile(128, 32, 8, num_splits=4, kv_layout="HND",
                                 page_size=page_size)
    assert kernel.manifest["config"]["page_size"] == page_size
    params = [p["name"] for p in kernel.manifest["kernels"][0]["params"]]
    after = params[params.index("max_len") + 1:]
    assert after[:2] == ["block_table", "num_pages"]
    subprocess.run(
        [os.path.join(BUILD, "bin", "fd-compile"), "--head-dim", "128",
         "--num-q-heads", "32", "--num-kv-heads", "8", "--num-splits", "4",
         "--kv-layout", "HND", "--page-size", str(page_size), "-o",
         str(tmp_path)], capture_output=True, check=True)
    assert set(kernel.ptx) == {"fd_partial_attention", "fd_merge"}
    for name, ptx in kernel.ptx.items():
        assert (tmp_path / f"{name}.ptx").read_text() == ptx, name
    dense = flashdecode.compile(128, 32, 8, num_splits=4, kv_layout="HND")
    assert dense.manifest["config"]["page_size"] == 0
    assert "block_table" not in [
        p["name"] for p in dense.manifest["kernels"][0]["params"]]
    assert dense.ptx["fd_partial_attention"] != \
        kernel.ptx["fd_partial_attention"]


HAND_SCHEDULE = ("form = tensor_cores, rows_per_tile = 8, row_tiles = 2, "
                 "threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, "
                 "stages = 3")


def test_compile_with_a_schedule_is_fd_compiles_schedule(tmp_path):
    """compile(schedule=...): the kernel built to a hand-written schedule,
    byte for byte fd-compile --schedule's; the manifest records it, and
    without one the planner's."""
    kernel = flashdecode.compile(64, 16, 1, num_splits=4,
                                 schedule=HAND_SCHEDULE)
    assert kernel.manifest["schedule"] == {
        "form": "tensor_cores", "rows_per_tile": 8, "row_tiles": 2,
        "threads": 128, "min_blocks_per_sm": 3, "held_query_steps": 2,
        "stages": 3}
    assert kernel.manifest["config"]["requested_schedule"] == HAND_SCHEDULE
    assert kernel.manifest["kernels"][0]["grid"][1] == 2
    assert ".minnctapersm 3" in kernel.ptx["fd_partial_attention"]
    subprocess.run(
        [os.path.join(BUILD, "bin", "fd-compile"), "--head-dim", "64",
         "--num-q-heads", "16", "--num-kv-heads", "1", "--num-splits", "4",
         "--schedule", HAND_SCHEDULE, "-o", str(tmp_path)],
        capture_output=True, check=True)
    for name, ptx in kernel.ptx.items():
        assert (tmp_path / f"{name}.ptx").read_text() == ptx, name
    planned = flashdecode.compile(64, 16, 1, num_splits=4)
    assert planned.manifest["schedule"]["rows_per_tile"] == 16
    assert planned.manifest["schedule"]["stages"] == 2
    assert planned.manifest["config"]["requested_schedule"] == ""
    assert planned.ptx != kernel.ptx


CLUSTER_SCHEDULE = ("form = tensor_cores, rows_per_tile = 16, row_tiles = 1, "
                    "threads = 128, min_blocks_per_sm = 2, "
                    "held_query_steps = 9, stages = 4, cluster_ctas = 4")


def test_compile_with_a_chunks_cluster_of_blocks():
    """cluster_ctas = 4 (MLA's split-value tile at 16 heads): each of the 3
    chunks streamed by a thread block cluster of 4 blocks (the kernel's
    .reqnctapercluster), merged in distributed shared memory; the manifest
    spells the field (only when it is not 1) and launches 3 x 4 blocks.
    Refused for a chip without clusters and above 8 blocks."""
    options = dict(v_head_dim=512, shared_kv=True, dtype="bfloat16",
                   page_size=64, num_splits=3)
    kernel = flashdecode.compile(576, 16, 1, schedule=CLUSTER_SCHEDULE,
                                 **options)
    assert kernel.manifest["schedule"]["cluster_ctas"] == 4
    assert kernel.manifest["kernels"][0]["grid"][0] == 12
    ptx = kernel.ptx["fd_partial_attention"]
    assert ".reqnctapercluster 4, 1, 1" in ptx
    assert "barrier.cluster.wait.aligned" in ptx
    assert "ld.shared::cluster" in ptx
    planned = flashdecode.compile(576, 16, 1, **options)
    assert "cluster_ctas" not in planned.manifest["schedule"]
    assert "cluster" not in planned.ptx["fd_partial_attention"]
    with pytest.raises(ValueError, match="cluster_ctas = 4 needs thread "
                       "block clusters, which chip sm_80 lacks"):
        flashdecode.compile(576, 16, 1, schedule=CLUSTER_SCHEDULE,
                            arch="sm_80", **options)
    with pytest.raises(ValueError, match="cluster_ctas = 9 is out of range"):
        flashdecode.compile(576, 16, 1, schedule=CLUSTER_SCHEDULE.replace(
            "cluster_ctas = 4", "cluster_ctas = 9"), **options)


@pytest.mark.parametrize("schedule,error,words", [
    ("form = tensor_cores, rows_per_tile = 8", ValueError,
     "schedule: the schedule has no row_tiles"),
    ("form = tensor_cores, rows_per_tile = 8, row_tiles = 1, threads = 128, "
     "stages = 2", ValueError,
     r"schedule: rows_per_tile = 8 x row_tiles = 1 do not cover the 16 query "
     r"rows of a KV head \(group size 16 x Lq 1\)"),
    ("form = cuda_cores, rows_per_tile = 16, row_tiles = 1, threads = 256",
     ValueError, "schedule: threads = 256 is not supported"),
    ("", ValueError, "schedule: the schedule is empty"),
    (8, TypeError, "schedule must be a string")])
def test_compile_with_a_bad_schedule_names_it(schedule, error, words):
    with pytest.raises(error, match=words):
        flashdecode.compile(64, 16, 1, num_splits=4, schedule=schedule)


@pytest.mark.parametrize("page_size,words", [
    (0, "page_size must be None"), (-16, "page_size must be None"),
    (True, "page_size must be None"), (16.0, "page_size must be None"),
    ("16", "page_size must be None"),
    (3, r"page_size 3 is not supported: expected 0 \(dense\) or a power of "
        "two from 1 to 256"),
    (512, "page_size 512 is not supported")])
def test_compile_with_a_bad_page_size_names_it(page_size, words):
    with pytest.raises(ValueError, match=words):
        flashdecode.compile(128, 32, 8, page_size=page_size)


def test_a_split_count_over_max_splits_is_refused():
    """As fd-compile and fd-split-kv refuse it: never clamped."""
    words = (r"num_splits 600 is over max_splits \(512\): at most max_splits "
             r"splits \(raise max_splits to allow more\)")
    with pytest.raises(ValueError, match=words):
        flashdecode.compile(128, 32, 8, num_splits=600)
    q = np.ones((1, 8, 64), np.float32)
    k = np.ones((1, 16, 2, 64), np.float32)
    with pytest.raises(ValueError, match="num_splits 600 is over max_splits"):
        flashdecode.decode_attention(q, k, k, np.array([16], np.int32),
                                     num_splits=600)
    assert flashdecode.compile(128, 32, 8, num_splits=600,
                               max_splits=600).num_splits == 600


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
    assert flashdecode.plan_splits(batch, kv_heads, max_len, num_q_heads=32,
                                   head_dim=128) == printed


_SCHEDULE_FEATURES = [
    {}, {"page_size": 16}, {"window_left": 1000}, {"with_alibi": True},
    {"query_len": 4, "with_query_lens": True},
    {"query_len": 2, "window_left": 512, "logits_soft_cap": 30.0},
    {"dtype": "float32"}, {"dtype": "float32", "with_alibi": True},
    {"fused_merge": True}]


@pytest.mark.parametrize("features", _SCHEDULE_FEATURES)
@pytest.mark.parametrize("kv_heads,batch,max_len", [
    (1, 1, 32768), (8, 3, 5000), (32, 16, 4096)])
def test_every_plan_sees_the_kernels_schedule(features, kv_heads, batch,
                                               max_len):
    """compile() (fd-split-kv on the IR), plan_splits (the problem's
    schedule from Python's arguments) and the config's resolve_num_splits
    (what decode_attention and Decoder plan on a GPU) agree where the
    kernel's schedule differs: paged caches, ALiBi and MQA's 16-row tiles
    launch 3 blocks per SM, f32 tiles hold fewer rows (fewer still with
    ALiBi's slope and position a row: MQA in f32 at B=1, L=32k plans 123
    splits with it, 164 without)."""
    features = dict(features)
    query_len = features.pop("query_len", 1)
    dtype = features.pop("dtype", "float16")
    compiled = flashdecode.compile(128, 32, kv_heads, dtype=dtype,
                                   batch=batch, max_len=max_len,
                                   query_len=query_len, **features)
    planned = flashdecode.plan_splits(
        batch, kv_heads, max_len, num_q_heads=32, head_dim=128,
        query_len=query_len, dtype=dtype, kv_dtype=dtype, **features)
    config = flashdecode._native.KernelRequest(
        128, 32, kv_heads, query_len, flashdecode._dtype_code(dtype), "NHD",
        features.get("page_size", 0), 0, True, None, False, batch, max_len,
        flashdecode._native.DEFAULT_SM_COUNT, flashdecode._native.DEFAULT_ARCH,
        window_left=features.get("window_left", 0),
        logits_soft_cap=features.get("logits_soft_cap"),
        with_alibi=features.get("with_alibi", False),
        with_query_lens=features.get("with_query_lens", False),
        fused_merge=features.get("fused_merge", False))
    assert compiled.num_splits == planned == config.resolve_num_splits(), \
        (compiled.num_splits, planned, config.resolve_num_splits())


def _unescape_mlir_string(text):
    """An MLIR string literal's contents: a backslash escapes a backslash
    or two hex digits."""
    return re.sub(r"\\([0-9A-Fa-f]{2}|\\)",
                  lambda m: "\\" if m.group(1) == "\\"
                  else chr(int(m.group(1), 16)), text)


@pytest.mark.parametrize("flags,options", [
    (["--num-kv-heads", "8", "--batch", "1", "--max-len", "32768"],
     "batch=1 max-len=32768"),
    (["--num-kv-heads", "1", "--batch", "1", "--max-len", "131072",
      "--fused-merge"], "batch=1 max-len=131072 fuse-merge=true"),
    (["--num-kv-heads", "8", "--batch", "4", "--max-len", "4096",
      "--page-size", "16", "--dtype", "bf16", "--fused-merge"],
     "batch=4 max-len=4096 fuse-merge=true"),
    (["--num-kv-heads", "32", "--batch", "2", "--max-len", "5000",
      "--dtype", "f32", "--num-splits", "3", "--arch", "sm_80",
      "--ptx-version", "78"],
     "num-splits=3 chip=sm_80 ptx-version=78"),
])
def test_fd_opt_lower_to_ptx_is_fd_compile(tmp_path, flags, options):
    """fd-opt --fd-lower-to-ptx on fd-compile's fd.attention plans the
    split count (fused merge and its cap included) and emits the PTX
    fd-compile does, byte for byte."""
    tool = lambda name: os.path.join(BUILD, "bin", name)
    common = ["--head-dim", "128", "--num-q-heads", "32"] + flags
    ir = tmp_path / "attention.mlir"
    subprocess.run([tool("fd-compile"), "--emit", "fd", "-o", str(ir)] +
                   common, check=True)
    out = tmp_path / "out"
    subprocess.run([tool("fd-compile"), "--no-cache", "-o", str(out)] +
                   common, check=True, capture_output=True)
    lowered = subprocess.run(
        [tool("fd-opt"), str(ir), f"--fd-lower-to-ptx={options}"],
        check=True, capture_output=True, text=True).stdout
    binaries = dict(re.findall(
        r'gpu\.binary @(\w+)\s*\[#gpu\.object<.*?assembly = '
        r'"((?:[^"\\]|\\.)*)"',
        lowered))
    compiled = {path.stem: path.read_text()
                for path in out.glob("*.ptx")}
    assert sorted(binaries) == sorted(compiled)
    for name, text in compiled.items():
        assert _unescape_mlir_string(binaries[name]) == text, name


def test_plan_splits_says_it_is_the_wave_model_without_the_work():
    assert "the wave model alone" in \
        flashdecode.plan_splits.__doc__.splitlines()[0]
    assert flashdecode.plan_splits(1, 8, 32768) == 63
    assert flashdecode.compile(128, 32, 8, max_len=32768).num_splits == 19


def test_plan_splits_features_need_the_work():
    with pytest.raises(ValueError, match="page_size, with_alibi describe "
                       "the kernel's work: pass num_q_heads and head_dim"):
        flashdecode.plan_splits(1, 8, 4096, page_size=16, with_alibi=True)
    with pytest.raises(ValueError, match="with_alibi must be True or False"):
        flashdecode.plan_splits(1, 8, 4096, num_q_heads=32, head_dim=128,
                                with_alibi=1)
    with pytest.raises(ValueError, match="arch 'sm_70' is not supported"):
        flashdecode.plan_splits(1, 8, 4096, num_q_heads=32, head_dim=128,
                                arch="sm_70")
    with pytest.raises(ValueError, match="kv_scale and fused_merge describe "
                       "the kernel's work"):
        flashdecode.plan_splits(1, 8, 4096, kv_scale="token_head")
    with pytest.raises(ValueError, match="kv_scale is only for fp8 caches"):
        flashdecode.plan_splits(1, 8, 4096, num_q_heads=32, head_dim=128,
                                kv_scale="token_head")
    with pytest.raises(ValueError, match="kv_scale must be one of"):
        flashdecode.plan_splits(1, 8, 4096, num_q_heads=32, head_dim=128,
                                kv_dtype="float8_e4m3fn", kv_scale="row")


def _request(batch, max_len, num_splits=0, **knobs):
    """An MQA request (D = 64, 8 query heads) planned for this batch."""
    return flashdecode._native.KernelRequest(
        64, 8, 1, 1, "f16", "NHD", 0, num_splits, True, None, False, batch,
        max_len, flashdecode._native.DEFAULT_SM_COUNT,
        flashdecode._native.DEFAULT_ARCH, **knobs)


def test_requests_that_plan_alike_resolve_to_one_kernel():
    """resolve() is what a kernel is: the request's config with the planned
    count made fixed, and no planning hints; the process's CPU kernels (and
    GPU launchers) are keyed by it, whatever batch a request planned for."""
    native = flashdecode._native
    small, other = _request(3, 3000), _request(4, 3000)
    assert small.resolve_num_splits() == other.resolve_num_splits()
    assert repr(small) != repr(other)
    assert (small.fields["planned_batch"], other.fields["planned_batch"]) == \
        (3, 4)
    assert repr(small.resolve()) == repr(other.resolve())
    fields = small.resolve().fields
    assert fields["requested_num_splits"] == small.resolve_num_splits() > 1
    assert not {"planned_batch", "planned_max_len", "sm_count",
                "blocks_per_sm", "min_chunk_length", "max_splits"} & \
        set(fields)
    # The chunk length is the kernel's (fd.partial_attention carries it).
    assert fields["chunk_length"] == 0
    # A knob that changes the plan changes the kernel; one that does not,
    # does not.
    assert small.resolve_num_splits() != _request(
        3, 3000, max_splits=8).resolve_num_splits()
    assert repr(_request(3, 3000, num_splits=5).resolve()) == repr(
        _request(9, 100, num_splits=5, max_splits=64).resolve())
    # A resolved config is a request of itself, a fixed count over the
    # default cap included; a request must raise the cap for it.
    over = _request(1, 8192, num_splits=600, max_splits=1000).resolve()
    assert native.KernelRequest(over).fields["max_splits"] == 600
    assert native.cpu_kernel(over).num_splits == 600
    with pytest.raises(ValueError, match="num_splits 600 is over max_splits"):
        _request(1, 8192, num_splits=600)
    kernel = native.cpu_kernel(small)
    assert native.cpu_kernel(other) is kernel
    assert kernel.num_splits == small.resolve_num_splits()
    assert native.cpu_kernel(_request(64, 3000)) is not kernel


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
    # Same configuration but for the knobs: a different cache entry. The
    # compiler plans with the kernel's work (tensor-core blocks, DRAM, whole
    # steps of 32 keys): 19 splits, where the wave model alone takes 63.
    assert flashdecode.compile(128, 32, 8, batch=1,
                               max_len=32768).num_splits == 19
    assert flashdecode.plan_splits(1, 8, 32768, num_q_heads=32,
                                   head_dim=128) == 19


def test_plan_splits_with_the_kernels_work():
    """num_q_heads, head_dim, query_len, kv_dtype, dtype and kv_scale make
    plan_splits the compiler's choice for those kernels, whatever the dtypes
    (MHA's one row a head over an fp8 cache takes tensor cores where they
    multiply in f16, CUDA cores under bf16 queries and per-token scales)."""
    for kwargs in ({}, {"query_len": 4}, {"kv_dtype": "float8_e4m3fn"},
                   {"kv_dtype": "bfloat16"}, {"kv_dtype": "float32"},
                   {"kv_dtype": "float8_e5m2", "dtype": "float32"},
                   {"kv_dtype": "float8_e4m3fn", "dtype": "bfloat16"},
                   {"kv_dtype": "float8_e4m3fn", "dtype": "bfloat16",
                    "kv_scale": "token_head"}):
        dtype = kwargs.get("kv_dtype", "float16")
        compile_kwargs = {"query_len": kwargs.get("query_len", 1)}
        if dtype.startswith("float8"):
            compile_kwargs["kv_dtype"] = dtype
            compile_kwargs["kv_scale"] = kwargs.get("kv_scale")
            dtype = kwargs.get("dtype", "float16")
        for heads, batch, max_len in ((1, 1, 32768), (8, 1, 32768),
                                      (1, 16, 4096), (2, 3, 5000),
                                      (32, 1, 32768)):
            kernel = flashdecode.compile(128, 32, heads, dtype=dtype,
                                         batch=batch, max_len=max_len,
                                         **compile_kwargs)
            assert kernel.num_splits == flashdecode.plan_splits(
                batch, heads, max_len, num_q_heads=32, head_dim=128,
                **kwargs), (kwargs, heads, batch, max_len)
    # MQA at B=1, L=32k: its tensor-core blocks' fixed cost against their
    # pace, 74 splits; with f32 queries (CUDA cores, a token per
    # token-time) one wave of the kernel's row tiles: 7 tiles of 5 rows
    # over an f16 cache (three blocks per SM by their registers), 53
    # splits; 11 tiles of 3 over an fp8 cache (its rows hold 16 elements a
    # lane; three blocks), 35.
    assert flashdecode.plan_splits(1, 1, 32768, num_q_heads=32,
                                   head_dim=128) == 74
    assert flashdecode.plan_splits(1, 1, 32768, num_q_heads=32,
                                   head_dim=128, dtype="float32") == 53
    assert flashdecode.plan_splits(1, 1, 32768, num_q_heads=32,
                                   head_dim=128, dtype=np.dtype("float32"),
                                   kv_dtype="float8_e4m3fn") == 35


def test_plan_splits_for_sm90a_plans_the_warpgroup_tile():
    """arch="sm_90a" plans MLA at 64 or more rows a KV head for the wgmma
    tile, one block an SM, as compile() does for that target."""
    latent = {"num_q_heads": 64, "head_dim": 576, "v_head_dim": 512,
              "shared_kv": True, "dtype": "bfloat16",
              "kv_dtype": "bfloat16"}
    for batch, max_len in ((1, 32768), (4, 4096)):
        kernel = flashdecode.compile(576, 64, 1, dtype="bfloat16",
                                     v_head_dim=512, shared_kv=True,
                                     batch=batch, max_len=max_len,
                                     arch="sm_90a")
        assert kernel.num_splits == flashdecode.plan_splits(
            batch, 1, max_len, arch="sm_90a", **latent), (batch, max_len)
    # 16 chunks of 8 blocks in clusters (docs/SplitHeuristic.md, "Clusters").
    assert flashdecode.plan_splits(1, 1, 32768, arch="sm_90a", **latent) == 16
    # sm_90's split-value tile: four row tiles share each chunk, two blocks
    # on most SMs (docs/SplitHeuristic.md, "Clusters").
    assert flashdecode.plan_splits(1, 1, 32768, arch="sm_90", **latent) == 62


@pytest.mark.parametrize("kwargs,message", [
    ({"num_q_heads": 32}, "head_dim must be an int >= 1"),
    ({"head_dim": 128}, "num_q_heads must be an int >= 1"),
    ({"num_q_heads": 30, "head_dim": 128}, r"num_q_heads \(30\) must be a "
     r"multiple of num_kv_heads \(8\)"),
    ({"num_q_heads": 32, "head_dim": 128, "query_len": 0},
     "query_len must be an int >= 1"),
    ({"num_q_heads": 32, "head_dim": 128, "kv_dtype": "int8"},
     "kv_dtype must be one of"),
    ({"num_q_heads": 32, "head_dim": 128, "kv_dtype": ["float16"]},
     "kv_dtype must be one of"),
    ({"num_q_heads": 32.0, "head_dim": 128}, "num_q_heads must be an int"),
    ({"num_q_heads": 32, "head_dim": 128, "dtype": "float8_e4m3fn"},
     "dtype must be one of"),
    ({"kv_dtype": "float16"}, "pass num_q_heads and head_dim"),
    ({"dtype": "float32"}, "pass num_q_heads and head_dim"),
    ({"query_len": 2}, "pass num_q_heads and head_dim"),
])
def test_plan_splits_checks_the_work(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flashdecode.plan_splits(1, 8, 4096, **kwargs)


def test_plan_splits_takes_numpy_work():
    assert flashdecode.plan_splits(
        1, 8, 32768, num_q_heads=np.int64(32), head_dim=np.int32(128),
        kv_dtype=np.dtype("float16")) == 19
    with pytest.raises(ValueError, match="num_kv_heads must be"):
        flashdecode.plan_splits(1, 0, 4096, num_q_heads=32, head_dim=128)


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
