"""Decoder: fixed GPU buffers bound once, for CUDA-graph decoding."""

from . import _flashdecode as _native
from . import _fp8
from . import _sparse
from ._common import (_DTYPES, _buffer_flags, _check_flag, _check_kv_shard,
                      _check_scale, _check_soft_cap, _check_window, _is_torch,
                      _planner_options, _shard_options, _split_options)
from ._cuda_arrays import (_CudaArray, _check_buffers, _check_cuda_inputs,
                           _check_cuda_scales, _check_device_lengths,
                           _check_lse, _check_out, _check_suffix_lens,
                           _checks_for, _common_device, _device_info,
                           _shard_pointer, _torch_stream, _value_pointer)
from ._spellings import spelled
from .device_array import DeviceArray


class Decoder:
    """Fixed GPU buffers bound once, for CUDA-graph decoding.

        decoder = Decoder(q, k_cache, v_cache, seq_lens, out)
        decoder.capture()        # records partial + merge once
        ...                      # write new lengths into seq_lens in place
        decoder.replay()         # one launch, no re-capture

    ``seq_lens`` (int32 ``[B]``) and ``query_lens`` are read by the kernels
    at every run() and replay(), which clamp each length into ``[0,
    max_len]`` (``[0, Lq]`` for query lengths) and report nothing: check
    them where they are written, or pass ``check_lengths=True``: run() and
    replay() then read them back first (waiting for the stream's queued
    work: a synchronization per step) and raise a ValueError naming the
    first entry outside, launching nothing.

    The Decoder keeps its arrays (DeviceArray, PyTorch CUDA tensors,
    __cuda_array_interface__ objects) alive; they must keep their addresses,
    so rebinding means a new Decoder. All must be on one GPU (``device``),
    which decides the context; the kernels are compiled for its compute
    capability (``arch``, e.g. "sm_80" on an A100) unless ``arch=`` names a
    target. ``stream`` is a CUstream handle (int); the default is PyTorch's
    current stream for tensors, else a stream the Decoder owns
    (DeviceArray.numpy() and copy_from_numpy() wait for it). Deleting the
    Decoder waits for the streams it launched on. ``blocks_per_sm``,
    ``min_chunk_length`` and ``max_splits`` are the split planner's knobs
    (see plan_splits; None keeps the default); ``window_left``,
    ``logits_soft_cap`` and ``fused_merge`` (one kernel, merge counters
    the plan owns) are decode_attention's. ``sinks`` (attention
    sinks: a float32 ``[Hq]`` device array on the same GPU, one logit per
    query head) is bound like every buffer: its contents are read at each
    run() and replay(), so new values written in place need no re-capture.
    ``alibi_slopes`` (ALiBi: a float32 ``[Hq]`` device array, one slope per
    query head) likewise: the partial kernel reads it at every launch.
    ``query_lens`` (per-sequence query lengths: an int32 ``[B]`` device
    array, decode_attention's) likewise: both kernels read it at every
    launch, so a replay may have another number of real query tokens per
    sequence (values outside ``[0, Lq]`` are clamped).
    ``kv_dtype``, ``k_scale`` and ``v_scale``: fp8 caches, as for
    decode_attention; device-array scales are bound like every buffer
    (read at each run() and replay(), so new scales written in place need
    no re-capture), a float is copied to device memory the Decoder owns.
    A per-tensor scale beside a per-token one must be a float (broadcast
    once): a per-tensor device array there is a ValueError.
    ``v_head_dim``: as for decode_attention. ``v_cache=None`` with
    ``v_head_dim`` decodes over MLA's latent cache (its first v_head_dim
    columns are the values, scaled by ``k_scale``; ``v_scale`` must be
    None); ``out`` is ``[B, (Lq,) Hq, v_head_dim]``.
    ``kv_shard=(rank, world, interleave)``: the caches are one rank's share
    of a cache sharded by token, ``seq_lens`` global lengths (as for
    decode_attention); the rank lives in device memory the process keeps,
    so the Decoders of every rank share one compiled kernel, and
    ``check_lengths`` bounds the lengths by what the shards hold.
    ``indices`` (and ``topk_length``): top-k sparse decode, as for
    decode_attention (``seq_lens`` None): the lists and their lengths are
    read at every run() and replay(), so new lists written in place need no
    re-capture (a ``topk_length`` of None is K's the Decoder owns).
    """

    @_checks_for("a Decoder")
    def __init__(self, q, k_cache, v_cache, seq_lens, out, lse=None, *,
                 num_splits=None, scale=None, kv_layout="NHD",
                 block_table=None, arch=None, blocks_per_sm=None,
                 min_chunk_length=None, max_splits=None, window_left=None,
                 logits_soft_cap=None, sinks=None, alibi_slopes=None,
                 query_lens=None, kv_dtype=None, k_scale=None, v_scale=None,
                 fused_merge=False, check_lengths=False, v_head_dim=None,
                 kv_shard=None, indices=None, topk_length=None,
                 _suffix_lens=None):
        # _suffix_lens (CascadeDecoder's prefix pass): the caches hold one
        # shared prefix, seq_lens ([1]) its length, that each query
        # sequence continues by its entry of this int32 [B] device array.
        kv_dtype = spelled("kv_dtype", kv_dtype)
        kv_layout = spelled("kv_layout", kv_layout)
        fused_merge = _check_flag("fused_merge", fused_merge)
        kv_shard = _check_kv_shard(kv_shard)
        top_k = 0
        if indices is not None:
            # The paged call it is (_sparse.py), bound to views of the
            # given arrays.
            sparse = _sparse.SparseCall(
                q, k_cache, v_cache, seq_lens, indices, topk_length,
                kv_layout, k_scale, v_scale, out, lse,
                block_table=block_table, window_left=window_left,
                alibi_slopes=alibi_slopes, query_lens=query_lens,
                kv_shard=kv_shard)
            q, k_cache, v_cache = sparse.q, sparse.k_cache, sparse.v_cache
            seq_lens, block_table = sparse.seq_lens, sparse.block_table
            k_scale, v_scale = sparse.k_scale, sparse.v_scale
            out, lse, top_k = sparse.out, sparse.lse, sparse.top_k
        elif topk_length is not None:
            raise ValueError("topk_length bounds the lists of indices: give "
                             "indices with it")
        self.check_lengths = _check_flag("check_lengths", check_lengths)
        window_left = _check_window(window_left)
        logits_soft_cap = _check_soft_cap(logits_soft_cap)
        shared_prefix = _suffix_lens is not None
        problem, arrays, kv_format = _check_cuda_inputs(
            q, k_cache, v_cache, seq_lens, block_table, kv_layout, None,
            kv_dtype, v_head_dim, shared_prefix)
        qa, ka, _, la = arrays[:4]
        table = arrays[4].pointer if block_table is not None else 0
        oa = _check_out(out, qa, problem)
        arrays.append(oa)
        lse_pointer = 0
        if lse is not None:
            arrays.append(_check_lse(lse, problem))
            lse_pointer = arrays[-1].pointer
        buffers = {"sinks": sinks, "alibi_slopes": alibi_slopes,
                   "query_lens": query_lens}
        pointers = _check_buffers(buffers, problem, arrays)
        if shared_prefix:
            arrays.append(_check_suffix_lens(_suffix_lens, problem))
            pointers["suffix_lens"] = arrays[-1].pointer
        scales, granularity, _ = _check_cuda_scales(
            kv_format, k_scale, v_scale, arrays, problem)
        for name, (value, kind) in zip(("k_scale", "v_scale"), scales):
            if isinstance(value, _CudaArray) and kind != granularity:
                raise ValueError(
                    f"{name} is a per-tensor device array beside a per-token "
                    "scale: a Decoder reads device scales as they are at "
                    "every replay, so give it per token and KV head "
                    f"{tuple(ka.shape[:-1])} too, or as a float")
        splits, split_kv = _split_options(num_splits)
        self.device = _common_device(arrays)
        target, sm_count = _device_info(self.device)
        # Floats become device arrays the Decoder owns (broadcast to the
        # per-token shape beside a per-token scale).
        owned = []
        for name, (value, kind) in zip(("k_scale", "v_scale"), scales):
            if isinstance(value, float):
                owned.append(DeviceArray.from_numpy(
                    _fp8.host_scale(value, name, kind, granularity,
                                    tuple(ka.shape[:-1])),
                    device=self.device))
                pointers[name] = owned[-1]._address
            else:
                pointers[name] = value.pointer
        self._keep_alive = (q, k_cache, v_cache, seq_lens, out, lse,
                            block_table, sinks, alibi_slopes, query_lens,
                            k_scale, v_scale, owned, _suffix_lens)
        # PyTorch tensors run on PyTorch's current stream; other arrays on
        # the plan's own stream (never the legacy one, which cannot be
        # captured, nor a PyTorch stream of another driver).
        self._torch_stream = any(_is_torch(x) for x in self._keep_alive)
        # The request's batch and max_len are the buffers' sizes.
        request = _native.KernelRequest(
            problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
            problem.query_len, _DTYPES[qa.dtype], kv_layout,
            problem.page_size, splits, split_kv, _check_scale(scale),
            lse is not None, problem.batch, problem.max_len, sm_count,
            target if arch is None else arch,
            **_planner_options(blocks_per_sm, min_chunk_length, max_splits),
            window_left=window_left, logits_soft_cap=logits_soft_cap,
            **_buffer_flags(buffers), fused_merge=fused_merge,
            **_fp8.config_options(kv_format, granularity),
            v_head_dim=problem.value_head_dim, shared_kv=problem.shared_kv,
            **_shard_options(kv_shard), top_k=top_k,
            shared_prefix=shared_prefix)
        pointers["kv_shard_rank"] = _shard_pointer(kv_shard, self.device)
        self._plan = _native.CudaPlan(
            request, self.device, qa.pointer, ka.pointer,
            _value_pointer(problem, arrays),
            la.pointer, oa.pointer, lse_pointer, table,
            problem.num_pages if block_table is not None else 0,
            **pointers)
        self.num_splits = self._plan.num_splits
        self.arch = self._plan.arch
        self._problem = problem
        self._kv_shard = kv_shard
        self._lengths = (la.pointer, pointers["query_lens"])

    def _stream(self, stream):
        """The stream handle to use; None is the plan's own stream."""
        if stream is None and self._torch_stream:
            return _torch_stream(self.device)
        return stream

    def _check_lengths(self, stream):
        if self.check_lengths:
            _check_device_lengths(self._problem, *self._lengths, self.device,
                                  stream, self._kv_shard)

    def run(self, stream=None):
        """One decode step on ``stream`` (see the class docstring)."""
        stream = self._stream(stream)
        self._check_lengths(stream)
        self._plan.launch(stream)

    def capture(self, stream=None):
        """Records the step into a CUDA graph (lengths are not read: a
        capture only records; replay() checks them)."""
        self._plan.capture(self._stream(stream))

    def replay(self, stream=None):
        """Launches the graph capture() recorded."""
        stream = self._stream(stream)
        self._check_lengths(stream)
        self._plan.replay(stream)
