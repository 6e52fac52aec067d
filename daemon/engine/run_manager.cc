#include "engine/run_manager.h"

#include <spdlog/spdlog.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "engine/active_run.h"
#include "engine/check_sequence.h"
#include "plan/plan_parser.h"
#include "util/clock.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

RunManager::RunManager(asio::any_io_executor ex, RunStore& store, RunManagerOptions options)
    : ex_(std::move(ex)), store_(store), options_(std::move(options)) {}

RunManager::~RunManager() = default;

std::string RunManager::LogPath(const std::string& run_id, const std::string& step_id) const {
  return options_.state_dir + "/logs/" + run_id + "/" + step_id + ".log";
}

// Each attempt has a status file of its own: a stale one can never be taken for the next.
std::string RunManager::StatusPath(const std::string& run_id, const std::string& step_id,
                                   int attempt) const {
  return options_.state_dir + "/logs/" + run_id + "/" + step_id + "." + std::to_string(attempt) +
         ".status";
}

ActiveRun* RunManager::Find(const std::string& run_id) {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : it->second.get();
}

// Builds the in-memory run from its record: the plan is parsed again from the stored text and
// variables, exactly as it was submitted.
Result<ActiveRun*> RunManager::Activate(const RunRecord& record) {
  ParseResult parsed = ParsePlan(record.plan_text, record.plan_file, record.vars);
  if (!parsed.plan) {
    std::string first = parsed.errors.empty() ? "" : ": " + parsed.errors.front().message;
    return Status::Error("the stored plan of run " + record.id + " no longer parses" + first);
  }
  return Activate(record, std::move(*parsed.plan));
}

Result<ActiveRun*> RunManager::Activate(const RunRecord& record, Plan plan) {
  auto run = std::make_unique<ActiveRun>();
  run->record = record;
  run->order = ++activations_;
  run->plan = std::move(plan);
  run->main_count = run->plan.steps.size();
  size_t total = run->main_count + run->plan.on_failure.size();
  if (total != record.steps.size())
    return Status::Error("the stored steps of run " + record.id + " do not match its plan");
  run->live.resize(total);
  for (size_t i = 0; i < total; ++i) {
    LiveStep& live = run->live[i];
    live.def =
        i < run->main_count ? &run->plan.steps[i] : &run->plan.on_failure[i - run->main_count];
    live.fail_on = FailOnMatcher(live.def->watch.fail_on);
    live.kernel_fail_on = FailOnMatcher::ForKernel(live.def->watch.fail_on);
    live.timer = std::make_unique<asio::steady_timer>(ex_);
    if (record.steps[i].state != StepState::kPending || record.steps[i].attempts > 0)
      run->preflight_done = true;
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir + "/logs/" + record.id, ec);
  ActiveRun* raw = run.get();
  runs_[record.id] = std::move(run);
  return raw;
}

namespace {

// A new run's record: its steps, main then on_failure, all pending.
RunRecord NewRunRecord(const Plan& plan, const std::string& plan_text, const std::string& plan_file,
                       const std::map<std::string, std::string>& vars) {
  RunRecord record;
  record.plan_name = plan.name;
  record.plan_file = plan_file;
  record.plan_text = plan_text;
  record.vars = vars;
  record.created_at_ms = NowMs();
  int index = 0;
  for (const auto* list : {&plan.steps, &plan.on_failure}) {
    for (const Step& step : *list) {
      StepRecord s;
      s.index = index++;
      s.id = step.id;
      s.phase = list == &plan.steps ? "main" : "on_failure";
      record.steps.push_back(s);
    }
  }
  return record;
}

}  // namespace

ApplyResult RunManager::Apply(const std::string& plan_text, const std::string& plan_file,
                              const std::map<std::string, std::string>& vars, bool wait_lock,
                              const std::string& key, const std::string& applied_by) {
  return Apply(ParsePlan(plan_text, plan_file, vars), plan_text, plan_file, vars, wait_lock, key,
               applied_by);
}

