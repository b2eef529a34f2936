"""backend="cuda": decode_attention on device arrays on the GPU that holds
them, with kernels compiled for its compute capability and loaded once per
configuration and GPU."""

from . import _flashdecode as _native
from . import _fp8
from ._common import (_DTYPES, _buffer_flags, _is_torch, _shard_options,
                      _split_options)
from ._cuda_arrays import (_check_buffers, _check_cuda_inputs,
                           _check_cuda_scales, _check_device_lengths,
                           _check_lse, _check_out, _check_suffix_lens,
                           _common_device,
                           _device_info, _new_output, _shard_pointer,
                           _torch_stream, _value_pointer)


def _launch_scale(scale, kind, granularity, count):
    """A checked k_scale / v_scale (a float or a _CudaArray) as
    CudaLauncher.launch takes it: the array's address when the kernel reads
    it as it is, else a StagedScale: the float, or a per-tensor array beside
    a per-token one, broadcast to the ``count`` scales per token and KV
    head."""
    repeat = count if granularity == "token_head" else 1
    if isinstance(scale, float):
        return _native.StagedScale(value=scale, count=repeat)
    if kind == granularity:
        return scale.pointer
    return _native.StagedScale(source=scale.pointer, count=repeat)


def _decode_cuda(q, k_cache, v_cache, seq_lens, num_splits, scale, kv_layout,
                 return_lse, dtype, block_table, arch, out, lse, stream,
                 planner, window_left=0, logits_soft_cap=None, kv_dtype=None,
                 k_scale=None, v_scale=None, fused_merge=False,
                 check_lengths=False, v_head_dim=None, kv_shard=None,
                 top_k=0, suffix_lens=None, **buffers):
    """``buffers``: sinks, alibi_slopes, query_lens (None or device
    arrays). kv_dtype, k_scale, v_scale: fp8 caches (see _fp8). kv_shard: a
    checked _Shard or None. top_k: the block table's lists are top-k
    indices (_sparse.py) when > 0. suffix_lens: None, or a device int32
    [B] (_cascade.py): the caches, seq_lens and block table hold one
    shared prefix that each query sequence continues by its suffix; its
    length may then be an int >= 0, staged in device memory by the
    launch."""
    shared_prefix = suffix_lens is not None
    problem, arrays, kv_format = _check_cuda_inputs(
        q, k_cache, v_cache, seq_lens, block_table, kv_layout, dtype, kv_dtype,
        v_head_dim, shared_prefix)
    qa = arrays[0]
    staged_length = None
    if arrays[3] is None:
        staged_length = seq_lens
        if staged_length > problem.max_len:
            raise ValueError(f"prefix_len must be in [0, {problem.max_len}] "
                             f"(the prefix's capacity), got {staged_length}")
    splits, _ = _split_options(num_splits)
    if lse is not None and not return_lse:
        raise ValueError("lse is written only with return_lse=True")
    if stream is not None and (isinstance(stream, bool) or
                               not isinstance(stream, int) or stream < 0):
        raise TypeError(f"stream must be a CUstream handle (an int >= 0) or "
                        f"None, got {stream!r}")
    pointers = _check_buffers(buffers, problem, arrays)
    if shared_prefix:
        arrays.append(_check_suffix_lens(suffix_lens, problem))
        pointers["suffix_lens"] = arrays[-1].pointer
    flags = dict(_buffer_flags(buffers), fused_merge=fused_merge)
    scales, granularity, count = _check_cuda_scales(
        kv_format, k_scale, v_scale, arrays, problem)
    for name, (value, kind) in zip(("k_scale", "v_scale"), scales):
        pointers[name] = _launch_scale(value, kind, granularity, count)
    inputs = len(arrays)
    if out is not None:
        arrays.append(_check_out(out, qa, problem))
    if lse is not None:
        arrays.append(_check_lse(lse, problem))
    device = _common_device(arrays)
    target, sm_count = _device_info(device)
    if out is None:
        out, out_pointer = _new_output(q, problem.out_shape(), qa.dtype,
                                       device)
    else:
        out_pointer = arrays[inputs].pointer
    lse_pointer = 0
    if lse is not None:
        lse_pointer = arrays[-1].pointer
    elif return_lse:
        lse, lse_pointer = _new_output(q, problem.lse_shape(), "float32",
                                       device)
    # The native launcher plans an automatic split count for this batch and
    # cache length and keys its kernels by what it resolves to, so batches
    # that split alike share them.
    launcher = _native.cuda_launcher(_native.KernelRequest(
        problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
        problem.query_len, _DTYPES[qa.dtype], kv_layout, problem.page_size,
        splits, True, scale, return_lse, problem.batch, problem.max_len,
        sm_count, target if arch is None else arch, **planner,
        window_left=window_left, logits_soft_cap=logits_soft_cap, **flags,
        **_fp8.config_options(kv_format, granularity),
        v_head_dim=problem.value_head_dim, shared_kv=problem.shared_kv,
        **_shard_options(kv_shard), top_k=top_k,
        shared_prefix=shared_prefix), device)
    pointers["kv_shard_rank"] = _shard_pointer(kv_shard, device)
    if stream is None:
        stream = _torch_stream(device) if any(
            _is_torch(x) for x in (q, k_cache, v_cache, seq_lens)) else 0
    lengths = 0 if arrays[3] is None else arrays[3].pointer
    if check_lengths:
        _check_device_lengths(problem, lengths, pointers["query_lens"],
                              device, stream, kv_shard)
    launcher.launch(qa.pointer, arrays[1].pointer,
                    _value_pointer(problem, arrays), lengths, out_pointer,
                    lse_pointer,
                    arrays[4].pointer if block_table is not None else 0,
                    problem.num_pages if block_table is not None else 0,
                    problem.batch, problem.max_len, stream,
                    staged_seq_len=staged_length, **pointers)
    return (out, lse) if return_lse else out
