"""context_parallel_decode over torch.distributed with real collectives:
gloo on loopback, world 2 and 4, the CPU backend. Each rank builds the same
global problem from the test's seed, takes its shard of the cache
(shard_cache), decodes and merges; the result must equal the unsharded
decode_attention and the float64 reference, for interleave 1 and 16, GQA
and MQA, f32, f16 and bf16, sinks (counted once), paged shards, ranks that
hold no token of a sequence, and heads="scatter". The processes stop by
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

# (name, dtype, Hq, Hkv, D, lengths, max_len, interleave, heads, sinks,
#  page_size): the cases every rank runs, in order.
CASES = [
    ("gqa-f32-i1", "float32", 8, 2, 64, [37, 0, 5, 64], 64, 1, "all", False,
     0),
    ("gqa-f32-i16", "float32", 8, 2, 64, [37, 0, 5, 64], 64, 16, "all",
     False, 0),
    ("mqa-f16-i1-scatter", "float16", 4, 1, 32, [50, 1, 33], 56, 1,
     "scatter", False, 0),
    ("mqa-f16-i16-scatter", "float16", 4, 1, 32, [50, 1, 33], 56, 16,
     "scatter", False, 0),
    ("gqa-f32-sinks", "float32", 8, 2, 64, [40, 0, 17], 48, 16, "all", True,
     0),
    ("gqa-f32-sinks-scatter", "float32", 8, 2, 64, [40, 0, 17], 48, 1,
     "scatter", True, 0),
    ("gqa-bf16-paged16", "bfloat16", 8, 2, 64, [70, 3, 0], 80, 16, "all",
     False, 16),
    ("mha-f32-paged16-scatter", "float32", 4, 4, 32, [31, 64], 64, 1,
     "scatter", False, 16),
]


def _inputs(seed, dtype, heads, kv_heads, head_dim, max_len, batch):
    """(q, k, v) as stored (bf16: uint16 bits), their exact float64 values,
    and sinks: the same on every rank for one seed."""
    rng = np.random.default_rng(seed)
    stored, exact = random_inputs(rng, dtype, (batch, heads, head_dim),
                                  (batch, max_len, kv_heads, head_dim),
                                  q_deviation=1.0)
    sinks = rng.standard_normal(heads).astype(np.float32)
    return stored, exact, sinks


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
    (name, dtype, heads, kv_heads, head_dim, lengths, max_len, interleave,
     head_mode, with_sinks, page_size) = case
    lens = np.array(lengths, np.int32)
    (q, k, v), (eq, ek, ev), sinks = _inputs(
        seed, dtype, heads, kv_heads, head_dim, max_len, len(lengths))
    k_shard = fdd.shard_cache(k, rank, world, interleave)
    v_shard = fdd.shard_cache(v, rank, world, interleave)
    table = None
    if page_size:
        k_shard, v_shard, table = page_pool(
            np.random.default_rng(seed + 1 + rank), k_shard, v_shard,
            page_size, "NHD")
        table = torch.from_numpy(table)
    features = {"sinks": torch.from_numpy(sinks)} if with_sinks else {}
    out, lse = fdd.context_parallel_decode(
        _as_torch(q), _as_torch(k_shard), _as_torch(v_shard),
        torch.from_numpy(lens), interleave=interleave, block_table=table,
        return_lse=True, heads=head_mode, **features)
    expected, expected_lse = attention(
        eq, ek, ev, lens, sinks=sinks if with_sinks else None)
    dtype_arg = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
    whole, whole_lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True,
        sinks=sinks if with_sinks else None, **dtype_arg)
    whole = from_bfloat16_bits(whole).astype(np.float64) \
        if dtype == "bfloat16" else whole.astype(np.float64)
    if head_mode == "scatter":
        share = heads // world
        mine = slice(rank * share, (rank + 1) * share)
        expected, expected_lse = expected[:, mine], expected_lse[:, mine]
        whole, whole_lse = whole[:, mine], whole_lse[:, mine]
    got, got_lse = _values(out, dtype), lse.numpy().astype(np.float64)
    tolerance = TOLERANCE[dtype]
    for reference, reference_lse, what in (
            (expected, expected_lse, "the float64 reference"),
            (whole, whole_lse, "the unsharded decode_attention")):
        np.testing.assert_allclose(got, reference, rtol=0, atol=tolerance,
                                   err_msg=f"{name}: out vs {what}")
        np.testing.assert_allclose(got_lse, reference_lse, rtol=0,
                                   atol=2e-5 * max(1.0, float(np.max(
                                       np.abs(reference_lse[np.isfinite(
                                           reference_lse)]), initial=0))),
                                   err_msg=f"{name}: lse vs {what}")
    # A sequence no rank holds a token of: zeros, lse -inf (sinks: the sink).
    empty = lens == 0
    if empty.any() and not with_sinks:
        assert np.all(got[empty] == 0) and np.all(np.isneginf(got_lse[empty]))


def _worker(rank, world, port, seed, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        for case in CASES:
            try:
                _run_case(seed, case, rank, world)
                results.put((rank, case[0], ""))
            except Exception:  # noqa: BLE001 - reported to the parent
                results.put((rank, case[0], traceback.format_exc()))
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


def test_errors_name_what_is_unsupported():
    q = torch.zeros(1, 4, 32)
    with pytest.raises(ValueError, match="heads must be 'all' or 'scatter'"):
        fdd.context_parallel_decode(q, q, q, torch.zeros(1, dtype=torch.int32),
                                    heads="some")
    with pytest.raises(NotImplementedError, match="window_left"):
        fdd.context_parallel_decode(q, q, q, torch.zeros(1, dtype=torch.int32),
                                    window_left=8)
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
