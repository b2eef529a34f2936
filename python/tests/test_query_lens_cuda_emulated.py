"""Per-sequence query lengths (query_lens=) on backend="cuda" and Decoder
over DeviceArrays, against the float64 reference of reference.py: on fdemu
(the emulator as CUDA driver) in make test, on a GPU when run with libcuda.
Both partial kernels (tensor cores: f16/bf16 with two or more rows per KV
head, padding rows inside a row tile and, at Lq = 8 with 4 query heads per
KV head, whole tiles of them; CUDA cores: f32, and MHA with Lq = 1) and the
merge read the lengths from device memory, so a Decoder's graph sees new
values. Every call writes into out and lse filled with a sentinel
(query_lens_checks.attend): a padding row left unwritten shows.

Inputs (and query lengths) are fresh random numbers on every run; a failure
names its seed. Sizes are small: the emulator interprets every thread.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import (check_bad_device_buffer, check_device,
                              check_misaligned_device_buffer,
                              check_the_device_works_after_bad_buffers,
                              to_device)
from query_lens_checks import (DEVICE_BAD, attend,
                               check_against_calls_with_n_tokens,
                               check_padding, device_cases, random_lengths,
                               random_query_lens, run, run_splits, sentinel)
from reference import (Inputs, attention, page_pool, random_alibi_slopes,
                       random_sinks)

pytestmark = pytest.mark.usefixtures("cuda_driver")

BACKEND = "cuda"

# (dtype, q heads, KV heads, head dim): the partial kernel each runs at
# Lq = 4.
KERNELS = {"f16-gqa-d64-tensor-cores": ("float16", 8, 2, 64),
           "bf16-mqa-d128-tensor-cores": ("bfloat16", 4, 1, 128),
           "bf16-mha-d64-tensor-cores": ("bfloat16", 4, 4, 64),
           "f32-gqa-cuda-cores": ("float32", 8, 2, 64),
           "f32-mqa-cuda-cores": ("float32", 4, 1, 64)}


def math_units(dtype, num_q_heads, num_kv_heads, head_dim, query_len):
    kernel = flashdecode.compile(head_dim, num_q_heads, num_kv_heads,
                                 dtype=dtype, num_splits=3,
                                 query_len=query_len, with_query_lens=True)
    partial = kernel.manifest["kernels"][0]
    assert partial["name"] == "fd_partial_attention"
    return partial["math_units"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_query_lens_match_float64_for_every_split(kernel):
    """Lq = 4, every n in [0, 4] and one more; lengths 0, 1, 3 (tokens
    before the first key), full and random; splits 1, 3, automatic and 16
    (more than the short sequences have keys)."""
    dtype, num_q_heads, num_kv_heads, head_dim = KERNELS[kernel]
    assert math_units(dtype, num_q_heads, num_kv_heads, head_dim, 4) == (
        "cuda_cores" if "cuda-cores" in kernel else "tensor_cores")
    inputs = Inputs(dtype, (6, 4, num_q_heads, head_dim),
                    (6, 120, num_kv_heads, head_dim))
    run_splits(BACKEND, inputs, random_lengths(inputs.rng, 6, 120, 4),
               random_query_lens(inputs.rng, 6, 4), (1, 3, None, 16))


@pytest.mark.parametrize("query_len", range(1, 9))
def test_every_query_len(query_len):
    """Lq from 1 to 8 (each dtype in turn: f32 on CUDA cores, f16/bf16 on
    tensor cores, two row tiles per KV head at Lq = 8), each n in [0, Lq]
    in one batch."""
    dtype = ("float32", "float16", "bfloat16")[query_len % 3]
    batch = query_len + 2
    inputs = Inputs(dtype, (batch, query_len, 8, 64), (batch, 70, 2, 64))
    run_splits(BACKEND, inputs,
               random_lengths(inputs.rng, batch, 70, query_len),
               random_query_lens(inputs.rng, batch, query_len), (1, None))


@pytest.mark.parametrize("dtype,heads", [("bfloat16", (4, 4)),
                                         ("float16", (8, 2))],
                         ids=["bf16-mha-cuda-cores", "f16-gqa-tensor-cores"])
def test_q_without_a_query_axis(dtype, heads):
    """q [B, Hq, D] (Lq = 1): n is 0 (zeros, lse -inf) or 1."""
    num_q_heads, num_kv_heads = heads
    assert math_units(dtype, num_q_heads, num_kv_heads, 64, 1) == (
        "cuda_cores" if num_q_heads == num_kv_heads else "tensor_cores")
    inputs = Inputs(dtype, (4, num_q_heads, 64), (4, 60, num_kv_heads, 64))
    lens = inputs.lengths(60, 0, 17, 60)
    for query_lens in ([1, 0, 1, 0], [0, 1, 0, 1]):
        run_splits(BACKEND, inputs, lens, np.array(query_lens, np.int32),
                   (1, 3))


# The scale that gives q of magnitude 10 (D = 64) unit scores.
UNCAPPED_SCALE = 1.0 / (10.0 * 8.0)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_with_a_window_a_soft_cap_sinks_and_alibi(dtype):
    """Lq = 5: the window and the ALiBi distances follow each token's
    position len - n + t; padding rows keep lse -inf beside sinks."""
    inputs = Inputs(dtype, (6, 5, 8, 64), (6, 60, 2, 64), q_magnitude=10.0)
    lens = random_lengths(inputs.rng, 6, 60, 5)
    query_lens = random_query_lens(inputs.rng, 6, 5)
    sinks = random_sinks(inputs.rng, 8)
    slopes = random_alibi_slopes(inputs.rng, 8)
    for window, cap, with_sinks, with_alibi, splits in (
            (1, 4.0, True, False, 3), (6, None, True, True, 8),
            (30, 2.0, False, True, None), (None, None, True, True, 2)):
        # Uncapped, q of 10 would put scores ~10 apart, where f32
        # arithmetic alone errs by about the tolerance: scale back.
        run(BACKEND, inputs, lens, query_lens, num_splits=splits,
            scale=None if cap else UNCAPPED_SCALE,
            window_left=window, logits_soft_cap=cap,
            sinks=sinks if with_sinks else None,
            alibi_slopes=slopes if with_alibi else None)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches(layout):
    shape = (4, 64, 2, 64) if layout == "NHD" else (4, 2, 64, 64)
    inputs = Inputs("bfloat16", (4, 3, 8, 64), shape)
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 8, layout)
    paged = {"kv_layout": layout, "block_table": table,
             "caches": (pool_k, pool_v)}
    lens = random_lengths(inputs.rng, 4, 64, 3)
    query_lens = random_query_lens(inputs.rng, 4, 3)
    run_splits(BACKEND, inputs, lens, query_lens, (1, 3), **paged)
    run(BACKEND, inputs, lens, query_lens, num_splits=3, window_left=13,
        logits_soft_cap=3.0, sinks=random_sinks(inputs.rng, 8),
        alibi_slopes=random_alibi_slopes(inputs.rng, 8), **paged)


def test_values_out_of_range_are_clamped():
    """Device memory may hold anything: each value is clamped to [0, Lq],
    bit for bit what the clamped values give."""
    inputs = Inputs("float16", (6, 3, 8, 64), (6, 50, 2, 64))
    lens = inputs.lengths(50, 1, 2, 0, 33, 50)
    query_lens = np.array([-1, 4, 100, np.iinfo(np.int32).min,
                           np.iinfo(np.int32).max, 2], np.int32)
    clamped = np.clip(query_lens, 0, 3).astype(np.int32)
    out, lse = run(BACKEND, inputs, lens, query_lens, num_splits=3)
    expected, expected_lse = attend(BACKEND, inputs, lens, clamped,
                                    num_splits=3)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(lse, expected_lse)


@pytest.mark.parametrize("dtype,heads", [("float16", (8, 2)),
                                         ("float32", (4, 1))],
                         ids=["f16-tensor-cores", "f32-cuda-cores"])
def test_rows_equal_calls_with_n_query_tokens(dtype, heads):
    """Independent of the reference: sequence b's rows are those of a call
    on q[b:b+1, :n] alone, dense and paged with a window and sinks."""
    num_q_heads, num_kv_heads = heads
    inputs = Inputs(dtype, (5, 4, num_q_heads, 64),
                    (5, 60, num_kv_heads, 64))
    lens = random_lengths(inputs.rng, 5, 60, 4)
    query_lens = random_query_lens(inputs.rng, 5, 4)
    assert check_against_calls_with_n_tokens(
        BACKEND, inputs, lens, query_lens, num_splits=3) == 4
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 16, "NHD")
    check_against_calls_with_n_tokens(
        BACKEND, inputs, lens, query_lens, caches=(pool_k, pool_v),
        block_table=table, window_left=7,
        sinks=random_sinks(inputs.rng, num_q_heads))


def test_the_launcher_cache_keys_on_query_lens():
    """The same shapes with and without query_lens are two kernels; new
    values in the same buffer give the new attention (new outputs: no
    sentinel)."""
    inputs = Inputs("bfloat16", (3, 4, 8, 64), (3, 60, 2, 64))
    q, k, v = to_device(*inputs.stored, dtype="bfloat16")
    lens = inputs.lengths(60, 0, 11)
    device_lens = DeviceArray.from_numpy(lens)
    query_lens = np.array([4, 1, 2], np.int32)
    device_query_lens = DeviceArray.from_numpy(query_lens)
    for step in range(3):
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3, query_lens=device_query_lens)
        expected, expected_lse = attention(*inputs.exact, lens,
                                           query_lens=query_lens)
        context = f"seed={inputs.seed} step {step} query_lens=" \
            f"{query_lens.tolist()}"
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     context, query_lens=query_lens)
        check_padding(out.numpy(), lse.numpy(), query_lens, "bfloat16",
                      context)
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3)
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     f"seed={inputs.seed} step {step} without query_lens")
        query_lens = random_query_lens(inputs.rng, 3, 4)
        device_query_lens.copy_from_numpy(query_lens)


@pytest.mark.parametrize("dtype,heads", [("float16", (8, 2)),
                                         ("float32", (4, 1))],
                         ids=["f16-tensor-cores", "f32-cuda-cores"])
def test_decoder_replays_new_query_lens_and_lengths(dtype, heads):
    """One capture, then replays after new query lengths (and lengths) are
    written into device memory in place: each replay reads them, and rows
    that were queries the replay before become zeros when they turn to
    padding."""
    num_q_heads, num_kv_heads = heads
    inputs = Inputs(dtype, (3, 4, num_q_heads, 64),
                    (3, 160, num_kv_heads, 64))
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(5, 1, 9)
    query_lens = np.array([4, 4, 4], np.int32)
    device_lens, device_query_lens = to_device(lens, query_lens)
    out = DeviceArray.from_numpy(sentinel((3, 4, num_q_heads, 64), dtype))
    lse = DeviceArray.from_numpy(sentinel((3, 4, num_q_heads), "float32"))
    decoder = flashdecode.Decoder(q, k, v, device_lens, out, lse,
                                  num_splits=4, query_lens=device_query_lens)
    assert decoder.num_splits == 4
    decoder.capture()
    np.testing.assert_array_equal(out.numpy(), sentinel(out.shape, dtype))
    steps = [[4, 4, 4], [0, 2, 4], [3, 0, 1], [4, 4, 0], [-3, 9, 2]]
    for step, values in enumerate(steps):
        query_lens = np.array(values, np.int32)
        device_query_lens.copy_from_numpy(query_lens)
        if step % 2:
            lens = lens + np.int32(inputs.rng.integers(10, 50))
            device_lens.copy_from_numpy(lens)
        decoder.replay()
        expected, expected_lse = attention(*inputs.exact, lens,
                                           query_lens=query_lens)
        context = f"seed={inputs.seed} replay {step} lens={lens.tolist()} " \
            f"query_lens={values}"
        check_device(out, lse, expected, expected_lse, dtype, lens, context,
                     query_lens=query_lens)
        check_padding(out.numpy(), lse.numpy(), query_lens, dtype, context)


def test_decoder_run_with_query_lens_sinks_alibi_and_a_window():
    """Decoder.run() (eager) with automatic splits, a window, a cap, sinks
    and ALiBi beside the query lengths."""
    inputs = Inputs("bfloat16", (3, 3, 8, 64), (3, 200, 2, 64),
                    q_magnitude=5.0)
    lens = inputs.lengths(1, 190, 40)
    query_lens = np.array([3, 2, 0], np.int32)
    sinks = random_sinks(inputs.rng, 8)
    slopes = random_alibi_slopes(inputs.rng, 8)
    out = DeviceArray.from_numpy(sentinel((3, 3, 8, 64), "bfloat16"),
                                 dtype="bfloat16")
    lse = DeviceArray.empty((3, 3, 8), "float32")
    decoder = flashdecode.Decoder(
        *to_device(*inputs.stored, lens, dtype="bfloat16"), out, lse,
        window_left=30, logits_soft_cap=2.5,
        sinks=DeviceArray.from_numpy(sinks),
        alibi_slopes=DeviceArray.from_numpy(slopes),
        query_lens=DeviceArray.from_numpy(query_lens))
    decoder.run()
    expected, expected_lse = attention(
        *inputs.exact, lens, window_left=30, logits_soft_cap=2.5,
        sinks=sinks, alibi_slopes=slopes, query_lens=query_lens)
    check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                 f"seed={inputs.seed}", query_lens=query_lens)
    check_padding(out.numpy(), lse.numpy(), query_lens, "bfloat16",
                  f"seed={inputs.seed}")


def test_the_native_plan_requires_query_lens():
    """_flashdecode.CudaPlan: the runtime refuses a config with query
    lengths without them and query lengths without the config."""
    native = flashdecode._flashdecode
    inputs = Inputs("float32", (1, 2, 4, 64), (1, 16, 1, 64))
    arrays = to_device(*inputs.stored, inputs.lengths(16))
    out = DeviceArray.empty((1, 2, 4, 64), "float32")
    query_lens = DeviceArray.from_numpy(np.array([1], np.int32))
    pointers = [a._address for a in arrays] + [out._address, 0, 0, 0]
    arch = native.cuda_target(0)

    def config(with_query_lens):
        return native.KernelRequest(64, 4, 1, 2, "f32", "NHD", 0, 2, True,
                                   None, False, 1, 16, 1, arch,
                                   with_query_lens=with_query_lens)
    with pytest.raises(Exception, match="queryLens buffer"):
        native.CudaPlan(config(True), 0, *pointers)
    with pytest.raises(Exception, match="without per-sequence query"):
        native.CudaPlan(config(False), 0, *pointers,
                        query_lens=query_lens._address)
    with pytest.raises(Exception, match="queryLens address is not 4-byte"):
        native.CudaPlan(config(True), 0, *pointers,
                        query_lens=query_lens._address + 2)
    native.CudaPlan(config(True), 0, *pointers,
                    query_lens=query_lens._address).launch(None)


# Bad query_lens: query_lens_checks.py's table through per_head_buffers.py's
# checks (q [2, 8, 64]: B = 2).

@pytest.mark.parametrize("make,words", device_cases())
def test_bad_query_lens_name_the_argument(make, words):
    check_bad_device_buffer("query_lens", make, words)


def test_misaligned_query_lens_say_4_bytes():
    check_misaligned_device_buffer("query_lens", count=2, dtype="int32")


def test_the_device_still_works_after_bad_query_lens():
    check_the_device_works_after_bad_buffers(
        "query_lens", np.array([1, 0], np.int32), DEVICE_BAD)
