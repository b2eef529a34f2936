//===- FDSchedule.cpp - The partial kernel's schedule in the IR -----------===//
//
// #fd.schedule <-> flashdecode::ScheduleChoice, the problem an attention op
// poses its partial kernel, and the verifier's check that a schedule fits it.
//
//===----------------------------------------------------------------------===//

#include "fd/Dialect/FD/IR/FD.h"

using namespace mlir;
using namespace mlir::fd;

FailureOr<::flashdecode::KernelForm>
mlir::fd::parseKernelForm(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (failed(parser.parseKeyword(&name)))
    return failure();
  if (std::optional<::flashdecode::KernelForm> form =
          ::flashdecode::findKernelForm(name))
    return *form;
  return parser.emitError(loc) << "unknown kernel form '" << name
                               << "': expected cuda_cores or tensor_cores";
}

::flashdecode::ScheduleChoice ScheduleAttr::getChoice() const {
  ::flashdecode::ScheduleChoice choice;
  choice.form = getForm();
  choice.rowsPerTile = getRowsPerTile();
  choice.rowTiles = getRowTiles();
  choice.threads = getThreads();
  choice.minBlocksPerSM = getMinBlocksPerSm();
  choice.heldQuerySteps = getHeldQuerySteps();
  choice.keyValueStages = getStages();
  choice.clusterCtas = getClusterCtas();
  return choice;
}

ScheduleAttr ScheduleAttr::get(MLIRContext *context,
                               const ::flashdecode::ScheduleChoice &choice) {
  return get(context, choice.form, choice.rowsPerTile, choice.rowTiles,
             choice.threads, choice.minBlocksPerSM, choice.heldQuerySteps,
             choice.keyValueStages, choice.clusterCtas);
}

::flashdecode::KernelProblem
mlir::fd::getKernelProblem(AttentionOpInterface op) {
  AttentionGeometry geometry = op.getGeometry();
  AttentionRules rules = op.getRules();
  auto elementBytes = [](Value value) -> int64_t {
    Type element = cast<ShapedType>(value.getType()).getElementType();
    return (element.getIntOrFloatBitWidth() + 7) / 8;
  };
  ::flashdecode::KernelProblem problem;
  problem.headDim = geometry.headDim;
  problem.valueHeadDim = geometry.valueHeadDim;
  problem.valuesFromKeys = !op.getValueCache();
  problem.queryElementBytes = elementBytes(op.getQuery());
  problem.cacheElementBytes = elementBytes(op.getKeyCache());
  problem.bfloat16Queries =
      cast<ShapedType>(op.getQuery().getType()).getElementType().isBF16();
  problem.float8TokenScales =
      op.getKScale() && !isPerTensorScale(op.getKScale());
  problem.groupSize = geometry.groupSize();
  problem.queryLength = geometry.queryLength;
  problem.alibi = static_cast<bool>(op.getAlibiSlopes());
  problem.sharedPrefix = rules.sharedPrefix;
  problem.features.paged = geometry.isPaged();
  problem.features.window = rules.windowLeft.has_value();
  problem.features.softCap = rules.logitsSoftCap.has_value();
  problem.features.queryLens = rules.perSequenceQueryLengths;
  return problem;
}

::flashdecode::KernelSchedule
mlir::fd::getOrPlanKernelSchedule(AttentionOpInterface op,
                                  const ::flashdecode::Chip &chip) {
  std::optional<::flashdecode::ScheduleChoice> choice;
  if (ScheduleAttr schedule = op.getScheduleAttr())
    choice = schedule.getChoice();
  return ::flashdecode::findPartialKernelSchedule(getKernelProblem(op), choice,
                                                  chip);
}

LogicalResult mlir::fd::verifySchedule(AttentionOpInterface op) {
  ScheduleAttr schedule = op.getScheduleAttr();
  if (!schedule)
    return success();
  std::string reason = ::flashdecode::getReasonScheduleInvalid(
      getKernelProblem(op), schedule.getChoice());
  if (reason.empty())
    return success();
  return op->emitOpError() << "schedule: " << reason;
}
