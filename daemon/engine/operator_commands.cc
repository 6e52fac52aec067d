// RunManager: the operator's commands (deployctl cancel, pause, resume, retry, skip, approve).
// Each is refused with a message for the operator when it makes no sense for the run as it
// stands; otherwise it is an event for the steps (StepEvent::kCancel, kOperatorSkip, …) or a
// new state for the run, committed like any other, its reason naming who asked ("cancelled by
// alice (uid 1000)"): the audit is the event log itself, written in the same transaction.
#include <boost/asio/cancellation_signal.hpp>

#include "engine/active_run.h"
#include "engine/run_manager.h"

namespace deployd {

namespace asio = boost::asio;

namespace {

// `refusal` ends the message for a run in any other state than failed or cancelled.
Result<RunRecord> LoadFinished(RunStore& store, const std::string& run_id,
                               const std::string& refusal) {
  Result<std::optional<RunRecord>> loaded = store.LoadRun(run_id, true);
  if (!loaded.ok()) return loaded.status();
  if (!loaded.value()) return Status::Error("no run '" + run_id + "'");
  RunRecord record = *loaded.value();
  if (record.state != RunState::kFailed && record.state != RunState::kCancelled)
    return Status::Error("run " + run_id + " is " + std::string(ToString(record.state)) + "; " +
                         refusal);
  return record;
}

// Why an operator's request about a run that is not active is refused.
Status NotActive(RunStore& store, const std::string& run_id, const std::string& refusal) {
  Result<std::optional<RunRecord>> loaded = store.LoadRun(run_id, false);
  if (!loaded.ok()) return loaded.status();
  if (!loaded.value()) return Status::Error("no run '" + run_id + "'");
  return Status::Error("run " + run_id + " has already finished (" +
                       std::string(ToString(loaded.value()->state)) + "); " + refusal);
}

std::optional<size_t> StepIndex(const RunRecord& record, const std::string& step_id) {
  for (const auto& s : record.steps)
    if (s.id == step_id) return s.index;
  return std::nullopt;
}

Status NoStep(const std::string& run_id, const std::string& step_id) {
  return Status::Error("run " + run_id + " has no step '" + step_id + "'");
}

StepEventInfo Because(std::string reason) {
  StepEventInfo info;
  info.reason = std::move(reason);
  return info;
}

}  // namespace

void RunManager::Cancel(const std::string& run_id, const std::string& by,
                        std::function<void(Status)> done) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return done(s);
  ActiveRun* run = Find(run_id);
  if (!run) {
    Result<std::optional<RunRecord>> loaded = store_.LoadRun(run_id, false);
    if (!loaded.ok()) return done(loaded.status());
    if (!loaded.value()) return done(Status::Error("no run '" + run_id + "'"));
    return done(Status::Error("run " + run_id + " has already finished (" +
                              std::string(ToString(loaded.value()->state)) + ")"));
  }
  run->cancel_waiters.push_back(std::move(done));
  if (run->cancelling) return;  // a cancel in progress: answered with it
  run->cancelling = true;
  run->cancelled_by = By(by);
  if (run->preflight_checks) run->preflight_checks->Cancel();
  // Each step is cancelled; one whose attempt is alive only once its processes are gone.
  for (size_t i = 0; i < run->live.size(); ++i) {
    if (IsTerminal(run->record.steps[i].state)) continue;
    Dispatch(run_id, i, StepEvent::kCancel, Because("cancelled " + run->cancelled_by),
             EventSource::kOperator, 0);
  }
  if (ActiveRun* r = Find(run_id)) MaybeFinishCancel(*r);
}

void RunManager::MaybeFinishCancel(ActiveRun& run) {
  if (Blocked()) return HoldFor(run, &RunManager::MaybeFinishCancel);
  if (!run.cancelling || IsTerminal(run.record.state)) return;
  for (const LiveStep& live : run.live)
    if (live.pending_stop || live.orphans) return;
  // Answered once "cancelled" is recorded, however long the store makes that wait.
  Finish(run, RunState::kCancelled, "cancelled " + run.cancelled_by, "", [](ActiveRun& r) {
    std::vector<std::function<void(Status)>> waiters = std::move(r.cancel_waiters);
    r.cancel_waiters.clear();
    for (auto& done : waiters) done(Status::Ok());
  });
}

Status RunManager::Reopen(ActiveRun& run, size_t from, const std::string& why) {
  for (size_t i = 0; i < run.live.size(); ++i) {
    StepState s = run.record.steps[i].state;
    bool reset = i >= run.main_count
                     ? IsTerminal(s)
                     : i >= from && (s == StepState::kFailed || s == StepState::kCancelled);
    if (reset) Dispatch(run.record.id, i, StepEvent::kOperatorRetry, {}, EventSource::kOperator, 0);
  }
  run.preflight_done = false;  // the host may have changed: check again before acting
  if (!CommitRunState(run, RunState::kRunning, why, "", [this](ActiveRun& r) { Start(r); }) &&
      !Retrying())
    return Status::Error("cannot record");
  return Status::Ok();
}

