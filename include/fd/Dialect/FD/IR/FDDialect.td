//===- FDDialect.td - Flash-Decoding dialect definition ----*- tablegen -*-===//
//
// The `fd` dialect: attention for decoding, in destination-passing style on
// memrefs, and the split-KV form it is rewritten into.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_IR_FDDIALECT_TD
#define FD_DIALECT_FD_IR_FDDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FD_Dialect : Dialect {
  let name = "fd";
  let summary = "Flash-Decoding attention: decode attention, split-KV partials "
                "and their log-sum-exp merge";
  let description = [{
    The `fd` dialect represents scaled dot-product attention for decoding,
    where a few new query tokens per sequence attend over a long key/value
    cache, and the *split-KV* form that Flash-Decoding rewrites it into.

    All ops work on memrefs in destination-passing style: the results are
    written into operand buffers, which is the ABI of the generated kernels and
    what lets a CUDA graph replay them with fixed addresses.

    Shapes use these names:

    | name | meaning |
    |------|---------|
    | `B`    | batch (number of sequences); may be dynamic |
    | `Lq`   | query tokens per sequence (1 for plain decoding, up to 8 for speculative decoding) |
    | `Hq`   | query heads (static) |
    | `Hkv`  | key/value heads (static); `Hq % Hkv == 0` (MHA, GQA, MQA) |
    | `D`    | head dimension (static), a multiple of 8 in [32, 256] |
    | `Lmax` | allocated cache length; may be dynamic |
    | `S`    | number of KV splits (static) |

    Per-sequence lengths live in a `memref<?xi32>` buffer and are read at run
    time, so one compiled kernel (and one captured CUDA graph) serves every
    length up to `Lmax`.
  }];
  let cppNamespace = "::mlir::fd";
  let useDefaultAttributePrinterParser = 1;
}

def FD_KVLayout : I32Enum<"KVLayout", "layout of the key/value cache", [
  I32EnumCase<"NHD", 0>,
  I32EnumCase<"HND", 1>
]> {
  let cppNamespace = "::mlir::fd";
}

def FD_KVLayoutAttr : EnumAttr<FD_Dialect, FD_KVLayout, "kv_layout"> {
  let summary = "KV cache layout: NHD is [B, Lmax, Hkv, D], HND is "
                "[B, Hkv, Lmax, D]";
  let assemblyFormat = "`<` $value `>`";
}

#endif // FD_DIALECT_FD_IR_FDDIALECT_TD
