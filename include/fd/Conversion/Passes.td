//===- Passes.td - Flash-Decoding conversion passes --------*- tablegen -*-===//

#ifndef FD_CONVERSION_PASSES_TD
#define FD_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFDToLoops : Pass<"convert-fd-to-loops", "ModuleOp"> {
  let summary = "Lower fd ops to scf/arith/math/memref loops (the CPU "
                "reference path)";
  let description = [{
    Lowers `fd.attention`, `fd.partial_attention` and `fd.merge` to loop
    nests that compute exactly what the ops specify, with f32 accumulation
    and an online softmax per row (one pass over the keys, running max and
    sum). The result runs on the CPU after the standard lowering to LLVM (see
    the `fd-lower-to-cpu` pipeline); it is the executable specification the
    GPU kernels are checked against.

    Loop order: sequence, (split,) query token, query head; the inner loops
    run over keys and the head dimension. Lengths are read from `seq_lens` at
    run time; chunk bounds are computed from them as `fd.partial_attention`
    documents.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def ConvertFDToGPU : Pass<"convert-fd-to-gpu", "ModuleOp"> {
  let summary = "Lower fd.partial_attention and fd.merge to GPU kernels and "
                "their launches";
  let description = [{
    Replaces each `fd.partial_attention` and `fd.merge` with a
    `gpu.launch_func` of a kernel built for its shapes and element type, in a
    `gpu.module` of the kernel's name (`fd_partial_attention`, `fd_merge`,
    suffixed when taken), so each kernel becomes its own PTX. The module
    becomes a `gpu.container_module`. Kernels take raw global pointers and the cache
    length, the ABI the runtime fills from the manifest.

    Partial kernel, grid `(S, Hkv * T, B)`, 128 threads, built as the op's
    `#fd.schedule` says (its form, row tiles, launch bounds, held q
    fragments and K/V stages; docs/KernelABI.md, "Schedules"): the pass
    chooses none and refuses an op without one (`fd-split-kv` attaches the
    schedule it planned with, `fd-schedule-kernels` the planner's). One
    block serves a tile of the query rows (query heads of the KV head's
    group times `Lq`) of one chunk; the T tiles of a KV head are blocks
    that stream the same chunk side by side (the second read is an L2 hit).
    Lanes read key and value rows with coalesced 16-byte loads, several
    token steps in flight; q.k is reduced with `gpu.shuffle`; an online
    softmax (base 2, scores prescaled by `scale * log2 e`) runs in registers
    per lane group; the groups of a warp combine through shuffles and the
    warps through workgroup memory.
    The sequence length is read from device memory and the chunk bounds are
    computed in the kernel, so a captured CUDA graph stays correct as
    sequences grow. An empty chunk writes `lse = -inf` and a zero partial.

    Merge kernel, grid `(Hq, Lq, B)`, `D` threads: the log-sum-exp combine of
    `fd.merge`, writing the output in its element type and the lse if asked.

    An fp8 cache (`f8E4M3FN`, `f8E5M2`) is read 16 elements per 16-byte
    load and decoded to f16 pairs: with `cvt.rn.f16x2.e4m3x2` / `e5m2x2` on
    sm_90 (`chip`; sm_89 has it only from PTX ISA 8.1), with integer bit
    operations elsewhere. Its scales are folded where they cost nothing: a
    per-tensor key scale into q's prescale, a per-tensor value scale into
    the normalization of the partial output.

    On sm_90 (`chip` sm_90, sm_90a) every kernel starts with
    `nvvm.griddepcontrol wait` then `launch_dependents` and carries
    `fd.programmatic_launch` (the manifest's `programmatic_launch`): launched
    with programmatic stream serialization, a kernel may then start while
    the one before it on the stream runs, and waits for it before its first
    global access; the next kernel may launch as soon as this one runs.

    `fd.attention` must be split first (`fd-split-kv`, `num-splits=1` for the
    unsplit kernel).
  }];
  let options = [
    Option<"chip", "chip", "std::string",
           /*default=*/"std::string(::flashdecode::kDefaultChipName)",
           "The GPU the kernels are for (sm_80, sm_86, sm_89, sm_90, "
           "sm_90a; default sm_90, fd/Planning/Chip.h's): decides how fp8 "
           "caches are decoded and whether the kernels take part in "
           "programmatic dependent launch (sm_90+)">,
    Option<"fuseMerge", "fuse-merge", "bool", /*default=*/"false",
           "Merge in the partial kernel: the last block of each (sequence, "
           "KV head) to finish merges its rows (counted in a zeroed i32 "
           "[B, Hkv] buffer it leaves zero), instead of a merge kernel">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def FDCheckNVVMTarget : Pass<"fd-check-nvvm-target", "ModuleOp"> {
  let summary = "Fail with a diagnostic when the NVVM target is unsupported";
  let description = [{
    The first pass of `fd-lower-to-ptx`: rejects a chip the kernels are not
    built for, or a PTX version too old for the chip, with an error naming
    the option and the accepted values (instead of a fatal error from the
    NVPTX backend later).
  }];
  let options = [
    Option<"chip", "chip", "std::string",
           /*default=*/"std::string(::flashdecode::kDefaultChipName)",
           "Target GPU">,
    Option<"ptxVersion", "ptx-version", "int", /*default=*/"80",
           "PTX ISA version times ten">
  ];
}

#endif // FD_CONVERSION_PASSES_TD
