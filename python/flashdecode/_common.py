"""What both backends share: dtypes, split options, the checked shapes of a
call, the scale, the sliding window, the logit soft-cap and the optional
buffers (sinks, ALiBi slopes, query lengths)."""

import math
import numbers

import numpy as np

from . import _flashdecode as _native
from ._fp8 import check_compile_options
from ._spellings import accepted

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
# The shapes the kernels are built for: the compiler's (fd/Planning/Limits.h).
_MAX_QUERY_LEN = _native.MAX_DECODE_QUERY_LEN
_KEY_HEAD_DIMS = "a " + _native.SUPPORTED_KEY_HEAD_DIMS
_VALUE_HEAD_DIMS = "a " + _native.SUPPORTED_VALUE_HEAD_DIMS
_PAGE_SIZES = "a " + _native.SUPPORTED_PAGE_SIZES


def _dtype_code(dtype):
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {accepted('dtype')}, got "
                         f"{dtype!r}")
    return _DTYPES[dtype]


def _split_options(num_splits):
    """(num_splits for the config, whether to split) from the user's value."""
    if num_splits is None or num_splits == "auto":
        return 0, True
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) \
            or num_splits < 1:
        raise ValueError(
            f"num_splits must be 'auto', None or a positive int, got {num_splits!r}")
    return num_splits, True




class _Problem:
    """The checked shapes of one decode_attention call. With a block table
    shape the caches are page pools [num_pages, page_size, Hkv, D] (NHD) or
    [num_pages, Hkv, page_size, D] (HND). The value cache is shaped alike
    with D_v (``v_head_dim``, default D) last; without one (``v_shape``
    None, ``v_head_dim`` given) the values are the key cache's first D_v
    columns (MLA's latent cache). With ``shared_prefix`` the caches hold
    one sequence (a batch of 1, a block table of one row, seq_lens (1,))
    that every query sequence continues."""

    def __init__(self, q_shape, k_shape, v_shape, lens_shape, kv_layout,
                 table_shape=None, v_head_dim=None, shared_prefix=False):
        if kv_layout not in ("NHD", "HND"):
            raise ValueError(f"kv_layout must be {accepted('kv_layout')}, "
                             f"got {kv_layout!r}")
        if len(q_shape) not in (3, 4):
            raise ValueError(
                f"q must be [B, Hq, D] or [B, Lq, Hq, D], got shape {tuple(q_shape)}")
        if len(k_shape) != 4:
            raise ValueError(
                f"k_cache must be 4-D ({'[B, Lmax, Hkv, D]' if kv_layout == 'NHD' else '[B, Hkv, Lmax, D]'}),"
                f" got shape {tuple(k_shape)}")
        _check_v_head_dim(v_head_dim)
        self.shared_kv = v_shape is None
        if self.shared_kv and v_head_dim is None:
            raise ValueError("v_cache is None: give v_head_dim, the values' "
                             "head dim (they are then the first v_head_dim "
                             "columns of k_cache)")
        if not self.shared_kv:
            expected = tuple(k_shape) if v_head_dim is None else \
                tuple(k_shape[:-1]) + (v_head_dim,)
            if tuple(v_shape) != expected:
                last = "" if v_head_dim is None else \
                    f" with v_head_dim {v_head_dim} last: {expected}"
                raise ValueError(f"v_cache shape {tuple(v_shape)} must equal "
                                 f"k_cache shape {tuple(k_shape)}{last}")
        self.q_shape = tuple(q_shape)
        self.batch = q_shape[0]
        self.has_query_len = len(q_shape) == 4
        self.query_len = q_shape[1] if self.has_query_len else 1
        self.num_q_heads, self.head_dim = q_shape[-2], q_shape[-1]
        if kv_layout == "NHD":
            kb, positions, self.num_kv_heads, kd = k_shape
        else:
            kb, self.num_kv_heads, positions, kd = k_shape
        self.page_size = 0
        # The caches' sequences: the queries', or one shared prefix.
        sequences = 1 if shared_prefix else self.batch
        if table_shape is None:
            self.max_len = positions
            if kb != sequences:
                raise ValueError(
                    f"k_cache batch {kb} must equal q batch {self.batch}"
                    if not shared_prefix else
                    f"the prefix's cache must hold one sequence, got a "
                    f"batch of {kb}")
        else:
            if len(table_shape) != 2 or table_shape[0] != sequences:
                raise ValueError(f"block_table must be [B, max_pages] with B = "
                                 f"{sequences}, got shape {tuple(table_shape)}")
            if not _native.is_supported_page_size(positions):
                raise ValueError(f"page size {positions} (the caches' "
                                 f"{'second' if kv_layout == 'NHD' else 'third'}"
                                 " dimension) is not supported: expected "
                                 f"{_PAGE_SIZES}")
            self.page_size, self.num_pages = positions, kb
            self.max_pages = table_shape[1]
            self.max_len = self.max_pages * positions
        if kd != self.head_dim:
            raise ValueError(f"k_cache head dim {kd} must equal q head dim "
                             f"{self.head_dim}")
        if not _native.is_supported_key_head_dim(self.head_dim):
            raise ValueError(f"head dim {self.head_dim} is not supported: "
                             f"expected {_KEY_HEAD_DIMS}")
        self.value_head_dim = self.head_dim if v_head_dim is None \
            else v_head_dim
        if not _native.is_supported_value_head_dim(self.value_head_dim):
            raise ValueError(
                f"v_head_dim {self.value_head_dim} is not supported: expected "
                f"{_VALUE_HEAD_DIMS}" + ("" if v_head_dim is not None else
                                         " (give v_head_dim)"))
        if self.shared_kv and self.value_head_dim > self.head_dim:
            raise ValueError(f"v_head_dim {self.value_head_dim} must be at "
                             f"most k_cache's head dim {self.head_dim}: the "
                             f"values are its first v_head_dim columns")
        if self.num_kv_heads < 1 or self.num_q_heads % self.num_kv_heads:
            raise ValueError(
                f"q heads ({self.num_q_heads}) must be a multiple of k_cache "
                f"heads ({self.num_kv_heads})")
        if not 1 <= self.query_len <= _MAX_QUERY_LEN:
            raise ValueError(f"q has {self.query_len} query tokens per "
                             f"sequence; 1 to {_MAX_QUERY_LEN} are supported")
        if self.batch < 1:
            raise ValueError("q must hold at least one sequence")
        if self.max_len < 1:
            raise ValueError("the caches must hold at least one position")
        if tuple(lens_shape) != (sequences,):
            raise ValueError(f"seq_lens must have shape ({sequences},), got "
                             f"{tuple(lens_shape)}")

    def out_shape(self):
        return tuple(self.q_shape[:-1]) + (self.value_head_dim,)

    def lse_shape(self):
        if self.has_query_len:
            return (self.batch, self.query_len, self.num_q_heads)
        return (self.batch, self.num_q_heads)


