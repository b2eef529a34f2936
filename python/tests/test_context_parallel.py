"""context_parallel_decode over torch.distributed with real collectives:
gloo on loopback, world 2 and 4, the CPU backend. Each rank builds the same
global problem from the test's seed, takes its shard of the cache
(shard_cache), decodes and merges; the result must equal the unsharded
decode_attention and the float64 reference, for interleave 1, 2, 3 and 16,
GQA, MQA and MHA, f32, f16 and bf16, sinks (counted once), paged shards,
ranks that hold no token of a sequence, heads="scatter", and the rules of
global positions: Lq = 2 and 4 causal, a window across the shards'
boundaries, ALiBi and per-sequence query lengths. The processes stop by
themselves: a bounded join, then they are killed and the test fails."""
import datetime
import os
import socket
import subprocess
import sys
import traceback

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import flashdecode  # noqa: E402
from flashdecode import distributed as fdd  # noqa: E402
from reference import (attention, from_bfloat16_bits, page_pool,  # noqa: E402
                       random_inputs)

TIMEOUT_SECONDS = 240
TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 2e-2}



def _case(name, dtype, heads, kv_heads, head_dim, lengths, max_len,
          interleave, head_mode="all", sinks=False, page_size=0, query_len=0,
          window_left=None, alibi=False, query_lens=None):
    """One case every rank runs: query_len 0 is q [B, Hq, D], else [B, Lq,
    Hq, D] with causal query tokens; window_left, ALiBi and query_lens
    count global positions across the shards."""
    return dict(name=name, dtype=dtype, heads=heads, kv_heads=kv_heads,
                head_dim=head_dim, lengths=lengths, max_len=max_len,
                interleave=interleave, head_mode=head_mode, sinks=sinks,
                page_size=page_size, query_len=query_len,
                window_left=window_left, alibi=alibi, query_lens=query_lens)


CASES = [
    _case("gqa-f32-i1", "float32", 8, 2, 64, [37, 0, 5, 64], 64, 1),
    _case("gqa-f32-i16", "float32", 8, 2, 64, [37, 0, 5, 64], 64, 16),
    _case("mqa-f16-i1-scatter", "float16", 4, 1, 32, [50, 1, 33], 56, 1,
          "scatter"),
    _case("mqa-f16-i16-scatter", "float16", 4, 1, 32, [50, 1, 33], 56, 16,
          "scatter"),
    _case("gqa-f32-sinks", "float32", 8, 2, 64, [40, 0, 17], 48, 16,
          sinks=True),
    _case("gqa-f32-sinks-scatter", "float32", 8, 2, 64, [40, 0, 17], 48, 1,
          "scatter", sinks=True),
    _case("gqa-bf16-paged16", "bfloat16", 8, 2, 64, [70, 3, 0], 80, 16,
          page_size=16),
    _case("mha-f32-paged16-scatter", "float32", 4, 4, 32, [31, 64], 64, 1,
          "scatter", page_size=16),
    # Query tokens whose keys lie on several ranks, a window across the
    # shards' boundaries, ALiBi's global distances, per-sequence query
    # lengths (padding rows stay zeros and -inf, sinks or not).
    _case("gqa-f32-lq4-causal", "float32", 8, 2, 64, [37, 3, 64, 2], 64, 1,
          query_len=4),
    _case("gqa-f16-lq4-window-i3", "float16", 8, 2, 64, [37, 3, 64, 20], 64,
          3, query_len=4, window_left=11),
    _case("mqa-f32-lq4-alibi-query-lens-scatter", "float32", 4, 1, 32,
          [50, 1, 33], 56, 16, "scatter", query_len=4, alibi=True,
          query_lens=[4, 0, 2]),
    _case("gqa-f32-lq2-sinks-query-lens", "float32", 8, 2, 64, [40, 9, 17],
          48, 2, sinks=True, query_len=2, query_lens=[1, 2, 0],
          window_left=30),
]


