// The supervisor of a background action: `deployd` re-executed as
//
//   deployd --supervise STATUS_FILE LOG_FILE -- PROGRAM [ARG…]
//
// (handled at the very top of main). It outlives the daemon: it ignores SIGTERM, SIGINT and
// SIGHUP (a `systemctl restart deployd` or a crash of the daemon must not take it along) and
// holds no descriptor of the daemon's. It forks the action into a process group of its own
// (stdin /dev/null, stdout and stderr appended to LOG_FILE, the environment and working
// directory it was given), writes a `running` SupervisorRecord to STATUS_FILE and the same
// record as one line on its stdout (then lets go of that pipe), waits for the action, writes
// the `exited` record, and exits. Stopping the action is signalling its process group; the
// supervisor then records the signal. See supervisor_record.h for the records.
#ifndef DEPLOYD_PROCESS_SUPERVISOR_H_
#define DEPLOYD_PROCESS_SUPERVISOR_H_

#include <string>
#include <string_view>
#include <vector>

namespace deployd {

inline constexpr std::string_view kSuperviseFlag = "--supervise";

// The argv that runs `program_argv` (argv[0] an absolute path) under the supervisor found at
// `deployd_exe`.
std::vector<std::string> SupervisorCommand(const std::string& deployd_exe,
                                           const std::string& status_file,
                                           const std::string& log_file);

// REQUIRES: argv[1] == kSuperviseFlag. Returns the process's exit status.
int SuperviseMain(int argc, char** argv);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SUPERVISOR_H_