def _check_scale(scale):
    if scale is None:
        return None
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return scale


def _check_window(window_left):
    """The config's window_left (0: no window) from the user's value: None
    (no window) or an int >= 1, the keys a query sees up to itself."""
    if window_left is None:
        return 0
    if isinstance(window_left, bool) or \
            not isinstance(window_left, numbers.Integral):
        raise ValueError("window_left must be an int >= 1 (or None for no "
                         f"window), got {window_left!r}")
    if window_left < 1:
        raise ValueError("window_left must be >= 1 (or None for no window), "
                         f"got {window_left!r}")
    return int(window_left)


def _check_soft_cap(logits_soft_cap):
    """None (off) or the cap c of c * tanh(score / c), a positive finite
    number."""
    if logits_soft_cap is None:
        return None
    if isinstance(logits_soft_cap, bool) or \
            not isinstance(logits_soft_cap, numbers.Real):
        raise ValueError("logits_soft_cap must be a positive finite number "
                         f"(or None for off), got {logits_soft_cap!r}")
    cap = float(logits_soft_cap)
    if not (math.isfinite(cap) and cap > 0):
        raise ValueError("logits_soft_cap must be a positive finite number "
                         f"(or None for off), got {logits_soft_cap!r}")
    return cap


def _check_page_size(page_size):
    """compile()'s page_size: None (dense: 0 for the config) or an int,
    whose range the config's validation states."""
    if page_size is None:
        return 0
    if isinstance(page_size, bool) or \
            not isinstance(page_size, numbers.Integral) or page_size < 1:
        raise ValueError(
            f"page_size must be None (dense caches) or {_PAGE_SIZES}, got "
            f"{page_size!r}")
    return int(page_size)


