// Spawn: the one way deployd starts a program. posix_spawn (a vfork-style clone: the daemon's
// page tables are not copied, so a start costs the same whatever deployd's size), then a
// pidfd on the child, so that its exit is an event and signals reach only this very process.
//
// The child gets exactly the descriptors asked for as 0, 1 and 2 and none of the caller's
// others, default signal dispositions and an empty signal mask, and — unless told otherwise —
// a session and process group of its own (pgid == pid), so that its whole tree can be
// signalled as one and it has no controlling terminal of the daemon's.
//
// Plain blocking calls, usable from the daemon's thread (a spawn does not wait for the child)
// and from the small programs deployd runs (the supervisor, the built-in actions).
#ifndef DEPLOYD_PROCESS_SPAWN_H_
#define DEPLOYD_PROCESS_SPAWN_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "deployd/status.h"

namespace deployd {

struct SpawnRequest {
  // argv[0] without a '/' is looked up on the PATH of `env` (the caller's PATH when `env`
  // has none).
  std::vector<std::string> argv;
  // The whole environment, "NAME=value" entries (see ChildEnvironment).
  std::vector<std::string> env;
  std::string cwd;  // empty: the caller's
  bool new_session = true;
  // Descriptors the child gets as stdin, stdout and stderr; -1 means /dev/null (stderr: -1
  // means the same as stdout).
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

struct Spawned {
  pid_t pid = 0;
  int pidfd = -1;  // owned by the caller (close-on-exec)
};

// Errors name the program as the plan wrote it:
//   "cannot start 'hf': not found on PATH"
//   "cannot start '/opt/x': Permission denied"
Result<Spawned> Spawn(const SpawnRequest& request);

// The environment a child of deployd gets: deployd's own, without what the service manager
// gave deployd alone (NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*, JOURNAL_STREAM, INVOCATION_ID, …:
// a child that used them would speak for deployd), with `overrides` replacing same-named
// entries.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& overrides);

// `name` as found on `path_var` (":"-separated; an empty entry is "."): the first regular,
// executable file; "" when there is none. A name with a '/' is returned as it is.
std::string FindOnPath(const std::string& name, const std::string& path_var);
// The same on deployd's own PATH.
std::string FindOnPath(const std::string& name);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SPAWN_H_