def _inputs(seed, case):
    """(q, k, v) as stored (bf16: uint16 bits), their exact float64 values,
    sinks and ALiBi slopes: the same on every rank for one seed."""
    rng = np.random.default_rng(seed)
    batch, heads = len(case["lengths"]), case["heads"]
    q_shape = (batch,) + ((case["query_len"],) if case["query_len"] else ()) \
        + (heads, case["head_dim"])
    stored, exact = random_inputs(
        rng, case["dtype"], q_shape,
        (batch, case["max_len"], case["kv_heads"], case["head_dim"]),
        q_deviation=1.0)
    sinks = rng.standard_normal(heads).astype(np.float32)
    slopes = (2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)).astype(
        np.float32)
    return stored, exact, sinks, slopes


def _as_torch(array):
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _values(tensor, dtype):
    if dtype == "bfloat16":
        return from_bfloat16_bits(
            tensor.view(torch.int16).numpy().view(np.uint16)).astype(
                np.float64)
    return tensor.numpy().astype(np.float64)


def _run_case(seed, case, rank, world):
    dtype, heads, interleave = case["dtype"], case["heads"], \
        case["interleave"]
    lens = np.array(case["lengths"], np.int32)
    (q, k, v), (eq, ek, ev), sinks, slopes = _inputs(seed, case)
    k_shard = fdd.shard_cache(k, rank, world, interleave)
    v_shard = fdd.shard_cache(v, rank, world, interleave)
    table = None
    if case["page_size"]:
        k_shard, v_shard, table = page_pool(
            np.random.default_rng(seed + 1 + rank), k_shard, v_shard,
            case["page_size"], "NHD")
        table = torch.from_numpy(table)
    query_lens = None if case["query_lens"] is None else \
        np.array(case["query_lens"], np.int32)
    # decode_attention's features, as numpy (the unsharded call) and torch.
    features = {"window_left": case["window_left"]}
    if case["sinks"]:
        features["sinks"] = sinks
    if case["alibi"]:
        features["alibi_slopes"] = slopes
    if query_lens is not None:
        features["query_lens"] = query_lens
    as_torch = {name: torch.from_numpy(value) if isinstance(value, np.ndarray)
                else value for name, value in features.items()}
    out, lse = fdd.context_parallel_decode(
        _as_torch(q), _as_torch(k_shard), _as_torch(v_shard),
        torch.from_numpy(lens), interleave=interleave, block_table=table,
        return_lse=True, heads=case["head_mode"], **as_torch)
    expected, expected_lse = attention(
        eq, ek, ev, lens, sinks=features.get("sinks"),
        window_left=case["window_left"],
        alibi_slopes=features.get("alibi_slopes"), query_lens=query_lens)
    dtype_arg = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
    whole, whole_lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, **features, **dtype_arg)
    whole = from_bfloat16_bits(whole).astype(np.float64) \
        if dtype == "bfloat16" else whole.astype(np.float64)
    if case["head_mode"] == "scatter":
        share = heads // world
        mine = (Ellipsis, slice(rank * share, (rank + 1) * share))
        expected, expected_lse = expected[mine + (slice(None),)], \
            expected_lse[mine]
        whole, whole_lse = whole[mine + (slice(None),)], whole_lse[mine]
    got, got_lse = _values(out, dtype), lse.numpy().astype(np.float64)
    tolerance = TOLERANCE[dtype]
    name = case["name"]
    for reference, reference_lse, what in (
            (expected, expected_lse, "the float64 reference"),
            (whole, whole_lse, "the unsharded decode_attention")):
        np.testing.assert_allclose(got, reference, rtol=0, atol=tolerance,
                                   err_msg=f"{name}: out vs {what}")
        np.testing.assert_array_equal(np.isneginf(got_lse),
                                      np.isneginf(reference_lse),
                                      err_msg=f"{name}: empty rows vs {what}")
        finite = np.isfinite(reference_lse)
        np.testing.assert_allclose(got_lse[finite], reference_lse[finite],
                                   rtol=0,
                                   atol=2e-5 * max(1.0, float(np.max(
                                       np.abs(reference_lse[finite]),
                                       initial=0))),
                                   err_msg=f"{name}: lse vs {what}")
    # Rows without keys (a sequence no rank holds a token of, padding rows):
    # zeros (the sink's lse with sinks, but for padding rows).
    assert np.all(got[np.isneginf(got_lse)] == 0), name


