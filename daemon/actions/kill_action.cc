#include "actions/kill_action.h"

#include <unistd.h>

#include "process/process_kill.h"
#include "process/process_stop.h"

namespace deployd {

Status RunKillAction(const KillAction& action, const ActionContext& ctx) {
  KillOptions options;
  options.pattern = action.match;
  options.whole_groups = action.whole_groups;
  Result<KillPlan> plan = KillPlan::Select(options);
  if (!plan.ok()) return plan.status();
  // This action's own command line carries the pattern: it is no news that it is spared.
  bool spared = false;
  for (const ExcludedProcess& e : plan->excluded()) {
    if (e.process.pid == ::getpid()) continue;
    ctx.say("not signalling " + e.process.Name() + ": " + e.why);
    spared = true;
  }
  if (plan->targets().empty()) {
    ctx.say("no process matches '" + action.match + "'" +
            (spared ? " besides those never signalled" : ""));
    return Status::Ok();
  }
  return StopProcesses(*plan, action.grace, ctx.say);
}

}  // namespace deployd
