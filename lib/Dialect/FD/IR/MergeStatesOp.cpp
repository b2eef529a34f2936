//===- MergeStatesOp.cpp - fd.merge_states --------------------------------===//

#include "OperandChecks.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/Limits.h"

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

int64_t MergeStatesOp::getNumStates() {
  int64_t states = 0;
  for (Value operand : getStates())
    states += memrefType(operand).getShape()[1];
  return states;
}

int64_t MergeStatesOp::getNumHeads() {
  return memrefType(getOutput()).getShape()[1];
}

int64_t MergeStatesOp::getHeadDim() {
  return memrefType(getOutput()).getShape()[2];
}

LogicalResult MergeStatesOp::verify() {
  MemRefType outputType = memrefType(getOutput());
  ArrayRef<int64_t> outputShape = outputType.getShape();
  int64_t rows = outputShape[0], heads = outputShape[1],
          headDim = outputShape[2];
  if (ShapedType::isDynamic(heads))
    return emitOpError() << "'output' must have a static head count (its "
                            "second dimension), got "
                         << outputType;
  if (ShapedType::isDynamic(headDim) ||
      !::flashdecode::isSupportedValueHeadDim(headDim))
    return emitOpError() << "'output' head dim " << formatShape({headDim})
                         << " is not supported: expected a static "
                         << ::flashdecode::describeSupportedValueHeadDims();
  if (getStates().empty())
    return emitOpError() << "needs at least one 'states' operand";
  if (getStates().size() != getStateLses().size())
    return emitOpError() << "takes one 'state_lses' operand per 'states' "
                            "operand, got "
                         << getStateLses().size() << " for "
                         << getStates().size();
  Type element = outputType.getElementType();
  Type f32 = Float32Type::get(getContext());
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip_equal(getStates(), getStateLses()))) {
    auto [states, lses] = pair;
    int64_t count = memrefType(states).getShape()[1];
    std::string name = "states #" + std::to_string(index);
    if (ShapedType::isDynamic(count) || count < 1)
      return emitOpError() << "'" << name
                           << "' must have a static number of states (its "
                              "second dimension, at least 1), got "
                           << states.getType();
    if (failed(verifyOperandShape(
            *this, states, name, {rows, count, heads, headDim}, element,
            "[T, N, H, D] with the output's T, H, D and element type")) ||
        failed(verifyOperandShape(
            *this, lses, "state_lses #" + std::to_string(index),
            {rows, count, heads}, f32, "[T, N, H] matching '" + name + "'")))
      return failure();
  }
  if (failed(verifyOperandShape(*this, getLse(), "lse", {rows, heads}, f32,
                                "[T, H] matching 'output'")))
    return failure();
  if (Value mask = getMask())
    return verifyOperandShape(*this, mask, "mask", {rows},
                              IntegerType::get(getContext(), 8),
                              "one flag per row, [T]");
  return success();
}
