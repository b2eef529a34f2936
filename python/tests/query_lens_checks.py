"""Shared by the tests of per-sequence query lengths, query_lens=
(test_query_lens.py on the CPU backend, test_query_lens_cuda_emulated.py on
backend="cuda" over DeviceArrays): one runner for both backends checked
against the float64 reference of reference.py, the padding rows' own check,
the check of each sequence's rows against a call with exactly its query
tokens, and the bad-buffer tables of an int32 [B] buffer in
per_head_buffers.py's form, run through its checks (a ValueError naming
query_lens before anything runs or reaches the device).

Sequence b has n = clamp(query_lens[b], 0, Lq) query tokens, its last n:
token t < n sits at position seq_lens[b] - n + t; rows t >= n are padding,
zeros with lse -inf (sinks or not).
"""
import numpy as np

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import (TOLERANCE, DeviceLike, Foreign, bf16,
                              host_pointer, table_cases, to_device)
from reference import (attention, check_rows, check_split_counts_agree,
                       check_with_sinks, decode, to_bfloat16_bits)

# TOLERANCE (the output's, per_head_buffers.py) is both backends'; the lse's
# is tighter on the CPU than on the GPU (exp2/log2).
LSE_TOLERANCE = {"cpu": 1e-5, "cuda": 1e-3}
SENTINEL = 7.0


def random_query_lens(rng, batch, query_len):
    """int32 [batch]: 0, Lq and each n in 1..Lq-1 (in random order) as far
    as the batch holds them, the rest random in [0, Lq]; shuffled."""
    values = np.concatenate([[0, query_len],
                             rng.permutation(np.arange(1, query_len)),
                             rng.integers(0, query_len + 1, batch)])
    return rng.permutation(values[:batch]).astype(np.int32)


def random_lengths(rng, batch, max_len, query_len):
    """int32 [batch]: 0, 1, Lq - 1 (fewer keys than a full draft: tokens
    before the first key), max_len, the rest random in [0, max_len];
    shuffled."""
    values = np.concatenate([[0, 1, query_len - 1, max_len],
                             rng.integers(0, max_len + 1, batch)])
    return rng.permutation(values[:batch]).astype(np.int32)


def clamped(query_lens, query_len):
    return np.clip(np.asarray(query_lens, np.int64), 0, query_len)


def sentinel(shape, dtype):
    """An array of SENTINEL in `dtype` storage (bfloat16: bit patterns)."""
    if dtype == "bfloat16":
        return to_bfloat16_bits(np.full(shape, SENTINEL, np.float32))
    return np.full(shape, SENTINEL, dtype)


def attend(backend, inputs, lens, query_lens, *, q=None, caches=None,
           block_table=None, sinks=None, alibi_slopes=None, **options):
    """decode_attention(return_lse=True) on `backend` over inputs.stored (q
    and the caches replaced by `q` and `caches` when given) -> the host
    (out, lse). backend="cuda" copies every array to the device and writes
    into out and lse filled with SENTINEL, so that a row the kernels leave
    unwritten shows."""
    q = inputs.stored[0] if q is None else q
    k, v = inputs.stored[1:] if caches is None else caches
    dtype = bf16(inputs.dtype)
    buffers = {"block_table": block_table, "sinks": sinks,
               "alibi_slopes": alibi_slopes, "query_lens": query_lens}
    if backend == "cpu":
        out, lse = flashdecode.decode_attention(
            q, k, v, lens, dtype=dtype, return_lse=True, **buffers,
            **options)
        assert out.dtype == q.dtype
    else:
        out = DeviceArray.from_numpy(sentinel(q.shape, inputs.dtype),
                                     dtype=dtype)
        lse = DeviceArray.from_numpy(sentinel(q.shape[:-1], "float32"))
        result = flashdecode.decode_attention(
            *to_device(q, k, v, dtype=dtype), DeviceArray.from_numpy(lens),
            backend="cuda", return_lse=True, out=out, lse=lse,
            **{name: DeviceArray.from_numpy(array)
               for name, array in buffers.items() if array is not None},
            **options)
        assert result[0] is out and result[1] is lse
        out, lse = out.numpy(), lse.numpy()
    assert out.shape == q.shape and lse.shape == q.shape[:-1]
    assert lse.dtype == np.float32
    return out, lse


