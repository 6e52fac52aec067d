// Built-in actions (`service`, `kill`, `gpus_free`, `remove`, `download`) and the probes of
// the checks that block (`service`, `process`, `gpus_free`, `weights_complete` with sha256).
//
// They never run on the daemon's thread: the engine starts deployd itself as a child,
// `deployd --action JSON` or `deployd --probe JSON`, and treats it like any other action
// (its output is the step's log, fail_on applies, timeouts and cancellation stop its process
// group, its exit status decides). Inside that child the code below is plain blocking code.
// An action's last line on failure is the reason the step failed.
#ifndef DEPLOYD_ACTIONS_BUILTIN_ACTION_H_
#define DEPLOYD_ACTIONS_BUILTIN_ACTION_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "checks/probe_request.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// The hidden flag deployd re-executes itself with for an action: `deployd --action JSON`
// (kBuiltinProbeFlag, for probes, is in checks/probe_request.h).
inline constexpr std::string_view kBuiltinActionFlag = "--action";

// What an action gets besides its plan keys: where to say things, and the daemon's config.
struct ActionContext {
  std::function<void(std::string_view line)> say;  // one line to the step's log (stdout)
  std::string unit_dir = "/etc/systemd/system";    // where `service` writes unit files
  std::vector<std::string> allowed_roots;          // `remove` deletes only under these
  std::string state_dir;                           // `remove` never deletes it
};

// `deployd --action JSON`: runs the action the request describes, saying its lines on
// stdout; exit 0 when it succeeded, 1 with the reason as the last line when it failed.
int BuiltinActionMain(std::string_view request);
// `deployd --probe JSON`: one probe; prints {"passed", "summary", "evidence"} as one line.
int BuiltinProbeMain(std::string_view request);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_BUILTIN_ACTION_H_
