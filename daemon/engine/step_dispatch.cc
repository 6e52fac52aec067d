// RunManager: the way every event reaches a step. Dispatch() drops a stale completion, lets
// UpdateStep() (step_update.h) decide, commits the decision before anything else happens, tells
// the followers, and carries out the effects: checks, the action, its stop, timers.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include "engine/active_run.h"
#include "engine/benchmark_baseline.h"
#include "engine/check_sequence.h"
#include "engine/run_manager.h"
#include "util/clock.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;

namespace {

// Where a step's attempt will be found again, committed before it is started: its status
// file, where its output starts in the log, the boot, and the tag its processes carry.
std::string AttemptIntent(const std::string& status_file, const std::string& log_path,
                          std::string tag) {
  AttemptRecord intent;
  intent.status_file = status_file;
  struct stat st;
  intent.log_offset =
      ::stat(log_path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  intent.boot_id = CurrentBootId();
  intent.tag = std::move(tag);
  intent.fired_at_ms = NowMs();
  return intent.ToJson();
}

}  // namespace

// `run_id` is a copy: effects may destroy the handler whose capture it came from.
void RunManager::Dispatch(std::string run_id, size_t index, StepEvent event, StepEventInfo info,
                          EventSource source, int generation, std::int64_t at_ms) {
  if (at_ms == 0) at_ms = NowMs();
  const StepEventInfo asked = info;
  // The event waits its turn while the store refuses writes, and when its own commit is
  // refused: it has changed nothing, and is decided again once what came before is recorded.
  auto later = [&] {
    Hold([=, this] { Dispatch(run_id, index, event, asked, source, generation, at_ms); });
  };
  if (Blocked()) return later();
  ActiveRun* run = Find(run_id);
  if (!run || index >= run->live.size()) return;
  LiveStep& live = run->live[index];
  StepRecord& record = run->record.steps[index];
  if (live.pending_stop || live.orphans) {
    // The attempt is being stopped: the step waits for its processes to be gone. Only an
    // operator's cancel changes what it will become then.
    if (event == StepEvent::kCancel && live.pending_stop &&
        live.pending_stop->event != StepEvent::kCancel &&
        !BeginStop(*run, index, PendingStop{StepEvent::kCancel, info.reason, {}, false}) &&
        Retrying())
      later();
    return;
  }
  const bool supplies_action = info.action.has_value();
  StepUpdate update = UpdateStep({.run_id = run_id,
                                  .step = live.def,
                                  .record = record,
                                  .event = event,
                                  .source = source,
                                  .generation = generation,
                                  .current = {live.action_gen, live.checks_gen, live.timer_gen},
                                  .info = std::move(info),
                                  .recovering = live.recovering,
                                  .never_started = live.never_started,
                                  .follows_output = live.journal || live.kernel_log,
                                  .now_ms = at_ms});
  if (update.stale) return;  // a completion from an earlier attempt
  if (!update.valid) {
    spdlog::debug("{} {}: {} ignored in state {}", run_id, record.id, ToString(event),
                  ToString(record.state));
    return;
  }
  if (update.Has(StepEffect::kStopAction) && live.AttemptAlive()) {
    // Nothing that follows is recorded before every process of the attempt is gone.
    if (!BeginStop(*run, index, PendingStop{event, asked.reason, asked.evidence, asked.final}) &&
        Retrying())
      later();
    return;
  }
  StepRecord& next = *update.commit.step;
  if (update.Has(StepEffect::kFire) && !supplies_action)
    next.action =
        AttemptIntent(StatusPath(run_id, record.id, next.attempts), LogPath(run_id, record.id),
                      run_id + "/" + record.id + "/" + std::to_string(next.attempts));
  Result<EventRecord> stored = Record(update.commit);
  if (!stored.ok()) {
    // Not recorded, so not acted on: the database stays the truth.
    if (Retrying()) later();
    return;
  }
  record = next;
  const std::string& detail = update.commit.event.detail;
  spdlog::info("{} {}: {}{}", run_id, record.id, ToString(record.state),
               detail.empty() ? "" : " (" + detail + ")");
  Notify(run_id, stored.value(), record.attempts);
  if (!run->stopping && !run->cancelling) SyncWaiting(*run, &record);
  RunEffects(*run, index, event, update);
}

void RunManager::RunEffects(ActiveRun& run, size_t index, StepEvent event,
                            const StepUpdate& update) {
  LiveStep& live = run.live[index];
  const StepState state = run.record.steps[index].state;
  // The progress watch lives while the action runs: running, or verifying beside a background
  // action. A foreground action that has exited has nothing left to make progress.
  if (state != StepState::kRunning && !(state == StepState::kVerifying && live.def->background))
    live.StopProgress();
  // A timer belongs to the state that armed it (a timeout, a retry delay).
  ++live.timer_gen;
  live.timer->cancel();
  live.awaiting = false;
  for (StepEffect effect : update.effects) {
    switch (effect) {
      case StepEffect::kEvaluateSkip:
        live.awaiting = true;
        StartChecks(run, index, /*skip_if=*/true);
        break;
      case StepEffect::kFire:
        live.recovering = false;
        StartAction(run, index);
        break;
      case StepEffect::kStartVerify:
        // Re-verifying after a restart of deployd: the unit's journal is read again from the
        // fire, so that nothing it said while deployd was down is missed.
        if (event == StepEvent::kRecover && !live.journal)
          FollowJournal(run, index, live.action_gen, /*recovering=*/true);
        if (event == StepEvent::kRecover) FollowKernelLog(run, index, live.action_gen);
        StartChecks(run, index, /*skip_if=*/false);
        break;
      case StepEffect::kStopVerify:
        if (live.checks) live.checks->Cancel();
        break;
      case StepEffect::kStopAction:
        // An attempt still alive was stopped before this transition (BeginStop).
        break;
      case StepEffect::kScheduleRetry:
        ScheduleRetry(run, index, update.retry_delay);
        break;
      case StepEffect::kAwaitApproval:
        live.recovering = false;  // the operator's answer is awaited; nothing runs
        break;
      case StepEffect::kResetAttempts:
        break;
    }
  }
  if (state != StepState::kRunning && state != StepState::kVerifying) live.StopFollowers();
  if (IsTerminal(state)) {
    if (live.checks) live.checks->Cancel();
    live.EndAttemptWatch();
    // Posted, not called: the followers woken by Notify() write this event to their sockets
    // before the next transition's commit (an fsync) runs.
    asio::post(ex_, [this, run_id = run.record.id] {
      if (ActiveRun* r = Find(run_id)) Advance(*r);
    });
  }
}

bool RunManager::BeginStop(ActiveRun& run, size_t index, PendingStop stop) {
  LiveStep& live = run.live[index];
  StepRecord& record = run.record.steps[index];
  StepRecord next = record;
  if (std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(record.action)) {
    attempt->stop = stop;
    next.action = attempt->ToJson();
  }
  std::string who = live.attempt && live.attempt->action()
                        ? " (pid " + std::to_string(live.attempt->action()->pid) + ")"
                        : "";
  Transition t;
  t.run_id = run.record.id;
  t.at_ms = NowMs();
  t.step = next;
  t.event.step_id = record.id;
  t.event.kind = "step.state";
  t.event.state = std::string(ToString(record.state));
  t.event.detail = "stopping: " + stop.reason + "; SIGTERM to the attempt" + who +
                   " and everything it started, SIGKILL after " + FormatDuration(live.def->grace);
  // Committed first, so that a restart goes on with the stop and records what it was for.
  if (Result<EventRecord> stored = Record(t); stored.ok()) {
    record = next;
    Notify(run.record.id, stored.value(), record.attempts);
  } else if (Blocked()) {
    return false;  // tried again (or deployd stops): nothing is stopped before it is recorded
  }
  spdlog::info("{} {}: {}", run.record.id, record.id, t.event.detail);
  live.pending_stop = std::move(stop);
  if (live.checks) live.checks->Cancel();
  ++live.timer_gen;  // a timeout or a stall of this attempt has nothing left to say
  live.timer->cancel();
  live.StopProgress();
  live.attempt->Stop();
  return true;
}

void RunManager::ScheduleRetry(ActiveRun& run, size_t index, Duration delay) {
  LiveStep& live = run.live[index];
  live.awaiting = true;
  int gen = live.timer_gen;
  live.timer->expires_after(delay);
  live.timer->async_wait([this, run_id = run.record.id, index, gen](boost::system::error_code ec) {
    if (!ec) Dispatch(run_id, index, StepEvent::kRetryDue, {}, EventSource::kTimer, gen);
  });
}

// The attempt failed before its action could start (it cannot be started, say). Posted: the
// caller is still carrying out the effects of the transition that fired it.
void RunManager::FailSoon(const std::string& run_id, size_t index, int gen, std::string reason) {
  asio::post(ex_, [this, run_id, index, gen, reason = std::move(reason)] {
    StepEventInfo info;
    info.reason = reason;
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
  });
}

void RunManager::StartChecks(ActiveRun& run, size_t index, bool skip_if) {
  LiveStep& live = run.live[index];
  int gen = ++live.checks_gen;
  if (live.checks) live.checks->Cancel();
  const auto& checks = skip_if ? live.def->skip_if : live.def->verify;
  auto done = [this, id = run.record.id, index, gen, skip_if](CheckOutcome outcome) {
    StepEventInfo info;
    StepEvent event;
    if (skip_if) {
      event = outcome.passed ? StepEvent::kSkipMatched : StepEvent::kSkipNotMatched;
      if (outcome.passed) info.reason = "skip_if: " + outcome.summary + "; already done";
    } else if (outcome.passed) {
      event = StepEvent::kVerifyPassed;
      // A benchmark's figures (and the version checked) are committed with the success: the
      // next run's baseline, `deployctl history`.
      if (const auto* summary = outcome.evidence.if_contains("summary"))
        info.reason = std::string(summary->as_string());
      info.evidence = std::move(outcome.evidence);
    } else {
      event = StepEvent::kVerifyFailed;
      info.reason = "verify failed: " + outcome.summary;
      info.evidence = std::move(outcome.evidence);
    }
    Dispatch(id, index, event, std::move(info), EventSource::kChecks, gen);
  };
  BenchmarkBaseline baseline;
  if (!skip_if && HasBenchmark(checks))
    baseline = FindBaseline(store_, run.record.plan_name, run.record.steps[index].id);
  live.checks = RunningChecks::Start(ex_, checks, std::move(done), std::move(baseline));
}

}  // namespace deployd
