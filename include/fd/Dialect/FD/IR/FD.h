//===- FD.h - Flash-Decoding dialect ----------------------------*- C++ -*-===//

#ifndef FD_DIALECT_FD_IR_FD_H
#define FD_DIALECT_FD_IR_FD_H

#include "fd/Planning/KVShard.h"
#include "fd/Planning/KernelPlan.h"
#include "fd/Planning/Limits.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "fd/Dialect/FD/IR/FDOpsDialect.h.inc"

#include "fd/Dialect/FD/IR/FDEnums.h"

namespace mlir::fd {
/// Parses a KernelForm's name (#fd.schedule's `form`).
FailureOr<::flashdecode::KernelForm> parseKernelForm(AsmParser &parser);
/// How a KV cache is sharded by token over ranks (#fd.kv_shard).
using ::flashdecode::KVShard;
} // namespace mlir::fd

#define GET_ATTRDEF_CLASSES
#include "fd/Dialect/FD/IR/FDAttrs.h.inc"

namespace mlir::fd {

/// The shape of an attention problem as seen by the attention ops. `batch` and
/// `maxLength` may be ShapedType::kDynamic; everything else is static.
struct AttentionGeometry {
  int64_t batch;
  /// Query tokens per sequence (1 when the query has no token dimension).
  int64_t queryLength;
  int64_t numQueryHeads;
  int64_t numKVHeads;
  /// D: the queries' and keys' head dim.
  int64_t headDim;
  /// D_v: the values' and outputs' head dim (headDim unless they differ, as
  /// in MLA).
  int64_t valueHeadDim;
  int64_t maxLength;
  /// Whether queries (and outputs) carry the Lq dimension: [B, Lq, Hq, D].
  bool hasQueryLengthDim;
  /// Positions per page of a paged cache; 0 for a dense cache.
  int64_t pageSize = 0;

  bool isPaged() const { return pageSize != 0; }

  int64_t groupSize() const { return numQueryHeads / numKVHeads; }
};

/// The geometry of an attention op from its inputs' types and `output` (the
/// output or the partial output, whose last dimension is D_v); a batch size
/// known from any of query, (dense) caches, lengths or block table is taken
/// (with a shared prefix, `suffixLens` not null, from query or suffixLens:
/// the cache holds one sequence). For a paged cache the positions dimension
/// holds the page size and the cache length is max_pages * page_size.
AttentionGeometry computeAttentionGeometry(Value query, Value keyCache,
                                           Value seqLens, Value blockTable,
                                           Value output, KVLayout layout,
                                           Value suffixLens);

/// Whether `cache` (a memref) holds fp8 elements (f8E4M3FN or f8E5M2), which
/// are scaled by the attention op's k_scale / v_scale.
bool isFloat8Cache(Value cache);

/// Whether an fp8 cache's `scales` (k_scale or v_scale) are per tensor
/// (memref<1xf32>), not per token and KV head (the cache's shape without the
/// head dim).
bool isPerTensorScale(Value scales);

/// What decides which keys a query row sees and how its scores are shaped,
/// beyond the geometry: read off an attention op's attributes once, applied
/// by the builders of fd/Dialect/FD/Utils/AttentionUtils.h.
struct AttentionRules {
  /// Query tokens per sequence; with more than one, token t is at
  /// position length - Lq + t and sees no key after it (causal).
  int64_t queryLength = 1;
  /// Sliding window: a query at position p sees keys p - W < j <= p.
  std::optional<int64_t> windowLeft;
  /// Logit soft-capping: score x -> c * tanh(x / c).
  std::optional<float> logitsSoftCap;

  /// Whether each sequence has its own number of query tokens (at most
  /// queryLength), read from a `query_lens` operand at run time.
  bool perSequenceQueryLengths = false;

  /// A cache sharded by token over ranks (#fd.kv_shard): the cache holds
  /// the rank's share of each sequence, whose length and positions are
  /// global; the rank is read from a `kv_shard_rank` operand at run time.
  std::optional<KVShard> kvShard;

  /// A paged cache whose negative block-table entries are holes: their
  /// positions are not attended (top-k sparse attention, with pages of one
  /// position).
  bool blockTableHoles = false;

  /// A shared prefix: the cache holds one sequence that every query
  /// sequence continues by its own number of tokens, read from a
  /// `suffix_lens` operand at run time, so its queries sit at positions
  /// past the cache.
  bool sharedPrefix = false;

  /// Whether the rows a kernel computes together see different keys, so
  /// rows need a mask beyond their chunk: more than one query token, or
  /// the rows of sequences continuing a shared prefix.
  bool rowsDiffer() const { return queryLength > 1 || sharedPrefix; }
};

AttentionRules getAttentionRules(Value query, IntegerAttr windowLeft,
                                 FloatAttr logitsSoftCap, Value queryLens,
                                 KVShardAttr kvShard, bool blockTableHoles,
                                 Value suffixLens);

/// The softmax scale: `scale`, or 1/sqrt(D) of `query` when it is null.
float getEffectiveScale(FloatAttr scale, Value query);

// The head dims, page sizes and decode query lengths the dialect accepts
// are fd/Planning/Limits.h's.
using ::flashdecode::isSupportedKeyHeadDim;
using ::flashdecode::isSupportedValueHeadDim;
using ::flashdecode::kMaxDecodeQueryLength;

} // namespace mlir::fd

#include "fd/Dialect/FD/IR/FDInterfaces.h.inc"

namespace mlir::fd {
/// What of `op`'s attention its partial kernel's schedule depends on
/// (fd/Planning/KernelPlan.h): element sizes, head dim, group, query length
/// and the features that cost registers.
::flashdecode::KernelProblem getKernelProblem(AttentionOpInterface op);

/// `op`'s schedule: its `schedule` attribute, else the planner's on `chip`
/// (::flashdecode::findPartialKernelSchedule).
::flashdecode::KernelSchedule
getOrPlanKernelSchedule(AttentionOpInterface op,
                        const ::flashdecode::Chip &chip);

/// Fails, with the verifier's message naming the field, unless `op`'s
/// `schedule` (if any) can work for its attention.
LogicalResult verifySchedule(AttentionOpInterface op);
} // namespace mlir::fd

#define GET_OP_CLASSES
#include "fd/Dialect/FD/IR/FDOps.h.inc"

#endif // FD_DIALECT_FD_IR_FD_H
