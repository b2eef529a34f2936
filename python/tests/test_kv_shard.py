"""decode_attention(kv_shard=(rank, world, interleave)) on backend="cpu":
each rank's (out, lse) over its share of a cache sharded by token (global
token j on rank (j // interleave) % world, the lengths global) against the
float64 reference attending that rank's keys (reference.py), and the
ranks merged by merge_states against the whole cache; Lq > 1 causal, a
window across the shards' boundaries, ALiBi's global distances, per-sequence
query lengths, splits, paged shards, MLA's latent cache; compile() and
plan_splits() with kv_shard_world; the errors that name the argument.
Inputs are fresh random numbers (FD_TEST_SEED reruns a failure)."""
import numpy as np
import pytest

import flashdecode
from flashdecode.distributed import shard_cache
from reference import (Inputs, attention, check_against_reference,
                       from_bfloat16_bits, page_pool)

TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 2e-2}
LSE_TOLERANCE = 2e-5


def shards(inputs, world, interleave):
    """Every rank's (k, v) share of the inputs' caches."""
    k, v = inputs.stored[1], inputs.stored[2]
    return [(shard_cache(k, rank, world, interleave),
             shard_cache(v, rank, world, interleave))
            for rank in range(world)]


def run_every_rank(inputs, lens, world, interleave, backend="cpu",
                   to_backend=lambda array: array, **features):
    """Each rank's (out, lse) as numpy, checked against the reference over
    its keys; returns them for the merge."""
    q = inputs.stored[0]
    dtype = {"dtype": "bfloat16"} if inputs.dtype == "bfloat16" else {}
    results = []
    reference_features = {name: value for name, value in features.items()
                          if name not in ("num_splits",)}
    for rank, (k, v) in enumerate(shards(inputs, world, interleave)):
        device = {name: to_backend(value) if isinstance(value, np.ndarray)
                  else value for name, value in features.items()}
        out, lse = flashdecode.decode_attention(
            to_backend(q), to_backend(k), to_backend(v), to_backend(lens),
            return_lse=True, kv_shard=(rank, world, interleave),
            backend=backend, **device, **dtype)
        out = out if isinstance(out, np.ndarray) else out.numpy()
        lse = lse if isinstance(lse, np.ndarray) else lse.numpy()
        expected, expected_lse = attention(
            *inputs.exact, lens, kv_shard=(rank, world, interleave),
            **reference_features)
        check_against_reference(
            out, lse, expected, expected_lse, inputs.dtype,
            TOLERANCE[inputs.dtype], LSE_TOLERANCE,
            f"rank {rank} of {world} x {interleave}, seed {inputs.seed}")
        results.append((out, lse))
    return results


def merged(results, dtype):
    """merge_states over the ranks' results (bfloat16: uint16 patterns, as
    merge_states reads them), in float64."""
    states = np.stack([out for out, _ in results], axis=-3)
    lses = np.stack([lse for _, lse in results], axis=-2)
    heads, width = states.shape[-2], states.shape[-1]
    rows = lses.size // (len(results) * heads)
    out, lse = flashdecode.merge_states(
        np.ascontiguousarray(states.reshape(rows, len(results), heads, width)),
        np.ascontiguousarray(lses.reshape(rows, len(results), heads)))
    value = from_bfloat16_bits(out) if dtype == "bfloat16" else out
    return value.astype(np.float64), lse.astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("world,interleave", [(1, 1), (2, 1), (3, 4),
                                              (4, 16)])
