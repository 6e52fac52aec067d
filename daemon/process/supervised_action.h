// SupervisedAction: one attempt of a step's action — foreground or background — run under its
// supervisor (supervisor.h), so that it is deployd's whatever happens to deployd, and watched
// while deployd runs: when it has started, when every process of it is gone and how the action
// ended (from the supervisor's status file), and stopping it.
//
// Started here, the supervisor is deployd's child (its exit is noticed by reaping it); found
// again after a restart of deployd (Find), it is watched through a pidfd. Either way the
// supervisor's exit is the signal — it exits only once every process of the attempt is gone —
// and its status file says how the action ended.
//
// One thread: everything runs on the executor given; handlers are never called from Start()
// or Find(), nor after Forget().
#ifndef DEPLOYD_PROCESS_SUPERVISED_ACTION_H_
#define DEPLOYD_PROCESS_SUPERVISED_ACTION_H_

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "process/child_process.h"
#include "process/process_exit_watch.h"
#include "process/process_identity.h"
#include "process/supervisor.h"
#include "process/supervisor_record.h"

namespace deployd {

// How an attempt ended, as far as it can be known.
struct ActionEnd {
  std::optional<ExitStatus> exit;  // unset: it could not start, or its end was not recorded
  std::string reason;              // "exit status 3", "cannot start 'x': …", …
  bool recorded = false;           // the supervisor recorded it (else it died without saying)
  std::vector<ProcessNote> left;   // what the action left running, stopped by the supervisor
  std::vector<ProcessNote> stuck;  // what even SIGKILL did not end (state D): still there
  // Output the step's log could not take (a full disk): "" when none was lost, else "12 lines
  // (8.0MiB) of output could not be written to the log: No space left on device".
  std::string log_lost;
  bool ok() const { return exit && exit->ok(); }
};

class SupervisedAction : public std::enable_shared_from_this<SupervisedAction> {
 public:
  struct Handlers {
    // The supervisor has started the action (Start only).
    std::function<void(const SupervisorRecord&)> on_started;
    // The action has ended, could not start, or its supervisor died without saying.
    std::function<void(const ActionEnd&)> on_end;
  };

  // Runs `options` (argv, env, cwd) under a supervisor executed from `supervisor_exe`
  // (deployd itself) with `supervision` (status file, log, grace, secrets to redact). Fails
  // when the supervisor cannot be started; a failure of the action to start comes to on_end.
  static Result<std::shared_ptr<SupervisedAction>> Start(boost::asio::any_io_executor ex,
                                                         SpawnOptions options,
                                                         SupervisorOptions supervision,
                                                         const std::string& supervisor_exe,
                                                         Handlers handlers);

  // What became of an action that an earlier deployd started.
  struct Found {
    enum class Kind {
      kAlive,         // its supervisor still runs: `watch` watches it (on_end when it ends)
      kEnded,         // it ended while deployd was down: `end` says how
      kNeverStarted,  // no status file: its supervisor never got to starting it
      kUnknown,       // neither its supervisor nor a record of its end is there
    };
    Kind kind = Kind::kUnknown;
    std::shared_ptr<SupervisedAction> watch;
    SupervisorRecord record;  // kAlive: who the action and its supervisor are, since when
    ActionEnd end;            // kEnded
  };
  // `supervisor`: as committed, if it was (else as the status file names it); one given is
  // watched even before its first record (kNeverStarted only when neither says who).
  static Found Find(boost::asio::any_io_executor ex, const std::string& status_file,
                    const std::optional<ProcessIdentity>& supervisor, Handlers handlers);

  // Asks the supervisor to stop the attempt (SIGTERM: the action's group and every process
  // below it, SIGKILL after its grace); on_end comes once all are gone. Idempotent.
  void Stop();
  // No handler is called from now on; a stop in progress still completes.
  void Forget();

  const std::optional<ProcessIdentity>& action() const { return action_; }
  const std::optional<ProcessIdentity>& supervisor() const { return supervisor_; }
  bool ended() const { return ended_; }

 private:
  explicit SupervisedAction(boost::asio::any_io_executor ex);
  void OnReport(std::string_view line);
  // The supervisor has exited (`how`: its own end, when known): learns the action's end.
  void Conclude(const std::string& how);

  Handlers handlers_;
  std::string status_file_;
  std::optional<ProcessIdentity> action_;
  std::optional<ProcessIdentity> supervisor_;
  std::string start_error_;  // what the supervisor said before failing
  bool ended_ = false;
  bool stop_asked_ = false;
  std::shared_ptr<ChildProcess> supervisor_child_;  // started here
  std::unique_ptr<ProcessExitWatch> exit_watch_;    // found after a restart
};

}  // namespace deployd

#endif  // DEPLOYD_PROCESS_SUPERVISED_ACTION_H_
