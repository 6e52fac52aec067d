// RunManager: carries out runs. It feeds each step's events to the StepMachine, commits every
// transition to the RunStore before acting on it, and executes the effects: starting actions
// (ChildProcess), running checks, arming timers, stopping process groups.
//
// How it works: steps run strictly in plan order, one at a time per run. Advance() finds the
// run's first step that is not finished and starts it; every completion (a child's exit, a
// check's answer, a timer) comes back as a StepEvent through Dispatch(), which decides the
// step's next record without I/O (step_update.h), commits it, tells the followers, runs the
// effects and, when the step has finished, calls Advance() again. When a main step fails, the
// plan's on_failure steps run and the run fails.
//
// Every asynchronous completion carries the step's generation; a completion from an earlier
// attempt (a child killed by a timeout that exits later, say) is recognised and dropped.
// One thread: everything runs on the io_context given at construction.
//
// When the store refuses a write (a full disk, an I/O error), the operation that wrote — it has
// changed nothing yet — waits, and so does every event and decision that comes after it, in
// order; they are tried again with a backoff (storage_retry.cc) and go on once the write
// succeeds. Nothing is acted on before it is recorded, nothing is lost, and a restart meanwhile
// finds the runs as they were last recorded.
//
// The member functions live in one file per concept: run_manager.cc (the run's lifecycle and
// scheduling, recovery at start), step_dispatch.cc (events → commit → effects),
// action_launch.cc (every action under its supervisor, `deployd --action` built-ins too),
// step_output.cc (fail_on, the journal, progress), attempt_recovery.cc (what became of each
// attempt after a restart: reattached, judged or fired), operator_commands.cc (cancel, pause,
// resume, retry, skip, approve), run_forgetting.cc (retention, delete, prune), run_events.cc
// (what followers are told) and storage_retry.cc (writes the store refuses).
#ifndef DEPLOYD_ENGINE_RUN_MANAGER_H_
#define DEPLOYD_ENGINE_RUN_MANAGER_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checks/checks.h"
#include "deployd/plan.h"
#include "deployd/status.h"
#include "engine/alive_actions.h"
#include "engine/attempt_record.h"
#include "engine/run_followers.h"
#include "engine/step_machine.h"
#include "engine/step_update.h"
#include "engine/storage_fault.h"
#include "plan/plan_parser.h"
#include "process/process_table.h"
#include "process/supervised_action.h"
#include "protocol/run_wire.h"
#include "store/run_store.h"

namespace deployd {

struct ActiveRun;
struct CheckOutcome;
struct ExitStatus;
struct SpawnOptions;

struct RunManagerOptions {
  std::string state_dir;  // logs go to STATE_DIR/logs/RUN/STEP.log
  std::uint64_t log_cap_bytes = 64ull << 20;
  // Called after each committed event with a one-line summary of what deployd is doing
  // (for systemd's STATUS=).
  std::function<void(const std::string& activity)> on_activity;
  // deployd itself, whatever replaced the file on disk since it started: what built-in actions
  // (`--action`) run from, and every attempt's supervisor (`--supervise`) when
  // `supervisor_program` is empty.
  std::string supervisor_exe = "/proc/self/exe";
  // The program every attempt's supervisor runs from (deployd-supervise, which starts faster).
  std::string supervisor_program;
  // Finished runs older than this are forgotten (rows, events and logs) when deployd starts
  // and whenever a run finishes; unset keeps every run.
  std::optional<Duration> retention;
  // Handed to built-in actions (builtin_action.h): where `service` writes unit files, where
  // `remove` may delete.
  std::string unit_dir = "/etc/systemd/system";
  std::vector<std::string> allowed_roots;
  // Fault injection (DEPLOYD_FAULT=crash-before-start): deployd dies right after committing an
  // attempt's fire, before starting it — the crash a restart must tell from "it ran".
  bool crash_before_start = false;
  // Called once when the state database's files were deleted or replaced under deployd (or
  // are damaged), with what was found: nothing more can be recorded, so deployd must stop.
  std::function<void(const std::string& why)> on_store_lost;
};

struct ApplyResult {
  std::string run_id;                    // set on success
  bool existing = false;                 // the run of the same key, created before
  std::vector<std::string> diagnostics;  // formatted plan errors
  Status status;                         // !ok: why nothing was started
};

class RunManager {
 public:
  RunManager(boost::asio::any_io_executor ex, RunStore& store, RunManagerOptions options);
  ~RunManager();

