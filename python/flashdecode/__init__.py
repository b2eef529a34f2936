"""flashdecode: Flash-Decoding attention from Python.

    import numpy as np, flashdecode
    out = flashdecode.decode_attention(q, k_cache, v_cache, seq_lens)

``decode_attention`` runs the compiled CPU lowering on numpy arrays
(``backend="cpu"``) or the generated PTX on device arrays (``backend="cuda"``:
``DeviceArray``, PyTorch CUDA tensors, or anything with
``__cuda_array_interface__``), on the GPU that holds them, compiled for its
compute capability, with kernels loaded once per configuration and GPU.
``compile`` returns the PTX and manifest of a configuration, ``plan_splits``
the split count the compiler would choose, and ``Decoder`` binds fixed GPU
buffers for CUDA-graph decoding. ``merge_states`` (``merge_state``,
``merge_state_in_place``) merges attention states computed apart (their
outputs and lses) exactly.

Shapes: q ``[B, Hq, D]`` or ``[B, Lq, Hq, D]`` (query token t of Lq sits at
position ``p = len - Lq + t`` and sees keys ``j <= p``; with ``window_left=W``
only ``p - W < j <= p``); caches ``[B, Lmax, Hkv, D]`` (NHD) or
``[B, Hkv, Lmax, D]`` (HND); ``seq_lens`` int32 ``[B]``; attention sinks
(``sinks=``) and ALiBi slopes (``alibi_slopes=``) float32 ``[Hq]``;
per-sequence query lengths (``query_lens=``) int32 ``[B]``. The output has
q's shape and dtype; the lse is float32 ``[B, Hq]`` (``[B, Lq, Hq]``),
natural log.
bfloat16 numpy data is given as uint16 bit patterns with ``dtype="bfloat16"``.
FP8 KV caches (both backends): uint8 bit patterns with
``kv_dtype="float8_e4m3fn"`` or ``"float8_e5m2"`` (or ml_dtypes fp8 arrays)
and ``k_scale=`` / ``v_scale=``; ``quantize_kv`` makes them.
``kv_shard=(rank, world, interleave)`` decodes over one rank's share of a
cache sharded by token with global lengths and positions;
``flashdecode.distributed.context_parallel_decode`` merges the ranks over
torch.distributed.
Names (``dtype``, ``kv_dtype``, ``kv_scale``, ``kv_layout``) take any
spelling of docs/Compiling.md's table ("float16", "f16", "half"; "e4m3";
"token-head" ...), the tools' included.
``__version__`` is the compiler's (every manifest's ``compiler_version``);
``emulator_library()`` is fdemu's driver library, for ``FD_CUDA_DRIVER``.
"""

import json
import numbers

from . import _flashdecode as _native
from ._common import (_check_flag, _check_kv_shard, _check_page_size,
                      _check_scale, _check_soft_cap, _check_window,
                      _dtype_code, _planner_options, _split_options,
                      _kernel_problem, _check_v_head_dim)
from ._cpu import _decode_cpu
from ._fp8 import check_compile_options as _check_fp8_options
from ._fp8 import quantize_kv
from ._cuda import _decode_cuda
from ._decoder import Decoder
from . import _sparse
from ._cascade import cascade_decode
from ._cascade_decoder import CascadeDecoder
from ._merge import merge_state, merge_state_in_place, merge_states
from .device_array import DeviceArray
from ._installation import __version__, emulator_library
from ._spellings import spelled
from ._cuda_arrays import NotOnDeviceError

__all__ = ["compile", "plan_splits", "decode_attention", "mla_decode",
           "cascade_decode", "Kernel", "Decoder", "CascadeDecoder", "DeviceArray", "quantize_kv", "merge_states",
           "merge_state", "merge_state_in_place", "emulator_library",
           "NotOnDeviceError"]

CudaError = _native.CudaError


