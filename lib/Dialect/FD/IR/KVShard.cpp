//===- KVShard.cpp - #fd.kv_shard and the operand that goes with it -------===//

#include "OperandChecks.h"
#include "fd/Dialect/FD/IR/FD.h"

using namespace mlir;
using namespace mlir::fd;

LogicalResult KVShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t world, int64_t interleave) {
  std::string reason = ::flashdecode::getReasonKVShardInvalid(
      world, interleave, /*separator=*/'_');
  if (!reason.empty())
    return emitError() << "#fd.kv_shard: " << reason;
  return success();
}

LogicalResult mlir::fd::detail::verifyKVShard(AttentionOpInterface op) {
  Value rank = op.getKvShardRank();
  if (static_cast<bool>(rank) != static_cast<bool>(op.getKvShardAttr()))
    return op->emitOpError()
           << "'kv_shard' and 'kv_shard_rank' go together: the attribute "
              "says how the cache is sharded, the operand which rank's "
              "share it holds; got "
           << (rank ? "the operand alone" : "the attribute alone");
  if (!rank)
    return success();
  return verifyOperandShape(op, rank, "kv_shard_rank", {1},
                            IntegerType::get(op->getContext(), 32),
                            "this rank, [1]");
}