def check_padding(out, lse, query_lens, dtype, context):
    """The padding rows t >= n of out (host, [B, Lq, Hq, D] or [B, Hq, D])
    are exact zeros, of lse -inf, whatever the reference says."""
    query_len = 1 if out.ndim == 3 else out.shape[1]
    padding = np.arange(query_len)[None, :] >= \
        clamped(query_lens, query_len)[:, None]
    if out.ndim == 3:
        padding = padding[:, 0]
    assert (decode(out, dtype)[padding] == 0).all(), \
        f"padding rows not zeros: {context}"
    assert np.isneginf(lse[padding]).all(), \
        f"padding rows' lse not -inf: {context}"


def run(backend, inputs, lens, query_lens, *, kv_layout="NHD", caches=None,
        block_table=None, window_left=None, logits_soft_cap=None, sinks=None,
        alibi_slopes=None, scale=None, **options):
    """attend() against the float64 reference (overall, row by row, rows
    without keys and padding); returns the host (out, lse)."""
    rules = {"kv_layout": kv_layout, "window_left": window_left,
             "logits_soft_cap": logits_soft_cap, "sinks": sinks,
             "alibi_slopes": alibi_slopes, "scale": scale}
    out, lse = attend(backend, inputs, lens, query_lens, caches=caches,
                      block_table=block_table, **rules, **options)
    expected, expected_lse = attention(*inputs.exact, lens,
                                       query_lens=query_lens, **rules)
    context = (f"{backend} seed={inputs.seed} dtype={inputs.dtype} "
               f"q={inputs.stored[0].shape} lens={lens.tolist()} "
               f"query_lens={query_lens.tolist()} layout={kv_layout} "
               f"window={window_left} cap={logits_soft_cap} "
               f"sinks={sinks is not None} alibi={alibi_slopes is not None} "
               f"paged={block_table is not None} {options}")
    check_with_sinks(out, lse, expected, expected_lse, lens, inputs.dtype,
                     TOLERANCE[inputs.dtype], LSE_TOLERANCE[backend],
                     context, query_lens=query_lens)
    check_padding(out, lse, query_lens, inputs.dtype, context)
    return out, lse


def run_splits(backend, inputs, lens, query_lens, splits, **options):
    """run() for each split count; the results also agree with each
    other."""
    results = [(n,) + run(backend, inputs, lens, query_lens, num_splits=n,
                          **options) for n in splits]
    check_split_counts_agree(results, inputs.dtype, TOLERANCE[inputs.dtype],
                             LSE_TOLERANCE[backend], f"seed={inputs.seed}")


def check_against_calls_with_n_tokens(backend, inputs, lens, query_lens, *,
                                      caches=None, block_table=None,
                                      **options):
    """Independent of the reference: with query_lens, rows t < n of
    sequence b equal a call for sequence b alone with q[b:b+1, :n] (n
    query tokens, the last n of the sequence) and no query_lens, row by
    row to the tolerances (the two kernels tile differently). Returns the
    number of sequences compared."""
    out, lse = attend(backend, inputs, lens, query_lens, caches=caches,
                      block_table=block_table, **options)
    q, k, v = inputs.stored
    assert q.ndim == 4, "q [B, Lq, Hq, D]"
    tolerance = TOLERANCE[inputs.dtype]
    compared = 0
    for b, n in enumerate(clamped(query_lens, q.shape[1])):
        context = f"{backend} seed={inputs.seed} sequence {b}: n={n} " \
            f"lens={lens.tolist()} {options}"
        if n == 0:
            check_padding(out[b:b + 1], lse[b:b + 1], [0], inputs.dtype,
                          context)
            continue
        # Dense caches: the sequence's own; paged: the pools, its row of
        # the block table.
        alone_caches = caches if caches is not None else \
            [np.ascontiguousarray(a[b:b + 1]) for a in (k, v)]
        alone_table = None if block_table is None else \
            np.ascontiguousarray(block_table[b:b + 1])
        alone, alone_lse = attend(
            backend, inputs, lens[b:b + 1], None,
            q=np.ascontiguousarray(q[b:b + 1, :n]), caches=alone_caches,
            block_table=alone_table, **options)
        check_rows(decode(out[b, :n], inputs.dtype),
                   decode(alone[0], inputs.dtype), inputs.dtype, tolerance,
                   context)
        np.testing.assert_array_equal(np.isneginf(lse[b, :n]),
                                      np.isneginf(alone_lse[0]),
                                      err_msg=context)
        finite = np.isfinite(alone_lse[0])
        np.testing.assert_allclose(lse[b, :n][finite], alone_lse[0][finite],
                                   rtol=LSE_TOLERANCE[backend],
                                   atol=LSE_TOLERANCE[backend],
                                   err_msg=context)
        check_padding(out[b:b + 1], lse[b:b + 1], [n], inputs.dtype, context)
        compared += 1
    return compared