  // Resumes every run the store holds as unfinished (DESIGN.md §1 "Crash and restart").
  void Recover();
  // Validates the plan with the variables, records the run and starts it.
  // One run holds a plan's lock at a time: while another holds it, the apply is refused
  // (naming the holder) or, with `wait_lock`, the run is recorded pending and starts once the
  // runs before it have finished. With an idempotency `key`, the run once created under it is
  // the answer (`existing`), whatever its state, and nothing is started; the same key with
  // another plan text or other variables is refused. `applied_by` names who asked, in the
  // run's record and its "run.created" event.
  ApplyResult Apply(const std::string& plan_text, const std::string& plan_file,
                    const std::map<std::string, std::string>& vars, bool wait_lock = false,
                    const std::string& key = "", const std::string& applied_by = "");
  // The same with the plan already parsed (`parsed` is ParsePlan of the text, file and vars:
  // the control server parses on a thread of its own, so a large plan does not hold this one).
  ApplyResult Apply(ParseResult parsed, const std::string& plan_text, const std::string& plan_file,
                    const std::map<std::string, std::string>& vars, bool wait_lock = false,
                    const std::string& key = "", const std::string& applied_by = "");
  // The operator's commands. `by` names who asked ("alice (uid 1000)"; "" for "operator") in
  // the reasons and events they record, committed with the transition they ask for.
  //
  // Stops every attempt of the run; once all their processes are gone, the run is cancelled
  // and `done` called (Ok), or at once with why it cannot be cancelled.
  void Cancel(const std::string& run_id, const std::string& by, std::function<void(Status)> done);
  // Starts a failed or cancelled run again from `step_id` (default: its first unfinished step).
  Status Retry(const std::string& run_id, const std::string& step_id, const std::string& by);
  // Marks a step that is not running as skipped, and lets its run go on.
  Status Skip(const std::string& run_id, const std::string& step_id, const std::string& by);
  // Lets an approval step that is waiting go on; `by` names the operator in its record.
  Status Approve(const std::string& run_id, const std::string& step_id, const std::string& by);
  // Pause takes effect between steps: the current step finishes, no new step starts (a run
  // whose steps are all done still finishes). Resume lets the run go on.
  Status Pause(const std::string& run_id, const std::string& by);
  Status Resume(const std::string& run_id, const std::string& by);

  // deployctl delete and prune (run_forgetting.cc): finished runs are forgotten as `retention`
  // forgets them — record, events and logs — and their ids returned; deployd's log says who
  // asked (`by`), the run's own record being gone. Delete refuses a run that has not finished,
  // naming its state; Prune forgets at most `limit` of the runs that finished more than
  // `older_than` ago, oldest first, so that one request's work stays bounded.
  Result<std::vector<std::string>> Delete(const std::string& run_id, const std::string& by);
  Result<std::vector<std::string>> Prune(Duration older_than, int limit, const std::string& by);

  // Live view of one run: called with each committed event as a follow stream's event line
  // (protocol/follow_stream.h: its seq and time as the store recorded them, with "attempt"),
  // and with each progress line of its steps.
  using Listener = RunFollowers::Listener;
  std::uint64_t Subscribe(const std::string& run_id, Listener listener);
  void Unsubscribe(std::uint64_t token);

  // Sets the progress of each step of `run` that is being watched right now. Progress is
  // observation, not state: it is never stored.
  void AddProgress(WireRun& run) const;
  // While the store refuses writes, sets the run's storage_fault when deployd carries it out:
  // "cannot record: … (for 12s, 5 tries; next try in 2s; 3 transitions wait)".
  void AddStorageFault(WireRun& run) const;

