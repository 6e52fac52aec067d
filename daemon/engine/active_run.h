// ActiveRun: a run the RunManager carries out now — its committed record (a cache of the
// store's), its plan parsed again from the stored text, and per step what is live while it
// runs (LiveStep): the generations that tell a current completion from a stale one, the action's
// processes, the watches on its output, its timer and its checks. Internal to the engine's
// RunManager files; one thread, the io_context's.
#ifndef DEPLOYD_ENGINE_ACTIVE_RUN_H_
#define DEPLOYD_ENGINE_ACTIVE_RUN_H_

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "checks/progress_watch.h"
#include "deployd/plan.h"
#include "engine/attempt_record.h"
#include "engine/check_sequence.h"
#include "engine/fail_on_matcher.h"
#include "engine/journal_follower.h"
#include "engine/kernel_log_follower.h"
#include "process/orphan_stop.h"
#include "process/supervised_action.h"
#include "store/run_store.h"
#include "util/log_follower.h"

namespace deployd {

struct LiveStep {
  const Step* def = nullptr;
  FailOnMatcher fail_on;
  FailOnMatcher kernel_fail_on;  // those of its patterns meant for the kernel's log
  // Which attempt, which checks, which timer an asynchronous completion belongs to.
  int action_gen = 0;
  int checks_gen = 0;
  int timer_gen = 0;
  bool recovering = false;
  bool never_started = false;  // recovering: the attempt's action provably never started
  std::string recovery_note;   // recovering: what was found of the attempt, for the evidence
  bool awaiting = false;       // a retry delay or skip_if checks are pending
  int fail_on_held_gen = -1;   // the attempt whose fatal line waits for the store (storage_retry)
  std::unique_ptr<JournalFollower> journal;       // a `service` step's, for fail_on
  std::unique_ptr<KernelLogFollower> kernel_log;  // for kernel_fail_on, from fire to the end
  int kernel_log_gen = -1;                        // the attempt it follows for
  std::shared_ptr<ProgressWatch> progress;        // watch.progress, from fire until the action ends
  std::shared_ptr<SupervisedAction> attempt;      // the attempt's action, while the step watches it
  std::unique_ptr<LogFollower> output;            // the attempt's log, for fail_on and progress
  // Set while the attempt is being stopped: what the step becomes once every process of the
  // attempt is gone (committed in the step's action record too). Other events wait.
  std::optional<PendingStop> pending_stop;
  // What is left of an attempt whose supervisor died without recording its end, being stopped.
  std::shared_ptr<OrphanStop> orphans;
  std::unique_ptr<boost::asio::steady_timer> timer;
  std::shared_ptr<RunningChecks> checks;  // skip_if or verify, while they run

  // An attempt's action that has not ended yet (it may be being stopped).
  bool AttemptAlive() const { return attempt && !attempt->ended(); }
  // The step no longer watches its attempt (a stop in progress still completes).
  void EndAttemptWatch();
  // The progress watch, if any, stops.
  void StopProgress();
  // The journal and kernel log followers, if any, stop: the step no longer runs or verifies.
  void StopFollowers();
};

struct ActiveRun {
  RunRecord record;
  Plan plan;
  std::vector<LiveStep> live;  // one per record.steps: main steps first, then on_failure
  size_t main_count = 0;
  std::uint64_t order = 0;  // activations in order of creation: who waits for a lock first
  bool preflight_done = false;
  bool stopping = false;    // deployd is shutting down: nothing new starts
  bool cancelling = false;  // nothing new starts; cancelled once every attempt is gone
  std::string cancelled_by = "by operator";  // who asked, in the reasons: "by alice (uid 1000)"
  std::vector<std::function<void(Status)>> cancel_waiters;
  std::shared_ptr<RunningChecks> preflight_checks;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_ACTIVE_RUN_H_