def _shard_config(world, interleave):
    """compile()'s and plan_splits()'s kv_shard_world (0: not sharded) and
    kv_shard_interleave, as ints (their ranges are the native rule's)."""
    for name, value in (("kv_shard_world", world),
                        ("kv_shard_interleave", interleave)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int, got {value!r}")
    return {"kv_shard_world": int(world),
            "kv_shard_interleave": int(interleave)}


def plan_splits(batch, num_kv_heads, max_len,
                sm_count=_native.DEFAULT_SM_COUNT, *, blocks_per_sm=None,
                min_chunk_length=None, max_splits=None, num_q_heads=None,
                head_dim=None, query_len=1, kv_dtype=None, fused_merge=False,
                dtype=None, page_size=None, window_left=None,
                logits_soft_cap=None, with_alibi=False, with_query_lens=False,
                arch=_native.DEFAULT_ARCH, v_head_dim=None, shared_kv=False,
                kv_shard_world=0, kv_shard_interleave=1, kv_scale=None):
    """Without num_q_heads and head_dim: the wave model alone, not compile().

    The split count fd-split-kv chooses for this problem (the same function):
    with the kernel's work given, what compile() plans for it.

    blocks_per_sm (4), min_chunk_length (128), max_splits (512): the
    planner's knobs (docs/SplitHeuristic.md); None keeps the default.
    num_q_heads and head_dim (both or neither), query_len and kv_dtype (the
    caches' dtype: "float16" by default, "bfloat16", "float32",
    "float8_e4m3fn", "float8_e5m2") and dtype (the queries': the caches'
    by default, float16 beside an fp8 cache) describe the kernel's work: the
    plan then paces its blocks as the kernel they get (tensor cores or CUDA
    cores) and adds the DRAM time of the cache and of the partials to the
    plan's cost, as fd-split-kv does for the op it rewrites; without them,
    the wave model alone. fused_merge (with them) plans for kernels
    compiled with fused_merge=True: their merge's serial tail grows with
    the split count (max_splits is not narrowed here: compile() keeps it
    within what the fused merge can merge). page_size, window_left,
    logits_soft_cap, with_alibi, with_query_lens and arch (with the work)
    are compile()'s: they choose the kernel's schedule (its row tiles, keys
    per step and launch bounds, fd/Planning/KernelPlan.h), and a window
    bounds the keys a sequence attends to, as for compile(). v_head_dim and
    shared_kv (with the work) are compile()'s too: the values' head dim
    (None: head_dim) and whether they are the key cache's first columns
    (MLA's latent cache: a token's bytes are read once); so are
    kv_shard_world and kv_shard_interleave (with the work): max_len is then
    one rank's cache, and a window attends to what one rank holds of it.
    kv_scale (with an fp8 kv_dtype) is compile()'s too: an fp8 cache's
    scales, "tensor" (None) or "token_head"; with bf16 queries it decides
    whether tensor cores multiply in f16, and so which kernel the heads get."""
    kv_dtype, dtype = spelled("kv_dtype", kv_dtype), spelled("dtype", dtype)
    work = _kernel_problem(num_kv_heads, num_q_heads, head_dim, query_len,
                           kv_dtype, fused_merge, dtype, v_head_dim,
                           shared_kv, kv_scale)
    window = _check_window(window_left)
    features = {"page_size": page_size, "window_left": window_left,
                "logits_soft_cap": logits_soft_cap, "with_alibi": with_alibi,
                "with_query_lens": with_query_lens,
                "kv_shard_world": kv_shard_world or None}
    if not work:
        given = [name for name, value in features.items()
                 if value not in (None, False)]
        if given:
            raise ValueError(f"{', '.join(given)} describe the kernel's "
                             f"work: pass num_q_heads and head_dim with them")
        return _native.plan_splits(
            batch, num_kv_heads, max_len, sm_count,
            **_planner_options(blocks_per_sm, min_chunk_length, max_splits))
    for name in ("with_alibi", "with_query_lens"):
        _check_flag(name, features[name])
    if isinstance(max_len, numbers.Integral) and max_len >= 0:
        max_len = _native.attended_length(
            max_len, work["query_len"], window,
            **_shard_config(kv_shard_world, kv_shard_interleave))
    return _native.plan_splits(
        batch, num_kv_heads, max_len, sm_count,
        **_planner_options(blocks_per_sm, min_chunk_length, max_splits),
        **work, paged=_check_page_size(page_size) > 0, window=window > 0,
        soft_cap=_check_soft_cap(logits_soft_cap) is not None,
        alibi=with_alibi, query_lens=with_query_lens, arch=arch)


class Kernel:
    """Compiled GPU kernels: ``ptx`` (name -> text), ``manifest`` (dict),
    ``num_splits``."""

    def __init__(self, ptx, manifest, num_splits):
        self.ptx = dict(ptx)
        self.manifest = json.loads(manifest)
        self.num_splits = num_splits

    def __repr__(self):
        config = self.manifest["config"]
        kv = "" if config.get("kv_scale", "none") == "none" else \
            f"kv_dtype={config['kv_dtype']}, kv_scale={config['kv_scale']}, "
        return (f"Kernel(head_dim={config['head_dim']}, "
                f"num_q_heads={config['num_q_heads']}, "
                f"num_kv_heads={config['num_kv_heads']}, "
                f"dtype={config['dtype']}, {kv}num_splits={self.num_splits})")


def compile(head_dim, num_q_heads, num_kv_heads, dtype="float16",
            num_splits="auto", kv_layout="NHD", arch=_native.DEFAULT_ARCH,
            batch=1, max_len=4096, *, query_len=1, scale=None,
            return_lse=False, sm_count=_native.DEFAULT_SM_COUNT,
            blocks_per_sm=None, min_chunk_length=None,
            max_splits=None, window_left=None, logits_soft_cap=None,
            with_sinks=False, with_alibi=False, with_query_lens=False,
            kv_dtype=None, kv_scale=None, fused_merge=False, page_size=None,
            schedule=None, v_head_dim=None, shared_kv=False,
            kv_shard_world=0, kv_shard_interleave=1, top_k=0):
    """Compiles the GPU kernels of one configuration (through the JIT cache).

    No device is involved, so ``arch`` and ``sm_count`` default to an H200's;
    decode_attention(backend="cuda") and Decoder ask the GPU instead.
    blocks_per_sm, min_chunk_length, max_splits: the split planner's knobs
    for num_splits="auto" (see plan_splits); None keeps the default.
    window_left, logits_soft_cap: as for decode_attention. with_sinks=True
    compiles for attention sinks (decode_attention's ``sinks``): the merge
    kernel takes a "sinks" parameter and manifest["config"]["with_sinks"]
    is true. with_alibi=True compiles for ALiBi (decode_attention's
    ``alibi_slopes``): the partial kernel takes an "alibi_slopes" parameter
    and manifest["config"]["with_alibi"] is true. with_query_lens=True
    compiles for per-sequence query lengths (decode_attention's
    ``query_lens``): both kernels take a "query_lens" parameter (their
    last, but for the scales of fp8 caches and a fused merge's parameters)
    and
    manifest["config"]["with_query_lens"] is true.
    kv_dtype="float8_e4m3fn" or "float8_e5m2" compiles for fp8 caches
    (decode_attention's kv_dtype): the partial kernel takes "k_scale" and
    "v_scale" (its last, but for a fused merge's) and
    manifest["config"]["kv_dtype"] is
    "e4m3" or "e5m2"; kv_scale (with kv_dtype only) is what one scale
    covers, "tensor" (the default: [1]) or "token_head" (the caches' shape
    without D), manifest["config"]["kv_scale"] "tensor" or "token-head".
    fused_merge=True merges in the partial kernel (the last block of each
    sequence and KV head to finish), with no merge kernel: after all its
    other parameters the kernel takes the merge's "output" ("lse" and
    "sinks" when compiled with them) and a "merge_counters" parameter
    (int32 [batch, num_kv_heads], zeroed once, left zero by every launch)
    and manifest["config"]["fused_merge"] is true.
    page_size=N (a power of two from 1 to 256) compiles for paged caches
    of N positions a page (decode_attention's block_table): the partial
    kernel takes "block_table" and "num_pages" after "max_len", and
    manifest["config"]["page_size"] is N; None (the default) is dense.
    schedule="form = tensor_cores, rows_per_tile = 8, row_tiles = 2,
    threads = 128, ..." builds the partial kernel to that schedule instead
    of the planner's (fd-compile --schedule's text, #fd.schedule's fields:
    docs/KernelABI.md, "Schedules"); one that is malformed or cannot work
    is a ValueError naming the field. manifest["schedule"] is the kernel's
    (the planner's, or this one). v_head_dim=N compiles for values (and
    outputs) of N elements (None: head_dim), shared_kv=True for values read
    from the key cache's first v_head_dim columns (MLA's latent cache): the
    partial kernel then takes no "value_cache" (nor "v_scale"), and
    manifest["config"] has "v_head_dim" and "shared_kv".
    kv_shard_world=N (kv_shard_interleave=I) compiles for a cache sharded by
    token over N ranks, I tokens at a time (decode_attention's kv_shard):
    the lengths are global, the partial kernel takes "kv_shard_rank" (int32
    [1], its last but for a fused merge's) and manifest["config"] has
    "kv_shard_world" and "kv_shard_interleave"; 0 (the default) is not
    sharded. top_k=K compiles top-k sparse decode (decode_attention's
    indices): the caches read as pages of one position (page_size 1, the
    default then), the "block_table" the lists [B, K] whose negative
    entries are skipped; manifest["config"]["top_k"] is K."""
    dtype, kv_dtype = spelled("dtype", dtype), spelled("kv_dtype", kv_dtype)
    kv_scale = spelled("kv_scale", kv_scale)
    kv_layout = spelled("kv_layout", kv_layout)
    if schedule is not None and not isinstance(schedule, str):
        raise TypeError("schedule must be a string (#fd.schedule's fields) "
                        f"or None, got {type(schedule).__name__}")
    splits, split_kv = _split_options(num_splits)
    window_left = _check_window(window_left)
    logits_soft_cap = _check_soft_cap(logits_soft_cap)
    flags = {name: _check_flag(name, value) for name, value in (
        ("with_sinks", with_sinks), ("with_alibi", with_alibi),
        ("with_query_lens", with_query_lens), ("fused_merge", fused_merge))}
    kv_options = _check_fp8_options(kv_dtype, kv_scale)
    _check_v_head_dim(v_head_dim)
    shared_kv = _check_flag("shared_kv", shared_kv)
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an int, got {top_k!r}")
    if top_k and page_size is None:
        page_size = 1
    ptx, manifest, chosen = _native.compile(_native.KernelRequest(
        head_dim, num_q_heads, num_kv_heads, query_len, _dtype_code(dtype),
        kv_layout, _check_page_size(page_size), splits, split_kv, scale,
        return_lse, batch, max_len, sm_count, arch,
        **_planner_options(blocks_per_sm, min_chunk_length, max_splits),
        window_left=window_left, logits_soft_cap=logits_soft_cap, **flags,
        **kv_options, schedule=schedule, v_head_dim=v_head_dim or 0,
        shared_kv=shared_kv,
        **_shard_config(kv_shard_world, kv_shard_interleave), top_k=top_k))
    return Kernel(ptx, manifest, chosen)


def decode_attention(q, k_cache, v_cache, seq_lens, *, num_splits=None,
                     scale=None, kv_layout="NHD", return_lse=False,
                     backend="cpu", dtype=None, block_table=None, arch=None,
                     out=None, lse=None, stream=None, blocks_per_sm=None,
                     min_chunk_length=None, max_splits=None, window_left=None,
                     logits_soft_cap=None, sinks=None, alibi_slopes=None,
                     query_lens=None, kv_dtype=None, k_scale=None,
                     v_scale=None, fused_merge=False, check_lengths=False,
                     v_head_dim=None, kv_shard=None, indices=None,
                     topk_length=None):
    """softmax(scale * q k^T) v over each sequence's first seq_lens[b] keys.

    v_head_dim: None (the values' head dim is q's) or D_v: v_cache is then
    k_cache's shape with D_v last and out [B, (Lq,) Hq, D_v]; with v_cache
    None (v_head_dim required: None there is a ValueError, never a guess)
    the values are the first D_v columns of each k_cache row (MLA's latent
    cache, see mla_decode), scaled by k_scale (v_scale must be None). Key
    head dims up to 576 and D_v up to 512 run on backend="cpu"; the GPU
    kernels take one head dim in [32, 256] with a v_cache (ValueError
    otherwise).

    seq_lens: int32 [B], each in [0, max_len] (max_len: the caches' length,
    or max_pages * page_size when paged). backend="cpu" raises ValueError
    for a length outside; on the GPU, where lengths live in device memory
    and may change between calls and replays, the kernels clamp each into
    [0, max_len] and report nothing (a bookkeeping bug then reads the whole
    cache or none of it), unless check_lengths=True: the call then reads
    seq_lens (and query_lens) back before launching, once the stream's
    queued work is done (a synchronization), and raises ValueError naming
    the first entry outside. The CPU backend always checks.
    num_splits: None/"auto" (the planner's choice) or a positive count of
    at most max_splits; blocks_per_sm, min_chunk_length, max_splits: the
    planner's knobs (see plan_splits; None keeps the default).
    block_table: int32 [B, max_pages]; when given, the caches are page pools
    [num_pages, page_size, Hkv, D] (NHD) or [num_pages, Hkv, page_size, D]
    (HND) and position j of sequence b is slot j % page_size of page
    block_table[b, j // page_size]. The CPU backend checks every entry
    (ValueError); on the GPU an entry outside [0, num_pages) reads the
    pool's first or last page (clamped, never memory outside the pool; not
    reported, to stay asynchronous).
    scale: default 1/sqrt(D). Returns out, or (out, lse) with return_lse.
    window_left: None (no window) or W >= 1, a sliding window: the query at
    position p sees keys p - W < j <= p (FlashAttention's window_size=(W-1,
    0)); automatic splits are planned for the min(len, W + Lq - 1) keys a
    sequence attends to. logits_soft_cap: None (off) or c > 0: each scaled
    score x becomes c * tanh(x / c) before the softmax. A row that sees no
    key (a length 0 sequence, or with Lq > 1 a token before the first key)
    is zeros, its lse -inf.
    sinks: None, or attention sinks (gpt-oss): float32 [Hq], one logit per
    query head, beside the scores after scale and soft-cap (the sinks
    themselves are neither scaled nor capped); a numpy
    array for backend="cpu", a device array on the arrays' GPU for
    backend="cuda" (read by the kernels, so it may change between calls).
    Row softmax(s) over scores s_j becomes exp(s_j) / (exp(sinks[h]) +
    sum_j exp(s_j)): a key whose value is zero. The lse includes it; a row
    that sees no key is zeros with lse = sinks[h]. With split-KV it counts
    once, in the merge, whatever num_splits is.
    alibi_slopes: None, or ALiBi (BLOOM, MPT): float32 [Hq], one slope m_h
    per query head (e.g. 2 ** (-8 * (h + 1) / Hq)); the score of query
    head h at position p for key j gains m_h * (j - p) (<= 0 for the keys
    it sees), after scale and soft-cap, before the softmax
    (FlashAttention's order). A numpy array for backend="cpu", a device
    array on the arrays' GPU for backend="cuda" (read by the kernels, so
    it may change between calls).
    query_lens: None (every sequence has Lq query tokens), or per-sequence
    query lengths (speculative decoding, where the drafts of a batch differ
    in length): int32 [B]; sequence b has n = query_lens[b] query tokens,
    in [0, Lq]: backend="cpu" raises ValueError for a value outside; on
    the GPU, where they live in device memory and may change between
    calls, the kernels clamp them into [0, Lq]. They are
    its last n tokens, in rows t < n of q, out and lse: token t sits at
    position p = seq_lens[b] - n + t, which the causal rule, the window and
    ALiBi use. Rows t >= n are padding, not queries: their output is zeros
    and their lse -inf, sinks or not; a sequence with n = 0 reads no key.
    Meant for q [B, Lq, Hq, D]; with q [B, Hq, D] (Lq = 1) n is 0 or 1. A
    C-contiguous numpy array for backend="cpu", a device array on the
    arrays' GPU for backend="cuda" (read by both kernels at each launch).
    kv_dtype, k_scale, v_scale: fp8 caches (both backends). The caches are
    uint8 bit patterns with kv_dtype "float8_e4m3fn" or "float8_e5m2", or
    fp8 arrays (ml_dtypes float8_e4m3fn / float8_e5m2 numpy arrays,
    DeviceArrays of those dtypes, PyTorch float8_e4m3fn / float8_e5m2
    tensors; kv_dtype None or the same); q stays float16, bfloat16 or
    float32 (an fp8 or uint8 q is a ValueError). Element x of a cache
    stands for x * scale: k_scale and v_scale are each a float or a float32
    array (numpy for backend="cpu", a device array on the arrays' GPU,
    4-byte aligned, for backend="cuda") of shape (1,) (per tensor) or the
    caches' shape without D (per token and KV head: [B, Lmax, Hkv], [B,
    Hkv, Lmax], or the page pools'); the kernel is compiled for the
    granularity the shapes say, and a per-tensor scale beside a per-token
    one is broadcast. quantize_kv makes them. On backend="cpu" every scale
    must be finite (ValueError); on the GPU, where device arrays are not
    read by the host, only a float is checked. backend="cuda" reads device
    scales at each launch; a float (or a broadcast per-tensor array) is
    written into a buffer of the GPU and stream before the launch, in
    stream order (a few small copies: a device array saves them).
    fused_merge: True or False (ValueError otherwise), compile()'s: with
    True the GPU's partial kernel also merges (one launch, no merge
    kernel; the counters it needs are zeroed buffers of the GPU and
    stream, or a Decoder's own). It only changes the GPU kernels, not
    the results (to rounding); backend="cpu", which has no merge kernel,
    checks it and computes the same.
    kv_shard: None, or (rank, world, interleave) ints: the caches hold one
    rank's share of each sequence (decode context parallelism): global
    token j lives on rank (j // interleave) % world, in order, so local
    slot i holds global token ((i // interleave) * world + rank) *
    interleave + i % interleave (flashdecode.distributed.shard_cache makes
    a shard). seq_lens are then the global lengths (at most world *
    interleave * (max_len // interleave) + max_len % interleave), the
    causal rule, the window and ALiBi use global positions, and a row that
    sees no key of this rank is zeros with lse -inf: merging the ranks'
    (out, lse) with merge_states gives the attention over the whole cache
    (flashdecode.distributed.context_parallel_decode does it over
    torch.distributed). sinks would count once per rank: a ValueError (join
    them in the merge as one more state). The kernel reads the rank from
    device memory, so one compiled kernel serves every rank.

    backend="cuda" (device arrays, all on one GPU, which decides the
    context): the kernels are compiled for that GPU's compute capability
    (``arch`` names a target instead, e.g. "sm_80") and loaded once per
    configuration and GPU; a call checks its arguments, binds them and
    launches on ``stream`` (a CUstream handle; default PyTorch's current
    stream for tensors, else the legacy default stream, which DeviceArray
    copies wait for) without synchronizing. ``out`` (and ``lse``, with
    return_lse) are written instead of new arrays, on either backend (numpy
    arrays or CPU tensors on the CPU, C-contiguous, of the output's shape
    and dtype and float32). backend="cpu" takes CPU torch tensors as well
    as numpy arrays (bfloat16 tensors as bfloat16) and returns tensors for
    tensors. The split workspace is
    one per GPU and stream, grown (after that stream's queued work) to the
    largest batch seen; it may move, so capture a Decoder, not this
    function, into a CUDA graph. Every pointer must be 16-byte aligned
    (seq_lens, sinks, alibi_slopes and query_lens: 4).

    Raises ValueError/TypeError naming the bad argument, RuntimeError for a
    missing GPU or driver or a kernel the GPU rejects.
    """
    dtype, kv_dtype = spelled("dtype", dtype), spelled("kv_dtype", kv_dtype)
    kv_layout = spelled("kv_layout", kv_layout)
    if dtype is not None:
        _dtype_code(dtype)
    scale = _check_scale(scale)
    masking = {"window_left": _check_window(window_left),
               "logits_soft_cap": _check_soft_cap(logits_soft_cap),
               "sinks": sinks, "alibi_slopes": alibi_slopes,
               "query_lens": query_lens}
    fp8 = {"kv_dtype": kv_dtype, "k_scale": k_scale, "v_scale": v_scale}
    planner = _planner_options(blocks_per_sm, min_chunk_length, max_splits)
    fused_merge = _check_flag("fused_merge", fused_merge)
    check_lengths = _check_flag("check_lengths", check_lengths)
    kv_shard = _check_kv_shard(kv_shard)
    sparse = None
    if indices is not None:
        sparse = _sparse.SparseCall(
            q, k_cache, v_cache, seq_lens, indices, topk_length, kv_layout,
            k_scale, v_scale, out, lse, block_table=block_table,
            window_left=window_left, alibi_slopes=alibi_slopes,
            query_lens=query_lens, kv_shard=kv_shard)
        q, k_cache, v_cache = sparse.q, sparse.k_cache, sparse.v_cache
        seq_lens, block_table = sparse.seq_lens, sparse.block_table
        fp8["k_scale"], fp8["v_scale"] = sparse.k_scale, sparse.v_scale
        out, lse = sparse.out, sparse.lse
    elif topk_length is not None:
        raise ValueError("topk_length bounds the lists of indices: give "
                         "indices with it")
    top_k = 0 if sparse is None else sparse.top_k
    if backend == "cpu":
        for name, value in (("arch", arch), ("stream", stream)):
            if value is not None:
                raise ValueError(f"{name} is for backend='cuda'")
        result = _decode_cpu(q, k_cache, v_cache, seq_lens, num_splits,
                             scale, kv_layout, return_lse, dtype,
                             block_table, planner, **masking, **fp8,
                             v_head_dim=v_head_dim, out=out, lse=lse,
                             kv_shard=kv_shard, top_k=top_k)
    elif backend == "cuda":
        result = _decode_cuda(q, k_cache, v_cache, seq_lens, num_splits,
                              scale, kv_layout, return_lse, dtype,
                              block_table, arch, out, lse, stream, planner,
                              **masking, **fp8, fused_merge=fused_merge,
                              check_lengths=check_lengths,
                              v_head_dim=v_head_dim, kv_shard=kv_shard,
                              top_k=top_k)
    else:
        raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    return result if sparse is None else sparse.restore(result, return_lse)


def mla_decode(q, kv_cache, seq_lens, *, block_table=None, head_dim_v=512,
               scale=None, return_lse=False, backend="cpu", query_lens=None,
               kv_dtype=None, k_scale=None, num_splits=None, dtype=None,
               kv_shard=None, indices=None, topk_length=None):
    """Absorbed multi-head latent attention decode (DeepSeek-V3/R1/V3.2,
    Kimi K2): every query head attends over one shared latent cache.

    q: [B, Hq, D] or [B, Lq, Hq, D] (D = 576: 512 latent + 64 rope);
    kv_cache: [B, Lmax, 1, D] or, with block_table [B, max_pages], pages
    [num_pages, page_size, 1, D]; the value of a token is the first
    head_dim_v columns of its cache row (read once, no value cache).
    Returns out [B, (Lq,) Hq, head_dim_v], or (out, lse) with return_lse
    (lse [B, (Lq,) Hq] float32, natural log). scale: the softmax scale,
    default 1/sqrt(D); DeepSeek's is 1/sqrt(192) times its YaRN factor, so
    pass it. query_lens (multi-token prediction), kv_dtype and k_scale (fp8
    latent caches, k_scale scaling keys and values alike), num_splits,
    kv_shard (a latent cache sharded by token over ranks: decode context
    parallelism), indices and topk_length (top-k sparse decode over the
    latent cache: DeepSeek V3.2; seq_lens None) and dtype ("bfloat16" for
    uint16 bit patterns) are decode_attention's, as
    is backend ("cpu" or "cuda"; Decoder(q, kv_cache, None, seq_lens, out,
    v_head_dim=head_dim_v) captures it for graph replays). ValueError names
    the argument: a kv_cache of more than one KV head, head_dim_v over the
    cache's head dim, q's head dim not the cache's."""
    shape = getattr(kv_cache, "shape", None)
    if shape is None or len(shape) != 4:
        raise ValueError(f"kv_cache must be [B, Lmax, 1, D] or pages "
                         f"[num_pages, page_size, 1, D], got "
                         f"{None if shape is None else tuple(shape)}")
    if shape[2] != 1:
        raise ValueError(f"kv_cache must hold one latent KV head (its third "
                         f"dimension), got {shape[2]}")
    if isinstance(head_dim_v, bool) or not isinstance(head_dim_v, int):
        raise TypeError(f"head_dim_v must be an int, got {head_dim_v!r}")
    if head_dim_v > shape[3]:
        raise ValueError(f"head_dim_v {head_dim_v} must be at most kv_cache's "
                         f"head dim {shape[3]}: the values are its first "
                         f"head_dim_v columns")
    q_dim = getattr(q, "shape", (None,))[-1]
    if q_dim != shape[3]:
        raise ValueError(f"q's head dim {q_dim} must equal kv_cache's "
                         f"{shape[3]} (queries absorbed into the latent "
                         f"space, rope columns included)")
    return decode_attention(q, kv_cache, None, seq_lens, num_splits=num_splits,
                            scale=scale, return_lse=return_lse,
                            backend=backend, block_table=block_table,
                            query_lens=query_lens, kv_dtype=kv_dtype,
                            k_scale=k_scale, v_head_dim=head_dim_v,
                            dtype=dtype, kv_shard=kv_shard, indices=indices,
                            topk_length=topk_length)
