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


def _check_shard(rank, world, interleave):
    for name, value, low in (("world", world, 1), ("interleave", interleave,
                                                     1)):
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or \
            not 0 <= rank < world:
        raise ValueError(f"rank must be an int in [0, {world}), got "
                         f"{rank!r}")


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


def _local_attention(q, k_cache, v_cache, local_lens, block_table, features):
    """This rank's (out, lse) over its shard: decode_attention on the
    tensors' device."""
    from . import decode_attention
    return decode_attention(q, k_cache, v_cache, local_lens,
                            block_table=block_table, return_lse=True,
                            backend="cuda" if q.is_cuda else "cpu",
                            **features)


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


def _merged_lse(lses, sinks):
    """The merge's lse per (row, head) and each rank's weight exp(lse_r -
    lse), as merge_states computes them (lses [world, B, Hq] f32, -inf and
    +inf empty; a sink one more state)."""
    torch = _torch()
    live = torch.where(torch.isinf(lses), torch.full_like(lses, -np.inf),
                       lses)
    if sinks is not None:
        live_all = torch.cat([live, sinks.to(live).expand(
            1, *live.shape[1:])])
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
    it with the same q [B, Hq, D] and the global lengths ``seq_lens``
    (int32 [B]) beside its own shard (``k_cache``, ``v_cache``, and
    ``block_table`` when its shard is paged; see shard_cache). Each rank
    attends over its tokens (``shard_length`` of them), then the ranks'
    (out, lse) are merged exactly: ``heads="all"`` all-gathers them and
    every rank returns the whole output [B, Hq, D]; ``heads="scatter"``
    all-gathers the lses, weighs each rank's output and reduce-scatters it
    by heads, rank r returning its Hq / world heads [B, Hq / world, D] (lse
    [B, Hq / world]; vLLM's cp_lse_ag_out_rs). ``sinks`` (float32 [Hq]) are
    counted once, in the merge; the other ``features`` are
    decode_attention's (scale, logits_soft_cap, kv_dtype, k_scale, num_splits
    ...). torch tensors: CUDA ones run the GPU kernels and NCCL (or the
    group's backend), CPU ones the CPU lowering and gloo. A rank that holds
    no token of a sequence contributes nothing; a sequence no rank holds a
    token of gives zeros and lse -inf (with sinks: zeros and the sink, as
    unsharded). Query tokens, windows and ALiBi need
    global positions in the kernels: Lq > 1, window_left and alibi_slopes
    raise NotImplementedError for now."""
    torch = _torch()
    dist = torch.distributed
    if heads not in _HEADS:
        raise ValueError(f"heads must be 'all' or 'scatter', got {heads!r}")
    for name in ("window_left", "alibi_slopes", "query_lens"):
        if features.get(name) is not None:
            raise NotImplementedError(
                f"{name} with a sharded cache needs global positions in the "
                "kernels (kv_shard), which are not built yet")
    for name in ("return_lse", "backend", "out", "lse"):
        if name in features:
            raise TypeError(f"context_parallel_decode takes no {name}=")
    if not (hasattr(q, "dim") and hasattr(q, "is_cuda")):
        raise TypeError(f"q must be a torch tensor, got {type(q).__name__}")
    if q.dim() != 3:
        raise NotImplementedError(
            "q must be [B, Hq, D]: query tokens (Lq > 1) with a sharded "
            "cache need global positions in the kernels (kv_shard), which "
            "are not built yet")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    _check_shard(rank, world, interleave)
    batch, num_heads, _ = q.shape
    if heads == "scatter" and num_heads % world:
        raise ValueError(f"heads='scatter' splits the {num_heads} query "
                         f"heads over {world} ranks: it must divide them")
    sinks = features.pop("sinks", None)
    local_lens = shard_length(seq_lens, rank, world, interleave)
    out, lse = _local_attention(q, k_cache, v_cache, local_lens, block_table,
                                features)
    lses = _all_gather(lse.contiguous(), group)
    if heads == "all":
        states = _all_gather(out.contiguous(), group)
        states = states.permute(1, 0, 2, 3).contiguous()
        state_lses = lses.permute(1, 0, 2).contiguous()
        if sinks is not None:
            sink_state = torch.zeros_like(states[:, :1])
            states = torch.cat([states, sink_state], dim=1)
            sink_lse = sinks.to(state_lses).reshape(1, 1, num_heads).expand(
                batch, 1, num_heads)
            state_lses = torch.cat([state_lses, sink_lse], dim=1)
        merged_out, merged_lse = merge_states(states, state_lses)
        return (merged_out, merged_lse) if return_lse else merged_out
    merged, weights = _merged_lse(lses, sinks)
    scaled = out.float() * weights[rank].unsqueeze(-1)
    share = num_heads // world
    mine = slice(rank * share, (rank + 1) * share)
    # A backend string names every device's ("cpu:gloo,cuda:nccl").
    if q.is_cuda and "nccl" in str(dist.get_backend(group)):
        chunks = [c.contiguous() for c in scaled.chunk(world, dim=1)]
        part = torch.empty_like(chunks[0])
        dist.reduce_scatter(part, chunks, group=group)
    else:  # gloo has no reduce-scatter: the sum, then this rank's heads.
        dist.all_reduce(scaled, group=group)
        part = scaled[:, mine].contiguous()
    part = part.to(out.dtype)
    lse_part = merged[:, mine].contiguous()
    return (part, lse_part) if return_lse else part
