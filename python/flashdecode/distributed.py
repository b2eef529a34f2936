"""Decode context parallelism over torch.distributed: one KV cache sharded
by token over the ranks of a process group, each rank's attention over its
shard merged exactly by log-sum-exp (``merge_states``).

Token j of a sequence lives on rank ``(j // I) % world``, ``I`` the
interleave (vLLM's ``cp_kv_cache_interleave_size``), in order: local slot i
of rank r is global token ``((i // I) * world + r) * I + i % I``
(``shard_cache`` builds a rank's shard of a whole cache). The collectives
are torch's: NCCL for CUDA tensors, gloo for CPU ones. torch is imported
when a function here is called, so ``import flashdecode`` (and this module)
works without it."""

import numpy as np

from ._common import _check_shard
from ._merge import merge_states

_HEADS = ("all", "scatter")


def _torch():
    try:
        import torch
        import torch.distributed
    except ImportError as error:
        raise ImportError(
            "flashdecode.distributed needs PyTorch with torch.distributed "
            "(Debian: apt-get install python3-torch; or pip install torch)"
        ) from error
    return torch


def shard_length(seq_lens, rank, world, interleave=1):
    """The tokens rank ``rank`` of ``world`` holds of sequences of global
    lengths ``seq_lens`` (int32 [B], numpy or torch; the result likewise):
    the global tokens j < len with (j // interleave) % world == rank."""
    _check_shard(rank, world, interleave)
    blocks = seq_lens // interleave
    partial = seq_lens - blocks * interleave
    rounds, extra = blocks // world, blocks % world
    local = rounds * interleave + (extra > rank) * interleave + \
        (extra == rank) * partial
    return local.astype(np.int32) if isinstance(local, np.ndarray) else \
        local.to(seq_lens.dtype)


