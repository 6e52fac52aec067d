// The `kill` action (docs/gpu-and-kill.md).
//
// `kill` selects processes as KillPlan does (command line or title, whole process groups,
// never deployd, its supervisors or its ancestors), then stops them as StopProcesses does
// (process/process_stop.h): SIGTERM (and SIGCONT), up to `grace` — ending as soon as no
// target is left — SIGKILL to the survivors, and a wait for the kernel to tear them down. A
// survivor in state D (stuck in a driver call) fails the action at once with its name: SIGKILL
// cannot reach it and retrying will not help.
//
// Blocking code for the action child (`deployd --action`), never for the daemon's thread.
#ifndef DEPLOYD_ACTIONS_KILL_ACTION_H_
#define DEPLOYD_ACTIONS_KILL_ACTION_H_

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// No match is success ("no process matches 'X'"). Says one line per target ("SIGTERM pid 123
// (VLLM::Worker_TP0), group 120") and a summary ("3 processes stopped: 2 by SIGTERM, 1 by
// SIGKILL after 30s").
Status RunKillAction(const KillAction& action, const ActionContext& ctx);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_KILL_ACTION_H_