ApplyResult RunManager::Apply(ParseResult parsed, const std::string& plan_text,
                              const std::string& plan_file,
                              const std::map<std::string, std::string>& vars, bool wait_lock,
                              const std::string& key, const std::string& applied_by) {
  ApplyResult result;
  if (Status s = RefuseWhileBlocked(); !s.ok()) {
    result.status = s;
    return result;
  }
  if (!key.empty()) {
    Result<std::optional<RunRecord>> found = store_.LoadRunByKey(key, false);
    if (!found.ok() || found.value()) {
      if (!found.ok()) {
        result.status = found.status();
      } else if (found.value()->plan_text != plan_text || found.value()->vars != vars) {
        result.status =
            Status::Error("idempotency key '" + key + "' already names run " + found.value()->id +
                          ", created from another plan text or other variables");
      } else {
        result.run_id = found.value()->id;
        result.existing = true;
      }
      return result;
    }
  }
  if (!parsed.plan) {
    for (const auto& d : parsed.errors) result.diagnostics.push_back(d.Format());
    result.status = Status::Error("invalid plan " + plan_file);
    return result;
  }
  // One run at a time holds a lock (the plan's name, or its `lock:`): the runs deployd holds
  // unfinished — committed, so this holds across restarts.
  const ActiveRun* holder = LockHolder(parsed.plan->lock, nullptr);
  if (holder && !wait_lock) {
    result.status = Status::Error(
        "lock '" + parsed.plan->lock + "' is held by run " + holder->record.id + " (" +
        std::string(ToString(holder->record.state)) + "): one run at a time; `deployctl watch " +
        holder->record.id + "`, or apply with --wait-lock to start once it has finished");
    return result;
  }
  RunRecord record = NewRunRecord(*parsed.plan, plan_text, plan_file, vars);
  record.key = key;
  record.applied_by = applied_by;
  if (holder)
    record.reason =
        "waiting for lock '" + parsed.plan->lock + "' (held by run " + holder->record.id + ")";
  Result<std::string> id = store_.CreateRun(record);
  if (!id.ok()) {
    result.status = id.status();
    return result;
  }
  record.id = id.value();
  Result<ActiveRun*> run = Activate(record, std::move(*parsed.plan));
  if (!run.ok()) {
    result.status = run.status();
    return result;
  }
  spdlog::info("{}: created from {} ({} steps)", record.id, plan_file, record.steps.size());
  result.run_id = record.id;
  asio::post(ex_, [this, id = record.id] {
    if (ActiveRun* r = Find(id)) Start(*r);
  });
  return result;
}

void RunManager::Recover() {
  ForgetOldRuns();
  Result<std::vector<RunRecord>> unfinished = store_.UnfinishedRuns();
  if (!unfinished.ok()) {
    spdlog::error("cannot list unfinished runs: {}", unfinished.status().message());
    return;
  }
  for (const RunRecord& record : unfinished.value()) {
    Result<ActiveRun*> activated = Activate(record);
    if (activated.ok()) {
      ResumeAfterRestart(*activated.value());
      continue;
    }
    spdlog::error("{}", activated.status().message());
    Transition t;
    t.run_id = record.id;
    t.at_ms = NowMs();
    t.run_state = RunState::kFailed;
    t.run_reason = "cannot resume: " + activated.status().message();
    t.run_finished_at_ms = t.at_ms;
    t.event.kind = "run.state";
    t.event.state = "failed";
    t.event.detail = *t.run_reason;
    (void)Record(t);
  }
}

void RunManager::ResumeAfterRestart(ActiveRun& run) {
  const std::string run_id = run.record.id;
  spdlog::info("{}: resuming ({})", run_id, ToString(run.record.state));
  // The steps interrupted by the restart, as stored: recovering one can start another (an
  // on_failure step after an interrupted step fails), which must not count as interrupted.
  std::vector<size_t> interrupted;
  for (size_t i = 0; i < run.live.size(); ++i) {
    StepState s = run.record.steps[i].state;
    if (s == StepState::kRunning || s == StepState::kVerifying) interrupted.push_back(i);
  }
  // A cancel that a restart interrupted goes on: steps already cancelled while the run is
  // not, or an attempt being stopped for it.
  for (size_t i = 0; i < run.live.size(); ++i) {
    const StepRecord& step = run.record.steps[i];
    std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(step.action);
    const bool stopping = attempt && attempt->stop && attempt->stop->event == StepEvent::kCancel;
    if (step.state != StepState::kCancelled && !stopping) continue;
    run.cancelling = true;
    // Who asked, as the step's record says it ("cancelled by alice (uid 1000)").
    const std::string& reason = stopping ? attempt->stop->reason : step.reason;
    if (reason.starts_with("cancelled by ")) run.cancelled_by = reason.substr(10);
  }
  for (size_t i : interrupted) Recover(run, i);
  if (!Find(run_id)) return;
  SyncWaiting(run);
  Start(run);
}

