// PlanPreview: the dry run behind `deployctl plan` (the "plan" op). The plan is parsed with
// its variables exactly as `apply` would, and described as it would run: each step's command
// after ${var} substitution (the argv, or the shell string), its options and checks. Every
// preflight and skip_if check is probed once, now (checks.h ProbeOnce), to tell which pass.
// Nothing is recorded and no step's action is started.
//
// Runs on the daemon's io_context, so that checks see what the daemon's steps would see (its
// user, environment and working directory).
#ifndef DEPLOYD_CONTROL_PLAN_PREVIEW_H_
#define DEPLOYD_CONTROL_PLAN_PREVIEW_H_

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <map>
#include <string>

namespace deployd {

// The plan `text` (named `file` in diagnostics) with `vars`. The answer: {"ok": false,
// "error", "diagnostics": […]} for an invalid plan, else {"ok": true, "plan": {"name",
// "description", "file", "vars", "preflight": [CHECK…], "preflight_passed", "steps": [STEP…],
// "on_failure": [STEP…]}} where CHECK is {"check": DescribeCheck, "after_ms", "every_ms",
// "within_ms", "timeout_ms"} plus, for probed checks, {"passed", "summary"}, and STEP is
// {"id", "action": "run"|"approval", "command": {"shell", "script"?, "argv"}, "approval"?,
// "background", "timeout_ms", "grace_ms", "retries", "retry_delay_ms", "idempotent", "cwd",
// "env", "fail_on", "progress"? ({"path", "stall_after_ms", "every_ms", "total_bytes",
// "on_stall"}), "verify": [CHECK…], "skip_if": [CHECK…], "would_skip"}.
boost::asio::awaitable<boost::json::object> PreviewPlan(std::string text, std::string file,
                                                        std::map<std::string, std::string> vars);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_PLAN_PREVIEW_H_