  std::string LogPath(const std::string& run_id, const std::string& step_id) const;
  // Where the supervisor of a background step's attempt records its action (supervisor.h).
  std::string StatusPath(const std::string& run_id, const std::string& step_id, int attempt) const;
  // Calls `done` once no process of the step's actions is alive (posted at once when none
  // is), so that `logs -f` can end when the log's writers have: the foreground children this
  // daemon started, and a background action (found by its recorded pid and start time, also
  // after a restart). Dropping the returned handle stops waiting.
  std::shared_ptr<void> WhenActionsExit(const std::string& run_id, const std::string& step_id,
                                        std::function<void()> done);
  size_t active_runs() const { return runs_.size(); }
  // For deployd's metrics: the storage fault now (inactive when none) and since deployd
  // started, and how many transitions wait for the store.
  const StorageFault& storage_fault() const { return fault_; }
  const StorageFaultTotals& storage_fault_totals() const { return fault_totals_; }
  size_t waiting_transitions() const { return held_.size(); }
  // SIGHUP: takes the settings that may change while deployd runs (log_cap_bytes, retention,
  // unit_dir, allowed_roots) from `options`, for what starts from now on; runs that a shorter
  // retention expires are forgotten at once.
  void Reconfigure(const RunManagerOptions& options);
  // The daemon's executor, where every member function must be called.
  const boost::asio::any_io_executor& executor() const { return ex_; }
  // Stops timers and checks; leaves every child process running (the next start recovers).
  void Shutdown();

 private:
  // run_manager.cc
  ActiveRun* Find(const std::string& run_id);
  Result<ActiveRun*> Activate(const RunRecord& record);
  // `plan` is the record's plan, parsed.
  Result<ActiveRun*> Activate(const RunRecord& record, Plan plan);
  // The steps a restart interrupted are recovered (or reattached), then the run goes on.
  void ResumeAfterRestart(ActiveRun& run);
  void Start(ActiveRun& run);
  // The unfinished run that holds `lock` (the earliest; before `before` when given), or null.
  const ActiveRun* LockHolder(const std::string& lock, const ActiveRun* before) const;
  // Starts the first pending run that waits for `lock`, now that its holder has finished.
  void StartLockWaiter(const std::string& lock);
  void RunPreflight(ActiveRun& run);
  void OnPreflight(const std::string& run_id, const CheckOutcome& outcome);
  void Advance(ActiveRun& run);
  void StartStep(ActiveRun& run, size_t index);
  // `then` is called once the run's end is recorded.
  void Finish(ActiveRun& run, RunState state, const std::string& reason,
              const std::string& evidence, std::function<void(ActiveRun&)> then = {});
  // run_forgetting.cc: retention, and the log directories of the runs the store forgot.
  void ForgetOldRuns();
  // "by alice (uid 1000)", or "by operator" when who asked is not known.
  static std::string By(const std::string& who);
  Result<std::vector<std::string>> Forgotten(Result<std::vector<std::string>> ids,
                                             const std::string& why);
  // True when recorded now; `then` is called once it is (now, or after a wait for the store).
  bool CommitRunState(ActiveRun& run, RunState state, const std::string& reason,
                      const std::string& evidence, std::function<void(ActiveRun&)> then = {});
  // Keeps the run `waiting` exactly while one of its steps waits for approval (also repairs a
  // restart between the step's commit and the run's). `changed`: the step just transitioned.
  void SyncWaiting(ActiveRun& run, const StepRecord* changed = nullptr);

  // step_dispatch.cc. `at_ms`: when the event happened (0: now), kept while it waits for the
  // store.
  void Dispatch(std::string run_id, size_t index, StepEvent event, StepEventInfo info,
                EventSource source, int generation, std::int64_t at_ms = 0);
  void RunEffects(ActiveRun& run, size_t index, StepEvent event, const StepUpdate& update);
  void ScheduleRetry(ActiveRun& run, size_t index, Duration delay);
  void FailSoon(const std::string& run_id, size_t index, int gen, std::string reason);
  void StartChecks(ActiveRun& run, size_t index, bool skip_if);

  // The step's attempt is stopped once `stop` is committed (step_dispatch.cc); false when it
  // could not be.
  bool BeginStop(ActiveRun& run, size_t index, PendingStop stop);
  // A run being cancelled is cancelled once none of its attempts is being stopped.
  void MaybeFinishCancel(ActiveRun& run);

