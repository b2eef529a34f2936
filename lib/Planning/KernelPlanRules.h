//===- KernelPlanRules.h - What planKernel and schedules share --*- C++ -*-===//
//-*-===//
//
// Private to the planning library: the rules KernelPlan.cpp (the schedule's
// facts and validation) and PlanKernel.cpp (planKernel's choices) both use.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_PLANNING_KERNELPLANRULES_H
#define FD_LIB_PLANNING_KERNELPLANRULES_H

#include "fd/Planning/KernelPlan.h"

#include <cstdint>
#include <string>

namespace flashdecode::detail {

/// A held k-step of q: a lane's four mma words.
inline constexpr int64_t kRegistersPerHeldQueryStep = 4;

/// Gives `schedule` launch bounds of the most blocks per SM, up to
/// kPlannedBlocksPerSM, whose register budget on `chip` covers its demand
/// (one where not even a single block's does: ptxas's own limit).
void setLaunchBoundsForRegisterDemand(KernelSchedule &schedule,
                                      const KernelProblem &problem,
                                      const Chip &chip);

/// Why no tensor-core tile takes `problem`: a sentence naming what the
/// tiles accept; empty when one does.
std::string getReasonNoTensorCoreTile(const KernelProblem &problem);

/// Why the warpgroup tile cannot take `problem`: a sentence naming what it
/// accepts; empty when it can (WarpgroupTilePlan.cpp, as the next).
std::string getReasonNoWarpgroupTile(const KernelProblem &problem);
/// Why a warpgroup tile cannot take `choice`'s fields for `problem`.
std::string getReasonWarpgroupTilingInvalid(const KernelProblem &problem,
                                            const ScheduleChoice &choice);

} // namespace flashdecode::detail

#endif // FD_LIB_PLANNING_KERNELPLANRULES_H
