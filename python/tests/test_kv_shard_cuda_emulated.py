"""decode_attention(kv_shard=...) on backend="cuda" and the Decoder (in
`make test`: fdemu, whose every launch is checked for out-of-bounds,
uninitialized and racy accesses) against the float64 reference attending
each rank's keys (reference.py) on fresh random inputs (FD_TEST_SEED reruns
a failure): the tensor-core kernel (f16, GQA) and the CUDA-core one (f32)
with Lq = 4 causal, a window across the shards' boundaries, ALiBi's global
distances and per-sequence query lengths; paged shards; MLA's latent cache;
Decoders of two ranks replaying a captured graph as the global lengths
grow (the rank is read from device memory at every replay); check_lengths
bounded by what the shards hold."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from flashdecode.distributed import shard_cache
from per_head_buffers import LSE_TOLERANCE, TOLERANCE, to_device
from reference import Inputs, attention, check_against_reference, page_pool
from test_kv_shard import check_sharded_mla, run_every_rank

pytestmark = pytest.mark.usefixtures("cuda_driver")


def device(array):
    """A numpy array on the device (uint16 patterns as bfloat16)."""
    return DeviceArray.from_numpy(
        np.ascontiguousarray(array),
        dtype="bfloat16" if array.dtype == np.uint16 else None)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("world,interleave", [(2, 1), (3, 4)])
def test_every_rule_at_global_positions(dtype, world, interleave):
    """f16 on tensor cores, f32 on CUDA cores: Lq = 4, a window of 11,
    ALiBi, query lengths 0 to 4, lengths 0 and shorter than the queries;
    1 and 3 splits."""
    inputs = Inputs(dtype, (4, 4, 8, 64), (4, 60, 2, 64))
    lens = np.array([60, 2, 0, 37], np.int32)
    query_lens = np.array([4, 3, 1, 2], np.int32)
    slopes = (2.0 ** (-np.arange(1, 9))).astype(np.float32)
    for num_splits in (1, 3):
        run_every_rank(inputs, lens, world, interleave, backend="cuda",
                       to_backend=device, window_left=11,
                       alibi_slopes=slopes, query_lens=query_lens,
                       num_splits=num_splits)


def test_paged_shard_on_the_gpu():
    inputs = Inputs("float16", (2, 8, 64), (2, 70, 2, 64))
    lens = np.array([70, 9], np.int32)
    q, k, v = inputs.stored
    for rank in range(2):
        pool_k, pool_v, table = page_pool(
            inputs.rng, shard_cache(k, rank, 2, 16),
            shard_cache(v, rank, 2, 16), 16, "NHD")
        out, lse = flashdecode.decode_attention(
            *to_device(q, pool_k, pool_v), device(lens),
            block_table=device(table), return_lse=True, backend="cuda",
            kv_shard=(rank, 2, 16), num_splits=2)
        expected, expected_lse = attention(*inputs.exact, lens,
                                           kv_shard=(rank, 2, 16))
        check_against_reference(out.numpy(), lse.numpy(), expected,
                                expected_lse, "float16", TOLERANCE["float16"],
                                LSE_TOLERANCE, f"rank {rank} seed "
                                f"{inputs.seed}")


def test_mla_decode_over_a_sharded_latent_cache():
    inputs = Inputs("bfloat16", (2, 2, 16, 576), (2, 130, 1, 576))
    check_sharded_mla(inputs, np.array([130, 3], np.int32), 2, 64,
                      backend="cuda", to_backend=device, num_splits=2)


def test_decoders_of_two_ranks_replay_growing_lengths():
    """Each rank's Decoder captures once; replays read the global lengths
    (and the rank) from device memory. A length past the shards' 2 * 2 * 24
    = 96 is refused by check_lengths."""
    inputs = Inputs("float16", (2, 2, 8, 64), (2, 96, 2, 64))
    q, k, v = inputs.stored
    lens = DeviceArray.from_numpy(np.array([1, 0], np.int32))
    decoders = []
    for rank in range(2):
        out = DeviceArray.empty((2, 2, 8, 64), "float16")
        lse = DeviceArray.empty((2, 2, 8), "float32")
        decoder = flashdecode.Decoder(
            *to_device(q, shard_cache(k, rank, 2, 2),
                       shard_cache(v, rank, 2, 2)),
            lens, out, lse, num_splits=3, window_left=40,
            kv_shard=(rank, 2, 2), check_lengths=True)
        decoder.capture()
        decoders.append((rank, decoder, out, lse))
    for now in ((1, 0), (5, 2), (96, 61)):
        lengths = np.array(now, np.int32)
        lens.copy_from_numpy(lengths)
        for rank, decoder, out, lse in decoders:
            decoder.replay()
            expected, expected_lse = attention(*inputs.exact, lengths,
                                               window_left=40,
                                               kv_shard=(rank, 2, 2))
            check_against_reference(
                out.numpy(), lse.numpy(), expected, expected_lse, "float16",
                TOLERANCE["float16"], LSE_TOLERANCE,
                f"rank {rank} lengths {now} seed {inputs.seed}")
    lens.copy_from_numpy(np.array([97, 0], np.int32))
    with pytest.raises(ValueError, match=r"seq_lens\[0\] = 97 is outside "
                       r"\[0, 96\] \(the global length 2 shards of 48 keys "
                       r"hold"):
        decoders[0][1].replay()
