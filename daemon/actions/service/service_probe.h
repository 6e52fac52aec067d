// The `service` check's probe: one `systemctl show` (and a read of the unit's cgroup) judged
// against the state the check asks for.
//
// Blocking code for the `deployd --probe` child only (builtin_action.h).
#ifndef DEPLOYD_ACTIONS_SERVICE_SERVICE_PROBE_H_
#define DEPLOYD_ACTIONS_SERVICE_SERVICE_PROBE_H_

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

// check.kind == kService: check.unit_state ("started" | "stopped") and check.enabled, as the
// `service` action counts them done (service_action.h). Summaries:
//   "service kimi.service: active (running), main pid 1234"
//   "service glm5.service: inactive (dead); 3 processes left in its cgroup"
// Evidence: check, target, load_state, active_state, sub_state, main_pid, exec_main_status,
// exec_main_code, unit_file_state, cgroup, cgroup_procs ([{pid, title}]), cgroup_error (when the
// cgroup could not be read: then a unit is never proven stopped).
CheckOutcome ProbeService(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_SERVICE_PROBE_H_