def _worker(rank, world, port, seed, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        for case in CASES:
            try:
                _run_case(seed, case, rank, world)
                results.put((rank, case["name"], ""))
            except Exception:  # noqa: BLE001 - reported to the parent
                results.put((rank, case["name"], traceback.format_exc()))
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        results.put((rank, "setup", traceback.format_exc()))


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("world", [2, 4])
def test_sharded_decode_equals_the_whole(world):
    seed = int(np.random.default_rng().integers(2**31))
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_worker,
                                 args=(rank, world, port, seed, results))
                 for rank in range(world)]
    for process in processes:
        process.start()
    expected = world * len(CASES)
    reports = []
    try:
        for _ in range(expected):
            reports.append(results.get(timeout=TIMEOUT_SECONDS))
            if reports[-1][1] == "setup":
                break
    except Exception:  # noqa: BLE001 - a timeout: reported below
        pass
    for process in processes:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
    failures = [f"rank {rank} {case}:\n{error}"
                for rank, case, error in reports if error]
    assert not failures, "\n".join(failures)
    assert len(reports) == expected, (
        f"{len(reports)} of {expected} results before the {TIMEOUT_SECONDS} "
        "s limit")


def test_shard_length_counts_each_ranks_tokens():
    lens = np.array([0, 1, 15, 16, 17, 40, 64, 100], np.int32)
    for world in (1, 2, 3, 4):
        for interleave in (1, 4, 16):
            counts = [fdd.shard_length(lens, r, world, interleave)
                      for r in range(world)]
            assert np.array_equal(sum(counts), lens)
            for rank, count in enumerate(counts):
                for b, length in enumerate(lens):
                    tokens = np.arange(length)
                    assert count[b] == np.sum(
                        (tokens // interleave) % world == rank)
            torch_counts = fdd.shard_length(torch.from_numpy(lens), 1 % world,
                                            world, interleave)
            assert torch_counts.dtype == torch.int32
            assert np.array_equal(torch_counts.numpy(), counts[1 % world])


def test_shard_cache_holds_each_ranks_tokens_in_order():
    cache = np.arange(2 * 37 * 3).reshape(2, 37, 3, 1).astype(np.float32)
    world, interleave = 3, 4
    for rank in range(world):
        shard = fdd.shard_cache(cache, rank, world, interleave)
        for i in range(shard.shape[1]):
            j = ((i // interleave) * world + rank) * interleave + \
                i % interleave
            if j < 37:
                assert np.array_equal(shard[:, i], cache[:, j])
            else:
                assert np.all(shard[:, i] == 0)
        assert np.array_equal(
            fdd.shard_cache(torch.from_numpy(cache), rank, world,
                            interleave).numpy(), shard)


def test_errors_name_the_argument():
    q = torch.zeros(1, 4, 32)
    with pytest.raises(ValueError, match="heads must be 'all' or 'scatter'"):
        fdd.context_parallel_decode(q, q, q, torch.zeros(1, dtype=torch.int32),
                                    heads="some")
    with pytest.raises(TypeError,
                       match="context_parallel_decode takes no kv_shard="):
        fdd.context_parallel_decode(q, q, q, torch.zeros(1, dtype=torch.int32),
                                    kv_shard=(0, 2, 1))
    with pytest.raises(ValueError, match=r"q must be \[B, Hq, D\] or "
                                         r"\[B, Lq, Hq, D\], got \(4, 32\)"):
        fdd.context_parallel_decode(q[0], q, q,
                                    torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="interleave must be an int >= 1"):
        fdd.shard_length(np.zeros(1, np.int32), 0, 2, 0)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 2\)"):
        fdd.shard_cache(np.zeros((1, 4, 1, 32)), 2, 2)


def test_flashdecode_imports_without_torch():
    """A Python without torch imports flashdecode and its distributed
    module; calling into it says what to install."""
    code = ("import sys; sys.modules['torch'] = None; import flashdecode; "
            "from flashdecode import distributed; "
            "import numpy as np\n"
            "try:\n"
            "    distributed.context_parallel_decode(None, None, None, None)\n"
            "except ImportError as error:\n"
            "    print('refused:', error)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=120, check=True)
    assert "refused: flashdecode.distributed needs PyTorch" in result.stdout
    assert "python3-torch" in result.stdout