def shard_cache(cache, rank, world, interleave=1, axis=1):
    """Rank ``rank``'s shard of a whole cache (numpy or torch; positions
    along ``axis``, 1 for NHD [B, L, Hkv, D], 2 for HND): its global tokens
    in order, ceil(L / (world * interleave)) * interleave positions (the
    last ones past the cache are zeros)."""
    _check_shard(rank, world, interleave)
    length = cache.shape[axis]
    span = world * interleave
    positions = -(-length // span) * interleave
    local = np.arange(positions)
    global_ = ((local // interleave) * world + rank) * interleave + \
        local % interleave
    inside = global_ < length
    shape = list(cache.shape)
    shape[axis] = positions
    if isinstance(cache, np.ndarray):
        shard = np.zeros(shape, cache.dtype)
        index = [slice(None)] * cache.ndim
        index[axis] = local[inside]
        source = [slice(None)] * cache.ndim
        source[axis] = global_[inside]
        shard[tuple(index)] = cache[tuple(source)]
        return shard
    torch = _torch()
    shard = torch.zeros(shape, dtype=cache.dtype, device=cache.device)
    picked = torch.from_numpy(global_[inside]).to(cache.device)
    shard.narrow(axis, 0, int(inside.sum())).copy_(
        cache.index_select(axis, picked))
    return shard


def _local_attention(q, k_cache, v_cache, seq_lens, kv_shard, block_table,
                     features):
    """This rank's (out, lse) over its shard, with global positions:
    decode_attention on the tensors' device."""
    from . import decode_attention
    return decode_attention(q, k_cache, v_cache, seq_lens,
                            block_table=block_table, return_lse=True,
                            backend="cuda" if q.is_cuda else "cpu",
                            kv_shard=kv_shard, **features)


def _all_gather(tensor, group):
    """[world, *shape]: every rank's `tensor` (16-bit floats as their
    bytes, which every backend copies, gloo included, whether or not it
    computes in them)."""
    torch = _torch()
    world = torch.distributed.get_world_size(group)
    bits = tensor.dtype in (torch.float16, torch.bfloat16)
    wire = tensor.contiguous().view(torch.uint8) if bits else \
        tensor.contiguous()
    parts = [torch.empty_like(wire) for _ in range(world)]
    torch.distributed.all_gather(parts, wire, group=group)
    gathered = torch.stack(parts)
    return gathered.view(tensor.dtype) if bits else gathered


def _sink_lses(sinks, lse, query_lens):
    """The sinks as one more state's lse per row, shaped like ``lse`` [B,
    (Lq,) Hq]: the head's sink, or -inf in a padding row of ``query_lens``
    (which stays empty, sinks or not)."""
    torch = _torch()
    sink_lse = sinks.to(lse).expand(lse.shape).clone()
    if query_lens is not None:
        tokens = lse.shape[1] if lse.dim() == 3 else 1
        token = torch.arange(tokens, device=lse.device)
        padding = token.reshape(1, -1) >= \
            query_lens.to(lse.device).reshape(-1, 1)
        sink_lse[padding.reshape(sink_lse.shape[:-1])] = -np.inf
    return sink_lse


def _merged_lse(lses, sink_lse):
    """The merge's lse per (row, head) and each rank's weight exp(lse_r -
    lse), as merge_states computes them (lses [world, B, (Lq,) Hq] f32,
    -inf and +inf empty; the sinks' lses, if any, one more state)."""
    torch = _torch()
    live = torch.where(torch.isinf(lses), torch.full_like(lses, -np.inf),
                       lses)
    if sink_lse is not None:
        live_all = torch.cat([live, sink_lse.unsqueeze(0)])
    else:
        live_all = live
    top = live_all.max(dim=0).values
    shift = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    total = torch.exp(live_all - shift).sum(dim=0)
    merged = torch.where(torch.isneginf(top), top, shift + torch.log(total))
    weights = torch.where(torch.isneginf(live), torch.zeros_like(live),
                          torch.exp(live - torch.where(
                              torch.isneginf(merged),
                              torch.zeros_like(merged), merged)))
    return merged, weights


def context_parallel_decode(q, k_cache, v_cache, seq_lens, *, group=None,
                            interleave=1, block_table=None,
                            return_lse=False, heads="all", **features):
    """Decode attention over a KV cache sharded by token over ``group``'s
    ranks (torch.distributed; None: the default group), every rank calling
    it with the same q [B, Hq, D] or [B, Lq, Hq, D] and the global lengths
    ``seq_lens`` (int32 [B]) beside its own shard (``k_cache``, ``v_cache``
    (None with ``v_head_dim``: MLA's latent cache), and ``block_table``
    when its shard is paged; see shard_cache). Each rank attends over its
    tokens with global positions (decode_attention's kv_shard: the causal
    rule of Lq > 1, ``window_left``, ``alibi_slopes`` and ``query_lens``
    are those of the whole cache), then the ranks' (out, lse) are merged
    exactly: ``heads="all"`` all-gathers them and every rank returns the
    whole output [B, (Lq,) Hq, D_v]; ``heads="scatter"`` all-gathers the
    lses, weighs each rank's output and reduce-scatters it by heads, rank r
    returning its Hq / world heads [B, (Lq,) Hq / world, D_v] (lse [B,
    (Lq,) Hq / world]; vLLM's cp_lse_ag_out_rs). ``sinks`` (float32 [Hq])
    are counted once, in the merge; the other ``features`` are
    decode_attention's (scale, logits_soft_cap, window_left, alibi_slopes,
    query_lens, kv_dtype, k_scale, num_splits, v_head_dim ...). torch
    tensors: CUDA ones run the GPU kernels and NCCL (or the group's
    backend), CPU ones the CPU lowering and gloo. A rank that sees no key
    of a row contributes nothing to it; a row no rank has a key for gives
    zeros and lse -inf (with sinks: zeros and the sink, as unsharded; a
    padding row of query_lens: zeros and -inf)."""
    torch = _torch()
    dist = torch.distributed
    if heads not in _HEADS:
        raise ValueError(f"heads must be 'all' or 'scatter', got {heads!r}")
    for name in ("return_lse", "backend", "out", "lse", "kv_shard"):
        if name in features:
            raise TypeError(f"context_parallel_decode takes no {name}=")
    if not (hasattr(q, "dim") and hasattr(q, "is_cuda")):
        raise TypeError(f"q must be a torch tensor, got {type(q).__name__}")
    if q.dim() not in (3, 4):
        raise ValueError(f"q must be [B, Hq, D] or [B, Lq, Hq, D], got "
                         f"{tuple(q.shape)}")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    _check_shard(rank, world, interleave)
    num_heads = q.shape[-2]
    if heads == "scatter" and num_heads % world:
        raise ValueError(f"heads='scatter' splits the {num_heads} query "
                         f"heads over {world} ranks: it must divide them")
    sinks = features.pop("sinks", None)
    out, lse = _local_attention(q, k_cache, v_cache, seq_lens,
                                (rank, world, interleave), block_table,
                                features)
    sink_lse = None if sinks is None else \
        _sink_lses(sinks, lse, features.get("query_lens"))
    lses = _all_gather(lse.contiguous(), group)
    if heads == "all":
        # Rows (sequence, query token) merged over the ranks' states.
        rows = lse.numel() // num_heads
        states = _all_gather(out.contiguous(), group).reshape(
            world, rows, num_heads, out.shape[-1]).transpose(0, 1)
        state_lses = lses.reshape(world, rows, num_heads).transpose(0, 1)
        if sink_lse is not None:
            states = torch.cat([states, torch.zeros_like(states[:, :1])],
                               dim=1)
            state_lses = torch.cat(
                [state_lses, sink_lse.reshape(rows, 1, num_heads)], dim=1)
        merged_out, merged_lse = merge_states(states.contiguous(),
                                              state_lses.contiguous())
        merged_out = merged_out.reshape(out.shape)
        merged_lse = merged_lse.reshape(lse.shape)
        return (merged_out, merged_lse) if return_lse else merged_out
    merged, weights = _merged_lse(lses, sink_lse)
    scaled = out.float() * weights[rank].unsqueeze(-1)
    share = num_heads // world
    head_dim = lse.dim() - 1
    mine = (slice(None),) * head_dim + (slice(rank * share,
                                              (rank + 1) * share),)
    # A backend string names every device's ("cpu:gloo,cuda:nccl").
    if q.is_cuda and "nccl" in str(dist.get_backend(group)):
        chunks = [c.contiguous() for c in scaled.chunk(world, dim=head_dim)]
        part = torch.empty_like(chunks[0])
        dist.reduce_scatter(part, chunks, group=group)
    else:  # gloo has no reduce-scatter: the sum, then this rank's heads.
        dist.all_reduce(scaled, group=group)
        part = scaled[mine].contiguous()
    part = part.to(out.dtype)
    lse_part = merged[mine].contiguous()
    return (part, lse_part) if return_lse else part