# Bad query_lens (good_arrays() of per_head_buffers.py: q [2, 8, 64], so
# (2,) is the right shape): a ValueError naming them. `words` take {name}
# and {what} as per_head_buffers.py's.

HOST_BAD = [
    (lambda: [1, 1], r"{name} must be a numpy int32 array of shape \(2,\) "
     r"for backend='cpu', got builtins.list"),
    (lambda: DeviceLike(), "{name} must be a numpy int32 array .*got "
     ".*DeviceLike"),
    (lambda: np.int32(1), "{name} must be a numpy int32 array .*got "
     "numpy.int32"),
    (lambda: np.ones(2, np.int64), "{name} must be int32, got int64"),
    (lambda: np.ones(2, np.uint32), "{name} must be int32, got uint32"),
    (lambda: np.ones(2, np.int16), "{name} must be int32, got int16"),
    (lambda: np.ones(2, np.float32), "{name} must be int32, got float32"),
    (lambda: np.ones(2, np.bool_), "{name} must be int32, got bool"),
    (lambda: np.ones(3, np.int32), r"{name} must have shape \(2,\) \(one "
     r"{what} per sequence\), got \(3,\)"),
    (lambda: np.ones(1, np.int32), r"{name} must have shape \(2,\).*got "
     r"\(1,\)"),
    (lambda: np.ones((2, 1), np.int32), r"{name} must have shape \(2,\)"
     r".*got \(2, 1\)"),
    (lambda: np.ones((1, 2), np.int32), r"{name} must have shape \(2,\)"
     r".*got \(1, 2\)"),
    (lambda: np.ones((), np.int32), r"{name} must have shape \(2,\).*got "
     r"\(\)"),
    (lambda: np.ones(4, np.int32)[::2], "{name} must be C-contiguous"),
]


class TorchLike:
    """Stands in for a PyTorch tensor (the attributes flashdecode reads of
    one) over a DeviceArray's memory: of another dtype, in host memory, or
    on cuda:1 (fdemu emulates one device: a second can only be
    described)."""

    class _Device:
        def __init__(self, index):
            self.index = index

    def __init__(self, array, dtype=None, is_cuda=True, device=0):
        self._array = array
        self.is_cuda = is_cuda
        self.device = self._Device(device)
        self.shape = array.shape
        self.dtype = "torch." + (dtype or array.dtype)

    def data_ptr(self):
        return self._array._address

    def is_contiguous(self):
        return True


def _ints(count=2):
    return DeviceArray.empty(count, "int32")


DEVICE_BAD = [
    (lambda: np.ones(2, np.int32), "{name} must be a CUDA tensor for "
     "backend='cuda'"),
    (lambda: [1, 1], "{name} must be a CUDA tensor"),
    (lambda: TorchLike(_ints(), is_cuda=False), "{name} must be a CUDA "
     "tensor for backend='cuda'"),
    (lambda: DeviceArray.empty(2, "float32"),
     "{name} must be int32, got float32"),
    (lambda: DeviceArray.empty(2, "float16"),
     "{name} must be int32, got float16"),
    (lambda: DeviceArray.empty(2, "bfloat16"),
     "{name} must be int32, got bfloat16"),
    (lambda: Foreign(_ints(), typestr="<i8"),
     "{name} dtype is not supported: expected int32"),
    (lambda: Foreign(_ints(), typestr="<u4"),
     "{name} dtype is not supported: expected int32"),
    (lambda: TorchLike(_ints(), dtype="int64"),
     "{name} dtype is not supported: expected int32"),
    (lambda: _ints(3),
     "{name} must have shape (2,) (one {what} per sequence), got (3,)"),
    (lambda: DeviceArray.empty((1, 2), "int32"),
     "{name} must have shape (2,) (one {what} per sequence), got (1, 2)"),
    (lambda: DeviceArray.empty((), "int32"), "{name} must have shape (2,)"),
    (lambda: Foreign(_ints(4), shape=(2,), strides=(8,), typestr="<i4"),
     "{name} must be contiguous"),
    (lambda: Foreign(_ints(3), offset=2, shape=(2,), typestr="<i4"),
     "{name} data pointer"),
    (lambda: host_pointer(2, "int32"), "{name} (data pointer"),
    (lambda: TorchLike(_ints(), device=1), "{name} on cuda:1"),
]


def host_cases():
    return table_cases("query_lens", HOST_BAD)


def device_cases():
    return table_cases("query_lens", DEVICE_BAD)
