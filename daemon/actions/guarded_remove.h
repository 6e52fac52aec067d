// RemovePath: the `remove` action. Deletes a file or a directory tree that a plan names, after
// refusing every path whose deletion would be a disaster rather than a cleanup.
//
// Refused (the message is "refusing to remove PATH: <why>"):
//   - an empty or relative path, or one with '..' components (what it names depends on more
//     than the text the operator reviewed);
//   - `/` and the top-level system directories themselves (/usr, /etc, /var, /home, /tmp,
//     /lib*, …; not the paths below them — `allowed_roots` is what confines those);
//   - deployd's state directory, anything inside it, and anything containing it;
//   - everything when `allowed_roots` is empty (none by default: nothing may be deleted until
//     the operator names where), and otherwise any path that is not strictly below one of
//     them, and an allowed root itself. "Below" is judged on the real path: the parent chain with
//     its symlinks resolved (realpath of the deepest existing ancestor), so /shared/link/x where
//     /shared/link → /data is outside /shared;
//   - a named path that is a symlink whose target lies outside the allowed roots (the plan
//     meant the target, and only the link would go);
//   - a directory on another filesystem than its parent (a mount point), named or met in the
//     tree: a bind mount of / under a model directory must not be emptied.
// What is removed:
//   - a named symlink is unlinked itself, never its target;
//   - a tree is walked without ever following a symlink: links inside it are unlinked (their
//     targets, inside or outside the tree, are untouched); directories are opened with
//     openat(O_NOFOLLOW|O_DIRECTORY) relative to their parent's descriptor and entries are
//     removed with unlinkat, and the parent of the named path is reached from / one component
//     at a time with O_NOFOLLOW, so swapping a directory for a symlink while the removal runs
//     makes it fail instead of redirecting it.
// A path that does not exist is success with nothing freed: a plan can be run again.
//
// Synchronous and blocking: a tree of a few hundred large files takes milliseconds (unlink
// does not touch the data). Uses no process-wide state (no cwd), only its own descriptors.
#ifndef DEPLOYD_ACTIONS_GUARDED_REMOVE_H_
#define DEPLOYD_ACTIONS_GUARDED_REMOVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "deployd/status.h"

namespace deployd {

struct RemoveOptions {
  // Absolute directories (as the daemon's configuration names them); empty = nothing may be
  // removed (after the fixed refusals, which are reported first).
  std::vector<std::string> allowed_roots;
  // deployd's own state directory; "" = none to protect (tests).
  std::string state_dir;
};

struct RemoveOutcome {
  bool existed = false;
  // Disk space released: st_blocks × 512 of each removed regular file whose link count was 1
  // (sparse files count what they occupy; a file with another hard link frees nothing).
  std::uint64_t bytes_freed = 0;
  std::uint64_t files = 0;        // non-directories removed: regular files, symlinks, others
  std::uint64_t directories = 0;  // including the named one
};

// Every refusal above that can be judged without deleting: for preflight and `validate`.
Status CheckRemovable(const std::string& path, const RemoveOptions& options);

// Refuses as CheckRemovable does, then removes. An error after something was removed says
// what had been removed ("…; removed 3 files (1.2GiB) before stopping").
Result<RemoveOutcome> RemovePath(const std::string& path, const RemoveOptions& options);

// "removed /shared/glm5: 12 files, 3 directories, 402.1GiB freed" / "/shared/glm5: already
// absent".
std::string DescribeRemoval(const std::string& path, const RemoveOutcome& outcome);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GUARDED_REMOVE_H_
