//===- MergeStatesModule.cpp - The fd IR of a merge of states -------------===//

#include "fd/Compiler/AttentionModule.h"
#include "fd/Compiler/MergeStates.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <numeric>

using namespace mlir;

namespace flashdecode {

std::string MergeStatesConfig::validate() const {
  auto text = [](int64_t value) { return std::to_string(value); };
  if (statesPerOperand.empty())
    return "a merge needs at least one states operand";
  for (int64_t count : statesPerOperand)
    if (count < 1)
      return "every states operand must hold at least one state (N >= 1), "
             "got " +
             text(count);
  int64_t total = std::accumulate(statesPerOperand.begin(),
                                  statesPerOperand.end(), int64_t(0));
  if (total > kMaxMergedStates)
    return "a merge takes at most " + text(kMaxMergedStates) + " states, got " +
           text(total);
  // The GPU kernel's blocks are (row, head): heads are a grid dimension.
  if (numHeads < 1 || numHeads > 65535)
    return "the head count H must be in [1, 65535], got " + text(numHeads);
  if (!isSupportedValueHeadDim(headDim))
    return "head dim D = " + text(headDim) + " is not supported: expected a " +
           describeSupportedValueHeadDims();
  return "";
}

std::string MergeStatesConfig::toString() const {
  std::string states;
  for (int64_t count : statesPerOperand)
    states += (states.empty() ? "" : ",") + std::to_string(count);
  return std::string("dtype=") + getElementTypeName(elementType) +
         " states=" + states + " heads=" + std::to_string(numHeads) +
         " head_dim=" + std::to_string(headDim) +
         " lse_base2=" + (lseBase2 ? "1" : "0") +
         " with_mask=" + (withMask ? "1" : "0");
}

OwningOpRef<ModuleOp> buildMergeStatesModule(MLIRContext &context,
                                             const MergeStatesConfig &config) {
  OpBuilder builder(&context);
  constexpr int64_t dynamic = ShapedType::kDynamic;
  Type element = getMLIRElementType(context, config.elementType);
  Type f32 = builder.getF32Type();
  const int64_t heads = config.numHeads, headDim = config.headDim;
  // states..., their lses..., output, lse[, mask].
  SmallVector<Type> argumentTypes;
  for (int64_t count : config.statesPerOperand)
    argumentTypes.push_back(
        MemRefType::get({dynamic, count, heads, headDim}, element));
  for (int64_t count : config.statesPerOperand)
    argumentTypes.push_back(MemRefType::get({dynamic, count, heads}, f32));
  argumentTypes.push_back(MemRefType::get({dynamic, heads, headDim}, element));
  argumentTypes.push_back(MemRefType::get({dynamic, heads}, f32));
  if (config.withMask)
    argumentTypes.push_back(MemRefType::get({dynamic}, builder.getI8Type()));
  auto [module, loc, arguments] =
      startFunctionModule(builder, kMergeStatesFunctionName, argumentTypes);
  const size_t operands = config.statesPerOperand.size();
  mlir::fd::MergeStatesOp::create(
      builder, loc, arguments.take_front(operands),
      arguments.slice(operands, operands), arguments[2 * operands],
      arguments[2 * operands + 1], config.withMask ? arguments.back() : Value(),
      config.lseBase2);
  func::ReturnOp::create(builder, loc);
  return std::move(module);
}

} // namespace flashdecode
