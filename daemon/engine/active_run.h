// ActiveRun: a run the RunManager carries out now — its committed record (a cache of the
// store's), its plan parsed again from the stored text, and per step what is live while it
// runs (LiveStep): the generations that tell a current completion from a stale one, the action's
// processes, the watches on its output, its timer and its checks. Internal to the engine's
// RunManager files; one thread, the io_context's.
#ifndef DEPLOYD_ENGINE_ACTIVE_RUN_H_
#define DEPLOYD_ENGINE_ACTIVE_RUN_H_

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <vector>

#include "checks/progress_watch.h"
#include "deployd/plan.h"
#include "engine/fail_on_matcher.h"
#include "engine/journal_follower.h"
#include "process/background_action.h"
#include "process/child_process.h"
#include "store/run_store.h"
#include "util/log_follower.h"

namespace deployd {

struct LiveStep {
  const Step* def = nullptr;
  FailOnMatcher fail_on;
  // Which attempt, which checks, which timer an asynchronous completion belongs to.
  int action_gen = 0;
  int checks_gen = 0;
  int timer_gen = 0;
  bool recovering = false;
  bool awaiting = false;  // a retry delay or skip_if checks are pending
  std::shared_ptr<ChildProcess> child;
  std::unique_ptr<JournalFollower> journal;      // a `service` step's, for fail_on
  std::shared_ptr<ProgressWatch> progress;       // watch.progress, from fire until the action ends
  std::shared_ptr<BackgroundAction> background;  // while the step watches it
  std::unique_ptr<LogFollower> output;  // a background action's log, for fail_on and progress
  std::unique_ptr<boost::asio::steady_timer> timer;
  std::shared_ptr<boost::asio::cancellation_signal> checks_cancel;

  // The step no longer watches its background action (a stop in progress still completes).
  void EndBackgroundWatch();
  // The progress watch, if any, stops.
  void StopProgress();
};

struct ActiveRun {
  RunRecord record;
  Plan plan;
  std::vector<LiveStep> live;  // one per record.steps: main steps first, then on_failure
  size_t main_count = 0;
  bool preflight_done = false;
  bool stopping = false;  // being cancelled: nothing new starts
  std::shared_ptr<boost::asio::cancellation_signal> preflight_cancel;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_ACTIVE_RUN_H_
