// The supervisor of one attempt of a step's action — every action, foreground or background:
//
//   deployd-supervise --supervise [--grace MS] [--log-cap BYTES] [--redact NAME]…
//           [--attempt N/M] STATUS_FILE LOG_FILE -- PROGRAM [ARG…]
//
// (supervise_main.cc; or `deployd --supervise …`, handled at the very top of deployd's main,
// where deployd-supervise is missing). It is what makes the attempt's processes deployd's for
// good, whatever happens to deployd:
//   - It is a child subreaper: whatever the action forks — into its process group, into a
//     session of its own (setsid), or orphaned by a double fork — stays below it, so "every
//     process of the attempt" is its subtree, and each one's exit reaches it as SIGCHLD.
//   - It outlives deployd: it holds none of deployd's descriptors, ignores SIGINT, SIGHUP and
//     SIGPIPE, and the action's output goes through it to LOG_FILE (appended, each line
//     redacted of the values of the environment variables named by --redact, rotated once to
//     LOG_FILE.1 past --log-cap), never through a pipe to deployd that would die with it;
//     beside the log, when its lines were written and where attempt N of M begins
//     (util/log_marks.h).
//   - SIGTERM asks it to stop the attempt: SIGTERM to the action's group and every process
//     below it, SIGKILL to what is left after --grace, then the wait until all are gone.
//   - When the action's main process exits by itself, whatever it left running is stopped
//     the same way (as systemd does with a service's cgroup) and named in the record.
//   - It exits only once every process of the attempt is gone — so its own exit, which deployd
//     waits for on a pidfd, proves it — after writing how the action ended (`exited`). A
//     process that SIGKILL cannot end (state D) is named as `stuck` after kKillWait.
// Its records (supervisor_record.h) go to STATUS_FILE: `starting` before the action is started
// (no file: it never was), `running`, then `exited` or `failed_to_start`; the `running` record
// is also one line on its stdout, after which it lets go of that pipe.
#ifndef DEPLOYD_PROCESS_SUPERVISOR_H_
#define DEPLOYD_PROCESS_SUPERVISOR_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deployd {

inline constexpr std::string_view kSuperviseFlag = "--supervise";
// After SIGKILL, how long the kernel gets to tear the processes down before the survivors are
// reported stuck (tens of GiB of GPU memory can take seconds to release).
inline constexpr std::chrono::milliseconds kKillWait{10'000};

struct SupervisorOptions {
  std::string status_file;
  std::string log_file;
  std::chrono::milliseconds grace{10'000};
  std::uint64_t log_cap_bytes = 64ull << 20;  // 0: never rotated
  std::vector<std::string> redact;            // names of environment variables (secrets)
  int attempt = 0;                            // which attempt of the step this is (0: not said)
  int attempts = 0;                           // of how many at most
};

// The argv that runs `program_argv` (argv[0] an absolute path) under the supervisor found at
// `deployd_exe`: append the program and its arguments.
std::vector<std::string> SupervisorCommand(const std::string& deployd_exe,
                                           const SupervisorOptions& options);

// REQUIRES: argv[1] == kSuperviseFlag. Returns the process's exit status.
int SuperviseMain(int argc, char** argv);

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SUPERVISOR_H_
