// The `kill` action and the `process` check's probe (docs/gpu-and-kill.md).
//
// `kill` selects processes as KillPlan does (command line or title, whole process groups,
// never deployd, its supervisors or its ancestors), sends SIGTERM (and SIGCONT), waits up to
// `grace` — ending as soon as no target is left — sends SIGKILL to the survivors, and waits for
// the kernel to tear them down. Waiting is on pidfds with poll(2), so it ends the moment the
// last target exits. A survivor in state D (stuck in a driver call) fails the action at once
// with its name: SIGKILL cannot reach it and retrying will not help.
//
// Blocking code for the action child (`deployd --action`) and the probe child (`deployd
// --probe`), never for the daemon's thread.
#ifndef DEPLOYD_ACTIONS_KILL_ACTION_H_
#define DEPLOYD_ACTIONS_KILL_ACTION_H_

#include "actions/builtin_action.h"
#include "checks/checks.h"
#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/process_kill.h"

namespace deployd {

// How long SIGKILLed processes get to disappear. The kernel can take seconds to release tens
// of GiB of GPU memory; longer than this means something holds them (state D).
inline constexpr Duration kKillVerifyWindow = std::chrono::seconds(10);

// No match is success ("no process matches 'X'"). Says one line per target ("SIGTERM pid 123
// (VLLM::Worker_TP0), group 120") and a summary ("3 processes stopped: 2 by SIGTERM, 1 by
// SIGKILL after 30s").
Status RunKillAction(const KillAction& action, const ActionContext& ctx);

// The signalling part of RunKillAction, shared with `gpus_free` (kill: true): SIGTERM, up to
// `grace`, SIGKILL, up to `verify`, then the summary or the reason survivors remain.
Status StopProcesses(KillPlan& plan, Duration grace, const ActionContext& ctx,
                     Duration verify = kKillVerifyWindow);

// Waits (on pidfds, waking the moment one exits) until no target of `plan` is left or `limit`
// has passed; returns the survivors then.
std::vector<Survivor> WaitUntilGone(KillPlan& plan, Duration limit);

// kind kProcess: passes when a process matching check.match runs (with check.absent: when none
// does). Selected as `kill` selects, without process groups, so deployd's own processes (whose
// command lines may carry the pattern) never count. The summary names up to 5 by pid and title:
//   process 'VLLM::': 3 running: pid 7 (VLLM::EngineCore), pid 8 (VLLM::Worker_TP0), …
//   process 'VLLM::': none running
CheckOutcome ProbeProcess(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_KILL_ACTION_H_
