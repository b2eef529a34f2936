//===- FDOps.td - Flash-Decoding dialect operations --------*- tablegen -*-===//

#ifndef FD_DIALECT_FD_IR_FDOPS_TD
#define FD_DIALECT_FD_IR_FDOPS_TD

include "fd/Dialect/FD/IR/FDAttrs.td"
include "fd/Dialect/FD/IR/FDInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class FD_Op<string mnemonic, list<Trait> traits = []>
    : Op<FD_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Operand constraints
//===----------------------------------------------------------------------===//

def FD_QueryMemRef : MemRefRankOf<[F16, BF16, F32], [3, 4]>;
def FD_CacheMemRef
    : MemRefRankOf<[F16, BF16, F32, F8E4M3FN, F8E5M2], [4]>;
// Per tensor [1], or per (token, KV head): the cache's shape without D.
def FD_KVScaleMemRef : MemRefRankOf<[F32], [1, 3]>;
def FD_LengthsMemRef : MemRefRankOf<[I32], [1]>;
def FD_OutputMemRef : MemRefRankOf<[F16, BF16, F32], [3, 4]>;
def FD_LseMemRef : MemRefRankOf<[F32], [2, 3]>;
def FD_PartialOutputMemRef : MemRefRankOf<[F32], [4, 5]>;
def FD_PartialLseMemRef : MemRefRankOf<[F32], [3, 4]>;
def FD_BlockTableMemRef : MemRefRankOf<[I32], [2]>;
def FD_SinksMemRef : MemRefRankOf<[F32], [1]>;
def FD_StatesMemRef : MemRefRankOf<[F16, BF16, F32], [4]>;
def FD_StateLseMemRef : MemRefRankOf<[F32], [3]>;
def FD_MergedStateMemRef : MemRefRankOf<[F16, BF16, F32], [3]>;
def FD_MergedLseMemRef : MemRefRankOf<[F32], [2]>;
def FD_RowMaskMemRef : MemRefRankOf<[I8], [1]>;
def FD_ShardRankMemRef : MemRefRankOf<[I32], [1]>;

// The inputs shared by `fd.attention` and `fd.partial_attention`.
defvar FD_AttentionInputs = (ins
  Arg<FD_QueryMemRef, "queries, [B, Hq, D] or [B, Lq, Hq, D]",
      [MemRead]>:$query,
  Arg<FD_CacheMemRef, "key cache, NHD or HND", [MemRead]>:$key_cache,
  Arg<Optional<FD_CacheMemRef>,
      "value cache, the key cache's shape but for D_v; absent: the values "
      "are the first D_v columns of the key cache", [MemRead]>:$value_cache,
  Arg<FD_LengthsMemRef, "valid cache length of each sequence, [B]",
      [MemRead]>:$seq_lens,
  Arg<Optional<FD_BlockTableMemRef>,
      "paged caches: the page of each block of page_size positions, "
      "[B, max_pages]", [MemRead]>:$block_table,
  Arg<Optional<FD_SinksMemRef>,
      "ALiBi: a slope per query head, [Hq] f32", [MemRead]>:$alibi_slopes,
  Arg<Optional<FD_LengthsMemRef>,
      "per-sequence query lengths: the real query tokens of each sequence, "
      "[B] i32, each in [0, Lq]", [MemRead]>:$query_lens,
  Arg<Optional<FD_KVScaleMemRef>,
      "fp8 caches: the key scale, per tensor [1] or per (token, KV head)",
      [MemRead]>:$k_scale,
  Arg<Optional<FD_KVScaleMemRef>,
      "fp8 caches: the value scale, like the key scale",
      [MemRead]>:$v_scale,
  Arg<Optional<FD_ShardRankMemRef>,
      "sharded caches (kv_shard): this rank, [1] i32", [MemRead]>:$kv_shard_rank,
  Arg<Optional<FD_LengthsMemRef>,
      "a shared prefix: the cache is one sequence that query sequence b "
      "continues by suffix_lens[b] tokens, [B] i32", [MemRead]>:$suffix_lens
);

defvar FD_AttentionAttrs = (ins
  DefaultValuedAttr<FD_KVLayoutAttr, "::mlir::fd::KVLayout::NHD">:$kv_layout,
  OptionalAttr<F32Attr>:$scale,
  OptionalAttr<I64Attr>:$window_left,
  OptionalAttr<F32Attr>:$logits_soft_cap,
  OptionalAttr<FD_KVShardAttr>:$kv_shard,
  UnitAttr:$block_table_holes,
  OptionalAttr<FD_ScheduleAttr>:$schedule
);


