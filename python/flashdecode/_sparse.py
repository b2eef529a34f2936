"""Top-k sparse decode (decode_attention's ``indices=``): each query token
attends the tokens its list names, flat slots of the caches' first two
dimensions (-1: none), the first ``topk_length`` of them. It runs as paged
attention over pages of one position whose negative entries are holes
(fd.attention's ``block_table_holes``, KernelConfig::topK): the lists are
the block table, the caches their slots ``[N0 * N1, 1, Hkv, D]`` (a view),
each query token a sequence of its own."""

import numpy as np

from ._common import _is_torch
from .device_array import DeviceArray

# decode_attention's features a list's tokens cannot take: they have no
# positions (their order is the list's), and one cache holds them.
_EXCLUDED = {
    "block_table": "the indices are flat slots of the caches: no block_table",
    "window_left": "a list's tokens have no positions a window could count",
    "alibi_slopes": "a list's tokens have no positions ALiBi could count",
    "query_lens": "each query token has its own list: no query_lens",
    "kv_shard": "the lists name the slots of one cache: no kv_shard",
}


class _InterfaceView:
    """A ``__cuda_array_interface__`` object seen with another shape of as
    many elements (contiguous); keeps the object alive."""

    def __init__(self, array, shape):
        self._array = array
        self.__cuda_array_interface__ = dict(
            array.__cuda_array_interface__, shape=tuple(shape), strides=None)


def _reshape(array, shape):
    """``array`` (numpy, torch, DeviceArray, or a __cuda_array_interface__
    object) seen with ``shape``; None stays None."""
    if array is None:
        return None
    if isinstance(array, (np.ndarray, DeviceArray)) or _is_torch(array):
        return array.reshape(shape)
    return _InterfaceView(array, shape)


def _full_lengths(like, count, value):
    """int32 [count] of ``value``s where ``like`` (the indices) lives."""
    host = np.full(count, value, np.int32)
    if isinstance(like, np.ndarray):
        return host
    if _is_torch(like):
        import torch
        return torch.from_numpy(host).to(like.device)
    device = like.device if isinstance(like, DeviceArray) else 0
    return DeviceArray.from_numpy(host, device=device)


class SparseCall:
    """decode_attention's arguments for ``indices`` read as a paged call:
    ``q``, ``k_cache``, ``v_cache``, ``seq_lens``, ``block_table``,
    ``k_scale``, ``v_scale``, ``out``, ``lse`` and ``top_k``; ``restore``
    gives the results q's shape back."""

    def __init__(self, q, k_cache, v_cache, seq_lens, indices, topk_length,
                 kv_layout, k_scale, v_scale, out, lse, **features):
        for name, why in _EXCLUDED.items():
            if features.get(name) is not None:
                raise ValueError(f"{name} with indices: {why}")
        if seq_lens is not None:
            raise ValueError("seq_lens with indices: pass None (the lists' "
                             "lengths are topk_length, default K)")
        if kv_layout != "NHD":
            raise ValueError("indices need kv_layout='NHD': a slot is a row "
                             "of [slots, Hkv, D]")
        q_shape = tuple(getattr(q, "shape", ()))
        if len(q_shape) not in (3, 4):
            raise ValueError(f"q must be [B, Hq, D] or [B, Lq, Hq, D], got "
                             f"shape {q_shape}")
        batch = q_shape[0]
        query_len = q_shape[1] if len(q_shape) == 4 else 1
        index_shape = tuple(getattr(indices, "shape", ()))
        # [B, Lq, K]; [B, K] where Lq is 1 (q [B, Hq, D] or [B, 1, Hq, D]).
        accepted = [(batch, query_len)] + ([(batch,)] if query_len == 1
                                           else [])
        if index_shape[:-1] not in accepted or index_shape[-1:] < (1,):
            expected = " or ".join(
                str(list(shape) + ["K"]).replace("'", "")
                for shape in accepted)
            raise ValueError(f"indices must be {expected} for q {q_shape}, "
                             f"got shape {index_shape}")
        self.top_k = index_shape[-1]
        rows = batch * query_len
        k_shape = tuple(getattr(k_cache, "shape", ()))
        if len(k_shape) != 4:
            raise ValueError(f"k_cache must be [N0, N1, Hkv, D] (a dense cache "
                             f"or a page pool), got shape {k_shape}")
        slots = k_shape[0] * k_shape[1]
        self._q_shape = q_shape
        self.q = _reshape(q, (rows,) + q_shape[-2:])
        self.k_cache = _reshape(k_cache, (slots, 1) + k_shape[2:])
        self.v_cache = None if v_cache is None else _reshape(
            v_cache, (slots, 1) + tuple(v_cache.shape[2:]))
        # Per-token scales [N0, N1, Hkv] become the slots'.
        self.k_scale, self.v_scale = (
            _reshape(scale, (slots, 1, k_shape[2]))
            if getattr(scale, "shape", (1,)) == k_shape[:3] else scale
            for scale in (k_scale, v_scale))
        self.block_table = _reshape(indices, (rows, self.top_k))
        self.seq_lens = self._lengths(topk_length, indices, batch, query_len,
                                      rows)
        self.out = _reshape(out, (rows,) + tuple(getattr(
            out, "shape", (0,)))[-2:]) if out is not None else None
        self.lse = _reshape(lse, (rows, q_shape[-2])) \
            if lse is not None else None

    def _lengths(self, topk_length, indices, batch, query_len, rows):
        """The lists' lengths, one per query token: topk_length [B] (each
        token of a sequence the same) or [B, Lq], or K."""
        if topk_length is None:
            return _full_lengths(indices, rows, self.top_k)
        shape = tuple(getattr(topk_length, "shape", ()))
        if shape == (batch, query_len) or (query_len == 1 and
                                           shape == (batch,)):
            return _reshape(topk_length, (rows,))
        if shape == (batch,) and isinstance(topk_length, np.ndarray):
            return np.ascontiguousarray(np.repeat(topk_length, query_len))
        raise ValueError(
            f"topk_length must be [B] ({batch},)" +
            (f" (a numpy array) or [B, Lq] {(batch, query_len)}"
             if query_len > 1 else "") + f", got shape {shape}")

    def restore(self, result, return_lse):
        """decode_attention's result with q's shape."""
        out, lse = result if return_lse else (result, None)
        out = _reshape(out, self._q_shape[:-1] + (out.shape[-1],))
        if not return_lse:
            return out
        return out, _reshape(lse, self._q_shape[:-1])

