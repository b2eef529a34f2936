"""cascade_decode: decode attention of many requests that share a prefix,
reading the prefix once for all of them (fd.attention's suffix_lens), each
request's own suffix as decode_attention does, the two merged exactly by
log-sum-exp (merge_state_in_place)."""

import numbers

import numpy as np

from ._common import _check_scale, _check_soft_cap, _check_window, \
    _is_torch, _planner_options
from ._cpu import _decode_cpu
from ._cuda import _decode_cuda
from ._cuda_arrays import _CudaArray
from ._merge import merge_state_in_place
from ._spellings import accepted, spelled


def _rows(array, rows, heads, head_dim):
    """``array`` ([R, (Lq,) H, D] or [R, (Lq,) H]) as the [rows, H(, D)]
    view merge_state_in_place takes: a numpy view, a torch view, or a
    DeviceArray's."""
    shape = (rows, heads) if head_dim is None else (rows, heads, head_dim)
    if isinstance(array, np.ndarray):
        return array.reshape(shape)
    if _is_torch(array):
        return array.view(shape)
    return array.reshape(shape)


def _prefix_views(prefix_k, prefix_v, prefix_block_table, kv_layout):
    """The prefix as one sequence of a cache: dense [P, Hkv, D] (NHD) or
    [Hkv, P, D] (HND) as [1, ...]; a page pool as it is, its block table
    [num_prefix_pages] as [1, num_prefix_pages]."""
    def one(array, name):
        if array is None:
            return None
        if prefix_block_table is not None:
            return array
        shape = tuple(array.shape)
        if len(shape) != 3:
            form = "[P, Hkv, D]" if kv_layout == "NHD" else "[Hkv, P, D]"
            raise ValueError(f"{name} must be {form} (one sequence; pages "
                             f"with prefix_block_table), got shape {shape}")
        return (array.reshape((1,) + shape) if not _is_torch(array)
                else array.view((1,) + shape))
    table = prefix_block_table
    if table is not None:
        if len(tuple(table.shape)) != 1:
            raise ValueError("prefix_block_table must be [num_prefix_pages], "
                             f"the prefix's pages in order, got shape "
                             f"{tuple(table.shape)}")
        table = table.reshape((1, table.shape[0])) if not _is_torch(table) \
            else table.view(1, -1)
    return one(prefix_k, "prefix_k"), one(prefix_v, "prefix_v"), table


def _check_prefix_on_device(prefix_k, prefix_v, prefix_len):
    """The prefix's arrays (None: not given, or an int length) are device
    memory: a host one is named as given, before the prefix pass takes them
    as its caches and lengths."""
    for name, array in (("prefix_k", prefix_k), ("prefix_v", prefix_v),
                        ("prefix_len", prefix_len)):
        if array is not None and not isinstance(array, numbers.Integral):
            _CudaArray(array, name, strict=False)


def _prefix_capacity(prefix_k, prefix_table, kv_layout):
    """The most tokens the prefix's cache holds: its positions, or its
    pages times their size."""
    positions = tuple(prefix_k.shape)[1 if kv_layout == "NHD" else 2]
    if prefix_table is None:
        return positions
    return tuple(prefix_table.shape)[1] * positions


def _prefix_lengths(prefix_len, capacity, backend):
    """prefix_len as the prefix pass's seq_lens: an int in [0, capacity] (a
    new int32 [1] array: numpy, or on the GPU staged by the launch), or a
    1-element int32 array as it is (numpy, checked; device memory on the
    GPU, clamped by the kernel: graph replays read its value at each
    launch)."""
    if isinstance(prefix_len, numbers.Integral) and \
            not isinstance(prefix_len, bool):
        value = int(prefix_len)
    elif tuple(getattr(prefix_len, "shape", ())) == (1,):
        if not isinstance(prefix_len, np.ndarray):
            return prefix_len
        value = int(prefix_len[0])
    else:
        raise ValueError("prefix_len must be an int or a 1-element int32 "
                         f"array, got {prefix_len!r}")
    if not 0 <= value <= capacity:
        raise ValueError(f"prefix_len must be in [0, {capacity}] (what the "
                         f"prefix's cache holds), got {value}")
    if isinstance(prefix_len, np.ndarray):
        return prefix_len
    return np.array([value], np.int32) if backend == "cpu" else value


