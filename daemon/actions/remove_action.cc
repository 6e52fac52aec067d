#include "actions/remove_action.h"

#include "actions/guarded_remove.h"

namespace deployd {

Status RunRemoveAction(const RemoveAction& action, const ActionContext& ctx) {
  RemoveOptions options{ctx.allowed_roots, ctx.state_dir};
  auto outcome = RemovePath(action.path, options);
  if (!outcome.ok()) return outcome.status();
  std::string line = DescribeRemoval(action.path, outcome.value());
  if (!outcome->existed) line += ", nothing to remove";
  ctx.say(line);
  return Status::Ok();
}

}  // namespace deployd
