#include "process/exit_status.h"

#include <string.h>
#include <sys/wait.h>

namespace deployd {

std::string ExitStatus::ToString() const {
  if (signal == 0) return "exit status " + std::to_string(code);
  return "killed by signal " + SignalName(signal);
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
  } else {
    status.code = WEXITSTATUS(wait_status);
  }
  return status;
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

}  // namespace deployd
