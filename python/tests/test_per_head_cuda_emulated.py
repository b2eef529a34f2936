"""Attention sinks (sinks=) and ALiBi (alibi_slopes=) on backend="cuda" and
Decoder over DeviceArrays, against the float64 reference of reference.py:
on fdemu (the emulator as CUDA driver) in make test, on a GPU when run with
libcuda. Each test runs on both per-query-head buffers
(per_head_checks.FEATURES). Both partial kernels (tensor cores: f16/bf16
with two or more rows per KV head; CUDA cores: f32, and one row per KV
head); the merge kernel reads the sinks, the partial kernel the slopes (it
adds slope_h * (j - p) to each score), both from device memory, so a
Decoder's graph sees new values.

Inputs (and sinks, slopes) are fresh random numbers on every run; a failure
names its seed. Sizes are small: the emulator interprets every thread.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import (check_bad_device_buffer, check_device,
                              check_misaligned_device_buffer,
                              check_the_device_works_after_bad_buffers,
                              device_cases, to_device)
from per_head_checks import (FEATURES, beside, each_feature, feature_cases,
                             run, run_splits)
from reference import Inputs, attention, page_pool

pytestmark = pytest.mark.usefixtures("cuda_driver")

BACKEND = "cuda"

# (dtype, q heads, KV heads, head dim): the partial kernel each runs.
KERNELS = {"f16-gqa-d64-tensor-cores": ("float16", 8, 2, 64),
           "bf16-gqa-d64-tensor-cores": ("bfloat16", 8, 2, 64),
           "f16-gqa-d128-tensor-cores": ("float16", 8, 2, 128),
           "bf16-gqa-d128-tensor-cores": ("bfloat16", 4, 1, 128),
           "f32-gqa-cuda-cores": ("float32", 8, 2, 64),
           "f32-mqa-cuda-cores": ("float32", 4, 1, 64),
           "f32-mha-cuda-cores": ("float32", 4, 4, 64),
           "bf16-mha-cuda-cores": ("bfloat16", 4, 4, 64)}


def math_units(name, dtype, num_q_heads, num_kv_heads, head_dim):
    """The partial kernel's math units, compiled with the buffer (which its
    kernel takes last)."""
    feature = FEATURES[name]
    kernel = flashdecode.compile(head_dim, num_q_heads, num_kv_heads,
                                 dtype=dtype, num_splits=3,
                                 **{feature.flag: True})
    partial = kernel.manifest["kernels"][0]
    assert partial["name"] == "fd_partial_attention"
    reader, = [spec for spec in kernel.manifest["kernels"]
               if spec["name"] == feature.kernel]
    assert reader["params"][-1]["name"] == name
    return partial["math_units"]


@each_feature
@pytest.mark.parametrize("kernel", KERNELS)
def test_matches_float64_for_every_split(kernel, name):
    """Lengths 0 (zeros; lse the sink, -inf with ALiBi), 1, 2, odd, full;
    splits 1, 3, automatic and 16 (more than the short sequences have
    keys); random values (slopes with a 0 and a 1.0; BLOOM's for the f16
    D 128 kernel)."""
    feature = FEATURES[name]
    dtype, num_q_heads, num_kv_heads, head_dim = KERNELS[kernel]
    assert math_units(name, dtype, num_q_heads, num_kv_heads, head_dim) == (
        "cuda_cores" if "cuda-cores" in kernel else "tensor_cores")
    inputs = Inputs(dtype, (5, num_q_heads, head_dim),
                    (5, 150, num_kv_heads, head_dim))
    values = feature.alternative(inputs.rng, num_q_heads) \
        if kernel.startswith("f16-gqa-d128") \
        else feature.random(inputs.rng, num_q_heads)
    run_splits(BACKEND, inputs, inputs.lengths(0, 1, 2, 37, 150),
               {name: values})


@each_feature
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_several_query_tokens_with_a_window_and_a_soft_cap(dtype, name):
    """Lq = 4 with 4 query heads per KV head (16 rows: tensor cores for
    f16): each token its own distances (ALiBi); tokens before the first key
    get lse = sink (-inf with ALiBi); windows shorter than Lq; alone and
    with the other per-head buffer beside (a sink gains no bias)."""
    feature = FEATURES[name]
    inputs = Inputs(dtype, (6, 4, 8, 64), (6, 90, 2, 64), q_magnitude=10.0)
    values = feature.random(inputs.rng, 8)
    other = FEATURES[feature.other].random(inputs.rng, 8)
    lens = inputs.lengths(0, 1, 3, 4, 41, 90)
    run_splits(BACKEND, inputs, lens, {name: values}, splits=(1, 5, 16))
    for window, cap, with_other in ((1, 4.0, False), (3, None, False),
                                    (3, None, True), (9, 1.5, False),
                                    (9, 1.5, True), (None, 30.0, False)):
        run(BACKEND, inputs, lens,
            beside(name, values, other if with_other else None),
            num_splits=4, window=window, cap=cap)
    _, lse = run(BACKEND, inputs, lens, {name: values}, num_splits=3)
    np.testing.assert_allclose(
        lse[0], np.broadcast_to(feature.empty_lse(values), (4, 8)),
        rtol=1e-6, err_msg=f"seed={inputs.seed}")


@each_feature
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches(layout, name):
    """Then a window and a cap, alone and with the other per-head buffer
    beside."""
    feature = FEATURES[name]
    shape = (3, 96, 2, 64) if layout == "NHD" else (3, 2, 96, 64)
    inputs = Inputs("bfloat16", (3, 2, 8, 64), shape)
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 8, layout)
    values = feature.random(inputs.rng, 8)
    lens = inputs.lengths(96, 0, 45)
    paged = {"kv_layout": layout, "block_table": table,
             "caches": (pool_k, pool_v)}
    run_splits(BACKEND, inputs, lens, {name: values}, splits=(1, 3), **paged)
    other = FEATURES[feature.other].random(inputs.rng, 8)
    for with_other in (False, True):
        run(BACKEND, inputs, lens,
            beside(name, values, other if with_other else None),
            num_splits=3, window=13, cap=3.0, **paged)


@each_feature
def test_scale_out_lse_and_cuda_array_interface(name):
    """scale= (neither the sinks nor the bias are scaled), out=/lse=
    written in place, and the buffer given as a foreign
    __cuda_array_interface__ object."""
    class Foreign:
        def __init__(self, array):
            self._array = array  # keeps the memory alive
            self.__cuda_array_interface__ = array.__cuda_array_interface__

    inputs = Inputs("float16", (2, 8, 64), (2, 70, 2, 64))
    values = FEATURES[name].random(inputs.rng, 8)
    lens = inputs.lengths(70, 23)
    out = DeviceArray.empty((2, 8, 64), "float16")
    lse = DeviceArray.empty((2, 8), "float32")
    result = flashdecode.decode_attention(
        *to_device(*inputs.stored, lens), backend="cuda", scale=0.3,
        num_splits=2, return_lse=True, out=out, lse=lse,
        **{name: Foreign(DeviceArray.from_numpy(values))})
    assert result[0] is out and result[1] is lse
    expected, expected_lse = attention(*inputs.exact, lens, scale=0.3,
                                       **{name: values})
    check_device(out, lse, expected, expected_lse, "float16", lens,
                 f"seed={inputs.seed}")


@each_feature
def test_the_launcher_cache_keys_on_the_buffer(name):
    """The same shapes with and without the buffer are two kernels; new
    values in the same buffer give the new attention."""
    feature = FEATURES[name]
    inputs = Inputs("bfloat16", (3, 8, 64), (3, 60, 2, 64))
    q, k, v = to_device(*inputs.stored, dtype="bfloat16")
    lens = inputs.lengths(60, 0, 11)
    device_lens = DeviceArray.from_numpy(lens)
    values = feature.random(inputs.rng, 8)
    device_values = DeviceArray.from_numpy(values)
    for step in range(3):
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3, **{name: device_values})
        expected, expected_lse = attention(*inputs.exact, lens,
                                           **{name: values})
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     f"seed={inputs.seed} step {step} with {name}")
        out, lse = flashdecode.decode_attention(
            q, k, v, device_lens, backend="cuda", return_lse=True,
            num_splits=3)
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                     f"seed={inputs.seed} step {step} without {name}")
        values = feature.random(inputs.rng, 8)
        device_values.copy_from_numpy(values)


@each_feature
@pytest.mark.parametrize("dtype,heads", [("float16", (8, 2)),
                                         ("float32", (4, 1))],
                         ids=["f16-tensor-cores", "f32-cuda-cores"])
def test_decoder_replays_new_values_and_lengths(dtype, heads, name):
    """One capture, then replays after new values (random, then the
    alternative ones: BLOOM's slopes) and new lengths are written into
    device memory in place: each replay reads them."""
    feature = FEATURES[name]
    num_q_heads, num_kv_heads = heads
    inputs = Inputs(dtype, (3, num_q_heads, 64), (3, 200, num_kv_heads, 64))
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(0, 1, 9)
    values = feature.random(inputs.rng, num_q_heads)
    device_lens, device_values = to_device(lens, values)
    sentinel = np.full((3, num_q_heads, 64), 7.0, dtype)
    out = DeviceArray.from_numpy(sentinel)
    lse = DeviceArray.empty((3, num_q_heads), "float32")
    decoder = flashdecode.Decoder(q, k, v, device_lens, out, lse,
                                  num_splits=4, **{name: device_values})
    assert decoder.num_splits == 4
    decoder.capture()
    np.testing.assert_array_equal(out.numpy(), sentinel)
    for step in range(4):
        if step % 2:
            lens = lens + np.int32(inputs.rng.integers(10, 60))
            device_lens.copy_from_numpy(lens)
        elif step:
            values = feature.alternative(inputs.rng, num_q_heads) \
                if step == 2 else feature.random(inputs.rng, num_q_heads)
            device_values.copy_from_numpy(values)
        decoder.replay()
        expected, expected_lse = attention(*inputs.exact, lens,
                                           **{name: values})
        check_device(out, lse, expected, expected_lse, dtype, lens,
                     f"seed={inputs.seed} replay {step} "
                     f"lens={lens.tolist()} {name}={values.tolist()}")


@each_feature
@pytest.mark.parametrize("with_other", [False, True],
                         ids=["alone", "with-the-other"])
def test_decoder_run_with_a_window(with_other, name):
    """Decoder.run() (eager) with automatic splits, a window and a cap,
    alone and with the other per-head buffer beside."""
    feature = FEATURES[name]
    inputs = Inputs("bfloat16", (2, 2, 8, 64), (2, 300, 2, 64),
                    q_magnitude=5.0)
    lens = inputs.lengths(1, 290)
    buffers = beside(name, feature.random(inputs.rng, 8),
                     FEATURES[feature.other].random(inputs.rng, 8)
                     if with_other else None)
    buffers = {key: values for key, values in buffers.items()
               if values is not None}
    out = DeviceArray.empty((2, 2, 8, 64), "bfloat16")
    lse = DeviceArray.empty((2, 2, 8), "float32")
    decoder = flashdecode.Decoder(
        *to_device(*inputs.stored, dtype="bfloat16"),
        DeviceArray.from_numpy(lens), out, lse, window_left=40,
        logits_soft_cap=2.5,
        **{key: DeviceArray.from_numpy(values)
           for key, values in buffers.items()})
    decoder.run()
    expected, expected_lse = attention(*inputs.exact, lens, window_left=40,
                                       logits_soft_cap=2.5, **buffers)
    check_device(out, lse, expected, expected_lse, "bfloat16", lens,
                 f"seed={inputs.seed}")


@each_feature
def test_the_native_plan_requires_the_buffer(name):
    """_flashdecode.CudaPlan: the runtime refuses a config with the feature
    without its buffer, the buffer without the feature, and a buffer that
    is not 4-byte aligned."""
    feature = FEATURES[name]
    native = flashdecode._flashdecode
    inputs = Inputs("float32", (1, 4, 64), (1, 16, 1, 64))
    arrays = to_device(*inputs.stored, inputs.lengths(16))
    out = DeviceArray.empty((1, 4, 64), "float32")
    values = DeviceArray.from_numpy(feature.random(inputs.rng, 4))
    pointers = [a._address for a in arrays] + [out._address, 0, 0, 0]
    arch = native.cuda_target(0)

    def config(compiled):
        return native.KernelRequest(64, 4, 1, 1, "f32", "NHD", 0, 2, True,
                                   None, False, 1, 16, 1, arch,
                                   **{feature.flag: compiled})
    with pytest.raises(Exception, match=f"{feature.plan_field} buffer"):
        native.CudaPlan(config(True), 0, *pointers)
    with pytest.raises(Exception, match=feature.plan_forbidden):
        native.CudaPlan(config(False), 0, *pointers,
                        **{name: values._address})
    with pytest.raises(Exception, match=f"{feature.plan_field} address is "
                       "not 4-byte"):
        native.CudaPlan(config(True), 0, *pointers,
                        **{name: values._address + 2})
    native.CudaPlan(config(True), 0, *pointers,
                    **{name: values._address}).launch(None)


# Bad buffers: a ValueError naming them, before anything reaches the device
# (per_head_buffers.py's suite).

@pytest.mark.parametrize("name,make,words", feature_cases(device_cases))
def test_bad_buffers_name_the_argument(name, make, words):
    check_bad_device_buffer(name, make, words)


@each_feature
def test_misaligned_buffers_say_4_bytes(name):
    check_misaligned_device_buffer(name)


@each_feature
def test_the_device_still_works_after_bad_buffers(name):
    check_the_device_works_after_bad_buffers(
        name, FEATURES[name].random(np.random.default_rng(), 8))
