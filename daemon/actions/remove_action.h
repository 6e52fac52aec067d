// The `remove` action: a guarded delete of the path a plan names (guarded_remove.h), run in the
// action child. The refusals are RemovePath's; this only supplies the daemon's configuration
// and says what was freed.
#ifndef DEPLOYD_ACTIONS_REMOVE_ACTION_H_
#define DEPLOYD_ACTIONS_REMOVE_ACTION_H_

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// Says "removed /shared/glm5: 12 files, 3 directories, 402.1GiB freed", or "/shared/glm5:
// already absent, nothing to remove" (success: a plan can be run again). A refusal or a failure
// part-way is the error, with RemovePath's message ("refusing to remove PATH: …").
Status RunRemoveAction(const RemoveAction& action, const ActionContext& ctx);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_REMOVE_ACTION_H_
