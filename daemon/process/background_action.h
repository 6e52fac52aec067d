// BackgroundAction: a `background: true` action, run under its supervisor (supervisor.h) so
// that it outlives deployd, and watched while deployd runs: when it has started, when it ends
// and how (from the supervisor's status file), and stopping its process group.
//
// Started here, the supervisor is deployd's child (its exit is noticed by reaping it); found
// again after a restart of deployd (Find), it is watched through a pidfd. Either way the
// supervisor's exit is the signal, and its status file says how the action ended.
//
// One thread: everything runs on the executor given; handlers are never called from Start()
// or Find(), nor after Forget().
#ifndef DEPLOYD_PROCESS_BACKGROUND_ACTION_H_
#define DEPLOYD_PROCESS_BACKGROUND_ACTION_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/child_process.h"
#include "process/process_exit_watch.h"
#include "process/process_identity.h"
#include "process/supervisor_record.h"

namespace deployd {

// What the step's record keeps of its background action (the `steps.action` column, JSON):
// committed with the fire (status_file, log_offset), completed when the supervisor reports
// (the processes), so that a later deployd can find the action again.
//   {"kind": "background", "status_file": "/…/STEP.1.status", "log_offset": 0,
//    "pid": 4242, "start_time": 123456, "supervisor_pid": 4241,
//    "supervisor_start_time": 123455, "boot_id": "…"}
struct BackgroundActionInfo {
  std::string status_file;
  std::uint64_t log_offset = 0;  // the size of the step's log at fire: its output starts here
  std::optional<ProcessIdentity> action;  // the action's process (and group); once reported
  std::optional<ProcessIdentity> supervisor;

  std::string ToJson() const;
  static std::optional<BackgroundActionInfo> FromJson(std::string_view text);
};

// How a background action ended, as far as it can be known.
struct ActionEnd {
  std::optional<ExitStatus> exit;  // unset: it could not start, or its end was not recorded
  std::string reason;              // "exit status 3", "cannot start 'x': …", …
  bool ok() const { return exit && exit->ok(); }
};

class BackgroundAction : public std::enable_shared_from_this<BackgroundAction> {
 public:
  struct Handlers {
    // The supervisor has started the action (Start only).
    std::function<void(const SupervisorRecord&)> on_started;
    // The action has ended, could not start, or its supervisor died without saying.
    std::function<void(const ActionEnd&)> on_end;
  };

  // Runs `options` (argv, env, cwd; output appended to options.log_path) under a supervisor
  // executed from `supervisor_exe` (deployd itself), which records the action in
  // `status_file`. Fails when the supervisor cannot be started; a failure of the action to
  // start comes to on_end.
  static Result<std::shared_ptr<BackgroundAction>> Start(boost::asio::any_io_executor ex,
                                                         SpawnOptions options,
                                                         const std::string& supervisor_exe,
                                                         const std::string& status_file,
                                                         Handlers handlers);

  // What became of an action that an earlier deployd started.
  struct Found {
    enum class Kind {
      kAlive,    // its supervisor still runs: `watch` watches it (on_end when the action ends)
      kEnded,    // it ended while deployd was down: `end` says how
      kUnknown,  // neither its supervisor nor a record of its end is there (a reboot, say)
    };
    Kind kind = Kind::kUnknown;
    std::shared_ptr<BackgroundAction> watch;
    SupervisorRecord record;  // kAlive: who the action and its supervisor are
    ActionEnd end;            // kEnded
  };
  static Found Find(boost::asio::any_io_executor ex, const BackgroundActionInfo& info,
                    Handlers handlers);

  // SIGTERM to the action's process group, SIGKILL after `grace` if the group is still there.
  // Before the supervisor has reported the action, it is stopped as soon as it does; an action
  // that has ended is left alone. The supervisor is never signalled: it records the signal.
  void Stop(Duration grace);
  // No handler is called from now on; a stop in progress still completes.
  void Forget();

  const std::optional<ProcessIdentity>& action() const { return action_; }

 private:
  explicit BackgroundAction(boost::asio::any_io_executor ex);
  void OnReport(std::string_view line);
  // The supervisor has exited (`how`: its own end, when known): learns the action's end.
  void Conclude(const std::string& how);
  void SignalGroup();

  Handlers handlers_;
  std::string status_file_;
  std::optional<ProcessIdentity> action_;
  std::optional<ProcessIdentity> supervisor_;
  std::string start_error_;  // what the supervisor said before failing
  bool ended_ = false;
  std::optional<Duration> stop_grace_;
  // Set while a stop waits for the supervisor's report: the stop must happen even when the
  // step has stopped watching in the meantime.
  std::shared_ptr<BackgroundAction> keep_alive_;
  std::shared_ptr<ChildProcess> supervisor_child_;  // started here
  std::unique_ptr<ProcessExitWatch> exit_watch_;    // found after a restart
  boost::asio::steady_timer kill_timer_;
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_BACKGROUND_ACTION_H_