const ActiveRun* RunManager::LockHolder(const std::string& lock, const ActiveRun* before) const {
  const ActiveRun* holder = nullptr;
  for (const auto& [id, run] : runs_) {
    if (run.get() == before || run->plan.lock != lock || IsTerminal(run->record.state)) continue;
    if (before && run->order > before->order) continue;
    if (!holder || run->order < holder->order) holder = run.get();
  }
  return holder;
}

void RunManager::StartLockWaiter(const std::string& lock) {
  ActiveRun* next = nullptr;
  for (auto& [id, run] : runs_)
    if (run->plan.lock == lock && run->record.state == RunState::kPending &&
        (!next || run->order < next->order))
      next = run.get();
  if (next) Start(*next);
}

void RunManager::Start(ActiveRun& run) {
  if (Blocked()) return HoldFor(run, &RunManager::Start);
  // A run that waits for its lock starts when the runs before it holding it have finished.
  if (run.record.state == RunState::kPending && LockHolder(run.plan.lock, &run)) return;
  if (run.record.state == RunState::kPending) {
    CommitRunState(run, RunState::kRunning, "", "", [this](ActiveRun& r) { Start(r); });
    return;
  }
  if (!run.preflight_done) {
    RunPreflight(run);
    return;
  }
  Advance(run);
}

// Every preflight check runs, and every secret a step will need is read now, before any step
// has changed the host: the operator learns all that stands in the way at once.
void RunManager::RunPreflight(ActiveRun& run) {
  std::vector<CheckOutcome> secrets = SecretProblems(run.plan);
  if (run.plan.preflight.empty() && secrets.empty()) {
    run.preflight_done = true;
    Advance(run);
    return;
  }
  run.preflight_checks = RunningChecks::Start(
      ex_, run.plan.preflight,
      [this, id = run.record.id](CheckOutcome outcome) { OnPreflight(id, outcome); }, {},
      Order::kEvery, std::move(secrets));
}

void RunManager::OnPreflight(const std::string& run_id, const CheckOutcome& outcome) {
  auto later = [&] { Hold([this, run_id, outcome] { OnPreflight(run_id, outcome); }); };
  if (Blocked()) return later();
  ActiveRun* run = Find(run_id);
  if (!run || run->stopping || run->cancelling) return;
  if (!outcome.passed) {
    Finish(*run, RunState::kFailed, "preflight failed: " + outcome.summary,
           json::serialize(outcome.evidence));
    return;
  }
  Transition t;
  t.run_id = run_id;
  t.at_ms = NowMs();
  t.event.kind = "run.preflight";
  t.event.detail = "preflight: " + outcome.summary;
  Result<EventRecord> stored = Record(t);
  if (!stored.ok()) {
    if (Retrying()) later();
    return;
  }
  Notify(run_id, stored.value(), 0);
  run->preflight_done = true;
  Advance(*run);
}

// Starts the first unfinished step, or finishes the run. Main steps run in order; once one
// has failed, the on_failure steps run, then the run has failed. A step that is waiting for
// approval is unfinished: the run waits with it.
void RunManager::Advance(ActiveRun& run) {
  if (Blocked()) return HoldFor(run, &RunManager::Advance);
  if (run.cancelling) return MaybeFinishCancel(run);
  if (run.stopping || IsTerminal(run.record.state) || !run.preflight_done) return;
  const auto& steps = run.record.steps;
  // A paused run starts no step; one with nothing left to start still finishes.
  const bool paused = run.record.state == RunState::kPaused;
  const StepRecord* failed = nullptr;
  for (size_t i = 0; i < run.main_count; ++i) {
    if (steps[i].state == StepState::kFailed || steps[i].state == StepState::kCancelled) {
      failed = &steps[i];
      break;
    }
    if (steps[i].state == StepState::kSucceeded || steps[i].state == StepState::kSkipped) continue;
    if (steps[i].state == StepState::kPending && !run.live[i].awaiting && !paused)
      StartStep(run, i);
    return;
  }
  if (!failed) {
    Finish(run, RunState::kSucceeded, "", "");
    return;
  }
  for (size_t i = run.main_count; i < steps.size(); ++i) {
    if (IsTerminal(steps[i].state)) continue;
    if (steps[i].state == StepState::kPending && !run.live[i].awaiting && !paused)
      StartStep(run, i);
    return;
  }
  Finish(run, RunState::kFailed, "step " + failed->id + " failed: " + failed->reason,
         failed->evidence);
}

