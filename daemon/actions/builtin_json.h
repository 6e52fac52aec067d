// What the daemon hands a built-in action or blocking probe it runs as a child
// (`deployd --action JSON`, `deployd --probe JSON`): the action's plan keys, the parts of the
// daemon's config it needs, and the names of the secrets in its environment (to redact). JSON on
// the command line: no secret value is ever part of it.
#ifndef DEPLOYD_ACTIONS_BUILTIN_JSON_H_
#define DEPLOYD_ACTIONS_BUILTIN_JSON_H_

#include <boost/json/object.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

struct BuiltinRequest {
  ActionKind kind = ActionKind::kRun;
  ServiceAction service;
  KillAction kill;
  GpusFreeAction gpus_free;
  RemoveAction remove;
  DownloadAction download;
  ActionContext context;             // without `say`
  std::vector<std::string> secrets;  // environment variables whose values are redacted
};

// `step` must have a built-in action (not run or approval).
std::string ActionRequestJson(const Step& step, const ActionContext& context);
Result<BuiltinRequest> ParseActionRequest(std::string_view text);

// One line for `deployctl plan`: "kimi.service: started, enabled (unit file with …)".
std::string DescribeAction(const Step& step);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_BUILTIN_JSON_H_
