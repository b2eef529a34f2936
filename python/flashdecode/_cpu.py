"""backend="cpu": the compiled CPU lowering on numpy arrays, one kernel
cached per configuration."""

import numpy as np

from . import _flashdecode as _native
from . import _fp8
from ._common import (_BUFFERS, _DTYPES, _Problem, _buffer_flags,
                      _buffer_shape, _buffer_shape_error, _host_view,
                      _is_torch, _length_bound, _shard_options,
                      _split_options, _to_tensor)


def _numpy_dtype(array, name, dtype):
    """The flashdecode dtype of a numpy array, checked against ``dtype``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array for backend='cpu', got "
                        f"{type(array).__name__}")
    kind = array.dtype
    if kind == np.float32:
        found = "float32"
    elif kind == np.float16:
        found = "float16"
    elif kind == np.uint16 or kind.name == "bfloat16":
        if dtype != "bfloat16":
            raise TypeError(f"{name} holds 16-bit patterns ({kind}): pass "
                            "dtype='bfloat16'")
        found = "bfloat16"
    else:
        raise TypeError(f"{name} dtype {kind} is not supported: expected "
                        "float32, float16, or bfloat16 as uint16 bit patterns")
    if dtype is not None and dtype != found:
        raise TypeError(f"{name} is {found} but dtype={dtype!r} was given")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous "
                         "(numpy.ascontiguousarray makes it so)")
    return found


def _check_buffer(array, name, problem):
    """sinks, alibi_slopes or query_lens for backend="cpu": None, or a
    C-contiguous numpy array of _BUFFERS' dtype and shape. Every problem is
    a ValueError naming the argument."""
    if array is None:
        return None
    dtype = _BUFFERS[name][0]
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{name} must be a numpy {dtype} array of shape "
                         f"{_buffer_shape(name, problem)} for backend='cpu', "
                         f"got {type(array).__module__}."
                         f"{type(array).__name__}")
    if array.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {array.dtype}")
    shape_error = _buffer_shape_error(name, array.shape, problem)
    if shape_error:
        raise ValueError(shape_error)
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous "
                         "(numpy.ascontiguousarray makes it so)")
    return array


def _scale_array(scale, name):
    """A k_scale / v_scale array for backend="cpu" (_fp8.check_scales'
    as_array): a numpy array."""
    if not isinstance(scale, np.ndarray):
        raise ValueError(f"{name} must be a float or a float32 numpy array, "
                         f"got {type(scale).__name__}")
    return scale


def _cpu_kernel(problem, dtype, num_splits, scale, return_lse, planner,
                window_left, logits_soft_cap, flags, kv_options,
                shard_options, top_k, shared_prefix):
    """The process's kernels for this call: the native cache plans an
    automatic split count for the batch and cache length and keys the
    kernels by what it resolves to."""
    splits, split_kv = _split_options(num_splits)
    return _native.cpu_kernel(_native.KernelRequest(
        problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
        problem.query_len, _DTYPES[dtype], problem.layout, problem.page_size,
        splits, split_kv, scale, return_lse, problem.batch, problem.max_len,
        _native.DEFAULT_SM_COUNT, _native.DEFAULT_ARCH, **planner,
        window_left=window_left, logits_soft_cap=logits_soft_cap, **flags,
        **kv_options, v_head_dim=problem.value_head_dim,
        shared_kv=problem.shared_kv, **shard_options, top_k=top_k,
        shared_prefix=shared_prefix))


def _check_output(array, name, shape, dtype):
    """out= / lse= for backend="cpu": C-contiguous numpy of `shape` and
    `dtype`."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array or a CPU tensor for "
                        f"backend='cpu', got {type(array).__name__}")
    if array.shape != tuple(shape) or array.dtype != dtype:
        raise ValueError(f"{name} must be {np.dtype(dtype).name} of shape "
                         f"{tuple(shape)}, got {array.dtype} {array.shape}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    return array


def _decode_cpu(q, k_cache, v_cache, seq_lens, num_splits, scale, kv_layout,
                return_lse, dtype, block_table, planner, window_left=0,
                logits_soft_cap=None, kv_dtype=None, k_scale=None,
                v_scale=None, v_head_dim=None, out=None, lse=None,
                kv_shard=None, top_k=0, suffix_lens=None, **buffers):
    """``buffers``: sinks, alibi_slopes, query_lens (None or numpy).
    kv_shard: a checked _Shard or None. top_k: the block table's lists are
    top-k indices (_sparse.py; negative entries are holes) when > 0.
    suffix_lens: None, or int32 [B] (checked by the caller, _cascade.py):
    the caches, seq_lens and block table hold one shared prefix that each
    query sequence continues by its suffix.
    kv_dtype, k_scale, v_scale: fp8 caches (see _fp8). v_cache None (with
    v_head_dim): the values are k_cache's first v_head_dim columns, scaled
    by k_scale. CPU torch tensors run as the numpy arrays sharing their
    memory; the results are tensors for a tensor q (out= and lse= as
    given)."""
    torch_q = q if _is_torch(q) else None
    if torch_q is not None and dtype is None and \
            str(torch_q.dtype) == "torch.bfloat16":
        dtype = "bfloat16"
    given_out, given_lse = out, lse
    q, k_cache, v_cache, seq_lens, block_table, out, lse = (
        _host_view(array, name) for array, name in (
            (q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache"),
            (seq_lens, "seq_lens"), (block_table, "block_table"),
            (out, "out"), (lse, "lse")))
    k_scale, v_scale = _host_view(k_scale, "k_scale"), \
        _host_view(v_scale, "v_scale")
    buffers = {name: _host_view(array, name)
               for name, array in buffers.items()}
    if lse is not None and not return_lse:
        raise ValueError("lse is written only with return_lse=True")
    if isinstance(q, np.ndarray):
        _fp8.check_query_dtype(q.dtype.name)
    found = _numpy_dtype(q, "q", dtype)
    shared_kv = v_cache is None
    if shared_kv:
        # Checked as the cache the values come from.
        v_cache = k_cache
        v_scale = _fp8.shared_value_scale(k_scale, v_scale)
    for name, array in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy array for backend='cpu'"
                            f", got {type(array).__name__}")
    kv_format = _fp8.kv_format(k_cache.dtype.name, v_cache.dtype.name,
                               kv_dtype)
    if kv_format is None:
        for name, array in (("k_cache", k_cache), ("v_cache", v_cache)):
            # 16-bit patterns are read as q's dtype; any other array says
            # its own, which q's must match (as on backend="cuda").
            hint = found if array.dtype == np.uint16 else None
            cache_dtype = _numpy_dtype(array, name, hint)
            if cache_dtype != found:
                raise TypeError(f"{name} dtype {cache_dtype} must match q "
                                f"({found})")
    else:
        for name, array in (("k_cache", k_cache), ("v_cache", v_cache)):
            if not array.flags.c_contiguous:
                raise ValueError(f"{name} must be C-contiguous "
                                 "(numpy.ascontiguousarray makes it so)")
    if block_table is not None:
        if not isinstance(block_table, np.ndarray) or block_table.dtype != np.int32:
            raise TypeError("block_table must be a numpy int32 array")
        if not block_table.flags.c_contiguous:
            raise ValueError("block_table must be C-contiguous")
    problem = _Problem(q.shape, k_cache.shape,
                       None if shared_kv else v_cache.shape,
                       np.shape(seq_lens), kv_layout,
                       None if block_table is None else block_table.shape,
                       v_head_dim, shared_prefix=suffix_lens is not None)
    problem.layout = kv_layout
    if top_k and block_table.size and \
            block_table.max() >= problem.num_pages:
        raise ValueError(
            f"indices must be slots in [0, {problem.num_pages}) of the caches "
            f"(or negative: none), got {block_table.max()}")
    if not top_k and block_table is not None and block_table.size and (
            block_table.min() < 0 or block_table.max() >= problem.num_pages):
        raise ValueError(
            f"block_table entries must be page indices in [0, "
            f"{problem.num_pages}) (the caches hold {problem.num_pages} pages), "
            f"got {block_table.min()}..{block_table.max()}")
    if not isinstance(seq_lens, np.ndarray) or seq_lens.dtype != np.int32:
        raise TypeError("seq_lens must be a numpy int32 array")
    seq_lens = np.ascontiguousarray(seq_lens)
    bound, what = _length_bound(problem.max_len, kv_shard)
    if seq_lens.size and (seq_lens.min() < 0 or seq_lens.max() > bound):
        raise ValueError(f"seq_lens must be in [0, {bound}] ({what}), got "
                         f"{seq_lens.min()}..{seq_lens.max()}")
    buffers = {name: _check_buffer(array, name, problem)
               for name, array in buffers.items()}
    scales, granularity = _fp8.check_scales(
        kv_format, k_scale, v_scale, k_cache.shape, _scale_array)
    k_scale, v_scale = (
        _fp8.host_scale(scale, name, kind, granularity,
                        tuple(k_cache.shape[:-1]))
        for name, (scale, kind) in zip(("k_scale", "v_scale"), scales)) \
        if scales else (None, None)
    kv_options = _fp8.config_options(kv_format, granularity)
    if kv_format is not None:
        # ml_dtypes arrays travel as their bytes.
        k_cache, v_cache = k_cache.view(np.uint8), v_cache.view(np.uint8)
    # Host memory: checked like seq_lens (on the GPU the kernels clamp).
    query_lens = buffers.get("query_lens")
    if query_lens is not None and query_lens.size and (
            query_lens.min() < 0 or query_lens.max() > problem.query_len):
        raise ValueError(
            f"query_lens must be in [0, {problem.query_len}] (at most the "
            f"query tokens of q), got {query_lens.min()}..{query_lens.max()}")
    kernel = _cpu_kernel(problem, found, num_splits, scale, return_lse,
                         planner, window_left, logits_soft_cap,
                         _buffer_flags(buffers), kv_options,
                         _shard_options(kv_shard), top_k,
                         suffix_lens is not None)
    if kv_shard is not None:
        buffers["kv_shard_rank"] = np.array([kv_shard.rank], np.int32)
    if suffix_lens is not None:
        buffers["suffix_lens"] = suffix_lens
    out = np.empty(problem.out_shape(), q.dtype) if out is None else \
        _check_output(out, "out", problem.out_shape(), q.dtype)
    if shared_kv:
        v_cache, v_scale = None, None
    if return_lse:
        lse = np.empty(problem.lse_shape(), np.float32) if lse is None else \
            _check_output(lse, "lse", problem.lse_shape(), np.float32)
    if block_table is None:
        kernel.run(q, k_cache, v_cache, seq_lens, out, lse, problem.batch,
                   problem.max_len, k_scale=k_scale, v_scale=v_scale,
                   **buffers)
    else:
        kernel.run(q, k_cache, v_cache, seq_lens, out, lse, problem.batch,
                   problem.max_len, block_table, problem.num_pages,
                   problem.max_pages, k_scale=k_scale, v_scale=v_scale,
                   **buffers)
    # Results the caller gave back as given, new ones of q's kind.
    convert = _to_tensor if torch_q is not None else (lambda array: array)
    out = given_out if given_out is not None else convert(out)
    if return_lse:
        lse = given_lse if given_lse is not None else convert(lse)
    return (out, lse) if return_lse else out