// A pending step starts — or, when a retry delay was committed before a restart, waits out what
// remains of it first.
void RunManager::StartStep(ActiveRun& run, size_t index) {
  const StepRecord& step = run.record.steps[index];
  if (step.due_at_ms > 0 && step.attempts > 0) {
    ScheduleRetry(run, index, Duration(std::max<std::int64_t>(0, step.due_at_ms - NowMs())));
    return;
  }
  Dispatch(run.record.id, index, StepEvent::kStart, {}, EventSource::kOperator, 0);
}

void RunManager::Finish(ActiveRun& run, RunState state, const std::string& reason,
                        const std::string& evidence, std::function<void(ActiveRun&)> then) {
  CommitRunState(run, state, reason, evidence, [this, then](ActiveRun& r) {
    spdlog::info("{}: {}{}", r.record.id, ToString(r.record.state),
                 r.record.reason.empty() ? "" : ": " + r.record.reason);
    // Completions may still be on the stack; the run leaves memory once they have unwound.
    asio::post(ex_, [this, id = r.record.id] {
      ActiveRun* ended = Find(id);
      if (ended && IsTerminal(ended->record.state)) {
        std::string lock = ended->plan.lock;
        runs_.erase(id);
        StartLockWaiter(lock);
      }
      ForgetOldRuns();
    });
    if (then) then(r);
  });
}

void RunManager::Reconfigure(const RunManagerOptions& options) {
  options_.log_cap_bytes = options.log_cap_bytes;
  options_.retention = options.retention;
  options_.unit_dir = options.unit_dir;
  options_.allowed_roots = options.allowed_roots;
  ForgetOldRuns();
}

bool RunManager::CommitRunState(ActiveRun& run, RunState state, const std::string& reason,
                                const std::string& evidence, std::function<void(ActiveRun&)> then) {
  auto later = [&] {
    Hold([this, id = run.record.id, state, reason, evidence, then] {
      if (ActiveRun* r = Find(id)) CommitRunState(*r, state, reason, evidence, then);
    });
  };
  if (Blocked()) {
    later();
    return false;
  }
  Transition t;
  t.run_id = run.record.id;
  t.at_ms = NowMs();
  t.run_state = state;
  t.run_reason = reason;
  t.run_evidence = evidence;
  t.run_finished_at_ms = IsTerminal(state) ? t.at_ms : 0;
  t.event.kind = "run.state";
  t.event.state = std::string(ToString(state));
  t.event.detail = reason;
  Result<EventRecord> stored = Record(t);
  if (!stored.ok()) {
    if (Retrying()) later();
    return false;
  }
  run.record.state = state;
  run.record.reason = reason;
  run.record.evidence = evidence;
  run.record.finished_at_ms = *t.run_finished_at_ms;
  Notify(run.record.id, stored.value(), 0);
  if (then) then(run);
  return true;
}

void RunManager::SyncWaiting(ActiveRun& run, const StepRecord* changed) {
  const StepRecord* waiting = nullptr;
  for (const StepRecord& s : run.record.steps) {
    if (s.state == StepState::kWaiting) {
      waiting = &s;
      break;
    }
  }
  if (waiting && run.record.state == RunState::kRunning) {
    CommitRunState(run, RunState::kWaiting, "step " + waiting->id + ": " + waiting->reason, "");
  } else if (!waiting && run.record.state == RunState::kWaiting) {
    // The step that waited has moved on (approved, skipped): say how.
    std::string how = changed ? "step " + changed->id + ": " + changed->reason : "";
    CommitRunState(run, RunState::kRunning, how, "");
  }
}

void RunManager::Shutdown() {
  if (!held_.empty())
    spdlog::warn(
        "{} transitions could not be recorded before stopping ({}); the next start "
        "finds out what became of their steps from what the actions left",
        held_.size(), fault_.error());
  held_.clear();
  if (retry_timer_) retry_timer_->cancel();
  for (auto& [id, run] : runs_) {
    run->stopping = true;
    if (run->preflight_checks) run->preflight_checks->Cancel();
    for (auto& live : run->live) {
      live.timer->cancel();
      if (live.orphans) live.orphans->Cancel();
      if (live.progress) live.progress->Stop();
      if (live.checks) live.checks->Cancel();
    }
  }
  followers_.Clear();
}

}  // namespace deployd
