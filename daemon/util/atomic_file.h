// WriteFileAtomically: replaces a file so that a reader sees the old content or the new, never
// a part of either, also after a crash or a power loss (leveldb's way): the content goes to a
// temporary file in the same directory, which is fsync'd, renamed over the target, and then the
// directory is fsync'd so that the rename itself is durable.
//
// The temporary file is `.NAME.deployd-tmp` beside NAME: hidden, so that a reader that lists
// the directory (systemd loading unit files, an operator's ls) never takes a half-written file
// for a real one. It is removed when a step fails. Blocking; safe from any thread as long as no
// two callers write the same path at once.
#ifndef DEPLOYD_UTIL_ATOMIC_FILE_H_
#define DEPLOYD_UTIL_ATOMIC_FILE_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

enum class Durability {
  kPowerLoss,     // fsync of the file and its directory: survives a crash of the host
  kProcessCrash,  // no fsync: survives the death of any process, not of the host (cheap)
};

// Writes `content` to `path` with exactly `mode` (set with fchmod, so the umask does not
// decide who can read it). Errors name the path and what failed:
//   "cannot write /etc/systemd/system/kimi.service: Permission denied"   (the temporary file)
//   "cannot write /var/lib/deployd/x.status: fsync: No space left on device"
Status WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode,
                           Durability durability = Durability::kPowerLoss);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_ATOMIC_FILE_H_
