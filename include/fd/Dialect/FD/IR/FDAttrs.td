//===- FDAttrs.td - Flash-Decoding dialect attributes ------*- tablegen -*-===//
//
// The partial kernel's schedule (fd/Planning/KernelPlan.h), as the IR
// carries it from fd-split-kv (or a hand-written test) to the GPU lowering,
// and how a KV cache is sharded by token over ranks.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_IR_FDATTRS_TD
#define FD_DIALECT_FD_IR_FDATTRS_TD

include "fd/Dialect/FD/IR/FDDialect.td"

def FD_KernelFormParameter
    : AttrParameter<"::flashdecode::KernelForm",
                    "the partial kernel's form: cuda_cores, tensor_cores or "
                    "warpgroup_tensor_cores"> {
  let parser = "::mlir::fd::parseKernelForm($_parser)";
  let printer = "$_printer << "
                "::llvm::StringRef(::flashdecode::getKernelFormName($_self))";
}

def FD_ScheduleAttr : AttrDef<FD_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "how the partial-attention kernel runs: form, row tiles, "
                "launch bounds, held q fragments, K/V stages";
  let description = [{
    The schedule of the GPU kernel that computes an `fd.partial_attention`
    (docs/KernelABI.md, "Schedules"). `fd-split-kv` attaches the planner's
    (and plans the split count with its tiles and occupancy) unless the
    `fd.attention` it rewrites carries one; `fd-schedule-kernels` attaches
    the planner's to a hand-written `fd.partial_attention` without one;
    `convert-fd-to-gpu` builds exactly this schedule and chooses nothing.

    - `form`: `cuda_cores` or `tensor_cores` (mma.sync: f16/bf16 queries;
      head dim 64 or 128 with values of their own at it, each warp its own
      keys; or else, with an f16, bf16 or fp8 cache, a head dim that is a
      multiple of 64 up to 576 and a value head dim that is a multiple of
      128 up to 512, the warps sharing each step's keys and splitting the
      value dims: MLA's latent cache, Gemma 4's 512), or
      `warpgroup_tensor_cores` (wgmma, sm_90a only: f16/bf16 queries and
      cache, values that are the key cache's first D_v columns, a head dim
      that is a multiple of 64 up to 576 and a value head dim that is a
      multiple of 128 up to 512; tiles of 64 rows, 256 threads, q, K/V and
      P in dynamic shared memory).
    - `rows_per_tile`, `row_tiles`: a KV head's query rows (group size x
      Lq) in `row_tiles` blocks of `rows_per_tile` rows (the last may hold
      padding rows; at most 16 on tensor cores, 64 on warpgroup tensor
      cores).
    - `threads`: of a block; 128 (256 on warpgroup tensor cores).
    - `min_blocks_per_sm`: the launch bounds' blocks per SM (the registers a
      thread may take are the register file over them); 0, no launch
      bounds.
    - `held_query_steps`: tensor cores, q's 16-wide k-steps whose fragments
      stay in registers through the token loop (the others are read from
      workgroup memory each step); a split-value tile holds its warp's
      quarter, D / 64, all of them.
    - `stages`: tensor cores, the steps of K and V in workgroup memory at
      once (cp.async copies ahead while the block computes); at least 2
      (warpgroup tensor cores: 2 to 4 steps of 32 keys).
    - `cluster_ctas`: the blocks of a thread block cluster (sm_90 or later)
      that share each chunk, 1 to 8 (default 1, not printed): each streams
      a C-th of the chunk's keys, and they merge their rows through
      distributed shared memory into the chunk's one partial, so the split
      count (and the merge's reads) stays that of the chunks while C times
      as many blocks stream them. Every tile (the warpgroup tile stages its
      normalized rows in its dynamic shared memory first); not with a fused
      merge.

    The verifier of the op that carries it refuses a schedule that cannot
    work on some target: rows that do not cover the group, a form the
    dtype or head dim does not have, registers over the file for the
    launch bounds, workgroup memory over the 48 KiB a block declares (or
    dynamic memory over what an sm_90a block may have).

    Example: `#fd.schedule<form = tensor_cores, rows_per_tile = 8,
    row_tiles = 2, threads = 128, min_blocks_per_sm = 4,
    held_query_steps = 2, stages = 3>`.
  }];
  let parameters = (ins
    FD_KernelFormParameter:$form,
    "int64_t":$rows_per_tile,
    "int64_t":$row_tiles,
    "int64_t":$threads,
    DefaultValuedParameter<"int64_t", "0">:$min_blocks_per_sm,
    DefaultValuedParameter<"int64_t", "0">:$held_query_steps,
    DefaultValuedParameter<"int64_t", "0">:$stages,
    DefaultValuedParameter<"int64_t", "1">:$cluster_ctas
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    ::flashdecode::ScheduleChoice getChoice() const;
    static ScheduleAttr get(::mlir::MLIRContext *context,
                            const ::flashdecode::ScheduleChoice &choice);
  }];
}

def FD_KVShardAttr : AttrDef<FD_Dialect, "KVShard"> {
  let mnemonic = "kv_shard";
  let summary = "a KV cache sharded by token over `world` ranks, `interleave` "
                "tokens at a time";
  let description = [{
    The cache of an attention op that carries it holds one rank's share of
    every sequence (decode context parallelism): global token `j` lives on
    rank `(j / interleave) % world`, in order, so local slot `i` of rank `r`
    holds global token `((i / interleave) * world + r) * interleave +
    i % interleave` (vLLM's `cp_kv_cache_interleave_size` is `interleave`).
    The rank is the op's `kv_shard_rank` operand, read from device memory,
    so one kernel serves every rank.

    Example: `#fd.kv_shard<world = 4, interleave = 16>`.
  }];
  let parameters = (ins "int64_t":$world, "int64_t":$interleave);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    ::mlir::fd::KVShard getShard() const { return {getWorld(), getInterleave()}; }
  }];
}

#endif // FD_DIALECT_FD_IR_FDATTRS_TD