def test_every_rank_and_their_merge(dtype, world, interleave):
    """GQA, lengths 0, 1, 5 (short of most ranks' first token), odd, a
    round and the longest; automatic and 64 splits (more than a rank's
    keys)."""
    inputs = Inputs(dtype, (6, 8, 64), (6, 150, 2, 64))
    lens = np.array([0, 1, 5, 97, world * interleave, 150], np.int32)
    for num_splits in (None, 64):
        results = run_every_rank(inputs, lens, world, interleave,
                                 num_splits=num_splits)
        out, lse = merged(results, dtype)
        expected, expected_lse = attention(*inputs.exact, lens)
        check_against_reference(
            out.astype(np.float32), lse, expected, expected_lse, "float32",
            TOLERANCE[dtype], LSE_TOLERANCE,
            f"merged, {num_splits} splits, seed {inputs.seed}")


@pytest.mark.parametrize("world,interleave", [(2, 1), (3, 4)])
def test_global_positions_for_every_rule(world, interleave):
    """Lq = 4 causal, a window of 11 across the shards' boundaries, ALiBi
    and per-sequence query lengths 0 to 4, split and not."""
    inputs = Inputs("float32", (5, 4, 8, 64), (5, 90, 2, 64))
    lens = np.array([90, 3, 40, 2, 61], np.int32)
    query_lens = np.array([4, 2, 0, 3, 1], np.int32)
    slopes = (2.0 ** (-np.arange(1, 9))).astype(np.float32)
    for num_splits in (1, 3):
        run_every_rank(inputs, lens, world, interleave, window_left=11,
                       alibi_slopes=slopes, query_lens=query_lens,
                       logits_soft_cap=20.0, num_splits=num_splits)


def test_paged_shards():
    """Each rank's share in shuffled pages of 16 equals its dense run."""
    inputs = Inputs("float16", (3, 2, 8, 64), (3, 100, 2, 64))
    lens = np.array([100, 17, 0], np.int32)
    q = inputs.stored[0]
    for rank, (k, v) in enumerate(shards(inputs, 2, 16)):
        dense = flashdecode.decode_attention(q, k, v, lens, return_lse=True,
                                             kv_shard=(rank, 2, 16))
        pool_k, pool_v, table = page_pool(inputs.rng, k, v, 16, "NHD")
        paged = flashdecode.decode_attention(q, pool_k, pool_v, lens,
                                             block_table=table,
                                             return_lse=True,
                                             kv_shard=(rank, 2, 16))
        np.testing.assert_array_equal(paged[0], dense[0])
        np.testing.assert_array_equal(paged[1], dense[1])


def check_sharded_mla(inputs, lens, world, interleave, backend="cpu",
                      to_backend=lambda array: array, **options):
    """mla_decode over each rank's share of the inputs' latent cache (one
    KV head, 576 wide, values its first 512 columns) against the
    reference over that rank's keys."""
    q, latent = inputs.stored[0], inputs.stored[1]
    exact = inputs.exact[1]
    scale = 1.0 / np.sqrt(192.0)
    shard = dict(dtype="bfloat16") if backend == "cpu" else {}
    for rank in range(world):
        out, lse = flashdecode.mla_decode(
            to_backend(q), to_backend(shard_cache(latent, rank, world,
                                                  interleave)),
            to_backend(lens), scale=scale, return_lse=True, backend=backend,
            kv_shard=(rank, world, interleave), **shard, **options)
        out = out if isinstance(out, np.ndarray) else out.numpy()
        lse = lse if isinstance(lse, np.ndarray) else lse.numpy()
        expected, expected_lse = attention(
            inputs.exact[0], exact, exact[..., :512], lens, scale=scale,
            kv_shard=(rank, world, interleave))
        check_against_reference(out, lse, expected, expected_lse, "bfloat16",
                                TOLERANCE["bfloat16"], LSE_TOLERANCE,
                                f"rank {rank}, seed {inputs.seed}")


def test_mla_decode_over_a_sharded_latent_cache():
    """DeepSeek's absorbed decode, 16 heads, the latent cache over 4 ranks
    of 64 tokens (MLA's decode context parallelism)."""
    inputs = Inputs("bfloat16", (2, 16, 576), (2, 300, 1, 576))
    check_sharded_mla(inputs, np.array([300, 70], np.int32), 4, 64)


