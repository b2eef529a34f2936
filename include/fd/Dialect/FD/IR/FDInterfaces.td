//===- FDInterfaces.td - Flash-Decoding op interfaces ------*- tablegen -*-===//

#ifndef FD_DIALECT_FD_IR_FDINTERFACES_TD
#define FD_DIALECT_FD_IR_FDINTERFACES_TD

include "mlir/IR/OpBase.td"

def FD_AttentionOpInterface : OpInterface<"AttentionOpInterface"> {
  let description = [{
    An op that attends queries over a KV cache (`fd.attention`,
    `fd.partial_attention`): its shared inputs, the geometry read off their
    types, and the effective scale. Passes and lowerings that treat both
    ops alike work on this interface.
  }];
  let cppNamespace = "::mlir::fd";

  let methods = [
    InterfaceMethod<"The queries, [B, Hq, D] or [B, Lq, Hq, D].",
      "::mlir::Value", "getQuery">,
    InterfaceMethod<"The key cache (or page pool).",
      "::mlir::Value", "getKeyCache">,
    InterfaceMethod<[{
        The value cache (or page pool); null when the values are the first
        D_v columns of the key cache (MLA's latent cache).
      }], "::mlir::Value", "getValueCache">,
    InterfaceMethod<[{
        Where the values are read: the value cache, or the key cache when
        there is none.
      }], "::mlir::Value", "getValueSource", (ins), [{}], [{
        ::mlir::Value values = $_op.getValueCache();
        return values ? values : $_op.getKeyCache();
      }]>,
    InterfaceMethod<[{
        The output written per split or per row, whose last dimension is
        D_v: `output` (fd.attention), `partial_output`
        (fd.partial_attention).
      }], "::mlir::Value", "getValueShapedOutput">,
    InterfaceMethod<"The valid length of each sequence, [B] i32.",
      "::mlir::Value", "getSeqLens">,
    InterfaceMethod<"The block table of paged caches; null when dense.",
      "::mlir::Value", "getBlockTable">,
    InterfaceMethod<"The ALiBi slopes, [Hq] f32; null without ALiBi.",
      "::mlir::Value", "getAlibiSlopes">,
    InterfaceMethod<[{
        The per-sequence query lengths, [B] i32; null when every sequence
        has Lq query tokens.
      }], "::mlir::Value", "getQueryLens">,
    InterfaceMethod<[{
        The scale of an fp8 key cache, [1] or per (token, KV head) f32; null
        for 16- and 32-bit caches.
      }], "::mlir::Value", "getKScale">,
    InterfaceMethod<"The scale of an fp8 value cache, like getKScale.",
      "::mlir::Value", "getVScale">,
    InterfaceMethod<[{
        This rank of a sharded cache, [1] i32; null when the cache is not
        sharded.
      }], "::mlir::Value", "getKvShardRank">,
    InterfaceMethod<[{
        With a shared prefix, each query sequence's tokens after it, [B]
        i32; null when every sequence has a cache of its own.
      }], "::mlir::Value", "getSuffixLens">,
    InterfaceMethod<"The cache layout.",
      "::mlir::fd::KVLayout", "getKvLayout">,
    InterfaceMethod<"The `scale` attribute, null when absent.",
      "::mlir::FloatAttr", "getScaleAttr">,
    InterfaceMethod<"The `window_left` attribute, null when absent.",
      "::mlir::IntegerAttr", "getWindowLeftAttr">,
    InterfaceMethod<"The `logits_soft_cap` attribute, null when absent.",
      "::mlir::FloatAttr", "getLogitsSoftCapAttr">,
    InterfaceMethod<"The `kv_shard` attribute, null when absent.",
      "::mlir::fd::KVShardAttr", "getKvShardAttr">,
    InterfaceMethod<[{
        Whether a negative block-table entry is a hole (`block_table_holes`).
      }], "bool", "getBlockTableHoles">,
    InterfaceMethod<[{
        The `schedule` attribute (the partial kernel's), null when absent.
      }], "::mlir::fd::ScheduleAttr", "getScheduleAttr">,
    InterfaceMethod<[{
        The masking and score rules the lowerings apply
        (fd/Dialect/FD/Utils/AttentionUtils.h).
      }],
      "::mlir::fd::AttentionRules", "getRules", (ins), [{}], [{
        return ::mlir::fd::getAttentionRules($_op.getQuery(),
            $_op.getWindowLeftAttr(), $_op.getLogitsSoftCapAttr(),
            $_op.getQueryLens(), $_op.getKvShardAttr(),
            $_op.getBlockTableHoles(), $_op.getSuffixLens());
      }]>,
    InterfaceMethod<[{
        Shape facts read off the operand types (batch and cache length may
        be ShapedType::kDynamic).
      }],
      "::mlir::fd::AttentionGeometry", "getGeometry", (ins), [{}], [{
        return ::mlir::fd::computeAttentionGeometry(
            $_op.getQuery(), $_op.getKeyCache(), $_op.getSeqLens(),
            $_op.getBlockTable(), $_op.getValueShapedOutput(),
            $_op.getKvLayout(), $_op.getSuffixLens());
      }]>,
    InterfaceMethod<"The softmax scale: `scale`, or 1/sqrt(D) when absent.",
      "float", "getEffectiveScale", (ins), [{}], [{
        return ::mlir::fd::getEffectiveScale($_op.getScaleAttr(),
                                             $_op.getQuery());
      }]>,
  ];
}

#endif // FD_DIALECT_FD_IR_FDINTERFACES_TD
