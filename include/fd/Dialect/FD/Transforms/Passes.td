//===- Passes.td - Flash-Decoding transformation passes ----*- tablegen -*-===//

#ifndef FD_DIALECT_FD_TRANSFORMS_PASSES_TD
#define FD_DIALECT_FD_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FDSplitKV : Pass<"fd-split-kv", "ModuleOp"> {
  let summary = "Rewrite decode-shaped fd.attention into split-KV partial "
                "attention and a log-sum-exp merge";
  let description = [{
    Rewrites every `fd.attention` whose query length `Lq` is at most 8
    (decoding, or speculative decoding) into

    ```mlir
    %ws   = memref.alloc(...) : memref<?xi8>        // the workspace
    %po   = memref.view %ws[%c0][...]   : ... to memref<Bx(Lq)xHqxSxDxf32>
    %plse = memref.view %ws[%off][...]  : ... to memref<Bx(Lq)xHqxSxf32>
    fd.partial_attention %q, %k, %v, %lens into %po, %plse
    fd.merge %po, %plse into %out(, %lse)
    memref.dealloc %ws
    ```

    The workspace is one byte buffer of
    `B * Lq * Hq * S * (D_v + 1) * 4` bytes: the partial outputs at offset 0,
    the partial log-sum-exps at offset `B * Lq * Hq * S * D * 4`. Making it
    one explicit allocation lets a caller (the runtime, a serving engine)
    allocate it once and keep its address fixed for CUDA-graph replay.

    With `workspace-argument`, the workspace is not allocated: the pass
    appends a `memref<?xi8> {fd.workspace}` argument to each function with
    decode-shaped attention, and the views are taken from it, so the caller
    allocates it once (at least the bytes above for the largest call in the
    function; the calls of one function run in turn and share it). Such a
    function must not be called from the module (its signature changes).

    Attention with `Lq > 8` (prefill-shaped) is left alone.

    The split count `S` comes from `num-splits` when non-zero (1 is legal and
    yields the unsplit kernel plus a trivial merge). With `num-splits=0` it is
    chosen by the split planner (`fd/Planning/SplitPlanner.h`), which needs
    the batch size and the cache length: from the static shapes, or from the
    `batch` / `max-len` options when those are dynamic. It also weighs what
    the op's blocks read and write (query rows per KV head, head dim, the
    cache's element bytes: the DRAM time of the cache and of the partials;
    with `fused-merge`, the serial merge in the partial kernel's last
    blocks; docs/SplitHeuristic.md). With `chunk-length=N`
    and `num-splits=0`, `S = min(max-splits, ceil(max-len / N))`; the partial
    op then uses fixed chunks of `N` keys.

    `report` attaches a remark to each rewritten op giving the split count,
    blocks, waves, wave efficiency and workspace size.
  }];
  let options = [
    Option<"numSplits", "num-splits", "int64_t", /*default=*/"0",
           "Number of KV splits; 0 chooses automatically">,
    Option<"smCount", "sm-count", "int64_t",
           /*default=*/"::flashdecode::SplitPlannerOptions().smCount",
           "Streaming multiprocessors of the target, for the automatic "
           "choice">,
    Option<"blocksPerSM", "blocks-per-sm", "int64_t",
           /*default=*/"::flashdecode::SplitPlannerOptions().blocksPerSM",
           "Partial-kernel blocks one SM runs at once, for the automatic "
           "choice (a wave is sm-count * blocks-per-sm blocks)">,
    Option<"minChunkLength", "min-chunk-length", "int64_t",
           /*default=*/"::flashdecode::SplitPlannerOptions().minChunkLength",
           "Shortest chunk the automatic choice makes, in tokens">,
    Option<"maxSplits", "max-splits", "int64_t",
           /*default=*/"::flashdecode::SplitPlannerOptions().maxSplits",
           "Largest split count the automatic choice makes (with fused-merge "
           "no more than the fused merge can merge)">,
    Option<"chunkLength", "chunk-length", "int64_t", /*default=*/"0",
           "Fixed chunk length in tokens (0: each sequence's length / S)">,
    Option<"batchHint", "batch", "int64_t", /*default=*/"0",
           "Batch size to plan for when the batch dimension is dynamic">,
    Option<"maxLengthHint", "max-len", "int64_t", /*default=*/"0",
           "Cache length to plan for when the cache length is dynamic">,
    Option<"chip", "chip", "std::string",
           /*default=*/"std::string(::flashdecode::kDefaultChipName)",
           "The target whose partial kernel the automatic choice plans for "
           "(its schedule's row tiles, keys per step and launch bounds)">,
    Option<"fusedMerge", "fused-merge", "bool", /*default=*/"false",
           "Plan for a merge fused into the partial kernel "
           "(convert-fd-to-gpu fuse-merge): the last block of each sequence "
           "and KV head merges every split alone">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark with the chosen split count and why">,
    Option<"workspaceArgument", "workspace-argument", "bool",
           /*default=*/"false",
           "Take the workspace from a new function argument instead of "
           "allocating it">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect"
  ];
}


def FDScheduleKernels : Pass<"fd-schedule-kernels", "ModuleOp"> {
  let summary = "Attach the planner's #fd.schedule to each "
                "fd.partial_attention without one";
  let description = [{
    `convert-fd-to-gpu` builds the partial kernel its op's `#fd.schedule`
    names (docs/KernelABI.md, "Schedules") and chooses none itself.
    `fd-split-kv` attaches the schedule it planned the split count with;
    this pass attaches the planner's (`planKernel` on `chip`) to every
    `fd.partial_attention` that has none, for split IR written by hand or
    by another compiler. Ops with a schedule keep it.
  }];
  let options = [
    Option<"chip", "chip", "std::string",
           /*default=*/"std::string(::flashdecode::kDefaultChipName)",
           "The target the schedules are planned for">
  ];
}

#endif // FD_DIALECT_FD_TRANSFORMS_PASSES_TD