//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def FD_AttentionOp : FD_Op<"attention", [AttrSizedOperandSegments,
    FD_AttentionOpInterface]> {
  let summary = "scaled dot-product attention of new queries over a KV cache";
  let description = [{
    Computes, for every sequence `b`, query token `t` and query head `h`,

    ```
    out[b, t, h, :] = softmax_j(scale * q[b, t, h, :] . k[b, j, g(h), :]) @ v[b, j, g(h), :]
    ```

    over the keys `j < seq_lens[b] - Lq + t + 1` (the causal rule: the `Lq`
    queries are the last `Lq` tokens of the sequence), where
    `g(h) = h / (Hq / Hkv)` maps a query head to the KV head of its group
    (MHA: `Hq == Hkv`; GQA: `Hq > Hkv`; MQA: `Hkv == 1`).

    Operands:
    - `query`: `[B, Hq, D]` (one query token) or `[B, Lq, Hq, D]`.
    - `key_cache`: `[B, Lmax, Hkv, D]` when `kv_layout` is `NHD` (the
      default), `[B, Hkv, Lmax, D]` when it is `HND`. Only the first
      `seq_lens[b]` positions of sequence `b` are read.
    - `value_cache` (optional): the key cache's shape with `D_v` for `D`.
      Without it the value of a token is the **first `D_v` columns of its
      key-cache row** (MLA's latent cache, read once: `D = 576`, `D_v =
      512`; the assembly then lists two caches' operands, `%kv, %lens`).
    - `seq_lens`: `[B]` i32, each in `[0, Lmax]`.
    - `output`: `[B, Hq, D_v]` or `[B, Lq, Hq, D_v]`, of the query's element
      type. `D_v` may differ from `D` (MLA): `D` a multiple of 8 in
      [32, 576], `D_v` in [32, 512] and at most `D` without a value cache.
    - `lse` (optional): `[B, Hq]` or `[B, Lq, Hq]` f32, the natural-log
      log-sum-exp of the scaled scores of each row.

    A row with no keys (length 0) produces an output of zeros and an `lse` of
    `-inf`. `scale` defaults to `1/sqrt(D)` (write it for MLA, whose scale
    is not that of its 576-wide keys). Element types are f16, bf16 or
    f32 (the same for q, k, v and output; fp8 caches below); accumulation
    is f32.

    **Sliding window.** With `window_left = W` (>= 1) the query at position
    `p` (token `t` is at `p = seq_lens[b] - Lq + t`) sees the keys
    `p - W < j <= p`: itself and the `W - 1` before it, FlashAttention's
    `window_size = (W - 1, 0)`. Keys before `seq_lens[b] - Lq + 1 - W` are
    seen by no query and never read.

    **Logit soft-capping.** With `logits_soft_cap = c` (> 0) each scaled
    score `x` becomes `c * tanh(x / c)` before the softmax (Gemma 2: 50.0);
    the `lse` is over the capped scores.

    **ALiBi.** With an `alibi_slopes` operand (`[Hq]` f32, in device memory)
    each score of query head `h` at position `p` for key `j` gains
    `alibi_slopes[h] * (j - p)` (<= 0 for the keys it sees), after the
    scale and the soft-cap (FlashAttention's order); BLOOM, MPT.

    **Attention sinks.** With a `sinks` operand (`[Hq]` f32, one learned
    logit per query head, in device memory; gpt-oss) the softmax's
    denominator gains `exp(sinks[h] - m)` and the numerator nothing: the sink
    is one more key whose value is zero. The `lse` includes it; a row with
    no keys then has an output of zeros and `lse = sinks[h]`. `fd-split-kv`
    hands the sinks to `fd.merge`, which counts them once (never per split).

    **Per-sequence query lengths.** With a `query_lens` operand (`[B]` i32,
    in device memory; speculative decoding, where the drafts of the
    requests differ in length) sequence `b` has `n = query_lens[b]` query
    tokens (clamped to `[0, Lq]`): tokens `t < n` are its last `n`, token
    `t` at position `p = seq_lens[b] - n + t`, and the causal rule, the
    window and ALiBi use that position. Rows `t >= n` are padding, not
    queries: their output is zeros and their `lse` is `-inf` (sinks
    included); lowerings skip them where they can (the GPU kernels skip
    row tiles of padding only). A sequence with `n = 0` reads no key.

    **FP8 caches.** `key_cache` and `value_cache` may hold `f8E4M3FN` or
    `f8E5M2` elements (the same type for both) under f16, bf16 or f32
    queries and output. Their values are the fp8 values times a scale, so
    an fp8 cache needs both `k_scale` and `v_scale` (f32, in device memory,
    so they may change between graph replays): per tensor, `[1]`, or per
    (token, KV head), the cache's shape without the head dim: `[B, Lmax,
    Hkv]` (NHD), `[B, Hkv, Lmax]` (HND), or the page pool's `[num_pages,
    page_size, Hkv]` / `[num_pages, Hkv, page_size]`; both of one
    granularity. There is no implicit scale of 1: write it. Scales on a
    16- or 32-bit cache are an error.

    **Sharded caches.** With `kv_shard = #fd.kv_shard<world = W,
    interleave = I>` and a `kv_shard_rank` operand (`[1]` i32, in device
    memory, in `[0, W)`) the caches hold one rank's share of each sequence
    (decode context parallelism): global token `j` is on rank `(j / I) % W`,
    and local slot `i` of rank `r` holds global token `((i / I) * W + r) *
    I + i % I`. `seq_lens` are then the **global** lengths (clamped to
    what the ranks' caches hold: `W * I * (Lmax / I) + Lmax % I`); the rank
    attends over the `n(L) = (L / (W * I)) * I + clamp(L % (W * I) - r * I,
    0, I)` tokens it holds of a length `L`. The causal rule, the window and
    ALiBi use global positions: local key `i` is visible to query position
    `p` iff its global token is (`i < n(p + 1)`, and `i >= n(p + 1 - W)`
    with a window). A rank that holds no visible key of a row writes zeros
    and `lse = -inf` for it. Merging the ranks' `(output, lse)` with
    `fd.merge_states` gives the attention over the whole cache; attention
    sinks would be counted once per rank, so they are an error here (join
    them in that merge as one more state).

    **Shared prefixes (cascade).** With a `suffix_lens` operand (`[B]` i32,
    in device memory) the cache holds one sequence, a prefix every query
    sequence shares (parallel sampling, beam search, one long system
    prompt): its batch is 1 (`[1, Lmax, Hkv, D]`, or a `block_table` of one
    row) and `seq_lens` (`[1]`) is its length `P`. Query sequence `b`
    continues it by `s = suffix_lens[b]` tokens (clamped to `[0, 2^30]`),
    its `Lq` query tokens the last of them: token `t` at position `p = P +
    s - Lq + t`. Its rows attend the prefix's keys `j < P` that the causal
    rule and the window leave a query at `p`, ALiBi biasing by `j - p`. The
    kernels compute the rows of several sequences together, so the prefix
    is read once for all of them, not once a sequence. Merging the result
    with attention over each sequence's own `s` tokens (whose positions
    start at 0 there: the causal rule, the window and ALiBi see the same
    distances) by `fd.merge_states` gives attention over the
    concatenation; give attention sinks to one of the two. Not with
    `query_lens`, `kv_shard` or `block_table_holes`. With a window the
    splits cut the keys the earliest possible query sees, `[P - Lq + 1 -
    W, P)`, whatever the suffixes.

    **Paged caches.** With a `block_table` operand (`[B, max_pages]` i32) the
    caches are pools of pages: `[num_pages, page_size, Hkv, D]` (NHD) or
    `[num_pages, Hkv, page_size, D]` (HND), `page_size` a static power of two
    from 1 to 256. Position `j` of sequence `b` lives in page
    `block_table[b, j / page_size]` at slot `j % page_size`; the cache length
    is `max_pages * page_size`. Pages may be shared between sequences (prefix
    sharing); they are only read. With `block_table_holes` a negative entry
    is a hole: its positions are not attended and never read (an entry past
    the pool is clamped into it, as without). Pages of one position with
    holes are top-k sparse attention over flat slots: the block table lists
    each sequence's tokens (FlashMLA's indices, `-1` for none), its length
    how many of them count.

    The `fd-split-kv` pass rewrites decode-shaped instances (`Lq <= 8`) into
    `fd.partial_attention` + `fd.merge`.

    Example:

    ```mlir
    fd.attention %q, %k, %v, %lens into %out, %lse
        : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
          memref<?xi32> into memref<?x32x128xf16>, memref<?x32xf32>
    ```
  }];

  let arguments = !con(FD_AttentionInputs, (ins
    Arg<FD_OutputMemRef, "attention output, shaped like the query",
        [MemWrite]>:$output,
    Arg<Optional<FD_LseMemRef>, "log-sum-exp per row, [B, (Lq,) Hq]",
        [MemWrite]>:$lse,
    Arg<Optional<FD_SinksMemRef>, "attention sinks: a logit per query head, "
        "[Hq] f32", [MemRead]>:$sinks), FD_AttentionAttrs);

  let assemblyFormat = [{
    $query `,` custom<CacheOperands>($key_cache, $value_cache, $seq_lens)
    (`block_table` $block_table^ `:` type($block_table))?
    (`alibi_slopes` $alibi_slopes^ `:` type($alibi_slopes))?
    (`query_lens` $query_lens^ `:` type($query_lens))?
    (`k_scale` $k_scale^ `:` type($k_scale))?
    (`v_scale` $v_scale^ `:` type($v_scale))?
    (`kv_shard_rank` $kv_shard_rank^ `:` type($kv_shard_rank))?
    (`suffix_lens` $suffix_lens^ `:` type($suffix_lens))?
    (`sinks` $sinks^ `:` type($sinks))? `into` $output
    (`,` $lse^)? attr-dict `:` type($query) `,`
    custom<CacheTypes>(type($key_cache), type($value_cache), type($seq_lens))
    `into` type($output) (`,` type($lse)^)?
  }];

  let extraClassDeclaration = [{
    /// `output`, whose last dimension is D_v.
    ::mlir::Value getValueShapedOutput() { return getOutput(); }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// PartialAttentionOp
//===----------------------------------------------------------------------===//

def FD_PartialAttentionOp : FD_Op<"partial_attention",
    [AttrSizedOperandSegments, FD_AttentionOpInterface]> {
  let summary = "attention over S chunks of the KV cache, one normalized "
                "partial output and log-sum-exp per chunk";
  let description = [{
    The split-KV half of Flash-Decoding. Same inputs and semantics as
    `fd.attention`, but the keys of each sequence are cut into `S` chunks
    (`S` is the static size of the split dimension of `partial_output`) and
    each chunk is reduced on its own:

    ```
    first(b)   = max(0, seq_lens[b] - Lq + 1 - window_left)  // 0 without a window
    span(b)    = seq_lens[b] - first(b)
    chunk(b)   = max(chunk_length, ceil(span(b) / S))   // chunk_length defaults to 1
    keys(b, s) = first(b) + [s * chunk(b), min((s + 1) * chunk(b), span(b)))
    partial_output[b, t, h, s, :] = softmax-weighted mean of V over keys(b, s)
    partial_lse[b, t, h, s]       = log sum_j exp(scale * q . k_j) over keys(b, s)
    ```

    (the causal rule, the window and the soft-cap of `fd.attention` apply
    within each chunk; with `query_lens`, `Lq` above is `query_lens[b]`,
    a sequence with `query_lens[b] = 0` has no keys in any chunk, and the
    rows of padding tokens `t >= query_lens[b]` are not written). With a window the chunks cover only the keys some
    query sees, not the whole cache. The chunks
    follow each sequence's **live** length read from `seq_lens` at run time,
    so short sequences in a batch do no wasted work and one kernel (or CUDA
    graph) serves every length. A chunk with no keys writes
    `partial_lse = -inf` and a zero partial output.

    With the `chunk_length` attribute, a sequence uses chunks of exactly that
    many keys as long as `span(b) <= chunk_length * S`; its result then
    does not depend on the other sequences of the batch or on `S`.

    Chunk boundaries need not align with pages of a paged cache.

    The optional `schedule` (`#fd.schedule`) is how its GPU kernel runs
    (docs/KernelABI.md, "Schedules"): `fd-split-kv` attaches the one it
    planned the split count with, `convert-fd-to-gpu` builds it and needs
    it. On `fd.attention` it is the schedule `fd-split-kv` gives the
    partial attention it makes. The CPU lowering ignores it.

    Operands beyond those of `fd.attention`:
    - `partial_output`: `[B, Hq, S, D_v]` or `[B, Lq, Hq, S, D_v]` f32.
    - `partial_lse`: `[B, Hq, S]` or `[B, Lq, Hq, S]` f32.

    Example:

    ```mlir
    fd.partial_attention %q, %k, %v, %lens into %po, %plse
        : memref<1x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
          memref<1xi32> into memref<1x32x16x128xf32>, memref<1x32x16xf32>
    ```
  }];

  let arguments = !con(FD_AttentionInputs, (ins
    Arg<FD_PartialOutputMemRef, "normalized partial outputs, f32",
        [MemWrite]>:$partial_output,
    Arg<FD_PartialLseMemRef, "log-sum-exp of each chunk, f32",
        [MemWrite]>:$partial_lse), FD_AttentionAttrs, (ins
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$chunk_length));

  let assemblyFormat = [{
    $query `,` custom<CacheOperands>($key_cache, $value_cache, $seq_lens)
    (`block_table` $block_table^ `:` type($block_table))?
    (`alibi_slopes` $alibi_slopes^ `:` type($alibi_slopes))?
    (`query_lens` $query_lens^ `:` type($query_lens))?
    (`k_scale` $k_scale^ `:` type($k_scale))?
    (`v_scale` $v_scale^ `:` type($v_scale))?
    (`kv_shard_rank` $kv_shard_rank^ `:` type($kv_shard_rank))?
    (`suffix_lens` $suffix_lens^ `:` type($suffix_lens))? `into`
    $partial_output `,` $partial_lse attr-dict `:` type($query) `,`
    custom<CacheTypes>(type($key_cache), type($value_cache), type($seq_lens))
    `into` type($partial_output) `,` type($partial_lse)
  }];

  let extraClassDeclaration = [{
    /// The number of KV splits, S.
    int64_t getNumSplits();
    /// `partial_output`, whose last dimension is D_v.
    ::mlir::Value getValueShapedOutput() { return getPartialOutput(); }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// MergeOp
//===----------------------------------------------------------------------===//

def FD_MergeOp : FD_Op<"merge", [AttrSizedOperandSegments]> {
  let summary = "exact log-sum-exp merge of split-KV partial attention";
  let description = [{
    Combines the `S` partial results of `fd.partial_attention` into the
    attention output. For each row (sequence, query token, head):

    ```
    m      = max_s partial_lse[s]
    w_s    = exp(partial_lse[s] - m)
    output = sum_s w_s * partial_output[s, :] / sum_s w_s
    lse    = m + log(sum_s w_s)
    ```

    Empty chunks (`partial_lse = -inf`) have weight 0. A row whose chunks are
    all empty gets an output of zeros and `lse = -inf`. The output is
    converted to its element type (f16, bf16 or f32) after the f32 merge.

    With `sinks` (`[Hq]` f32, the attention sinks of `fd.attention`) each
    row's sink joins as one more partial with `partial_lse = sinks[h]` and
    a zero output: it is in `m` and in `sum_s w_s`, so a row whose chunks
    are all empty gets zeros and `lse = sinks[h]`.

    With `query_lens` (`[B]` i32, those of `fd.attention`) the rows of
    padding tokens `t >= query_lens[b]` (clamped to `[0, Lq]`) get zeros and
    `lse = -inf`, sinks or not; their partials are never read (the partial
    attention does not write them).

    Operands:
    - `partial_output`: `[B, Hq, S, D]` or `[B, Lq, Hq, S, D]` f32.
    - `partial_lse`: `[B, Hq, S]` or `[B, Lq, Hq, S]` f32.
    - `output`: `[B, Hq, D]` or `[B, Lq, Hq, D]`.
    - `lse` (optional): `[B, Hq]` or `[B, Lq, Hq]` f32.

    Example:

    ```mlir
    fd.merge %po, %plse into %out
        : memref<?x32x16x128xf32>, memref<?x32x16xf32> into memref<?x32x128xf16>
    ```
  }];

  let arguments = (ins
    Arg<FD_PartialOutputMemRef, "partial outputs", [MemRead]>:$partial_output,
    Arg<FD_PartialLseMemRef, "partial log-sum-exps", [MemRead]>:$partial_lse,
    Arg<FD_OutputMemRef, "merged output", [MemWrite]>:$output,
    Arg<Optional<FD_LseMemRef>, "merged log-sum-exp", [MemWrite]>:$lse,
    Arg<Optional<FD_SinksMemRef>, "attention sinks, [Hq] f32",
        [MemRead]>:$sinks,
    Arg<Optional<FD_LengthsMemRef>, "per-sequence query lengths, [B] i32",
        [MemRead]>:$query_lens);

  let assemblyFormat = [{
    $partial_output `,` $partial_lse (`sinks` $sinks^ `:` type($sinks))?
    (`query_lens` $query_lens^ `:` type($query_lens))? `into` $output (`,` $lse^)? attr-dict `:`
    type($partial_output) `,` type($partial_lse) `into` type($output)
    (`,` type($lse)^)?
  }];

  let extraClassDeclaration = [{
    /// The number of KV splits, S.
    int64_t getNumSplits();
    /// The row geometry read off the partial output [B, (Lq,) Hq, S, D]:
    /// batch (maybe dynamic), query length, query heads and head dim; the
    /// merge knows nothing of KV heads or caches (numKVHeads and maxLength
    /// are 0).
    ::mlir::fd::AttentionGeometry getGeometry();
  }];
  let hasVerifier = 1;
}

def FD_MergeStatesOp
    : FD_Op<"merge_states", [AttrSizedOperandSegments]> {
  let summary = "exact log-sum-exp merge of attention states given by the user";
  let description = [{
    The standalone form of `fd.merge`: merges attention states (an output
    row and its log-sum-exp) computed apart, over disjoint sets of keys (two
    calls, a shared prefix and a suffix, shards of a cache on several GPUs).
    For each row `t` and head `h`, over every state `n` of every operand:

    ```
    m        = max_n lse[n]
    w_n      = exp(lse[n] - m)
    output   = sum_n w_n * state[n, :] / sum_n w_n
    lse      = m + log(sum_n w_n)
    ```

    A state whose lse is `-inf` or `+inf` is empty: its weight is 0 and its
    row is not read. A row whose states are all empty gets zeros and
    `lse = -inf`. A NaN lse makes its whole row NaN (output and lse); a NaN
    element of a state that is not empty, that output element. With `lse_base2` the lses, in and out, are base 2 (FlashInfer's
    convention: `2^lse` is the softmax denominator); without, natural logs
    (fd.attention's). The sum is in f32; the output is rounded to its
    element type.

    With `mask` (`[T]` i8) only rows whose mask is nonzero are written; the
    others keep their output and lse (a fixed shape for CUDA-graph replays).
    `output` and `lse` may be the memory of an operand of one state
    (`[T, 1, H, D]` and `[T, 1, H]`): each row reads its states before it
    writes (an in-place merge).

    Operands:
    - `states`: one or more `[T, N_i, H, D]` (f16, bf16 or f32, all one
      type), the states of operand i.
    - `state_lses`: as many `[T, N_i, H]` f32, their lses.
    - `output`: `[T, H, D]` of the states' element type.
    - `lse`: `[T, H]` f32.
    - `mask` (optional): `[T]` i8.

    Example:

    ```mlir
    fd.merge_states %a, %b lses %la, %lb into %out, %lse
        : memref<?x1x32x128xf16>, memref<?x1x32x128xf16>
          lses memref<?x1x32xf32>, memref<?x1x32xf32>
          into memref<?x32x128xf16>, memref<?x32xf32>
    ```
  }];

  let arguments = (ins
    Arg<Variadic<FD_StatesMemRef>, "the states' rows", [MemRead]>:$states,
    Arg<Variadic<FD_StateLseMemRef>, "the states' log-sum-exps",
        [MemRead]>:$state_lses,
    Arg<FD_MergedStateMemRef, "merged rows", [MemWrite]>:$output,
    Arg<FD_MergedLseMemRef, "merged log-sum-exps", [MemWrite]>:$lse,
    Arg<Optional<FD_RowMaskMemRef>, "rows to merge, [T] i8",
        [MemRead]>:$mask,
    UnitAttr:$lse_base2);

  let assemblyFormat = [{
    $states `lses` $state_lses (`mask` $mask^ `:` type($mask))? `into`
    $output `,` $lse attr-dict `:` type($states) `lses` type($state_lses)
    `into` type($output) `,` type($lse)
  }];

  let extraClassDeclaration = [{
    /// The states of every operand, sum_i N_i.
    int64_t getNumStates();
    /// H and D, read off the output [T, H, D].
    int64_t getNumHeads();
    int64_t getHeadDim();
  }];
  let hasVerifier = 1;
}

#endif // FD_DIALECT_FD_IR_FDOPS_TD
