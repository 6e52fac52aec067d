// AttemptRecord: what a step's record keeps of its current attempt's action (the
// `steps.action` column, JSON), so that a later deployd — after a crash, a restart, a reboot —
// knows what became of it. Committed with the fire, before anything starts: where its
// supervisor records it (status_file), where its output starts in the log, the boot it was
// fired in and the tag every process of the attempt carries in its environment. Completed
// with the processes once a background action's supervisor reports them, and with `stop` while
// the attempt is being stopped: the step's next state is committed only once every process of
// the attempt is gone, and `stop` says what that state will be, also across a restart.
//
//   {"kind": "supervised", "status_file": "/…/STEP.1.status", "log_offset": 0,
//    "boot_id": "…", "tag": "demo-1/fetch/1", "fired_at_ms": 1764650000000,
//    "pid": 4242, "start_time": 123456, "supervisor_pid": 4241, "supervisor_start_time": 123455,
//    "stop": {"event": "action-failed", "reason": "timed out after 5s", "evidence": {…},
//             "final": false}}
// (Records of older deployd versions say "kind": "background"; they read the same.)
//
// A plain value; no threading concerns.
#ifndef DEPLOYD_ENGINE_ATTEMPT_RECORD_H_
#define DEPLOYD_ENGINE_ATTEMPT_RECORD_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/step_machine.h"
#include "process/process_identity.h"

namespace deployd {

// The environment variable every process of an attempt carries (inherited from its
// supervisor): how its processes are found when the supervisor is gone.
inline constexpr std::string_view kAttemptTagVar = "DEPLOYD_ATTEMPT";

// Why an attempt is being stopped, and so what its step becomes once it is gone.
struct PendingStop {
  StepEvent event = StepEvent::kActionFailed;  // kActionFailed, kStalled, kVerifyFailed, kCancel
  std::string reason;
  boost::json::object evidence;
  bool final = false;  // no retry can help (a fatal fail_on line)
};

struct AttemptRecord {
  std::string status_file;
  std::uint64_t log_offset = 0;  // the size of the step's log at fire: its output starts here
  std::string boot_id;           // of the fire
  std::string tag;               // the value of kAttemptTagVar
  std::int64_t fired_at_ms = 0;  // Unix time of the fire: a service's journal is read from here
  std::optional<ProcessIdentity> action;  // the action's process (and group); once reported
  std::optional<ProcessIdentity> supervisor;
  std::optional<PendingStop> stop;

  std::string ToJson() const;
  static std::optional<AttemptRecord> FromJson(std::string_view text);
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_ATTEMPT_RECORD_H_