def cascade_decode(q, prefix_k, prefix_v, prefix_len, k_cache, v_cache,
                   seq_lens, *, block_table=None, prefix_block_table=None,
                   return_lse=False, backend="cpu", num_splits=None,
                   scale=None, kv_layout="NHD", dtype=None, window_left=None,
                   logits_soft_cap=None, sinks=None, alibi_slopes=None,
                   arch=None, stream=None, blocks_per_sm=None,
                   min_chunk_length=None, max_splits=None):
    """Decode attention of R requests that continue one shared prefix:
    request r's sequence is the prefix's first prefix_len tokens, then the
    first seq_lens[r] tokens of its own cache; its query tokens are the
    last Lq of it (token t at position prefix_len + seq_lens[r] - Lq + t).
    The result equals decode_attention over the concatenated caches with
    lengths prefix_len + seq_lens, but the prefix is read once per KV head
    for all requests (parallel sampling, beam search, one long system
    prompt), not once a request.

    q: [R, Hq, D] or [R, Lq, Hq, D]. prefix_k, prefix_v: the prefix, one
    sequence, [P, Hkv, D] (kv_layout "NHD") or [Hkv, P, D] ("HND"); with
    prefix_block_table (int32 [num_prefix_pages], its pages in order) page
    pools [num_pages, page_size, Hkv, D] (NHD) or [num_pages, Hkv,
    page_size, D] (HND). prefix_len: an int, or a 1-element int32 array
    (numpy for backend="cpu", device memory for "cuda", read at every
    launch) in [0, the prefix's capacity]. k_cache, v_cache, seq_lens
    (int32 [R]) and block_table: the requests' suffixes, as
    decode_attention takes them (a suffix of 0 tokens is fine: its request
    attends the prefix alone). window_left, logits_soft_cap, alibi_slopes
    and sinks apply with positions counted from the prefix's start (the
    sinks once per row); scale, dtype, num_splits and the planner's knobs
    as for decode_attention, for both passes (num_splits counts each
    pass's splits). Returns out shaped like q, or (out, lse) with
    return_lse (natural-log, [R, (Lq,) Hq]).

    Three launches (or CPU runs): the prefix pass, whose rows of several
    requests stream the prefix together (fd.attention's suffix_lens), the
    suffix pass (decode_attention) and merge_state_in_place of the first
    into the second, in the output's dtype.
    """
    dtype = spelled("dtype", dtype)
    kv_layout = spelled("kv_layout", kv_layout)
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    if kv_layout not in ("NHD", "HND"):
        raise ValueError(f"kv_layout must be {accepted('kv_layout')}, got "
                         f"{kv_layout!r}")
    common = {"num_splits": num_splits, "scale": _check_scale(scale),
              "kv_layout": kv_layout, "return_lse": True, "dtype": dtype,
              "planner": _planner_options(blocks_per_sm, min_chunk_length,
                                          max_splits),
              "window_left": _check_window(window_left),
              "logits_soft_cap": _check_soft_cap(logits_soft_cap),
              "alibi_slopes": alibi_slopes, "query_lens": None}
    if backend == "cuda":
        _check_prefix_on_device(prefix_k, prefix_v, prefix_len)
    prefix = _prefix_views(prefix_k, prefix_v, prefix_block_table, kv_layout)
    lengths = _prefix_lengths(
        prefix_len, _prefix_capacity(prefix[0], prefix[2], kv_layout),
        backend)
    if backend == "cpu":
        for name, value in (("arch", arch), ("stream", stream)):
            if value is not None:
                raise ValueError(f"{name} is for backend='cuda'")
        out, lse = _decode_cpu(q, k_cache, v_cache, seq_lens,
                               block_table=block_table, sinks=sinks,
                               **common)
        prefix_out, prefix_lse = _decode_cpu(
            q, prefix[0], prefix[1], lengths, block_table=prefix[2],
            sinks=None, suffix_lens=np.ascontiguousarray(seq_lens), **common)
    else:
        cuda = {"arch": arch, "out": None, "lse": None, "stream": stream}
        out, lse = _decode_cuda(q, k_cache, v_cache, seq_lens,
                                block_table=block_table, sinks=sinks,
                                **cuda, **common)
        prefix_out, prefix_lse = _decode_cuda(
            q, prefix[0], prefix[1], lengths, block_table=prefix[2],
            sinks=None, suffix_lens=seq_lens, **cuda, **common)
    shape = tuple(q.shape)
    rows, heads = int(np.prod(shape[:-2])), shape[-2]
    head_dim = tuple(out.shape)[-1]
    merge_state_in_place(_rows(out, rows, heads, head_dim),
                         _rows(lse, rows, heads, None),
                         _rows(prefix_out, rows, heads, head_dim),
                         _rows(prefix_lse, rows, heads, None), stream=stream)
    return (out, lse) if return_lse else out
