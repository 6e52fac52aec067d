// RunBlocking: one command run to completion from blocking code (the `deployd --action` and
// `--probe` children), with its stdout and stderr captured separately: systemctl and friends
// print their reasons on stderr ("Failed to start x.service: Unit x.service not found.").
// BlockingCommandRunner wraps it for callers that want only stdout (nvidia-smi, hf).
//
// argv[0] is looked up on PATH; no shell is involved. The child gets /dev/null as stdin, none
// of the caller's other descriptors, and stays in the caller's process group, so stopping the
// action's group stops it too. Blocks the calling thread: never for the daemon's io_context.
#ifndef DEPLOYD_PROCESS_BLOCKING_COMMAND_H_
#define DEPLOYD_PROCESS_BLOCKING_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/exit_status.h"

namespace deployd {

struct CommandOutput {
  // How it ended: exit.ToString() is "exit status 1" / "killed by signal 9 (SIGKILL)".
  ExitStatus exit{.code = -1};
  std::string out;  // stdout, at most 4 MiB (the rest is read and dropped)
  std::string err;  // stderr, likewise

  bool ok() const { return exit.ok(); }
  // The first non-empty line of stderr, else of stdout, else exit.ToString(): the tool's own
  // reason.
  std::string Reason() const;
};

// Runs argv and waits for it, killing it (SIGKILL) after `timeout`. A non-zero exit is not an
// error here (the caller knows what a status means); errors are only "could not run":
//   "cannot start 'systemctl': No such file or directory"
//   "systemctl: no answer within 30s, killed"
Result<CommandOutput> RunBlocking(const std::vector<std::string>& argv, Duration timeout);

// A command run for its stdout: the stdout, or why it could not run or failed. A non-zero exit
// is an error whose message includes the first line of output: nvidia-smi prints its own
// errors there ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
// driver"). A seam: tests give canned output instead of running anything.
using CommandRunner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;

// A CommandRunner over RunBlocking (stderr discarded), killing the command after `timeout`:
// nvidia-smi hangs on a GPU that fell off the bus. Errors: "nvidia-smi: exit status 9: NVIDIA-SMI
// has failed …", or RunBlocking's.
CommandRunner BlockingCommandRunner(Duration timeout = std::chrono::seconds(30));

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_BLOCKING_COMMAND_H_