  // action_launch.cc
  void StartAction(ActiveRun& run, size_t index);
  void OnAttemptStarted(const std::string& run_id, size_t index, int gen,
                        const SupervisorRecord& started);
  void OnAttemptEnd(const std::string& run_id, size_t index, int gen, const ActionEnd& end,
                    const std::string& when);
  bool StopWhatIsLeft(ActiveRun& run, size_t index, int gen, const ActionEnd& end,
                      const std::string& when);
  void ArmTimeout(ActiveRun& run, size_t index, int gen, Duration after);
  void FollowOutput(ActiveRun& run, size_t index, int gen, std::uint64_t offset);
  // The argv of the step's action: its command, or deployd itself running a built-in.
  std::vector<std::string> ActionArgv(const Step& step) const;
  // The step's secrets, read now (never stored): added to the action's environment.
  Result<std::map<std::string, std::string>> LoadSecrets(const ActiveRun& run, const Step& step);
  // A preflight problem for each secret the plan's steps use that cannot be read now.
  static std::vector<CheckOutcome> SecretProblems(const Plan& plan);

  // step_output.cc
  // A `service` step that starts its unit follows the unit's journal for fail_on from fire
  // until the step ends.
  void FollowJournal(ActiveRun& run, size_t index, int gen, bool recovering = false);
  // A step whose fail_on has patterns for the kernel's log follows it from the attempt's fire
  // until the step ends (kernel_log_follower.h); again after a restart of deployd.
  void FollowKernelLog(ActiveRun& run, size_t index, int gen);
  void OnOutputLine(const std::string& run_id, size_t index, int gen, std::string_view line);
  void OnKernelLine(const std::string& run_id, size_t index, int gen, std::string_view line);
  // A fail_on line matched: the attempt fails (the first fatal line while writes wait).
  void FailOnLine(ActiveRun& run, size_t index, int gen, StepEventInfo info);
  void StartProgressWatch(ActiveRun& run, size_t index, int action_gen);

  // attempt_recovery.cc
  void Recover(ActiveRun& run, size_t index);
  void RecoverUnknown(ActiveRun& run, size_t index, bool never_started);
  // Processes of an attempt whose supervisor is gone: stopped before anything else happens.
  void StopLeftovers(ActiveRun& run, size_t index, std::vector<ProcStat> left);
  void Reattach(ActiveRun& run, size_t index, int gen, const AttemptRecord& attempt,
                const SupervisedAction::Found& found);

  // operator_commands.cc
  // Re-opens a finished run from `from` on: failed or cancelled main steps and every
  // on_failure step become pending again, and the run is running.
  Status Reopen(ActiveRun& run, size_t from, const std::string& why);

  // run_events.cc. `event` as the store recorded it (its seq and time).
  void Notify(const std::string& run_id, const EventRecord& event, int attempt);

  // storage_retry.cc
  // True while an earlier write waits for the store: every event and decision then waits too
  // (Hold), so that they are recorded in the order they came.
  bool Blocked() const { return blocked_; }
  // Queues `op` (an operation that has changed nothing) to run once what waits before it is
  // recorded.
  void Hold(std::function<void()> op);
  // Holds `op` of the run, called again once it is its turn (when the run is still there).
  void HoldFor(ActiveRun& run, void (RunManager::*op)(ActiveRun&));
  // Commits `t`. When the store refuses the write, says so (log, STATUS=) and either starts
  // trying again (Retrying(): the caller Holds its operation) or, when the files are gone,
  // has deployd stop.
  Result<EventRecord> Record(const Transition& t);
  bool Retrying() const { return blocked_ && !store_lost_; }
  // Why an operator's command is refused while writes wait; Ok when they do not.
  Status RefuseWhileBlocked() const;
  void ArmStorageRetry(std::chrono::milliseconds delay);
  void RetryHeld();

  boost::asio::any_io_executor ex_;
  RunStore& store_;
  RunManagerOptions options_;
  std::map<std::string, std::unique_ptr<ActiveRun>> runs_;
  std::uint64_t activations_ = 0;  // ActiveRun::order
  RunFollowers followers_;
  AliveActions alive_actions_;
  // storage_retry.cc
  StorageFault fault_;
  StorageFaultTotals fault_totals_;
  std::deque<std::function<void()>> held_;
  bool blocked_ = false;
  bool draining_ = false;
  size_t insert_at_ = 0;  // while draining: where an operation held now goes
  bool store_lost_ = false;
  std::unique_ptr<boost::asio::steady_timer> retry_timer_;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_RUN_MANAGER_H_
