"""Shared by the tests of FP8 KV caches (kv_dtype=, k_scale=, v_scale=):
test_fp8.py (backend="cpu") and test_fp8_cuda_emulated.py (backend="cuda"
over DeviceArrays). One runner for both backends, checked against the
float64 reference of reference.py on the caches the quantized ones stand
for (each byte decoded exactly, times its scale), and one table of bad
inputs that both backends must reject with the same ValueError naming the
argument.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from flashdecode._fp8 import decode_fp8

from reference import (attention, check_with_sinks, decode, page_pool,
                       random_alibi_slopes, random_inputs, random_sinks)

FORMATS = ("float8_e4m3fn", "float8_e5m2")
GRANULARITIES = ("tensor", "token_head")
# The output's largest error relative to its largest magnitude (also per
# row: reference.check_rows); the lse's is tighter on the CPU than on the
# GPU (exp2/log2).
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = {"cpu": {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-3},
                 "cuda": {"float32": 1e-3, "float16": 1e-3,
                          "bfloat16": 1e-3}}
# The values are this many times the keys: a k_scale and v_scale swapped
# (or one used for both) shows.
VALUE_MAGNITUDE = 4.0


def dequantized(bits, scale, kv_dtype):
    """The float64 values fp8 bytes and their float32 scale ([1], or the
    bytes' shape without D) stand for."""
    values = decode_fp8(bits, kv_dtype)
    return values * (scale.astype(np.float64)[..., None] if scale.size > 1
                     else float(scale.reshape(-1)[0]))


def gather(pool, table, layout):
    """A page pool back to dense caches through the block table."""
    if layout == "HND":
        pool = pool.transpose(0, 2, 1, 3)
    dense = pool[table].reshape((table.shape[0], -1) + pool.shape[2:])
    return dense if layout == "NHD" else dense.transpose(0, 2, 1, 3)


def bf16(dtype):
    return "bfloat16" if dtype == "bfloat16" else None


def to_device(value, dtype=None):
    """A numpy array as a DeviceArray (floats and None stay as they are)."""
    if isinstance(value, np.ndarray):
        return DeviceArray.from_numpy(value, dtype=dtype)
    return value


def attend(backend, q, k_bytes, v_bytes, lens, dtype, kv_dtype, k_scale,
           v_scale, *, typed=False, **options):
    """decode_attention(return_lse=True) on `backend` -> the host (out,
    lse). backend="cuda" copies every array to the device. typed=True
    gives the caches as fp8 DeviceArrays instead of uint8 with kv_dtype
    (backend="cuda" only: the CPU's typed arrays are ml_dtypes')."""
    fp8 = {"k_scale": k_scale, "v_scale": v_scale,
           "kv_dtype": None if typed else kv_dtype}
    if backend == "cpu":
        assert not typed
        out, lse = flashdecode.decode_attention(
            q, k_bytes, v_bytes, lens, return_lse=True, dtype=bf16(dtype),
            **fp8, **options)
        assert out.dtype == q.dtype
        return out, lse
    caches = (to_device(bits, kv_dtype if typed else None)
              for bits in (k_bytes, v_bytes))
    options = {name: to_device(value) for name, value in options.items()}
    fp8.update((name, to_device(fp8[name])) for name in ("k_scale",
                                                          "v_scale"))
    out, lse = flashdecode.decode_attention(
        to_device(q, bf16(dtype)), *caches, to_device(lens), backend="cuda",
        return_lse=True, **fp8, **options)
    assert isinstance(out, DeviceArray) and out.dtype == dtype
    return out.numpy(), lse.numpy()


class Case:
    """Random q, keys and values (VALUE_MAGNITUDE times the keys) of one
    shape, quantized to fp8 caches (quantize_kv, dense or paged) and the
    float64 reference on the caches they stand for. The seed is kept for
    the failure message."""

    def __init__(self, dtype, kv_dtype, granularity, layout, heads, lengths,
                 max_len, *, query_len=None, paged=0, head_dim=64):
        self.seed = int(np.random.default_rng().integers(2**63))
        rng = np.random.default_rng(self.seed)
        num_q, num_kv = heads
        batch = len(lengths)
        q_shape = (batch, num_q, head_dim) if query_len is None else \
            (batch, query_len, num_q, head_dim)
        cache_shape = (batch, max_len, num_kv, head_dim) if layout == "NHD" \
            else (batch, num_kv, max_len, head_dim)
        (self.q, k, v), (self.q_exact, _, _) = random_inputs(
            rng, dtype, q_shape, cache_shape)
        k, v = decode(k, dtype), decode(v, dtype) * VALUE_MAGNITUDE
        self.lens = np.array(lengths, np.int32)
        self.table = None
        if paged:
            k, v, self.table = page_pool(rng, k, v, paged, layout)
        self.k_bytes, self.v_bytes, self.k_scale, self.v_scale = \
            flashdecode.quantize_kv(k, v, kv_dtype, granularity)
        self.dtype, self.kv_dtype, self.layout = dtype, kv_dtype, layout
        self.context = (f"seed={self.seed} {dtype} {kv_dtype} {granularity} "
                        f"{layout} q={q_shape} lens={lengths} paged={paged}")

    def expected(self, k_scale=None, v_scale=None, **options):
        """The float64 (out, lse) with the case's scales (or others) and
        decode_attention's `options` (window_left, sinks, ...)."""
        k_scale = self.k_scale if k_scale is None else k_scale
        v_scale = self.v_scale if v_scale is None else v_scale
        kx = dequantized(self.k_bytes, k_scale, self.kv_dtype)
        vx = dequantized(self.v_bytes, v_scale, self.kv_dtype)
        if self.table is not None:
            kx, vx = (gather(pool, self.table, self.layout)
                      for pool in (kx, vx))
        return attention(self.q_exact, kx, vx, self.lens, self.layout,
                         **options)

    def check(self, backend, out, lse, expected, context="",
              query_lens=None):
        check_with_sinks(out, lse, *expected, self.lens, self.dtype,
                         TOLERANCE[self.dtype],
                         LSE_TOLERANCE[backend][self.dtype],
                         f"{backend} {self.context} {context}",
                         query_lens=query_lens)

    def run(self, backend, num_splits=None, *, k_scale=None, v_scale=None,
            typed=False, expected=None, **options):
        """One call with the case's scales (or the ones given, which the
        reference uses unless `expected` says otherwise) and
        decode_attention's `options` (numpy arrays: device arrays on
        backend="cuda"), checked; returns the host (out, lse)."""
        k_scale = self.k_scale if k_scale is None else k_scale
        v_scale = self.v_scale if v_scale is None else v_scale
        if expected is None:
            expected = self.expected(np.asarray(k_scale, np.float32),
                                     np.asarray(v_scale, np.float32),
                                     **options)
        out, lse = attend(backend, self.q, self.k_bytes, self.v_bytes,
                          self.lens, self.dtype, self.kv_dtype, k_scale,
                          v_scale, typed=typed, kv_layout=self.layout,
                          num_splits=num_splits, block_table=self.table,
                          **options)
        assert out.shape == self.q.shape
        self.check(backend, out, lse, expected,
                   f"splits={num_splits} typed={typed} {sorted(options)}",
                   options.get("query_lens"))
        return out, lse


def run_case(backend, dtype, kv_dtype, granularity, layout, heads, lengths,
             max_len, *, splits=(None, 3), **shape):
    """decode_attention on quantized caches against the reference on the
    caches they stand for, for each split count; returns the Case."""
    case = Case(dtype, kv_dtype, granularity, layout, heads, lengths,
                max_len, **shape)
    expected = case.expected()
    for num_splits in splits:
        case.run(backend, num_splits, expected=expected)
    return case


def check_every_other_feature(backend):
    """fp8 caches beside attention sinks, ALiBi, per-sequence query
    lengths, a window and a soft-cap: the kernels with every parameter."""
    case = Case("float16", "float8_e4m3fn", "token_head", "NHD", (8, 2),
                [0, 2, 5, 40], 40, query_len=3)
    rng = np.random.default_rng(case.seed)
    options = {"sinks": random_sinks(rng, 8),
               "alibi_slopes": random_alibi_slopes(rng, 8),
               "query_lens": np.array([3, 1, 2, 3], np.int32),
               "window_left": 9, "logits_soft_cap": 20.0}
    for num_splits in (1, 4):
        case.run(backend, num_splits, **options)


# Bad input, one argument wrong at a time over good fp8 inputs (q float32
# [2, 8, 64], uint8 caches [2, 16, 2, 64] with kv_dtype="float8_e4m3fn",
# k_scale = v_scale = 1.0): (what to change, the ValueError's words, a
# regular expression; a dict of them per backend where the backends' kinds
# of array differ). Numpy arrays become DeviceArrays on backend="cuda".

def _dense():
    return np.ones((2, 16, 2, 64), np.float32)


BAD_INPUTS = [
    ({"k_scale": None}, r"k_scale is required with an fp8 cache "
     r"\(float8_e4m3fn\): a float, or float32 \(1,\) or \(2, 16, 2\)"),
    ({"v_scale": None}, "v_scale is required"),
    ({"k_cache": _dense, "v_cache": _dense, "kv_dtype": None, "v_scale": None},
     "k_scale is only for fp8 caches"),
    ({"k_cache": _dense, "v_cache": _dense, "kv_dtype": None, "k_scale": None,
      "v_scale": lambda: np.ones(1, np.float32)},
     "v_scale is only for fp8 caches"),
    ({"k_scale": lambda: np.ones((2, 16), np.float32)},
     r"k_scale must be a float, shape \(1,\) \(per tensor\) or \(2, 16, 2\) "
     r"\(per token and KV head: the caches' shape without D\), got "
     r"\(2, 16\)"),
    ({"v_scale": lambda: np.ones((2, 2, 16), np.float32)},
     r"v_scale must be a float, shape \(1,\) .* got \(2, 2, 16\)"),
    ({"k_scale": lambda: np.ones((1, 1), np.float32)},
     r"k_scale must be a float, shape \(1,\) .* got \(1, 1\)"),
    ({"v_scale": lambda: np.ones(1, np.float16)},
     "v_scale must be float32, got float16"),
    ({"k_scale": lambda: np.ones((2, 16, 2), np.int32)},
     "k_scale must be float32, got int32"),
    ({"k_scale": "1"},
     {"cpu": "k_scale must be a float or a float32 numpy array, got str",
      "cuda": "k_scale must be a float or a float32 device array for "
              "backend='cuda' .*got builtins.str"}),
    ({"v_scale": True},
     {"cpu": "v_scale must be a float or a float32 numpy array, got bool",
      "cuda": "v_scale must be a float or a float32 device array .*got "
              "builtins.bool"}),
    ({"k_scale": float("nan")}, "k_scale must be finite"),
    ({"v_scale": float("inf")}, "v_scale must be finite"),
    ({"v_scale": 1e39}, "v_scale must be finite"),
    ({"kv_dtype": "float8"}, r"kv_dtype must be one of float8_e4m3fn \(e4m3, "
     r"fp8_e4m3, f8E4M3FN\) or float8_e5m2 \(e5m2, fp8_e5m2, f8E5M2\) \(or "
     r"None for caches of q's dtype\), got 'float8'"),
    ({"kv_dtype": "float8_e5m2", "k_cache": _dense, "v_cache": _dense},
     "kv_dtype='float8_e5m2' needs fp8 caches .* but k_cache is float32"),
    ({"v_cache": _dense}, "needs fp8 caches .* but v_cache is float32"),
    ({"kv_dtype": None}, r"k_cache holds bytes \(uint8\): pass kv_dtype="
     "'float8_e4m3fn' or 'float8_e5m2' for an fp8 cache"),
    ({"q": lambda: np.ones((2, 8, 64), np.uint8)},
     "q must be float16, bfloat16 or float32, got uint8: fp8 is for the "
     r"caches only \(kv_dtype\)"),
]


def good_fp8_inputs():
    """The table's good inputs (numpy)."""
    bits = np.full((2, 16, 2, 64), 0x38, np.uint8)
    return {"q": np.ones((2, 8, 64), np.float32), "k_cache": bits,
            "v_cache": bits.copy(), "seq_lens": np.array([16, 5], np.int32),
            "kv_dtype": "float8_e4m3fn", "k_scale": 1.0, "v_scale": 1.0}


def bad_inputs(backend):
    """pytest params (arguments, words) of BAD_INPUTS for `backend`:
    arguments() makes the call's keywords."""
    def arguments(change):
        def make():
            inputs = good_fp8_inputs()
            inputs.update((name, value() if callable(value) else value)
                          for name, value in change.items())
            if backend == "cuda":
                inputs = {name: to_device(value)
                          for name, value in inputs.items()}
            return {name: value for name, value in inputs.items()
                    if value is not None}
        return make

    return [pytest.param(arguments(change),
                         words[backend] if isinstance(words, dict) else words,
                         id=str(index))
            for index, (change, words) in enumerate(BAD_INPUTS)]


def check_bad_input(backend, arguments, words):
    """decode_attention on `backend` raises the ValueError; on "cuda"
    Decoder too."""
    with pytest.raises(ValueError, match=words):
        flashdecode.decode_attention(**arguments(), backend=backend)
    if backend == "cuda":
        inputs = arguments()
        out = DeviceArray.empty(inputs["q"].shape, inputs["q"].dtype)
        with pytest.raises(ValueError,
                           match=words.replace("backend='cuda'", "a Decoder")):
            flashdecode.Decoder(out=out, **inputs)

