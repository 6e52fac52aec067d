// Talking to systemd for the `service` action and check: `systemctl show` read into a
// UnitStatus, the verbs (daemon-reload, start, stop, enable, …) run and their failures made one
// line; processes named for messages.
//
// Blocking code for the `deployd --action` and `--probe` children only (builtin_action.h):
// systemctl runs as a child of the calling thread (process/blocking_command.h).
#ifndef DEPLOYD_ACTIONS_SERVICE_SYSTEMCTL_H_
#define DEPLOYD_ACTIONS_SERVICE_SYSTEMCTL_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/blocking_command.h"
#include "process/spawn.h"

namespace deployd {

// systemctl show, enable, daemon-reload, journalctl: quick unless systemd itself is stuck.
inline constexpr Duration kSystemctlTimeout = std::chrono::seconds(30);

// "kimi" -> "kimi.service", as systemctl itself completes it. Errors: "service: no unit given",
// "'a b' is not a valid systemd unit name".
Result<std::string> NormalizeUnit(const std::string& unit);

// The unit as `systemctl show` describes it.
struct UnitStatus {
  std::string load_state, active_state, sub_state, unit_file_state, control_group, result;
  std::string invocation_id;  // of the unit's current (or last) run; "" before the first
  pid_t main_pid = 0;
  int exec_main_status = 0;
  int exec_main_code = 0;  // CLD_EXITED 1, CLD_KILLED 2, CLD_DUMPED 3; 0: never ran
  int n_restarts = 0;
  bool need_reload = false;
  std::optional<Duration> timeout_stop;  // nullopt: infinity or unknown

  bool Loaded() const { return load_state == "loaded"; }
  bool Running() const {
    return active_state == "active" && sub_state == "running" && main_pid > 0;
  }
  bool Stopped() const { return active_state == "inactive" || active_state == "failed"; }
  bool Starting() const { return active_state == "activating" && sub_state != "auto-restart"; }
  bool Enabled() const {
    return unit_file_state == "enabled" || unit_file_state == "enabled-runtime";
  }
  // "active (running)"
  std::string State() const { return active_state + " (" + sub_state + ")"; }
  // How the last main process ended, "" when none has: "main process exited with status 1
  // (ExecMainStatus=1)", "main process was killed by signal 9 (SIGKILL) (ExecMainStatus=9)".
  std::string MainExit() const;
};

// `systemctl ARGS…`, whatever its exit status.
Result<CommandOutput> Systemctl(std::vector<std::string> args,
                                Duration timeout = kSystemctlTimeout);

// `systemctl show UNIT -p …`. Errors: "systemctl show x.service: <its reason>".
Result<UnitStatus> ShowUnit(const std::string& unit, Duration timeout = kSystemctlTimeout);

// A systemctl verb that must succeed ("" for no unit, as daemon-reload): "systemctl enable
// x.service failed: <its stderr's reason>".
Status SystemctlVerb(const std::string& verb, const std::string& unit,
                     Duration timeout = kSystemctlTimeout);

// "pid 123 (VLLM::Worker_TP0)", the title read from /proc now ("?" when gone).
std::string DescribePid(pid_t pid);
// "pid 123 (VLLM::Worker_TP0), pid 124 (python3)"
std::string DescribePids(const std::vector<pid_t>& pids);
// "1 process", "2 processes"
std::string ProcessCount(size_t n);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_SYSTEMCTL_H_
