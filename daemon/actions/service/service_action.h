// The `service` built-in action and the `service` check's probe: a systemd unit brought to a
// state (started, stopped, restarted; enabled or not) and proven there, through systemctl.
//
// With `exec`, deployd writes the unit file itself, with the settings that keep a model server
// from leaving orphans, hanging a stop or crash-looping unseen (notes §D #26, #27): Type=exec,
// KillMode=mixed, TimeoutStopSec from stop_timeout, Restart=always with RestartSec and a start
// limit, CUDA_DEVICE_ORDER=PCI_BUS_ID and HF_HUB_OFFLINE=1. The file is replaced atomically and
// only when its content changes; `daemon-reload` follows.
//
// What counts as done:
//   started/restarted  ActiveState=active, SubState=running, MainPID > 0, and still so (same
//                      main pid, no restart) over a short settling time after the start;
//   stopped            ActiveState inactive or failed, and no process left in the unit's cgroup
//                      (cgroup v2: <root><ControlGroup>/cgroup.procs, root from
//                      $DEPLOYD_CGROUP_ROOT, default /sys/fs/cgroup);
//   enabled            UnitFileState enabled (or enabled-runtime) / anything else.
//
// Blocking code for the `deployd --action` and `--probe` children only (builtin_action.h):
// systemctl runs as a child of the calling thread, and waits sample `systemctl show` every
// 200ms.
#ifndef DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_
#define DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_

#include <string>

#include "actions/builtin_action.h"
#include "checks/checks.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// The unit file deployd writes for a ServiceAction with `exec` (vLLM-safe defaults). Pure:
// argv[0] is written as given (RunServiceAction resolves a bare name on PATH first, because
// systemd would search only its own fixed directories). Every value is quoted and escaped for
// systemd: `%` as `%%`, `$` as `$$` in ExecStart, C escapes inside double quotes.
std::string RenderUnitFile(const ServiceAction& action);

// One ExecStart= argument as systemd parses it back to `arg` (quoted only when it has to be).
std::string QuoteExecArg(const std::string& arg);

// Brings action.unit to the state the action asks for and proves it (see above). Errors are
// one line, e.g.
//   "kimi.service is not running (activating/auto-restart): main process exited with status 1
//    (ExecMainStatus=1)"                         (the journal's last lines are said before)
//   "2 processes left in kimi.service's cgroup after stop: pid 123 (VLLM::Worker_TP0), pid 124
//    (python3)"
//   "systemctl not found on PATH: the service action needs systemd"
Status RunServiceAction(const ServiceAction& action, const ActionContext& ctx);

// check.kind == kService: one `systemctl show` (and a read of the cgroup) against
// check.unit_state ("started" | "stopped") and check.enabled. Summaries:
//   "service kimi.service: active (running), main pid 1234"
//   "service glm5.service: inactive (dead); 3 processes left in its cgroup"
// Evidence: check, target, load_state, active_state, sub_state, main_pid, exec_main_status,
// exec_main_code, unit_file_state, cgroup, cgroup_procs ([{pid, title}]).
CheckOutcome ProbeService(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_SERVICE_ACTION_H_
