"""Attention sinks (sinks=) on backend="cuda" and Decoder over DeviceArrays,
against the float64 reference of reference.py: on fdemu (the emulator as
CUDA driver) in make test, on a GPU when run with libcuda. Both partial
kernels (tensor cores: f16/bf16 with two or more rows per KV head; CUDA
cores: f32, and one row per KV head); the sinks are read by the merge
kernel, from device memory, so a Decoder's graph sees new values.

Inputs (and sinks) are fresh random numbers on every run; a failure names
its seed. Sizes are small: the emulator interprets every thread.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import (LSE_TOLERANCE, TOLERANCE, bf16,
                              check_bad_device_buffer, check_device,
                              check_misaligned_device_buffer,
                              check_the_device_works_after_bad_buffers,
                              device_cases, to_device)
from reference import (Inputs, attention, check_split_counts_agree,
                       page_pool, random_sinks)

pytestmark = pytest.mark.usefixtures("cuda_driver")

# TOLERANCE, LSE_TOLERANCE, check_device: per_head_buffers.py.


def run(inputs, lens, sinks, *, num_splits=None, window=None, cap=None,
        kv_layout="NHD", scale=None, table=None, caches=None):
    """decode_attention(backend="cuda", sinks=DeviceArray) against the
    reference; returns the host (out, lse)."""
    dtype = inputs.dtype
    q, k, v = inputs.stored
    if caches is not None:
        k, v = caches
    paged = {} if table is None else \
        {"block_table": DeviceArray.from_numpy(table)}
    out, lse = flashdecode.decode_attention(
        *to_device(q, k, v, dtype=bf16(dtype)), DeviceArray.from_numpy(lens),
        backend="cuda", return_lse=True, num_splits=num_splits,
        window_left=window, logits_soft_cap=cap, kv_layout=kv_layout,
        scale=scale, sinks=DeviceArray.from_numpy(sinks), **paged)
    assert out.shape == q.shape and lse.shape == q.shape[:-1]
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=kv_layout, window_left=window,
        logits_soft_cap=cap, scale=scale, sinks=sinks)
    check_device(out, lse, expected, expected_lse, dtype, lens,
                 f"seed={inputs.seed} dtype={dtype} lens={lens.tolist()} "
                 f"sinks={sinks.tolist()} window={window} cap={cap} "
                 f"splits={num_splits} layout={kv_layout}")
    return out.numpy(), lse.numpy()


def run_splits(inputs, lens, sinks, splits=(1, 3, None, 16), **options):
    """run() for each split count, the results also agreeing with each
    other to the tolerances."""
    results = [(n,) + run(inputs, lens, sinks, num_splits=n, **options)
               for n in splits]
    check_split_counts_agree(results, inputs.dtype, TOLERANCE[inputs.dtype],
                             LSE_TOLERANCE, f"seed={inputs.seed}")


# (dtype, q heads, KV heads, head dim): the partial kernel each runs.
KERNELS = {"f16-gqa-d64-tensor-cores": ("float16", 8, 2, 64),
           "bf16-gqa-d64-tensor-cores": ("bfloat16", 8, 2, 64),
           "f16-gqa-d128-tensor-cores": ("float16", 8, 2, 128),
           "bf16-gqa-d128-tensor-cores": ("bfloat16", 4, 1, 128),
           "f32-gqa-cuda-cores": ("float32", 8, 2, 64),
           "f32-mqa-cuda-cores": ("float32", 4, 1, 64),
           "f32-mha-cuda-cores": ("float32", 4, 4, 64),
           "bf16-mha-cuda-cores": ("bfloat16", 4, 4, 64)}


def math_units(dtype, num_q_heads, num_kv_heads, head_dim):
    kernel = flashdecode.compile(head_dim, num_q_heads, num_kv_heads,
                                 dtype=dtype, num_splits=3, with_sinks=True)
    partial = kernel.manifest["kernels"][0]
    assert partial["name"] == "fd_partial_attention"
    return partial["math_units"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_sinks_match_float64_for_every_split(kernel):
    """Lengths 0 (zeros, lse = sink), 1, 2, odd, full; splits 1, 3,
    automatic and 16 (more than the short sequences have keys)."""
    dtype, num_q_heads, num_kv_heads, head_dim = KERNELS[kernel]
    assert math_units(dtype, num_q_heads, num_kv_heads, head_dim) == (
        "cuda_cores" if "cuda-cores" in kernel else "tensor_cores")
    inputs = Inputs(dtype, (5, num_q_heads, head_dim),
                    (5, 150, num_kv_heads, head_dim))
    sinks = random_sinks(inputs.rng, num_q_heads)
    run_splits(inputs, inputs.lengths(0, 1, 2, 37, 150), sinks)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_several_query_tokens_with_a_window_and_a_soft_cap(dtype):
    """Lq = 4 with 4 query heads per KV head (16 rows: tensor cores for
    f16); tokens before the first key get lse = sink; windows shorter
    than Lq."""
    inputs = Inputs(dtype, (6, 4, 8, 64), (6, 90, 2, 64), q_magnitude=10.0)
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(0, 1, 3, 4, 41, 90)
    run_splits(inputs, lens, sinks, splits=(1, 5, 16))
    for window, cap in ((1, 4.0), (3, None), (9, 1.5), (None, 30.0)):
        run(inputs, lens, sinks, num_splits=4, window=window, cap=cap)
    _, lse = run(inputs, lens, sinks, num_splits=3)
    np.testing.assert_allclose(lse[0], np.broadcast_to(sinks, (4, 8)),
                               rtol=1e-6, err_msg=f"seed={inputs.seed}")


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches(layout):
    shape = (3, 96, 2, 64) if layout == "NHD" else (3, 2, 96, 64)
    inputs = Inputs("bfloat16", (3, 2, 8, 64), shape)
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 8, layout)
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(96, 0, 45)
    run_splits(inputs, lens, sinks, splits=(1, 3), kv_layout=layout,
               table=table, caches=(pool_k, pool_v))
    run(inputs, lens, sinks, num_splits=3, kv_layout=layout, table=table,
        caches=(pool_k, pool_v), window=13, cap=3.0)


def test_scale_out_lse_and_cuda_array_interface():
    """scale= (the sinks are not scaled), out=/lse= written in place, and
    sinks given as a foreign __cuda_array_interface__ object."""
    class Foreign:
        def __init__(self, array):
            self._array = array  # keeps the memory alive
            self.__cuda_array_interface__ = array.__cuda_array_interface__

    inputs = Inputs("float16", (2, 8, 64), (2, 70, 2, 64))
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(70, 23)
    out = DeviceArray.empty((2, 8, 64), "float16")
    lse = DeviceArray.empty((2, 8), "float32")
    result = flashdecode.decode_attention(
        *to_device(*inputs.stored, lens), backend="cuda", scale=0.3,
        num_splits=2, return_lse=True, out=out, lse=lse,
        sinks=Foreign(DeviceArray.from_numpy(sinks)))
    assert result[0] is out and result[1] is lse
    expected, expected_lse = attention(*inputs.exact, lens, scale=0.3,
                                       sinks=sinks)
    check_device(out, lse, expected, expected_lse, "float16", lens,
                 f"seed={inputs.seed}")


def test_the_launcher_cache_keys_on_sinks():
    """The same shapes with and without sinks are two kernels; new sink
    values in the same buffer give the new attention."""
    inputs = Inputs("bfloat16", (3, 8, 64), (3, 60, 2, 64))
    q, k, v = to_device(*inputs.stored, dtype="bfloat16")
    lens = inputs.lengths(60, 0, 11)
    device_lens = DeviceArray.from_numpy(lens)
    sinks = random_sinks(inputs.rng, 8)
    device_sinks = DeviceArray.from_numpy(sinks)
    for step in range(3):
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3, sinks=device_sinks)
        expected, expected_lse = attention(*inputs.exact, lens, sinks=sinks)
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     f"seed={inputs.seed} step {step} with sinks")
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3)
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     f"seed={inputs.seed} step {step} without sinks")
        sinks = random_sinks(inputs.rng, 8)
        device_sinks.copy_from_numpy(sinks)


@pytest.mark.parametrize("dtype,heads", [("float16", (8, 2)),
                                         ("float32", (4, 1))],
                         ids=["f16-tensor-cores", "f32-cuda-cores"])
def test_decoder_replays_new_sinks_and_lengths(dtype, heads):
    """One capture, then replays after new sink values (and new lengths)
    are written into device memory in place: each replay reads them."""
    num_q_heads, num_kv_heads = heads
    inputs = Inputs(dtype, (3, num_q_heads, 64), (3, 200, num_kv_heads, 64))
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(0, 1, 9)
    sinks = random_sinks(inputs.rng, num_q_heads)
    device_lens, device_sinks = to_device(lens, sinks)
    sentinel = np.full((3, num_q_heads, 64), 7.0, dtype)
    out = DeviceArray.from_numpy(sentinel)
    lse = DeviceArray.empty((3, num_q_heads), "float32")
    decoder = flashdecode.Decoder(q, k, v, device_lens, out, lse,
                                  num_splits=4, sinks=device_sinks)
    assert decoder.num_splits == 4
    decoder.capture()
    np.testing.assert_array_equal(out.numpy(), sentinel)
    for step in range(4):
        if step % 2:
            lens = lens + np.int32(inputs.rng.integers(10, 60))
            device_lens.copy_from_numpy(lens)
        elif step:
            sinks = random_sinks(inputs.rng, num_q_heads)
            device_sinks.copy_from_numpy(sinks)
        decoder.replay()
        expected, expected_lse = attention(*inputs.exact, lens, sinks=sinks)
        check_device(out, lse, expected, expected_lse, dtype, lens,
                     f"seed={inputs.seed} replay {step} "
                     f"lens={lens.tolist()} sinks={sinks.tolist()}")


def test_decoder_run_with_sinks_and_a_window():
    """Decoder.run() (eager) with automatic splits, a window and a cap."""
    inputs = Inputs("bfloat16", (2, 2, 8, 64), (2, 300, 2, 64),
                    q_magnitude=5.0)
    lens = inputs.lengths(1, 290)
    sinks = random_sinks(inputs.rng, 8)
    out = DeviceArray.empty((2, 2, 8, 64), "bfloat16")
    lse = DeviceArray.empty((2, 2, 8), "float32")
    decoder = flashdecode.Decoder(
        *to_device(*inputs.stored, dtype="bfloat16"),
        DeviceArray.from_numpy(lens), out, lse, window_left=40,
        logits_soft_cap=2.5, sinks=DeviceArray.from_numpy(sinks))
    decoder.run()
    expected, expected_lse = attention(*inputs.exact, lens, window_left=40,
                                       logits_soft_cap=2.5, sinks=sinks)
    check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                 f"seed={inputs.seed}")


# Bad sinks: a ValueError naming them, before anything reaches the device
# (per_head_buffers.py: the same suite as test_alibi_cuda_emulated.py's).

@pytest.mark.parametrize("make,words", device_cases("sinks"))
def test_bad_sinks_name_the_argument(make, words):
    check_bad_device_buffer("sinks", make, words)


def test_misaligned_sinks_say_4_bytes():
    check_misaligned_device_buffer("sinks")


def test_the_device_still_works_after_bad_sinks():
    check_the_device_works_after_bad_buffers(
        "sinks", random_sinks(np.random.default_rng(), 8))
