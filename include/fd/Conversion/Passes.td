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

#endif // FD_CONVERSION_PASSES_TD