Status RunManager::Retry(const std::string& run_id, const std::string& step_id,
                         const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  if (Find(run_id)) return Status::Error("run " + run_id + " is still running");
  Result<RunRecord> record =
      LoadFinished(store_, run_id, "only a failed or cancelled run can be retried");
  if (!record.ok()) return record.status();
  size_t from = 0;
  if (!step_id.empty()) {
    auto index = StepIndex(record.value(), step_id);
    if (!index) return NoStep(run_id, step_id);
    if (!IsTerminal(record->steps[*index].state))
      return Status::Error("step " + step_id + " has not run yet");
    from = *index;
  }
  Result<ActiveRun*> run = Activate(record.value());
  if (!run.ok()) return run.status();
  ActiveRun& r = *run.value();
  if (!step_id.empty())
    Dispatch(run_id, from, StepEvent::kOperatorRetry, {}, EventSource::kOperator, 0);
  return Reopen(r, from, (step_id.empty() ? "retried " : "retried from " + step_id + " ") + By(by));
}

Status RunManager::Skip(const std::string& run_id, const std::string& step_id,
                        const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  if (ActiveRun* run = Find(run_id)) {
    auto index = StepIndex(run->record, step_id);
    if (!index) return NoStep(run_id, step_id);
    StepState s = run->record.steps[*index].state;
    if (s != StepState::kPending && s != StepState::kWaiting)
      return Status::Error("step " + step_id + " is " + std::string(ToString(s)) +
                           "; only a step that has not started, or has failed, can be skipped");
    Dispatch(run_id, *index, StepEvent::kOperatorSkip, Because("skipped " + By(by)),
             EventSource::kOperator, 0);
    return Status::Ok();
  }
  Result<RunRecord> record = LoadFinished(
      store_, run_id, "only steps of a running, failed or cancelled run can be skipped");
  if (!record.ok()) return record.status();
  auto index = StepIndex(record.value(), step_id);
  if (!index) return NoStep(run_id, step_id);
  StepState s = record->steps[*index].state;
  if (s == StepState::kSucceeded || s == StepState::kSkipped)
    return Status::Error("step " + step_id + " is already " + std::string(ToString(s)));
  Result<ActiveRun*> run = Activate(record.value());
  if (!run.ok()) return run.status();
  Dispatch(run_id, *index, StepEvent::kOperatorSkip, Because("skipped " + By(by)),
           EventSource::kOperator, 0);
  return Reopen(*run.value(), *index, "skipped " + step_id + " " + By(by));
}

Status RunManager::Approve(const std::string& run_id, const std::string& step_id,
                           const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  ActiveRun* run = Find(run_id);
  if (!run) return NotActive(store_, run_id, "there is nothing to approve");
  auto index = StepIndex(run->record, step_id);
  if (!index) return NoStep(run_id, step_id);
  if (!run->live[*index].def->approval)
    return Status::Error("step " + step_id + " is not an approval step");
  StepState s = run->record.steps[*index].state;
  if (s != StepState::kWaiting)
    return Status::Error("step " + step_id + " is " + std::string(ToString(s)) +
                         ", not waiting for approval");
  Dispatch(run_id, *index, StepEvent::kApprove, Because("approved by " + by),
           EventSource::kOperator, 0);
  return Status::Ok();
}

Status RunManager::Pause(const std::string& run_id, const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  ActiveRun* run = Find(run_id);
  if (!run) return NotActive(store_, run_id, "only a running run can be paused");
  const RunRecord& record = run->record;
  if (record.state == RunState::kPaused)
    return Status::Error("run " + run_id + " is already paused");
  for (const StepRecord& s : record.steps) {
    if (s.state == StepState::kWaiting)
      return Status::Error("run " + run_id + " is waiting for approval of step " + s.id +
                           "; nothing starts until it is approved");
  }
  std::string reason = "paused " + By(by);
  for (size_t i = 0; i < record.steps.size(); ++i) {
    const StepRecord& s = record.steps[i];
    if (s.state == StepState::kRunning || s.state == StepState::kVerifying ||
        (s.state == StepState::kPending && run->live[i].awaiting)) {
      reason += "; step " + s.id + " finishes first";
      break;
    }
  }
  if (!CommitRunState(*run, RunState::kPaused, reason, "") && !Retrying())
    return Status::Error("cannot record");
  return Status::Ok();
}

Status RunManager::Resume(const std::string& run_id, const std::string& by) {
  if (Status s = RefuseWhileBlocked(); !s.ok()) return s;
  ActiveRun* run = Find(run_id);
  if (!run) return NotActive(store_, run_id, "only a paused run can be resumed");
  if (run->record.state != RunState::kPaused)
    return Status::Error("run " + run_id + " is not paused (it is " +
                         std::string(ToString(run->record.state)) + ")");
  // A retry of an approval step may have started to wait meanwhile.
  auto go_on = [this](ActiveRun& r) {
    SyncWaiting(r);
    Advance(r);
  };
  if (!CommitRunState(*run, RunState::kRunning, "resumed " + By(by), "", go_on) && !Retrying())
    return Status::Error("cannot record");
  return Status::Ok();
}

}  // namespace deployd
