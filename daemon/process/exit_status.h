// ExitStatus: how a process ended — its exit code, or the signal that killed it — as every
// part of deployd reports it: a child on the io_context (child_process.h), a blocking command
// (blocking_command.h), a background action's supervisor record (supervisor_record.h).
// A plain value; no threading concerns.
#ifndef DEPLOYD_PROCESS_EXIT_STATUS_H_
#define DEPLOYD_PROCESS_EXIT_STATUS_H_

#include <string>

namespace deployd {

struct ExitStatus {
  int code = 0;    // exit code when !signal
  int signal = 0;  // the signal that killed the process, 0 if it exited
  bool ok() const { return signal == 0 && code == 0; }
  // The shell's convention: code, or 128 + signal.
  int AsShellStatus() const { return signal ? 128 + signal : code; }
  // "exit status 3" / "killed by signal 9 (SIGKILL)"
  std::string ToString() const;

  // From a wait status as waitpid(2) fills it in.
  static ExitStatus FromWaitStatus(int wait_status);
};

// "9 (SIGKILL)"; the number alone for a signal without a name.
std::string SignalName(int sig);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_EXIT_STATUS_H_