def _check_v_head_dim(v_head_dim):
    """v_head_dim is an int (its range is the native rule's) or None."""
    if v_head_dim is not None and (isinstance(v_head_dim, bool) or
                                   not isinstance(v_head_dim, int)):
        raise TypeError(f"v_head_dim must be an int or None, got "
                        f"{v_head_dim!r}")


class _Shard:
    """A KV cache sharded by token (decode_attention's kv_shard): rank
    ``rank`` of ``world`` holds the global tokens j with (j // interleave)
    % world == rank, in order."""

    def __init__(self, rank, world, interleave):
        self.rank, self.world, self.interleave = rank, world, interleave

    def config_options(self):
        """KernelRequest's kv_shard_world and kv_shard_interleave."""
        return {"kv_shard_world": self.world,
                "kv_shard_interleave": self.interleave}

    def capacity(self, max_len):
        """The longest global length whose share fits max_len keys on
        every rank (rank 0 takes an incomplete round's tokens first): what
        the kernels clamp a global length to."""
        return self.world * self.interleave * (max_len // self.interleave) \
            + max_len % self.interleave


def _check_shard(rank, world, interleave):
    """A _Shard of ints: world and interleave >= 1, rank in [0, world)."""
    for name, value, low in (("world", world, 1),
                             ("interleave", interleave, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
                or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or \
            not 0 <= rank < world:
        raise ValueError(f"rank must be an int in [0, {world}), got "
                         f"{rank!r}")
    return _Shard(int(rank), int(world), int(interleave))


def _check_kv_shard(kv_shard):
    """decode_attention's kv_shard: None (not sharded) or (rank, world,
    interleave), as a _Shard."""
    if kv_shard is None:
        return None
    if not isinstance(kv_shard, (tuple, list)) or len(kv_shard) != 3:
        raise ValueError("kv_shard must be None or (rank, world, interleave),"
                         f" got {kv_shard!r}")
    return _check_shard(*kv_shard)


def _length_bound(max_len, kv_shard):
    """The most a seq_lens entry may be, and what that bound is: the cache
    length, or with a KV shard (_Shard or None) the global length the
    shards hold."""
    if kv_shard is None:
        return max_len, "the cache length"
    return kv_shard.capacity(max_len), \
        f"the global length {kv_shard.world} shards of {max_len} keys hold"


def _shard_options(kv_shard):
    """KernelRequest's options of a _Shard or None."""
    return {} if kv_shard is None else kv_shard.config_options()


def _check_flag(name, value):
    """compile()'s with_sinks, with_alibi, with_query_lens, fused_merge:
    True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


# The optional arrays bound beside q and the caches: name -> (dtype, the
# config flag that compiles the kernels to read it, whether it holds one
# element per query head ("Hq") or per sequence ("B"), what each element
# is).
_BUFFERS = {
    "sinks": ("float32", "with_sinks", "Hq", "one logit per query head"),
    "alibi_slopes": ("float32", "with_alibi", "Hq",
                     "one slope per query head"),
    "query_lens": ("int32", "with_query_lens", "B",
                   "one query length per sequence"),
}


def _buffer_shape(name, problem):
    """The shape buffer ``name`` must have: (Hq,) or (B,)."""
    per = _BUFFERS[name][2]
    return (problem.num_q_heads if per == "Hq" else problem.batch,)


def _buffer_shape_error(name, shape, problem):
    """The message for a buffer (sinks, alibi_slopes, query_lens) of the
    wrong shape, or None when its shape is right."""
    expected = _buffer_shape(name, problem)
    if tuple(shape) == expected:
        return None
    return (f"{name} must have shape {expected} ({_BUFFERS[name][3]}), got "
            f"{tuple(shape)}")


def _buffer_flags(buffers):
    """The config flags (with_sinks=...) of the buffers given (name ->
    array or None)."""
    return {_BUFFERS[name][1]: array is not None
            for name, array in buffers.items()}


_QUERY_ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_KV_ELEMENT_BYTES = dict(_QUERY_ELEMENT_BYTES, float8_e4m3fn=1,
                         float8_e5m2=1)


def _dtype_name(dtype):
    """A numpy or ml_dtypes dtype's name; anything else as given."""
    return getattr(dtype, "name", dtype)


def _kernel_problem(num_kv_heads, num_q_heads, head_dim, query_len,
                    kv_dtype, fused_merge=False, dtype=None, v_head_dim=None,
                    shared_kv=False, kv_scale=None):
    """The problem whose partial kernel plan_splits plans for, as the native
    planner's keywords (it works out the kernel's schedule and workload):
    none without num_q_heads and head_dim; ValueError naming the argument
    for a bad one. dtype is the queries' (None: the caches', or float16
    beside an fp8 cache); kv_scale an fp8 cache's scales (None: per
    tensor), as compile() takes it."""
    _check_flag("fused_merge", fused_merge)
    _check_flag("shared_kv", shared_kv)
    _check_v_head_dim(v_head_dim)
    if num_q_heads is None and head_dim is None:
        if kv_dtype is not None or dtype is not None or query_len != 1 or \
                fused_merge or kv_scale is not None:
            raise ValueError("query_len, dtype, kv_dtype, kv_scale and "
                             "fused_merge describe the kernel's work: pass "
                             "num_q_heads and head_dim with them")
        if v_head_dim is not None or shared_kv:
            raise ValueError("v_head_dim and shared_kv describe the kernel's "
                             "work: pass num_q_heads and head_dim with them")
        return {}
    counts = {}
    for name, value in (("num_kv_heads", num_kv_heads),
                        ("num_q_heads", num_q_heads), ("head_dim", head_dim),
                        ("query_len", query_len)):
        if not isinstance(value, bool) and isinstance(value, numbers.Integral) \
                and value >= 1:
            counts[name] = int(value)
            continue
        raise ValueError(f"{name} must be an int >= 1 (num_q_heads and "
                         f"head_dim both or neither), got {value!r}")
    if counts["num_q_heads"] % counts["num_kv_heads"]:
        raise ValueError(f"num_q_heads ({num_q_heads}) must be a multiple of "
                         f"num_kv_heads ({num_kv_heads})")
    name = "float16" if kv_dtype is None else _dtype_name(kv_dtype)
    if not isinstance(name, str) or name not in _KV_ELEMENT_BYTES:
        raise ValueError(f"kv_dtype must be one of {accepted('dtype')}, or "
                         f"an fp8 format: {accepted('fp8')}; got {kv_dtype!r}")
    kv_bytes = _KV_ELEMENT_BYTES[name]
    query_bytes = max(2, kv_bytes)
    query_name = name
    if dtype is not None:
        query_name = _dtype_name(dtype)
        query_bytes = _QUERY_ELEMENT_BYTES.get(query_name)
        if query_bytes is None:
            raise ValueError(f"dtype must be one of {accepted('dtype')}, "
                             f"got {dtype!r}")
    scales = check_compile_options(
        name if kv_bytes == 1 else None, kv_scale)["kv_scale"]
    return {"group_size": counts["num_q_heads"] // counts["num_kv_heads"],
            "query_len": counts["query_len"],
            "head_dim": counts["head_dim"],
            "kv_element_bytes": kv_bytes,
            "query_element_bytes": query_bytes,
            "fused_merge": fused_merge, "v_head_dim": v_head_dim or 0,
            "shared_kv": shared_kv,
            "bfloat16_queries": query_name == "bfloat16",
            "float8_token_scales": scales == "token_head"}


def _planner_options(blocks_per_sm, min_chunk_length, max_splits):
    """The planner knobs given (None: the planner's default) as keywords."""
    given = {"blocks_per_sm": blocks_per_sm,
             "min_chunk_length": min_chunk_length, "max_splits": max_splits}
    return {name: value for name, value in given.items() if value is not None}


def _is_torch(array):
    return hasattr(array, "data_ptr") and hasattr(array, "is_cuda")


def _host_view(array, name):
    """A CPU torch tensor as the numpy array sharing its memory (bfloat16
    as uint16 bit patterns); anything else as it is."""
    if not _is_torch(array):
        return array
    if array.is_cuda:
        raise TypeError(f"{name} is a CUDA tensor: the CPU path (backend="
                        "'cpu', numpy states) takes numpy arrays and CPU "
                        "tensors (the GPU one CUDA tensors)")
    import torch
    if array.dtype == torch.bfloat16:
        return array.view(torch.int16).numpy().view(np.uint16)
    return array.numpy()


def _to_tensor(array):
    """_host_view's inverse: a numpy result as the CPU tensor sharing its
    memory (uint16, only ever bfloat16 bits here, as bfloat16)."""
    import torch
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