def test_lengths_are_global_and_bounded_by_the_shards():
    """2 ranks of 4 tokens over 10 positions hold global lengths up to
    2 * 4 * 2 + 2 = 18."""
    inputs = Inputs("float32", (1, 8, 64), (1, 18, 2, 64))
    k, v = shards(inputs, 2, 4)[0]
    k, v = k[:, :10], v[:, :10]
    q = inputs.stored[0]
    flashdecode.decode_attention(q, k, v, np.array([18], np.int32),
                                 kv_shard=(0, 2, 4))
    with pytest.raises(ValueError, match=r"seq_lens must be in \[0, 18\] "
                       r"\(the global length 2 shards of 10 keys hold\), "
                       r"got 19\.\.19"):
        flashdecode.decode_attention(q, k, v, np.array([19], np.int32),
                                     kv_shard=(0, 2, 4))


def test_kv_shard_errors_name_the_argument():
    inputs = Inputs("float32", (1, 8, 64), (1, 16, 2, 64))
    q, k, v = inputs.stored
    lens = np.array([16], np.int32)
    for bad, message in (
            (3, r"kv_shard must be None or \(rank, world, interleave\), "
                r"got 3"),
            ((0, 2), r"kv_shard must be None or \(rank, world, "
                     r"interleave\), got \(0, 2\)"),
            ((2, 2, 1), r"rank must be an int in \[0, 2\), got 2"),
            ((True, 2, 1), r"rank must be an int in \[0, 2\), got True"),
            ((0, 0, 1), r"world must be an int >= 1, got 0"),
            ((0, 2, 0), r"interleave must be an int >= 1, got 0")):
        with pytest.raises(ValueError, match=message):
            flashdecode.decode_attention(q, k, v, lens, kv_shard=bad)
    with pytest.raises(ValueError, match="with_sinks with kv_shard_world: "
                       "each rank would count the sinks once more"):
        flashdecode.decode_attention(q, k, v, lens, kv_shard=(0, 2, 1),
                                     sinks=np.zeros(8, np.float32))


def test_compile_and_plan_splits_take_the_shard():
    kernel = flashdecode.compile(64, 8, 2, num_splits=3, query_len=2,
                                 kv_shard_world=4, kv_shard_interleave=16)
    config = kernel.manifest["config"]
    assert (config["kv_shard_world"], config["kv_shard_interleave"]) == \
        (4, 16)
    partial = kernel.manifest["kernels"][0]
    assert partial["params"][-1] == {"name": "kv_shard_rank", "type": "ptr"}
    # A window of 1000 ending at 4 query tokens: one rank of 4 x 16 holds
    # at most 256 of its keys, so the plan is that of a 256-key sequence.
    options = dict(num_q_heads=8, head_dim=64, query_len=4, window_left=1000)
    sharded = flashdecode.plan_splits(1, 2, 4096, kv_shard_world=4,
                                      kv_shard_interleave=16, **options)
    assert sharded == flashdecode.plan_splits(1, 2, 256, **options)
    assert sharded == flashdecode.compile(
        64, 8, 2, batch=1, max_len=4096, query_len=4, window_left=1000,
        kv_shard_world=4, kv_shard_interleave=16).num_splits
    assert sharded < flashdecode.plan_splits(1, 2, 4096, **options)
    with pytest.raises(ValueError, match="kv_shard_interleave 16 needs "
                       "kv_shard_world"):
        flashdecode.plan_splits(1, 2, 4096, kv_shard_interleave=16, **options)
    with pytest.raises(ValueError, match="kv_shard_interleave 16 needs "
                       "kv_shard_world"):
        flashdecode.compile(64, 8, 2, kv_shard_interleave=16)
    with pytest.raises(TypeError, match="kv_shard_world must be an int"):
        flashdecode.compile(64, 8, 2, kv_shard_world=2.0)
