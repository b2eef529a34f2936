"""FP8 KV caches (kv_dtype=, k_scale=, v_scale=) on backend="cuda" and
Decoder over DeviceArrays, against the float64 reference of reference.py on
the caches the quantized ones stand for: on fdemu (the emulator as CUDA
driver) in make test, on a GPU when run with libcuda. Both formats, both
granularities, both partial kernels (tensor cores: f16/bf16 with two or
more rows per KV head, and MHA's one row where they multiply in f16; CUDA
cores: f32, and MHA's bf16 queries over per-token scales), dense and paged
caches;
scales as device arrays, as floats and a per-tensor one beside a per-token
one (both staged into device memory before the launch); the bad inputs of
fp8_checks.BAD_INPUTS with the CPU backend's words (test_fp8.py runs the
same table), and those only device arrays have.

Inputs are fresh random numbers on every run; a failure names its seed.
Sizes are small: the emulator interprets every thread.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from fp8_checks import (FORMATS, GRANULARITIES, Case, bad_inputs,
                        check_bad_input, check_every_other_feature,
                        good_fp8_inputs, run_case, to_device)
from per_head_buffers import Foreign, host_pointer

pytestmark = pytest.mark.usefixtures("cuda_driver")

BACKEND = "cuda"

# (dtype, (q heads, KV heads), head dim): the partial kernel each runs.
KERNELS = {"f16-gqa-d64-tensor-cores": ("float16", (8, 2), 64),
           "bf16-gqa-d128-tensor-cores": ("bfloat16", (8, 2), 128),
           "f16-mha-d64": ("float16", (4, 4), 64),
           "bf16-mha-d64": ("bfloat16", (4, 4), 64),
           "f32-mha-d64-cuda-cores": ("float32", (4, 4), 64)}


def expected_math_units(kernel, granularity):
    """The form each kernel gets on the default chip (sm_90): MHA's one
    row a head goes to tensor cores over an fp8 cache they multiply in f16
    (f16 queries; bf16 with per-tensor scales), where the CUDA-core
    kernel's conversions bound it; bf16 queries over per-token scales keep
    bf16 pairs and CUDA cores."""
    if kernel.endswith("cuda-cores"):
        return "cuda_cores"
    if kernel == "bf16-mha-d64" and granularity == "token_head":
        return "cuda_cores"
    return "tensor_cores"


def math_units(dtype, heads, head_dim, kv_dtype, granularity):
    kernel = flashdecode.compile(head_dim, *heads, dtype=dtype,
                                 num_splits=3, kv_dtype=kv_dtype,
                                 kv_scale=granularity)
    partial = kernel.manifest["kernels"][0]
    assert partial["name"] == "fd_partial_attention"
    assert [p["name"] for p in partial["params"][-2:]] == ["k_scale",
                                                           "v_scale"]
    return partial["math_units"]


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("kv_dtype", FORMATS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_matches_float64_on_the_dequantized_caches(kernel, kv_dtype,
                                                   granularity):
    """Lengths 0 (zeros, lse -inf), 1, odd and full; automatic splits and
    3 (more than the short sequences have keys)."""
    dtype, heads, head_dim = KERNELS[kernel]
    assert math_units(dtype, heads, head_dim, kv_dtype, granularity) == \
        expected_math_units(kernel, granularity)
    run_case(BACKEND, dtype, kv_dtype, granularity, "NHD", heads,
             [0, 1, 37, 101], 101, head_dim=head_dim)


@pytest.mark.parametrize("kv_dtype,granularity",
                         [("float8_e5m2", "token_head"),
                          ("float8_e4m3fn", "tensor")])
def test_hnd_caches_and_query_tokens(kv_dtype, granularity):
    """HND caches with Lq = 3 (12 rows per KV head: tensor cores); tokens
    before the first key are zeros."""
    run_case(BACKEND, "float16", kv_dtype, granularity, "HND", (8, 2),
             [1, 2, 41], 41, query_len=3, splits=(1, 5))


@pytest.mark.parametrize("layout,kv_dtype,granularity",
                         [("NHD", "float8_e4m3fn", "token_head"),
                          ("HND", "float8_e5m2", "token_head"),
                          ("NHD", "float8_e5m2", "tensor")])
def test_paged_caches(layout, kv_dtype, granularity):
    """Page pools of 16 positions in shuffled order (per-token scales: of
    the pools' shape without D)."""
    run_case(BACKEND, "bfloat16", kv_dtype, granularity, layout, (8, 2),
             [3, 0, 45], 48, splits=(1, 4), paged=16)


def test_with_every_other_feature():
    check_every_other_feature(BACKEND)


def test_floats_and_broadcast_scales():
    """A float is staged into device memory before the launch; a per-tensor
    scale (float or [1] device array) beside a per-token one is broadcast
    to the caches' shape without D. New floats on the same kernel are
    staged again; k_scale and v_scale are not interchangeable (the values
    are 4 times the keys)."""
    case = Case("float16", "float8_e4m3fn", "tensor", "NHD", (8, 2),
                [0, 29, 40], 40)
    k_scale, v_scale = (float(scale[0]) for scale in (case.k_scale,
                                                      case.v_scale))
    per_token = np.full((3, 40, 2), v_scale, np.float32)
    for k, v in ((k_scale, v_scale), (case.k_scale, v_scale),
                 (k_scale, case.v_scale.reshape(())),
                 (2 * k_scale, 0.5 * v_scale), (k_scale, per_token),
                 (case.k_scale, per_token), (per_token * 0 + k_scale,
                                             v_scale)):
        case.run(BACKEND, 2, k_scale=k, v_scale=v)
    # The other way round is another attention.
    out, _ = case.run(BACKEND, 2, k_scale=k_scale, v_scale=v_scale)
    swapped, _ = flashdecode.decode_attention(
        *(to_device(a) for a in (case.q, case.k_bytes, case.v_bytes,
                                 case.lens)),
        backend="cuda", return_lse=True, num_splits=2,
        kv_dtype="float8_e4m3fn", k_scale=v_scale, v_scale=k_scale)
    assert np.abs(swapped.numpy().astype(np.float64) - out).max() > \
        0.5 * np.abs(out).max()


def test_fp8_device_arrays_need_no_kv_dtype():
    """DeviceArrays of dtype float8_e4m3fn / float8_e5m2 say the format;
    the same bytes as uint8 with kv_dtype give the same bits."""
    case = Case("bfloat16", "float8_e5m2", "token_head", "NHD", (4, 4),
                [7, 30], 30)
    typed = case.run(BACKEND, 3, typed=True)
    plain = case.run(BACKEND, 3)
    for a, b in zip(typed, plain):
        np.testing.assert_array_equal(a, b)


def test_decoder_replays_new_scales_and_lengths():
    """One capture over device scales, then replays after new scales and
    lengths are written in place; a float scale is the Decoder's own
    copy."""
    case = Case("float16", "float8_e4m3fn", "token_head", "NHD", (8, 2),
                [0, 1, 17], 64)
    q, k, v, lens, k_scale, v_scale = (
        to_device(a) for a in (case.q, case.k_bytes, case.v_bytes,
                               case.lens, case.k_scale, case.v_scale))
    out = DeviceArray.empty(case.q.shape, "float16")
    lse = DeviceArray.empty(case.lens.shape + case.q.shape[1:2], "float32")
    decoder = flashdecode.Decoder(q, k, v, lens, out, lse, num_splits=3,
                                  kv_dtype="float8_e4m3fn", k_scale=k_scale,
                                  v_scale=v_scale)
    decoder.capture()
    scales = [case.k_scale, case.v_scale]
    for step in range(3):
        if step:
            case.lens = case.lens + np.int32(10 * step)
            lens.copy_from_numpy(case.lens)
            scales[step - 1] = scales[step - 1] * np.float32(1.5 + step)
            k_scale.copy_from_numpy(scales[0])
            v_scale.copy_from_numpy(scales[1])
        decoder.replay()
        case.check(BACKEND, out.numpy(), lse.numpy(),
                   case.expected(*scales), f"replay {step}")
    # Floats (v's broadcast beside the per-token k_scale).
    decoder = flashdecode.Decoder(q, k, v, lens, out, lse, num_splits=2,
                                  kv_dtype="float8_e4m3fn", k_scale=k_scale,
                                  v_scale=0.25)
    decoder.run()
    case.check(BACKEND, out.numpy(), lse.numpy(),
               case.expected(scales[0], np.float32([0.25])), "float v_scale")


@pytest.mark.parametrize("arguments,words", bad_inputs(BACKEND))
def test_bad_input_names_the_argument(arguments, words):
    """The table both backends share (fp8_checks.BAD_INPUTS): the CPU
    backend's words, from decode_attention and Decoder."""
    check_bad_input(BACKEND, arguments, words)


def device_inputs(**change):
    inputs = {name: to_device(value)
              for name, value in good_fp8_inputs().items()}
    inputs.update(change)
    return inputs


DEVICE_BAD = [
    (lambda: {"k_scale": np.ones(1, np.float32)},
     "k_scale must be a float or a float32 device array for backend='cuda' "
     "(a flashdecode.DeviceArray, a PyTorch CUDA tensor or an object with "
     "__cuda_array_interface__), got numpy.ndarray "
     "(flashdecode.DeviceArray.from_numpy copies one to the device)"),
    (lambda: {"v_scale": Foreign(DeviceArray.empty(1, "float32"),
                                 typestr="<f8")},
     "v_scale dtype is not supported: expected float32"),
    (lambda: {"k_scale": Foreign(DeviceArray.empty(2, "float32"), offset=2,
                                 shape=(1,))},
     "k_scale data pointer"),
    (lambda: {"v_scale": host_pointer(1)}, "v_scale (data pointer"),
    (lambda: {"k_scale": Foreign(DeviceArray.empty(128, "float32"),
                                 shape=(2, 16, 2), strides=(8, 4, 4))},
     "k_scale must be contiguous"),
    (lambda: {"kv_dtype": None,
              "k_cache": DeviceArray.from_numpy(
                  np.zeros((2, 16, 2, 64), np.uint8), "float8_e4m3fn"),
              "v_cache": DeviceArray.from_numpy(
                  np.zeros((2, 16, 2, 64), np.uint8), "float8_e5m2")},
     "k_cache and v_cache must be the same fp8 format (or neither fp8), "
     "got float8_e4m3fn and float8_e5m2"),
    (lambda: {"k_cache": DeviceArray.from_numpy(
        np.zeros((2, 16, 2, 64), np.uint8), "float8_e5m2")},
     "k_cache is float8_e5m2 but kv_dtype='float8_e4m3fn' was given"),
    (lambda: {"v_cache": Foreign(DeviceArray.empty((2, 16, 2, 64), "uint8"),
                                 typestr="|i1")},
     "kv_dtype='float8_e4m3fn' needs fp8 caches (uint8 bit patterns or "
     "ml_dtypes fp8 arrays), but v_cache is int8"),
    (lambda: {"q": DeviceArray.empty((2, 8, 64), "float8_e5m2")},
     "q must be float16, bfloat16 or float32, got float8_e5m2"),
]


@pytest.mark.parametrize("change,words", DEVICE_BAD,
                         ids=[str(i) for i in range(len(DEVICE_BAD))])
def test_bad_device_input_names_the_argument(change, words):
    with pytest.raises(ValueError) as raised:
        flashdecode.decode_attention(**device_inputs(**change()),
                                     backend="cuda")
    assert words in str(raised.value)


def test_errors_only_the_decoder_has():
    """A per-tensor device array beside a per-token scale: a Decoder binds
    device scales as they are (decode_attention broadcasts it before each
    launch)."""
    inputs = device_inputs(k_scale=DeviceArray.from_numpy(
        np.ones(1, np.float32)), v_scale=DeviceArray.from_numpy(
            np.ones((2, 16, 2), np.float32)))
    out = DeviceArray.empty((2, 8, 64), "float32")
    with pytest.raises(ValueError, match=r"k_scale is a per-tensor device "
                       r"array beside a per-token scale: .* give it per "
                       r"token and KV head \(2, 16, 2\) too, or as a float"):
        flashdecode.Decoder(out=out, **inputs)
    flashdecode.decode_attention(**inputs, backend="cuda")
    # An int8 cache without kv_dtype is not a cache dtype at all.
    with pytest.raises(TypeError, match="k_cache dtype is not supported: "
                       r"expected float32, float16 or bfloat16 \(q's\), or "
                       r"uint8 or fp8 \(with kv_dtype\)"):
        flashdecode.decode_attention(**device_inputs(
            kv_dtype=None, k_scale=None, v_scale=None,
            k_cache=Foreign(DeviceArray.empty((2, 16, 2, 64), "uint8"),
                            typestr="|i1"),
            v_cache=DeviceArray.empty((2, 16, 2, 64), "float32")),
            backend="cuda")


def test_the_device_works_after_bad_input():
    """Rejected calls never reach the device: no sticky error follows."""
    for arguments, _ in (param.values for param in bad_inputs(BACKEND)):
        with pytest.raises(ValueError):
            flashdecode.decode_attention(**arguments(), backend="cuda")
    case = Case("float32", "float8_e4m3fn", "tensor", "NHD", (8, 2),
                [16, 5], 16)
    case.run(BACKEND, 2)
