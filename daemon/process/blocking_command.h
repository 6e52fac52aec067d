// RunBlocking: one command run to completion from blocking code (the `deployd --action` and
// `--probe` children), with its stdout and stderr captured separately: systemctl and friends
// print their reasons on stderr ("Failed to start x.service: Unit x.service not found.").
//
// argv[0] is looked up on PATH; no shell is involved. The child gets /dev/null as stdin, none
// of the caller's other descriptors, and stays in the caller's process group, so stopping the
// action's group stops it too. Blocks the calling thread: never for the daemon's io_context.
#ifndef DEPLOYD_PROCESS_BLOCKING_COMMAND_H_
#define DEPLOYD_PROCESS_BLOCKING_COMMAND_H_

#include <string>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

struct CommandOutput {
  int exit_status = -1;  // 0-255 when it exited; -1 when a signal ended it
  int term_signal = 0;   // the signal that ended it, else 0
  std::string out;       // stdout, at most 4 MiB (the rest is read and dropped)
  std::string err;       // stderr, likewise

  bool ok() const { return exit_status == 0; }
  // "exit status 1" / "killed by signal 9 (SIGKILL)"
  std::string How() const;
  // The first non-empty line of stderr, else of stdout, else How(): the tool's own reason.
  std::string Reason() const;
};

// Runs argv and waits for it, killing it (SIGKILL) after `timeout`. A non-zero exit is not an
// error here (the caller knows what a status means); errors are only "could not run":
//   "cannot start 'systemctl': No such file or directory"
//   "systemctl: no answer within 30s, killed"
Result<CommandOutput> RunBlocking(const std::vector<std::string>& argv, Duration timeout);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_BLOCKING_COMMAND_H_
