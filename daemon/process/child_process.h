// ChildProcess: one action or probe command, started with Spawn (process/spawn.h) on the daemon's
// io_context, in a session and process group of its own (pgid == pid).
//
// Stdout and stderr share one pipe; each complete line is handed to `on_line` as it arrives
// (and appended to `log_path` when given). A caller that must tell them apart (a version
// check reads stdout first) gives `on_stderr_line`: stderr then has a pipe of its own. `on_exit` is
// called exactly once, after the child was reaped and the output it wrote before exiting was
// delivered. (A plan's actions, which must outlive the daemon, run under a supervisor:
// supervised_action.h.)
//
// Everything happens on the io_context's one thread; callbacks are never invoked re-entrantly
// from Start(). Destroying the object (or the daemon exiting) never kills the child: stopping
// is explicit, with Signal() or Terminate().
#ifndef DEPLOYD_PROCESS_CHILD_PROCESS_H_
#define DEPLOYD_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/exit_status.h"

namespace deployd {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] without '/' is looked up on PATH (of `env` if set)
  std::map<std::string, std::string> env;     // added to (overriding) the daemon's environment
  std::string cwd;                            // empty: the daemon's
  std::string log_path;                       // empty: output is not logged
  std::uint64_t log_cap_bytes = 64ull << 20;  // past this the log is rotated once (.1)
  // When set, the program is run through this command: the child executes
  // wrapper + {argv[0] resolved on PATH} + argv[1…] (a background action's supervisor). Errors
  // still name argv[0].
  std::vector<std::string> wrapper;
  // Values (secrets) replaced by "***" in every line before it is logged or handed on.
  std::vector<std::string> redact;
  // When set, each line is handed to this first: what it returns is logged and handed on in
  // the line's place (as several lines if it holds '\n'); nullopt drops the line.
  std::function<std::optional<std::string>(std::string_view line)> rewrite_line;
  // When set, stderr has a pipe of its own and its lines are handed here instead of to
  // `on_line` (both are logged, redacted and rewritten alike). Each stream keeps its lines in
  // order; how the two interleave is then only as they happened to be read.
  std::function<void(std::string_view line)> on_stderr_line;
};

class ChildProcess : public std::enable_shared_from_this<ChildProcess> {
 public:
  using LineHandler = std::function<void(std::string_view line)>;
  using ExitHandler = std::function<void(const ExitStatus&)>;

  // Fails (with "cannot start 'argv0': No such file or directory") when the program cannot
  // be executed; no callback is called then.
  static Result<std::shared_ptr<ChildProcess>> Start(boost::asio::any_io_executor ex,
                                                     const SpawnOptions& options,
                                                     LineHandler on_line, ExitHandler on_exit);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool exited() const { return exited_; }

  // Sends `sig` to the child's whole process group.
  void Signal(int sig);
  // SIGTERM to the group, then SIGKILL to the group after `grace` unless the group is gone.
  void Terminate(Duration grace);

  // The last lines of output (at most `kTailLines`), for evidence.
  std::vector<std::string> Tail() const;
  static constexpr size_t kTailLines = 20;

  struct Impl;  // Boost.Process and pipe state; defined in child_process.cc only

 private:
  ChildProcess() = default;
  static void ReadOutput(std::shared_ptr<ChildProcess> self, bool from_stderr);
  static void ReportExit(std::shared_ptr<ChildProcess> self);
  pid_t pid_ = 0;
  bool exited_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_CHILD_PROCESS_H_
