// The `service` built-in action: a systemd unit brought to a state (started, stopped,
// restarted; enabled or not) and proven there, through systemctl (systemctl.h).
//
// With `exec`, deployd writes the unit file itself first (unit_file.h), with the settings that
// keep a model server from leaving orphans, hanging a stop or crash-looping unseen; the file is
// replaced atomically and only when its content changes, and `daemon-reload` follows.
//
// What counts as done:
//   started/restarted  ActiveState=active, SubState=running, MainPID > 0, and still so (same
//                      main pid, no restart) over a short settling time after the start;
//   stopped            ActiveState inactive or failed, and no process left in the unit's cgroup
//                      (in the hierarchy this host mounts: v2, hybrid or v1, unit_cgroup.h;
//                      a cgroup that cannot be read is an error, never "empty");
//   enabled            UnitFileState enabled (or enabled-runtime) / anything else.
// The `service` check (service_probe.h) judges a unit by the same rules.
//
// Blocking code for the `deployd --action` child only (builtin_action.h): systemctl runs as a
// child of the calling thread. Nothing is sampled on a timer. A start is proven by waiting on
// the main process's pidfd for the settling time (2s), which ends the moment that process
// exits, then reading `systemctl show` again: the same main pid, no restart. A stop relies on
// `systemctl stop`'s own wait for the stop job, then waits on pidfds (up to 5s) for what is
// still in the cgroup to exit (process/process_stop.h).
#ifndef DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_
#define DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// Brings action.unit to the state the action asks for and proves it (see above). Errors are
// one line, e.g.
//   "kimi.service is not running (activating/auto-restart): main process exited with status 1
//    (ExecMainStatus=1)"                         (the journal's last lines are said before)
//   "2 processes left in kimi.service's cgroup after stop: pid 123 (VLLM::Worker_TP0), pid 124
//    (python3)"
//   "cannot prove that no process is left in kimi.service's cgroup: cannot read
//    /sys/fs/cgroup/system.slice/kimi.service/cgroup.procs: Permission denied"
//   "systemctl not found on PATH: the service action needs systemd"
Status RunServiceAction(const ServiceAction& action, const ActionContext& ctx);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_
