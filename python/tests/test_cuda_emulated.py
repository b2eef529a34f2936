"""backend="cuda" and Decoder on DeviceArrays against the CPU backend, without
PyTorch: on fdemu (the emulator as CUDA driver) in make test, on a GPU when
run with libcuda. Sizes are small: the emulator interprets every thread.

The CPU backend is itself checked against float64 in test_numerics.py; here
the GPU kernels must agree with it (with sliding windows and soft-capping:
with reference.py's float64 attention) to 1e-2 of the output's
largest magnitude (f16/bf16; 1e-5 for f32) and 1e-3 on the lse.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import (Inputs, attention, check_against_reference,
                       from_bfloat16_bits, page_pool, random_inputs)

pytestmark = pytest.mark.usefixtures("cuda_driver")

TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5}


def to_device(*arrays, dtype=None):
    return [DeviceArray.from_numpy(a, dtype=dtype if a.dtype == np.uint16
                                   else None) for a in arrays]


def as_float(values, dtype):
    return from_bfloat16_bits(values) if dtype == "bfloat16" else \
        values.astype(np.float32)


def check_close(out, lse, expected, expected_lse, dtype, context=""):
    """The GPU's out/lse (DeviceArrays) against the CPU backend's. Rows
    without keys must be zeros with lse -inf on both."""
    assert isinstance(out, DeviceArray) and out.dtype == dtype
    actual = as_float(out.numpy(), dtype)
    reference = as_float(expected, dtype)
    scale = max(np.abs(reference).max(), 1e-30)
    error = np.abs(actual - reference).max() / scale
    assert error <= TOLERANCE[dtype], f"relative error {error} {context}"
    if lse is None:
        return
    assert isinstance(lse, DeviceArray) and lse.dtype == "float32"
    actual_lse = lse.numpy()
    assert actual_lse.shape == expected_lse.shape
    empty = np.isneginf(expected_lse)
    np.testing.assert_array_equal(np.isneginf(actual_lse), empty,
                                  err_msg=f"rows without keys {context}")
    np.testing.assert_allclose(actual_lse[~empty], expected_lse[~empty],
                               rtol=1e-3, atol=1e-3, err_msg=context)


def run_both(q, k, v, lens, dtype, **options):
    """(GPU out, lse) on DeviceArrays, (CPU out, lse) on the numpy arrays."""
    bf16 = "bfloat16" if dtype == "bfloat16" else None
    table = options.pop("block_table", None)
    device_table = {} if table is None else \
        {"block_table": DeviceArray.from_numpy(table)}
    cpu_table = {} if table is None else {"block_table": table}
    gpu = flashdecode.decode_attention(
        *to_device(q, k, v, dtype=bf16), DeviceArray.from_numpy(lens),
        backend="cuda", return_lse=True, **device_table, **options)
    cpu = flashdecode.decode_attention(q, k, v, lens, return_lse=True,
                                       dtype=bf16, **cpu_table, **options)
    return gpu, cpu


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
@pytest.mark.parametrize("heads", [(8, 2), (4, 1), (4, 4)],
                         ids=["gqa", "mqa", "mha"])
def test_matches_cpu(dtype, kv_layout, heads):
    num_q_heads, num_kv_heads = heads
    rng = np.random.default_rng()
    head_dim, max_len = 64, 301
    cache = (4, max_len, num_kv_heads, head_dim) if kv_layout == "NHD" else \
        (4, num_kv_heads, max_len, head_dim)
    (q, k, v), _ = random_inputs(rng, dtype, (4, num_q_heads, head_dim), cache)
    lens = np.array([0, 1, 2 * int(rng.integers(20, 140)) + 1, max_len],
                    np.int32)
    (out, lse), (expected, expected_lse) = run_both(
        q, k, v, lens, dtype, kv_layout=kv_layout, num_splits=3)
    assert out.shape == q.shape and lse.shape == (4, num_q_heads)
    check_close(out, lse, expected, expected_lse, dtype, f"lens={lens}")


@pytest.mark.parametrize("head_dim", [128, 256])
def test_head_dims_and_automatic_splits(head_dim):
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float16", (2, 4, head_dim),
                                 (2, 200, 1, head_dim))
    lens = np.array([200, int(rng.integers(1, 200))], np.int32)
    (out, lse), (expected, expected_lse) = run_both(q, k, v, lens, "float16")
    check_close(out, lse, expected, expected_lse, "float16", f"lens={lens}")


def test_more_splits_than_tokens():
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "bfloat16", (3, 4, 64), (3, 12, 2, 64))
    lens = np.array([0, 5, 9], np.int32)
    (out, lse), (expected, expected_lse) = run_both(
        q, k, v, lens, "bfloat16", num_splits=16)
    check_close(out, lse, expected, expected_lse, "bfloat16")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_query_len_4(dtype):
    """q [B, Lq, Hq, D]: token t of 4 sees keys < len - 4 + t + 1, so a
    sequence of length 1 has three rows without keys."""
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, dtype, (3, 4, 8, 64), (3, 150, 2, 64))
    lens = np.array([1, 2 * int(rng.integers(5, 70)) + 1, 150], np.int32)
    (out, lse), (expected, expected_lse) = run_both(q, k, v, lens, dtype,
                                                    num_splits=4)
    assert out.shape == (3, 4, 8, 64) and lse.shape == (3, 4, 8)
    assert np.isneginf(expected_lse[0, :3]).all()
    check_close(out, lse, expected, expected_lse, dtype, f"lens={lens}")


@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paged_caches(kv_layout, dtype):
    rng = np.random.default_rng()
    num_pages, page_size = 20, 16
    pool = (num_pages, page_size, 2, 64) if kv_layout == "NHD" else \
        (num_pages, 2, page_size, 64)
    (q, k, v), _ = random_inputs(rng, dtype, (3, 8, 64), pool)
    table = rng.permutation(num_pages)[:18].astype(np.int32).reshape(3, 6)
    lens = np.array([96, 2 * int(rng.integers(1, 40)) + 1, 0], np.int32)
    (out, lse), (expected, expected_lse) = run_both(
        q, k, v, lens, dtype, kv_layout=kv_layout, num_splits=3,
        block_table=table)
    check_close(out, lse, expected, expected_lse, dtype, f"lens={lens}")


def test_without_lse_and_with_scale():
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float16", (2, 8, 64), (2, 90, 2, 64))
    lens = np.array([90, int(rng.integers(1, 90))], np.int32)
    out = flashdecode.decode_attention(*to_device(q, k, v, lens),
                                       backend="cuda", scale=0.3)
    assert isinstance(out, DeviceArray)
    check_close(out, None, flashdecode.decode_attention(q, k, v, lens,
                                                        scale=0.3),
                None, "float16")


def test_cuda_array_interface_objects_are_accepted():
    """Any object with __cuda_array_interface__ (here wrapping DeviceArrays,
    as CuPy or Numba arrays would come): outputs are DeviceArrays."""
    class Foreign:
        def __init__(self, array):
            self._array = array  # keeps the memory alive
            self.__cuda_array_interface__ = array.__cuda_array_interface__

    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float16", (2, 8, 64), (2, 50, 2, 64))
    lens = np.array([50, int(rng.integers(1, 50))], np.int32)
    out, lse = flashdecode.decode_attention(
        *[Foreign(a) for a in to_device(q, k, v, lens)], backend="cuda",
        return_lse=True)
    expected, expected_lse = flashdecode.decode_attention(q, k, v, lens,
                                                          return_lse=True)
    check_close(out, lse, expected, expected_lse, "float16")


def test_decoder_replays_as_lengths_grow():
    """One capture, then replays while the lengths grow in place; each
    replay must see the new lengths. The capture itself runs nothing."""
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float16", (2, 8, 64), (2, 400, 2, 64))
    device_q, device_k, device_v = to_device(q, k, v)
    lens = np.array([1, 7], np.int32)
    device_lens = DeviceArray.from_numpy(lens)
    sentinel = np.full(q.shape, 7.0, np.float16)
    out = DeviceArray.from_numpy(sentinel)
    lse = DeviceArray.empty((2, 8), "float32")
    decoder = flashdecode.Decoder(device_q, device_k, device_v, device_lens,
                                  out, lse, num_splits=4)
    assert decoder.num_splits == 4
    decoder.capture()
    np.testing.assert_array_equal(out.numpy(), sentinel)
    for step in range(5):
        grown = lens + np.int32(step * int(rng.integers(30, 79)))
        device_lens.copy_from_numpy(grown)
        decoder.replay()
        expected, expected_lse = flashdecode.decode_attention(
            q, k, v, grown, return_lse=True)
        check_close(out, lse, expected, expected_lse, "float16",
                    f"replay {step}, lens={grown}")


def test_paged_decoder_replays_as_pages_move():
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "bfloat16", (2, 4, 64), (12, 8, 1, 64))
    table = rng.permutation(12)[:10].astype(np.int32).reshape(2, 5)
    lens = np.array([3, 17], np.int32)
    device_table, device_lens = DeviceArray.from_numpy(table), \
        DeviceArray.from_numpy(lens)
    out = DeviceArray.empty(q.shape, "bfloat16")
    decoder = flashdecode.Decoder(*to_device(q, k, v, dtype="bfloat16"),
                                  device_lens, out, num_splits=2,
                                  block_table=device_table)
    decoder.capture()
    for step in range(3):
        lens = lens + np.int32(7)
        table = rng.permutation(12)[:10].astype(np.int32).reshape(2, 5)
        device_lens.copy_from_numpy(lens)
        device_table.copy_from_numpy(table)
        decoder.replay()
        expected = flashdecode.decode_attention(
            q, k, v, lens, dtype="bfloat16", block_table=table)
        check_close(out, None, expected, None, "bfloat16",
                    f"replay {step}, lens={lens}")


def test_decoder_run_and_automatic_splits_use_the_device():
    """Decoder.run() (eager, the Decoder's own stream) and the split count
    planned for the device's SMs (132 on fdemu's H200)."""
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float32", (1, 8, 64), (1, 1000, 2, 64))
    lens = np.array([int(rng.integers(500, 1000))], np.int32)
    out = DeviceArray.empty(q.shape, "float32")
    decoder = flashdecode.Decoder(*to_device(q, k, v, lens), out)
    sm_count = flashdecode._flashdecode.cuda_sm_count()
    assert decoder.num_splits == flashdecode.plan_splits(
        1, 2, 1000, sm_count=sm_count, num_q_heads=8, head_dim=64,
        kv_dtype="float32")
    decoder.run()
    check_close(out, None, flashdecode.decode_attention(q, k, v, lens), None,
                "float32")


def test_planner_knobs_reach_the_decoder_and_decode_attention():
    """blocks_per_sm / max_splits change the plan of a Decoder and of
    decode_attention(backend="cuda"), and the result stays the attention."""
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float32", (1, 8, 64), (1, 4096, 2, 64))
    lens = np.array([int(rng.integers(3000, 4096))], np.int32)
    sm_count = flashdecode._flashdecode.cuda_sm_count()
    out = DeviceArray.empty(q.shape, "float32")
    decoder = flashdecode.Decoder(*to_device(q, k, v, lens), out,
                                  blocks_per_sm=1, max_splits=3)
    assert decoder.num_splits == flashdecode.plan_splits(
        1, 2, 4096, sm_count=sm_count, blocks_per_sm=1, max_splits=3,
        num_q_heads=8, head_dim=64, kv_dtype="float32") == 3
    decoder.run()
    expected = flashdecode.decode_attention(q, k, v, lens)
    check_close(out, None, expected, None, "float32")
    gpu = flashdecode.decode_attention(
        *to_device(q, k, v, lens), backend="cuda", max_splits=2)
    check_close(gpu, None, expected, None, "float32")
    with pytest.raises(ValueError, match="blocks_per_sm must be >= 1"):
        flashdecode.Decoder(*to_device(q, k, v, lens), out, blocks_per_sm=0)


# Sliding window (window_left) and logit soft-capping (logits_soft_cap),
# against reference.py's float64 attention rather than the CPU
# backend (itself checked in test_window_softcap.py), with the tolerances
# above (1e-3 on the lse). Both partial kernels: tensor cores (16-bit,
# D = 64, two or more rows per KV head) and CUDA cores (f32, and one row
# per KV head).

WINDOW_LSE_TOLERANCE = 1e-3


def bf16(dtype):
    return "bfloat16" if dtype == "bfloat16" else None


def check_reference(out, lse, expected, expected_lse, dtype, context):
    """Device out/lse against the float64 reference; rows without keys are
    zeros with lse -inf."""
    assert isinstance(out, DeviceArray) and out.dtype == dtype
    check_against_reference(out.numpy(), None if lse is None else lse.numpy(),
                            expected, expected_lse, dtype, TOLERANCE[dtype],
                            WINDOW_LSE_TOLERANCE, context)


def run_windowed(inputs, lens, *, num_splits=None, window=None, cap=None,
                 kv_layout="NHD"):
    """decode_attention(backend="cuda") against the float64 reference."""
    dtype = inputs.dtype
    out, lse = flashdecode.decode_attention(
        *to_device(*inputs.stored, dtype=bf16(dtype)),
        DeviceArray.from_numpy(lens), backend="cuda", return_lse=True,
        num_splits=num_splits, window_left=window, logits_soft_cap=cap,
        kv_layout=kv_layout)
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=kv_layout, window_left=window,
        logits_soft_cap=cap)
    check_reference(out, lse, expected, expected_lse, dtype,
                    f"seed={inputs.seed} dtype={dtype} lens={lens.tolist()} "
                    f"window={window} cap={cap} splits={num_splits}")


# (dtype, q heads, KV heads): tensor cores, CUDA cores on 16-bit data (one
# row per KV head), CUDA cores on f32.
WINDOW_KERNELS = {"f16-gqa-tensor-cores": ("float16", 8, 2),
                  "bf16-mha-cuda-cores": ("bfloat16", 4, 4),
                  "f32-mqa-cuda-cores": ("float32", 4, 1)}


@pytest.mark.parametrize("kernel", WINDOW_KERNELS)
def test_windows_and_soft_caps_match_float64(kernel):
    dtype, num_q_heads, num_kv_heads = WINDOW_KERNELS[kernel]
    inputs = Inputs(dtype, (5, num_q_heads, 64), (5, 200, num_kv_heads, 64),
                    q_magnitude=10.0)
    lens = inputs.lengths(0, 1, 2, 37, 200)
    for window in (1, 7, 37, 300):
        for num_splits in (3, 16):
            run_windowed(inputs, lens, num_splits=num_splits, window=window)
    for window, cap in ((None, 4.0), (7, 4.0), (1, 0.5), (60, 30.0)):
        run_windowed(inputs, lens, num_splits=5, window=window, cap=cap)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_windows_shorter_than_the_query_tokens(dtype):
    """Lq = 4 with 4 query heads per KV head: 16 rows (tensor cores for f16,
    several row tiles for f32); windows shorter than Lq, lengths shorter
    than Lq."""
    inputs = Inputs(dtype, (6, 4, 8, 64), (6, 90, 2, 64))
    lens = inputs.lengths(0, 1, 3, 4, 41, 90)
    for window in (1, 3, 9):
        for num_splits in (1, 5):
            run_windowed(inputs, lens, num_splits=num_splits, window=window)
    run_windowed(inputs, lens, num_splits=4, window=2, cap=1.5)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_soft_cap_of_scores_far_beyond_it(dtype):
    inputs = Inputs(dtype, (3, 8, 64), (3, 150, 2, 64), q_magnitude=200.0)
    lens = inputs.lengths(1, 77, 150)
    for cap in (1.0, 30.0):
        run_windowed(inputs, lens, num_splits=4, cap=cap)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches_with_a_window(layout):
    shape = (3, 96, 2, 64) if layout == "NHD" else (3, 2, 96, 64)
    inputs = Inputs("bfloat16", (3, 2, 8, 64), shape)
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 8, layout)
    lens = inputs.lengths(96, 1, 45)
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=layout, window_left=13,
        logits_soft_cap=3.0)
    out, lse = flashdecode.decode_attention(
        *to_device(q, pool_k, pool_v, dtype="bfloat16"),
        DeviceArray.from_numpy(lens), backend="cuda", kv_layout=layout,
        block_table=DeviceArray.from_numpy(table), num_splits=3,
        window_left=13, logits_soft_cap=3.0, return_lse=True)
    check_reference(out, lse, expected, expected_lse, "bfloat16",
                    f"seed={inputs.seed} layout={layout}")


def test_automatic_splits_plan_for_the_window():
    """num_splits=None plans for the keys a window leaves, on both the
    per-call path and the Decoder (whose config plans it in the compiler)."""
    inputs = Inputs("float32", (1, 8, 64), (1, 2000, 2, 64))
    lens = inputs.lengths(1999)
    sm_count = flashdecode._flashdecode.cuda_sm_count()
    run_windowed(inputs, lens, window=50, cap=6.0)
    out = DeviceArray.empty((1, 8, 64), "float32")
    decoder = flashdecode.Decoder(*to_device(*inputs.stored, lens), out,
                                  window_left=50, logits_soft_cap=6.0)
    assert decoder.num_splits == flashdecode.plan_splits(
        1, 2, 50, sm_count=sm_count, num_q_heads=8, head_dim=64,
        kv_dtype="float32")
    decoder.run()
    expected, expected_lse = attention(*inputs.exact, lens, window_left=50,
                                       logits_soft_cap=6.0)
    check_reference(out, None, expected, expected_lse, "float32",
                    f"seed={inputs.seed}")


def test_decoder_replays_a_window_as_lengths_grow():
    """One capture, replays as the lengths grow in place: the window slides
    with them."""
    inputs = Inputs("float16", (2, 2, 8, 64), (2, 300, 2, 64),
                    q_magnitude=5.0)
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(1, 9)
    device_lens = DeviceArray.from_numpy(lens)
    out = DeviceArray.empty((2, 2, 8, 64), "float16")
    lse = DeviceArray.empty((2, 2, 8), "float32")
    decoder = flashdecode.Decoder(q, k, v, device_lens, out, lse,
                                  num_splits=4, window_left=23,
                                  logits_soft_cap=2.5)
    decoder.capture()
    for step in range(4):
        grown = lens + np.int32(step * int(inputs.rng.integers(20, 90)))
        device_lens.copy_from_numpy(grown)
        decoder.replay()
        expected, expected_lse = attention(
            *inputs.exact, grown, window_left=23, logits_soft_cap=2.5)
        check_reference(out, lse, expected, expected_lse, "float16",
                        f"seed={inputs.seed} replay {step} "
                        f"lens={grown.tolist()}")


# Bad input: checked before anything reaches the device.

def good_arrays():
    """Valid f16 inputs on the device: q [2, 8, 64], caches [2, 16, 2, 64].
    (Made when a test runs: without a driver the tests skip.)"""
    rng = np.random.default_rng()
    (q, k, v), _ = random_inputs(rng, "float16", (2, 8, 64), (2, 16, 2, 64))
    return dict(zip(("q", "k_cache", "v_cache", "seq_lens"),
                    to_device(q, k, v, np.array([3, 16], np.int32))))


def with_(**changes):
    """good_arrays() with some replaced (or added, as block_table)."""
    def arrays():
        result = good_arrays()
        result.update({name: make() for name, make in changes.items()})
        return result
    return arrays


def numpy_of(name):
    return lambda: good_arrays()[name].numpy()


BAD_DECODE_INPUTS = [
    (with_(q=numpy_of("q")), {}, TypeError, "q must be a CUDA tensor"),
    (with_(k_cache=numpy_of("k_cache")), {}, TypeError,
     "k_cache must be a CUDA tensor"),
    (with_(v_cache=numpy_of("v_cache")), {}, TypeError,
     "v_cache must be a CUDA tensor"),
    (with_(seq_lens=numpy_of("seq_lens")), {}, TypeError,
     "seq_lens must be a CUDA tensor"),
    (with_(block_table=lambda: np.zeros((2, 1), np.int32)), {}, TypeError,
     "block_table must be a CUDA tensor"),
    (with_(q=lambda: DeviceArray.empty((2, 8, 64), "int32")), {}, TypeError,
     "q dtype int32 is not supported"),
    (with_(k_cache=lambda: DeviceArray.empty((2, 16, 2, 64), "float32")), {},
     TypeError, "k_cache dtype float32 must match q (float16)"),
    (with_(seq_lens=lambda: DeviceArray.from_numpy(np.ones(2, np.float32))),
     {}, TypeError, "seq_lens must be int32"),
    (good_arrays, {"dtype": "bfloat16"}, TypeError,
     "q is float16 but dtype='bfloat16'"),
    (with_(q=lambda: DeviceArray.empty((2, 64), "float16")), {}, ValueError,
     "q must be [B, Hq, D] or [B, Lq, Hq, D]"),
    (with_(k_cache=lambda: DeviceArray.empty((2, 16, 128), "float16")), {},
     ValueError, "k_cache must be 4-D"),
    (with_(v_cache=lambda: DeviceArray.empty((2, 15, 2, 64), "float16")), {},
     ValueError, "v_cache shape (2, 15, 2, 64) must equal k_cache shape"),
    (with_(seq_lens=lambda: DeviceArray.from_numpy(np.ones(3, np.int32))),
     {}, ValueError, "seq_lens must have shape (2,)"),
    (with_(block_table=lambda: DeviceArray.from_numpy(
        np.zeros((2, 1), np.float32))), {}, TypeError,
     "block_table must be int32"),
    (with_(block_table=lambda: DeviceArray.from_numpy(np.zeros(2, np.int32))),
     {}, ValueError, "block_table must be [B, max_pages]"),
    (good_arrays, {"kv_layout": "NDH"}, ValueError,
     "kv_layout must be NHD (nhd) or HND (hnd)"),
]


@pytest.mark.parametrize("arrays,options,error,words", BAD_DECODE_INPUTS)
def test_bad_decode_input_names_the_argument(arrays, options, error, words):
    with pytest.raises(error) as raised:
        flashdecode.decode_attention(**arrays(), backend="cuda", **options)
    assert words in str(raised.value)


@pytest.mark.parametrize("name", ["q", "k_cache", "v_cache", "seq_lens",
                                  "sinks", "alibi_slopes", "query_lens"])
def test_a_host_array_is_one_error_for_every_argument(name):
    """numpy where device memory is needed: NotOnDeviceError, a TypeError
    and a ValueError, for the main arrays and the feature buffers alike."""
    arrays = good_arrays()
    count = {"seq_lens": 2, "query_lens": 2}.get(name, 8)
    dtype = np.int32 if name.endswith("lens") else np.float32
    host = (arrays[name].numpy() if name in arrays
            else np.ones(count, dtype))
    if name == "query_lens":
        arrays["q"] = DeviceArray.empty((2, 2, 8, 64), "float16")
    arrays[name] = host
    with pytest.raises(flashdecode.NotOnDeviceError,
                       match=f"{name} must be a CUDA tensor for "
                             "backend='cuda'") as raised:
        flashdecode.decode_attention(**arrays, backend="cuda")
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, ValueError)


def test_numpy_array_error_says_how_to_copy_to_the_device():
    arrays = good_arrays()
    arrays["q"] = arrays["q"].numpy()
    with pytest.raises(TypeError, match=r"got numpy.ndarray \(flashdecode"
                       r".DeviceArray.from_numpy copies one to the device\)"):
        flashdecode.decode_attention(**arrays, backend="cuda")


@pytest.mark.parametrize("out,lse,error,words", [
    (lambda: DeviceArray.empty((2, 8, 32), "float16"), None, ValueError,
     "out shape (2, 8, 32) must equal q shape (2, 8, 64)"),
    (lambda: DeviceArray.empty((2, 8, 64), "bfloat16"), None, TypeError,
     "out dtype bfloat16 must match q (float16)"),
    (lambda: np.empty((2, 8, 64), np.float16), None, TypeError,
     "out must be a CUDA tensor"),
    (lambda: DeviceArray.empty((2, 8, 64), "float16"),
     lambda: DeviceArray.empty((2, 4), "float32"), ValueError,
     "lse must be float32 (2, 8)"),
    (lambda: DeviceArray.empty((2, 8, 64), "float16"),
     lambda: DeviceArray.empty((2, 8), "float16"), ValueError,
     "lse must be float32 (2, 8)"),
])
def test_bad_decoder_buffers_name_the_argument(out, lse, error, words):
    arrays = good_arrays()
    with pytest.raises(error) as raised:
        flashdecode.Decoder(*arrays.values(), out(),
                            None if lse is None else lse())
    assert words in str(raised.value)


def test_the_device_still_works_after_bad_input():
    """Rejected calls never reach the device: no sticky error follows."""
    for arrays, options, error, _ in BAD_DECODE_INPUTS:
        with pytest.raises(error):
            flashdecode.decode_attention(**arrays(), backend="cuda", **options)
    arrays = good_arrays()
    out = flashdecode.decode_attention(**arrays, backend="cuda")
    expected = flashdecode.decode_attention(
        *(a.numpy() for a in arrays.values()))
    check_close(out, None, expected, None, "float16")
