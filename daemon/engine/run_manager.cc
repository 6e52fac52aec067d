#include "engine/run_manager.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>

#include "actions/builtin_json.h"
#include "checks/checks.h"
#include "checks/progress_watch.h"
#include "plan/plan_parser.h"
#include "process/background_action.h"
#include "process/child_process.h"
#include "process/process_exit_watch.h"
#include "util/line_splitter.h"
#include "util/log_follower.h"
#include "util/secrets.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr Duration kMaxRetryDelay = std::chrono::hours(1);

std::regex CompileFailOn(const std::string& pattern) {
  // Patterns are validated by the parser; "(?i)" (Python's spelling) selects icase.
  auto flags = std::regex::ECMAScript | std::regex::optimize;
  if (pattern.rfind("(?i)", 0) == 0)
    return std::regex(pattern.substr(4), flags | std::regex::icase);
  return std::regex(pattern, flags);
}

json::array ToJson(const std::vector<std::string>& lines) {
  json::array a;
  for (const auto& l : lines) a.emplace_back(l);
  return a;
}

// All checks in order; the first failure ends it.
asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks) {
  CheckOutcome last;
  last.passed = true;
  for (const Check& check : checks) {
    last = co_await RunCheck(check);
    if (!last.passed) {
      last.evidence["check"] = DescribeCheck(check);
      last.evidence["summary"] = last.summary;
      last.evidence["attempts"] = last.attempts;
      co_return last;
    }
  }
  last.summary =
      std::to_string(checks.size()) + (checks.size() == 1 ? " check" : " checks") + " passed";
  co_return last;
}

}  // namespace

struct RunManager::EventInfo {
  std::string reason;
  json::object evidence;
  std::optional<int> exit_status;
  std::optional<std::int64_t> pid;
  std::optional<std::string> action;  // replaces the step's action record
  std::string detail;                 // the event's detail, when not the reason
  bool final = false;                 // no retry can help (a fatal fail_on line)
};

namespace {

struct LiveStep {
  const Step* def = nullptr;
  std::vector<std::pair<const FailPattern*, std::regex>> fail_on;
  int action_gen = 0;
  int checks_gen = 0;
  int timer_gen = 0;
  bool recovering = false;
  bool awaiting = false;  // a retry delay or skip_if checks are pending
  std::shared_ptr<ChildProcess> child;
  std::shared_ptr<ChildProcess> journal;  // a `service` step's `journalctl -f`, for fail_on
  // The journal's lines meet fail_on once systemd has said "Started …" (or the action has
  // succeeded): what a restart's stop phase logs ("Main process exited, code=killed") is not a
  // failure of the new server.
  bool journal_armed = false;
  std::shared_ptr<ProgressWatch> progress;       // watch.progress, from fire until the action ends
  std::shared_ptr<BackgroundAction> background;  // while the step watches it
  std::unique_ptr<LogFollower> output;  // a background action's log, for fail_on and progress
  std::unique_ptr<asio::steady_timer> timer;
  std::shared_ptr<asio::cancellation_signal> checks_cancel;
};

// The step no longer watches its background action (a stop in progress still completes).
void EndBackgroundWatch(LiveStep& live) {
  live.output.reset();
  if (live.background) live.background->Forget();
  live.background.reset();
}

}  // namespace

struct RunManager::ActiveRun {
  RunRecord record;
  Plan plan;
  std::vector<LiveStep> live;
  size_t main_count = 0;
  bool preflight_done = false;
  bool stopping = false;  // being cancelled: nothing new starts
  std::shared_ptr<asio::cancellation_signal> preflight_cancel;
};

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

RunManager::ActiveRun* RunManager::Find(const std::string& run_id) {
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : it->second.get();
}

// Builds the in-memory run from its record: the plan is parsed again from the stored text and
// variables, exactly as it was submitted.
Result<RunManager::ActiveRun*> RunManager::Activate(const RunRecord& record) {
  ParseResult parsed = ParsePlan(record.plan_text, record.plan_file, record.vars);
  if (!parsed.plan) {
    std::string first = parsed.errors.empty() ? "" : ": " + parsed.errors.front().message;
    return Status::Error("the stored plan of run " + record.id + " no longer parses" + first);
  }
  auto run = std::make_unique<ActiveRun>();
  run->record = record;
  run->plan = std::move(*parsed.plan);
  run->main_count = run->plan.steps.size();
  size_t total = run->main_count + run->plan.on_failure.size();
  if (total != record.steps.size())
    return Status::Error("the stored steps of run " + record.id + " do not match its plan");
  run->live.resize(total);
  for (size_t i = 0; i < total; ++i) {
    LiveStep& live = run->live[i];
    live.def =
        i < run->main_count ? &run->plan.steps[i] : &run->plan.on_failure[i - run->main_count];
    for (const auto& p : live.def->watch.fail_on)
      live.fail_on.emplace_back(&p, CompileFailOn(p.pattern));
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

ApplyResult RunManager::Apply(const std::string& plan_text, const std::string& plan_file,
                              const std::map<std::string, std::string>& vars) {
  ApplyResult result;
  ParseResult parsed = ParsePlan(plan_text, plan_file, vars);
  if (!parsed.plan) {
    for (const auto& d : parsed.errors) result.diagnostics.push_back(d.Format());
    result.status = Status::Error("invalid plan " + plan_file);
    return result;
  }
  RunRecord record;
  record.plan_name = parsed.plan->name;
  record.plan_file = plan_file;
  record.plan_text = plan_text;
  record.vars = vars;
  record.created_at_ms = NowMs();
  int index = 0;
  for (const auto* list : {&parsed.plan->steps, &parsed.plan->on_failure}) {
    for (const Step& step : *list) {
      StepRecord s;
      s.index = index++;
      s.id = step.id;
      s.phase = list == &parsed.plan->steps ? "main" : "on_failure";
      record.steps.push_back(s);
    }
  }
  Result<std::string> id = store_.CreateRun(record);
  if (!id.ok()) {
    result.status = id.status();
    return result;
  }
  record.id = id.value();
  Result<ActiveRun*> run = Activate(record);
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
    if (!activated.ok()) {
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
      (void)store_.Commit(t);
      continue;
    }
    ActiveRun& run = *activated.value();
    spdlog::info("{}: resuming ({})", record.id, ToString(record.state));
    // The steps interrupted by the restart, as stored: recovering one can start another (an
    // on_failure step after an interrupted step fails), which must not count as interrupted.
    std::vector<size_t> interrupted;
    for (size_t i = 0; i < run.live.size(); ++i) {
      StepState s = run.record.steps[i].state;
      if (s == StepState::kRunning || s == StepState::kVerifying) interrupted.push_back(i);
    }
    for (size_t i : interrupted) {
      if (run.live[i].def->background && Reattach(run, i)) continue;
      run.live[i].recovering = true;
      Dispatch(record.id, i, StepEvent::kRecover, {}, Source::kOperator, 0);
    }
    if (!Find(record.id)) continue;
    SyncWaiting(run);
    Start(run);
  }
}

void RunManager::Start(ActiveRun& run) {
  if (run.record.state == RunState::kPending && !CommitRunState(run, RunState::kRunning, "", ""))
    return;
  if (!run.preflight_done) {
    RunPreflight(run);
    return;
  }
  Advance(run);
}

void RunManager::RunPreflight(ActiveRun& run) {
  if (run.plan.preflight.empty()) {
    run.preflight_done = true;
    Advance(run);
    return;
  }
  auto cancel = std::make_shared<asio::cancellation_signal>();
  run.preflight_cancel = cancel;
  asio::co_spawn(
      ex_, RunChecks(run.plan.preflight),
      asio::bind_cancellation_slot(cancel->slot(), [this, id = run.record.id, cancel](
                                                       std::exception_ptr e, CheckOutcome outcome) {
        ActiveRun* run = Find(id);
        if (e || !run || run->stopping) return;
        if (!outcome.passed) {
          Finish(*run, RunState::kFailed, "preflight failed: " + outcome.summary,
                 json::serialize(outcome.evidence));
          return;
        }
        Transition t;
        t.run_id = id;
        t.at_ms = NowMs();
        t.event.kind = "run.preflight";
        t.event.detail = "preflight: " + outcome.summary;
        if (Status s = store_.Commit(t); !s.ok()) {
          spdlog::error("{}: {}", id, s.message());
          return;
        }
        Notify(id, t.event, 0);
        run->preflight_done = true;
        Advance(*run);
      }));
}

// Starts the first unfinished step, or finishes the run. Main steps run in order; once one
// has failed, the on_failure steps run, then the run has failed. A step that is waiting for
// approval is unfinished: the run waits with it.
void RunManager::Advance(ActiveRun& run) {
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
      Dispatch(run.record.id, i, StepEvent::kStart, {}, Source::kOperator, 0);
    return;
  }
  if (!failed) {
    Finish(run, RunState::kSucceeded, "", "");
    return;
  }
  for (size_t i = run.main_count; i < steps.size(); ++i) {
    if (IsTerminal(steps[i].state)) continue;
    if (steps[i].state == StepState::kPending && !run.live[i].awaiting && !paused)
      Dispatch(run.record.id, i, StepEvent::kStart, {}, Source::kOperator, 0);
    return;
  }
  Finish(run, RunState::kFailed, "step " + failed->id + " failed: " + failed->reason,
         failed->evidence);
}

void RunManager::Finish(ActiveRun& run, RunState state, const std::string& reason,
                        const std::string& evidence) {
  if (!CommitRunState(run, state, reason, evidence)) return;
  spdlog::info("{}: {}{}", run.record.id, ToString(state), reason.empty() ? "" : ": " + reason);
  // Completions may still be on the stack; the run leaves memory once they have unwound.
  asio::post(ex_, [this, id = run.record.id] {
    ActiveRun* r = Find(id);
    if (r && IsTerminal(r->record.state)) runs_.erase(id);
    ForgetOldRuns();
  });
}

void RunManager::ForgetOldRuns() {
  if (!options_.retention) return;
  Result<std::vector<std::string>> forgotten =
      store_.ForgetRunsFinishedBefore(NowMs() - options_.retention->count());
  if (!forgotten.ok()) {
    spdlog::error("{}", forgotten.status().message());
    return;
  }
  for (const std::string& id : forgotten.value()) {
    std::error_code ec;
    std::filesystem::remove_all(options_.state_dir + "/logs/" + id, ec);
    spdlog::info("{}: forgotten (finished more than {} ago)", id,
                 FormatDuration(*options_.retention));
  }
}

bool RunManager::CommitRunState(ActiveRun& run, RunState state, const std::string& reason,
                                const std::string& evidence) {
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
  if (Status s = store_.Commit(t); !s.ok()) {
    spdlog::error("{}: cannot record the run {}: {}", run.record.id, ToString(state), s.message());
    return false;
  }
  run.record.state = state;
  run.record.reason = reason;
  run.record.evidence = evidence;
  run.record.finished_at_ms = *t.run_finished_at_ms;
  Notify(run.record.id, t.event, 0);
  return true;
}

// `run_id` is a copy: effects may destroy the handler whose capture it came from.
void RunManager::Dispatch(std::string run_id, size_t index, StepEvent event, EventInfo info,
                          Source source, int generation) {
  ActiveRun* run = Find(run_id);
  if (!run || index >= run->live.size()) return;
  LiveStep& live = run->live[index];
  if ((source == Source::kAction && generation != live.action_gen) ||
      (source == Source::kChecks && generation != live.checks_gen) ||
      (source == Source::kTimer && generation != live.timer_gen))
    return;  // a completion from an earlier attempt
  StepRecord& record = run->record.steps[index];
  const Step& def = *live.def;

  StepFacts facts;
  facts.has_skip_if = !def.skip_if.empty();
  facts.has_verify = !def.verify.empty();
  facts.background = def.background;
  // Built-in actions converge: firing one again is always safe.
  facts.idempotent =
      def.idempotent || (def.kind != ActionKind::kRun && def.kind != ActionKind::kApproval);
  facts.approval = def.approval.has_value();
  facts.attempts = record.attempts;
  facts.max_attempts = def.max_attempts();
  facts.recovering = live.recovering;
  facts.restart_on_stall = def.watch.on_stall == OnStall::kRestart;
  facts.follows_output = live.journal != nullptr;
  if (info.final) facts.max_attempts = facts.attempts;
  StepTransition t = NextState(record.state, facts, event);
  if (!t.valid) {
    spdlog::debug("{} {}: {} ignored in state {}", run_id, record.id, ToString(event),
                  ToString(record.state));
    return;
  }

  StepRecord next = record;
  next.state = t.next;
  auto has = [&](StepEffect e) {
    return std::find(t.effects.begin(), t.effects.end(), e) != t.effects.end();
  };
  std::int64_t now = NowMs();
  // Asking for approval is an approval step's attempt, as firing is a command's.
  const bool attempt = has(StepEffect::kFire) || has(StepEffect::kAwaitApproval);
  if (has(StepEffect::kResetAttempts)) next.attempts = 0;
  if (attempt || has(StepEffect::kResetAttempts)) {
    if (attempt) ++next.attempts;
    if (next.started_at_ms == 0 || has(StepEffect::kResetAttempts)) next.started_at_ms = now;
    next.finished_at_ms = 0;
    next.exit_status.reset();
    next.pid.reset();
    next.reason.clear();
    next.evidence.clear();
    next.action.clear();
  }
  // Where the action will be found again is committed before it is started.
  if (has(StepEffect::kFire) && def.background) {
    BackgroundActionInfo intent;
    intent.status_file = StatusPath(run_id, record.id, next.attempts);
    struct stat st;
    std::string log = LogPath(run_id, record.id);
    intent.log_offset = ::stat(log.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    next.action = intent.ToJson();
  }
  if (info.action) next.action = *info.action;
  if (has(StepEffect::kAwaitApproval))
    next.reason = "waiting for approval: " + *def.approval + " (`deployctl approve " + run_id +
                  " " + record.id + "`)";
  if (info.exit_status) next.exit_status = info.exit_status;
  if (info.pid) next.pid = info.pid;
  if (!info.reason.empty()) next.reason = info.reason;
  if (!info.evidence.empty()) next.evidence = json::serialize(info.evidence);
  if (t.interrupted)
    next.reason =
        "interrupted by a restart of deployd; not safe to repeat: "
        "`deployctl retry " +
        run_id + " " + record.id + "` once it is safe, or `deployctl skip " + run_id + " " +
        record.id + "`";
  if (IsTerminal(next.state)) next.finished_at_ms = now;

  Transition tr;
  tr.run_id = run_id;
  tr.at_ms = now;
  tr.step = next;
  tr.event.step_id = record.id;
  tr.event.kind = "step.state";
  tr.event.state = std::string(ToString(next.state));
  tr.event.detail =
      has(StepEffect::kFire) ? "attempt " + std::to_string(next.attempts) : next.reason;
  if (has(StepEffect::kEvaluateSkip)) tr.event.detail = "checking skip_if";
  if (event == StepEvent::kRecover) tr.event.detail = "deployd restarted; " + tr.event.detail;
  if (!info.detail.empty()) tr.event.detail = info.detail;
  if (Status s = store_.Commit(tr); !s.ok()) {
    // Not recorded, so not acted on: the database stays the truth.
    spdlog::error("{} {}: cannot record {}: {}", run_id, record.id, ToString(next.state),
                  s.message());
    return;
  }
  record = next;
  spdlog::info("{} {}: {}{}", run_id, record.id, ToString(next.state),
               tr.event.detail.empty() ? "" : " (" + tr.event.detail + ")");
  Notify(run_id, tr.event, record.attempts);
  if (!run->stopping) SyncWaiting(*run, &record);

  // The progress watch lives while the action runs: running, or verifying beside a background
  // action. A foreground action that has exited has nothing left to make progress.
  if (live.progress && next.state != StepState::kRunning &&
      !(next.state == StepState::kVerifying && def.background)) {
    live.progress->Stop();
    live.progress.reset();
  }
  // A timer belongs to the state that armed it (a timeout, a retry delay).
  ++live.timer_gen;
  live.timer->cancel();
  live.awaiting = false;
  for (StepEffect effect : t.effects) {
    switch (effect) {
      case StepEffect::kEvaluateSkip:
        live.awaiting = true;
        StartChecks(*run, index, /*skip_if=*/true);
        break;
      case StepEffect::kFire:
        live.recovering = false;
        StartAction(*run, index);
        break;
      case StepEffect::kStartVerify:
        // Re-verifying after a restart of deployd: the unit has long started, so its journal
        // meets fail_on at once.
        if (event == StepEvent::kRecover && !live.journal) {
          FollowJournal(*run, index, live.action_gen);
          live.journal_armed = true;
        }
        StartChecks(*run, index, /*skip_if=*/false);
        break;
      case StepEffect::kStopVerify:
        if (live.checks_cancel) live.checks_cancel->emit(asio::cancellation_type::terminal);
        break;
      case StepEffect::kStopAction:
        StopAction(*run, index);
        break;
      case StepEffect::kScheduleRetry: {
        live.awaiting = true;
        Duration delay = def.retry_delay;
        for (int i = 1; i < record.attempts && delay < kMaxRetryDelay; ++i) delay *= 2;
        delay = std::min(delay, kMaxRetryDelay);
        int gen = live.timer_gen;
        live.timer->expires_after(delay);
        live.timer->async_wait([this, run_id, index, gen](boost::system::error_code ec) {
          if (!ec) Dispatch(run_id, index, StepEvent::kRetryDue, {}, Source::kTimer, gen);
        });
        break;
      }
      case StepEffect::kAwaitApproval:
        live.recovering = false;  // the operator's answer is awaited; nothing runs
        break;
      case StepEffect::kResetAttempts:
        break;
    }
  }
  if (live.journal && next.state != StepState::kRunning && next.state != StepState::kVerifying) {
    live.journal->Terminate(std::chrono::seconds(1));
    live.journal.reset();
  }
  if (IsTerminal(next.state)) {
    if (live.checks_cancel) live.checks_cancel->emit(asio::cancellation_type::terminal);
    EndBackgroundWatch(live);
    // Posted, not called: the followers woken by Notify() write this event to their sockets
    // before the next transition's commit (an fsync) runs.
    asio::post(ex_, [this, run_id] {
      if (ActiveRun* r = Find(run_id)) Advance(*r);
    });
  }
}

// The attempt failed before its action could start (it cannot be started, say). Posted: the
// caller is still carrying out the effects of the transition that fired it.
void RunManager::FailSoon(const std::string& run_id, size_t index, int gen, std::string reason) {
  asio::post(ex_, [this, run_id, index, gen, reason = std::move(reason)] {
    EventInfo info;
    info.reason = reason;
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), Source::kAction, gen);
  });
}

void RunManager::StartAction(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  const std::string run_id = run.record.id;
  int gen = ++live.action_gen;
  EndBackgroundWatch(live);
  if (def.background) {
    StartBackground(run, index, gen);
    return;
  }
  Result<std::map<std::string, std::string>> secrets = LoadSecrets(run, def);
  if (!secrets.ok()) {
    FailSoon(run_id, index, gen, secrets.status().message());
    return;
  }
  FollowJournal(run, index, gen);

  SpawnOptions options;
  options.argv = ActionArgv(def);
  options.env = def.env;
  for (const auto& [name, value] : secrets.value()) {
    options.env[name] = value;
    options.redact.push_back(value);
  }
  options.cwd = def.cwd;
  options.log_path = LogPath(run_id, def.id);
  options.log_cap_bytes = options_.log_cap_bytes;

  // A background action's output goes to its log file, which FollowBackgroundOutput() reads.
  ChildProcess::LineHandler on_line;
  if (!live.fail_on.empty() || def.watch.progress) {
    on_line = [this, run_id, index, gen](std::string_view line) {
      OnOutputLine(run_id, index, gen, line);
    };
  }
  auto on_exit = [this, run_id, index, gen](const ExitStatus& status) {
    ActiveRun* run = Find(run_id);
    if (!run) return;
    LiveStep& live = run->live[index];
    EventInfo info;
    info.exit_status = status.AsShellStatus();
    info.evidence["exit_status"] = status.AsShellStatus();
    if (status.signal) info.evidence["signal"] = status.signal;
    if (live.child) info.evidence["output_tail"] = ToJson(live.child->Tail());
    // The child has been reaped: release its pipe, pidfd and log descriptors now (output still
    // in flight keeps the object alive until EOF). Held until the run ended, they cost 3 fds
    // per finished step (EMFILE after ~330 steps under a 1024 limit) and made every later fork
    // slower (Asio re-registers each open descriptor in the child before exec).
    std::string last_line =
        live.child && !live.child->Tail().empty() ? live.child->Tail().back() : "";
    if (gen == live.action_gen) live.child.reset();
    if (status.ok()) {
      if (gen == live.action_gen) live.journal_armed = true;
      Dispatch(run_id, index, StepEvent::kActionSucceeded, std::move(info), Source::kAction, gen);
      return;
    }
    info.reason = status.ToString();
    // A built-in action's last line says why it failed (builtin_action.h).
    if (live.def->kind != ActionKind::kRun && status.code == 1 && !last_line.empty())
      info.reason = last_line;
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), Source::kAction, gen);
  };

  // Counted for WhenActionsExit(); the count is taken down after the exit has been handled.
  std::string key = run_id + "/" + def.id;
  auto on_exit_counted = [this, key, on_exit = std::move(on_exit)](const ExitStatus& status) {
    on_exit(status);
    if (--alive_actions_[key] > 0) return;
    alive_actions_.erase(key);
    auto waiters = exit_waiters_.extract(key);
    if (!waiters.empty())
      for (auto& done : waiters.mapped()) done();
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(ex_, options, std::move(on_line), std::move(on_exit_counted));
  if (!child.ok()) {
    FailSoon(run_id, index, gen, child.status().message());
    return;
  }
  live.child = child.value();
  ++alive_actions_[key];
  StartProgressWatch(run, index, gen);
  if (def.timeout) {
    int timer_gen = live.timer_gen;
    Duration timeout = *def.timeout;
    live.timer->expires_after(timeout);
    live.timer->async_wait(
        [this, run_id, index, gen, timer_gen, timeout](boost::system::error_code ec) {
          ActiveRun* run = Find(run_id);
          if (ec || !run || run->live[index].timer_gen != timer_gen) return;
          EventInfo info;
          info.reason = "timed out after " + FormatDuration(timeout);
          info.evidence["timeout_ms"] = timeout.count();
          if (auto& c = run->live[index].child) info.evidence["output_tail"] = ToJson(c->Tail());
          Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), Source::kAction, gen);
        });
  }
}

namespace {

// "no progress for 10m (bytes under /x stuck at 1.2GiB)"
std::string StallReason(const ProgressSpec& spec, const ProgressSnapshot& s) {
  std::string why;
  if (!spec.path.empty()) {
    why = "bytes under " + spec.path + " stuck at " + FormatBytes(s.bytes.value_or(0));
  } else if (s.done && s.total && *s.done == std::floor(*s.done) && *s.total < 1e7) {
    why = "progress in the output stuck at " + std::to_string(std::llround(*s.done)) + "/" +
          std::to_string(std::llround(*s.total));
  } else if (s.fraction) {  // sizes ("2.25G/5.00G") read better as a percentage
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.1f%%", *s.fraction * 100);
    why = std::string("progress in the output stuck at ") + percent;
  } else {
    why = "no progress line in the output";
  }
  return "no progress for " + FormatDuration(spec.stall_after) + " (" + why + ")";
}

}  // namespace

// From fire until the action ends (see Dispatch); a stall comes back as kStalled of this
// attempt. A background step reattached after a restart of deployd needs its watch started
// here too (the stall clock starts afresh then: what happened while deployd was down is
// unknown).
void RunManager::StartProgressWatch(ActiveRun& run, size_t index, int action_gen) {
  LiveStep& live = run.live[index];
  if (!live.def->watch.progress) return;
  const ProgressSpec& spec = *live.def->watch.progress;
  const std::string run_id = run.record.id;
  const std::string step_id = live.def->id;
  auto on_change = [this, run_id, step_id](const ProgressSnapshot& snapshot) {
    if (listeners_.empty()) return;
    json::object line{{"type", "progress"}, {"run", run_id}, {"step", step_id}};
    for (const auto& field : ProgressToJson(snapshot)) line[field.key()] = field.value();
    NotifyLine(run_id, line);
  };
  auto on_stall = [this, run_id, index, action_gen, spec](const ProgressSnapshot& snapshot,
                                                          std::int64_t stalled_for_ms) {
    ActiveRun* run = Find(run_id);
    if (!run) return;
    EventInfo info;
    info.reason = StallReason(spec, snapshot);
    json::object progress = ProgressToJson(snapshot);
    info.evidence["stalled_for_ms"] = stalled_for_ms;
    info.evidence["stall_after_ms"] = spec.stall_after.count();
    if (!spec.path.empty()) info.evidence["path"] = spec.path;
    info.evidence["bytes"] = progress["bytes"];
    info.evidence["last_progress_at_ms"] = snapshot.last_progress_at_ms;
    info.evidence["rate_bps"] = progress["rate_bps"];
    info.evidence["last_line"] =
        snapshot.last_line.empty() ? json::value(nullptr) : json::value(snapshot.last_line);
    if (auto& c = run->live[index].child) info.evidence["output_tail"] = ToJson(c->Tail());
    Dispatch(run_id, index, StepEvent::kStalled, std::move(info), Source::kAction, action_gen);
  };
  live.progress = ProgressWatch::Start(ex_, spec, std::move(on_change), std::move(on_stall));
}

void RunManager::AddProgress(json::object& run_json) const {
  const json::value* id = run_json.if_contains("id");
  json::value* steps = run_json.if_contains("steps");
  if (!id || !id->is_string() || !steps || !steps->is_array()) return;
  auto it = runs_.find(std::string(id->as_string()));
  if (it == runs_.end()) return;
  const ActiveRun& run = *it->second;
  for (json::value& step : steps->as_array()) {
    const json::value* id_field = step.as_object().if_contains("id");
    if (!id_field || !id_field->is_string()) continue;
    std::string step_id(id_field->as_string());  // the object may move as it grows
    for (const LiveStep& live : run.live) {
      if (live.progress && step_id == live.def->id)
        step.as_object()["progress"] = ProgressToJson(live.progress->Snapshot());
    }
  }
}

std::vector<std::string> RunManager::ActionArgv(const Step& step) const {
  if (step.kind == ActionKind::kRun) return step.run.Argv();
  ActionContext context;
  context.unit_dir = options_.unit_dir;
  context.allowed_roots = options_.allowed_roots;
  context.state_dir = options_.state_dir;
  return {options_.supervisor_exe, std::string(kBuiltinActionFlag),
          ActionRequestJson(step, context)};
}

Result<std::map<std::string, std::string>> RunManager::LoadSecrets(const ActiveRun& run,
                                                                   const Step& step) {
  std::map<std::string, std::string> values;
  for (const std::string& name : step.secrets) {
    auto source = std::find_if(run.plan.secrets.begin(), run.plan.secrets.end(),
                               [&](const SecretSource& s) { return s.name == name; });
    if (source == run.plan.secrets.end()) continue;  // the parser checked every name
    SecretSpec spec;
    spec.name = source->name;
    spec.file = source->file;
    spec.env = source->env;
    Result<Secret> secret = LoadSecret(spec);
    if (!secret.ok()) return secret.status();
    values[name] = secret->value;
  }
  return values;
}

// `journalctl -u UNIT -f -n 0 -o cat`, started before the action, until the step ends: the
// server's lines go to the step's log and, once the unit has started, meet fail_on — so a
// server that dies in its first seconds is caught from its own lines too.
void RunManager::FollowJournal(ActiveRun& run, size_t index, int gen) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  if (def.kind != ActionKind::kService || live.fail_on.empty() ||
      (def.service.state != "started" && def.service.state != "restarted"))
    return;
  const std::string run_id = run.record.id;
  SpawnOptions options;
  options.argv = {"journalctl", "-u", def.service.unit, "-f", "-n", "0", "-o", "cat"};
  options.log_path = LogPath(run_id, def.id);
  options.log_cap_bytes = options_.log_cap_bytes;
  live.journal_armed = false;
  auto on_line = [this, run_id, index, gen](std::string_view line) {
    ActiveRun* run = Find(run_id);
    if (!run || run->live[index].action_gen != gen) return;
    LiveStep& live = run->live[index];
    if (!live.journal_armed) {
      live.journal_armed = line.starts_with("Started ");
      return;
    }
    OnOutputLine(run_id, index, gen, line);
  };
  auto on_exit = [run_id, unit = def.service.unit](const ExitStatus& status) {
    if (!status.ok() && status.signal != SIGTERM)
      spdlog::warn("{}: journalctl -u {} ended: {}", run_id, unit, status.ToString());
  };
  Result<std::shared_ptr<ChildProcess>> journal =
      ChildProcess::Start(ex_, options, std::move(on_line), std::move(on_exit));
  if (!journal.ok()) {
    spdlog::warn("{} {}: cannot follow the journal of {}: {}", run_id, def.id, def.service.unit,
                 journal.status().message());
    return;
  }
  live.journal = journal.value();
}

void RunManager::StopAction(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  if (live.background) {
    // The action's process group, not its supervisor: the supervisor records the signal.
    live.background->Stop(live.def->grace);
    EndBackgroundWatch(live);
    return;
  }
  if (live.child && !live.child->exited()) live.child->Terminate(live.def->grace);
}

// Each output line of the action, as it arrives: progress first, then the fail_on patterns.
void RunManager::OnOutputLine(const std::string& run_id, size_t index, int gen,
                              std::string_view line) {
  ActiveRun* run = Find(run_id);
  if (!run) return;
  if (const auto& watch = run->live[index].progress) watch->OnLine(line);
  for (const auto& [pattern, re] : run->live[index].fail_on) {
    if (!std::regex_search(line.begin(), line.end(), re)) continue;
    EventInfo info;
    if (pattern->explanation.empty()) {
      info.reason = "output matched fail_on '" + pattern->pattern + "': " + std::string(line);
    } else {
      info.reason = pattern->explanation + ": " + std::string(line);
      info.evidence["explanation"] = pattern->explanation;
    }
    info.final = pattern->fatal;
    info.evidence["fail_on"] = pattern->pattern;
    info.evidence["line"] = line;
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), Source::kAction, gen);
    return;
  }
}

// A background action runs under its supervisor (supervisor.h), which deployd re-executes
// itself as; the step learns from the supervisor that the action has started (committed with
// its processes before the step verifies) and how it ended.
void RunManager::StartBackground(ActiveRun& run, size_t index, int gen) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  const std::string run_id = run.record.id;
  std::optional<BackgroundActionInfo> intent =
      BackgroundActionInfo::FromJson(run.record.steps[index].action);
  if (!intent) {
    // Dispatch commits the intent with the fire; without it nothing may start.
    FailSoon(run_id, index, gen,
             "internal error: the background action's record was not committed");
    return;
  }
  Result<std::map<std::string, std::string>> secrets = LoadSecrets(run, def);
  if (!secrets.ok()) {
    FailSoon(run_id, index, gen, secrets.status().message());
    return;
  }
  SpawnOptions options;
  options.argv = ActionArgv(def);
  options.env = def.env;
  // Only a built-in action (download) may have secrets here: it redacts its own output, which
  // goes to the log without passing through deployd (the parser refuses them elsewhere).
  for (const auto& [name, value] : secrets.value()) options.env[name] = value;
  options.cwd = def.cwd;
  options.log_path = LogPath(run_id, def.id);

  BackgroundAction::Handlers handlers;
  handlers.on_started = [this, run_id, index, gen, intent](const SupervisorRecord& record) {
    BackgroundActionInfo started = *intent;
    started.action = record.action;
    started.supervisor = record.supervisor;
    EventInfo info;
    info.pid = record.action.pid;
    info.action = started.ToJson();
    Dispatch(run_id, index, StepEvent::kActionStarted, std::move(info), Source::kAction, gen);
  };
  handlers.on_end = [this, run_id, index, gen](const ActionEnd& end) {
    OnBackgroundEnd(run_id, index, gen, end, "");
  };
  Result<std::shared_ptr<BackgroundAction>> started = BackgroundAction::Start(
      ex_, options, options_.supervisor_exe, intent->status_file, std::move(handlers));
  if (!started.ok()) {
    FailSoon(run_id, index, gen, started.status().message());
    return;
  }
  live.background = std::move(started.value());
  FollowBackgroundOutput(run, index, gen, intent->log_offset);
  StartProgressWatch(run, index, gen);
}

// An exit status 0 leaves the decision to the verify checks; anything else fails the step.
void RunManager::OnBackgroundEnd(const std::string& run_id, size_t index, int gen,
                                 const ActionEnd& end, const std::string& when) {
  ActiveRun* run = Find(run_id);
  if (!run) return;
  const StepRecord& record = run->record.steps[index];
  if (end.ok()) {
    spdlog::info("{} {}: background action exited with status 0{}", run_id, record.id, when);
    // Nothing is left to make progress: a verify that takes longer than stall_after (hashing
    // the weights it downloaded, say) is not a stall.
    LiveStep& live = run->live[index];
    if (live.progress && gen == live.action_gen) {
      live.progress->Stop();
      live.progress.reset();
    }
    return;
  }
  EventInfo info;
  if (end.exit) {
    info.exit_status = end.exit->AsShellStatus();
    info.evidence["exit_status"] = end.exit->AsShellStatus();
    if (end.exit->signal) info.evidence["signal"] = end.exit->signal;
  }
  std::optional<BackgroundActionInfo> action = BackgroundActionInfo::FromJson(record.action);
  std::vector<std::string> tail = ReadLastLines(
      LogPath(run_id, record.id), action ? action->log_offset : 0, ChildProcess::kTailLines);
  info.evidence["output_tail"] = ToJson(tail);
  info.reason = (end.exit ? "background action " : "") + end.reason + when;
  // A built-in action's last line says why it failed (builtin_action.h).
  if (run->live[index].def->kind != ActionKind::kRun && end.exit && end.exit->code == 1 &&
      !end.exit->signal && !tail.empty())
    info.reason = tail.back() + when;
  if (!when.empty()) info.detail = "deployd restarted; " + info.reason;
  Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), Source::kAction, gen);
}

// fail_on for a background action: its log is followed as it grows (inotify), from where the
// attempt's output starts, so lines written while deployd was down are matched too.
void RunManager::FollowBackgroundOutput(ActiveRun& run, size_t index, int gen,
                                        std::uint64_t offset) {
  LiveStep& live = run.live[index];
  if (live.fail_on.empty() && !live.def->watch.progress) return;
  const std::string run_id = run.record.id;
  auto lines = std::make_shared<LineSplitter>();
  auto on_line = [this, run_id, index, gen](std::string_view line) {
    OnOutputLine(run_id, index, gen, line);
  };
  Result<std::unique_ptr<LogFollower>> follower =
      LogFollower::Start(ex_, LogPath(run_id, live.def->id), offset,
                         [lines, on_line](std::string_view data) { lines->Feed(data, on_line); });
  if (!follower.ok()) {
    spdlog::error("{} {}: fail_on cannot watch the output: {}", run_id, live.def->id,
                  follower.status().message());
    return;
  }
  live.output = std::move(follower.value());
}

// After a restart (DESIGN.md §1): a background action whose supervisor still runs is watched
// again and verified as before; one that ended while deployd was down is judged by the exit
// status its supervisor recorded. False when nothing is known of it: the generic recovery
// applies.
bool RunManager::Reattach(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  const StepRecord& record = run.record.steps[index];
  const std::string run_id = run.record.id;
  std::optional<BackgroundActionInfo> info = BackgroundActionInfo::FromJson(record.action);
  if (!info) return false;
  int gen = ++live.action_gen;
  BackgroundAction::Handlers handlers;
  handlers.on_end = [this, run_id, index, gen](const ActionEnd& end) {
    OnBackgroundEnd(run_id, index, gen, end, "");
  };
  BackgroundAction::Found found = BackgroundAction::Find(ex_, *info, std::move(handlers));
  switch (found.kind) {
    case BackgroundAction::Found::Kind::kUnknown:
      return false;
    case BackgroundAction::Found::Kind::kAlive: {
      live.background = found.watch;
      BackgroundActionInfo known = *info;
      known.action = found.record.action;
      known.supervisor = found.record.supervisor;
      EventInfo event;
      event.pid = known.action->pid;
      event.action = known.ToJson();
      event.detail = "deployd restarted; reattached to the background action (pid " +
                     std::to_string(known.action->pid) + ")";
      Dispatch(run_id, index, StepEvent::kReattach, std::move(event), Source::kAction, gen);
      break;
    }
    case BackgroundAction::Found::Kind::kEnded: {
      if (!found.end.ok()) {
        OnBackgroundEnd(run_id, index, gen, found.end, " (it ended while deployd was down)");
        return true;
      }
      EventInfo event;
      event.exit_status = 0;
      event.detail = "deployd restarted; the background action had exited with status 0 meanwhile";
      Dispatch(run_id, index, StepEvent::kReattach, std::move(event), Source::kAction, gen);
      break;
    }
  }
  if (ActiveRun* r = Find(run_id); r && !IsTerminal(r->record.steps[index].state)) {
    FollowBackgroundOutput(*r, index, gen, info->log_offset);
    if (found.kind == BackgroundAction::Found::Kind::kAlive) StartProgressWatch(*r, index, gen);
  }
  return true;
}

void RunManager::StartChecks(ActiveRun& run, size_t index, bool skip_if) {
  LiveStep& live = run.live[index];
  int gen = ++live.checks_gen;
  auto cancel = std::make_shared<asio::cancellation_signal>();
  live.checks_cancel = cancel;
  const auto& checks = skip_if ? live.def->skip_if : live.def->verify;
  asio::co_spawn(ex_, RunChecks(checks),
                 asio::bind_cancellation_slot(
                     cancel->slot(), [this, id = run.record.id, index, gen, skip_if, cancel](
                                         std::exception_ptr e, CheckOutcome outcome) {
                       if (e) return;  // cancelled: the step has moved on
                       EventInfo info;
                       StepEvent event;
                       if (skip_if) {
                         event =
                             outcome.passed ? StepEvent::kSkipMatched : StepEvent::kSkipNotMatched;
                         if (outcome.passed)
                           info.reason = "skip_if: " + outcome.summary + "; already done";
                       } else if (outcome.passed) {
                         event = StepEvent::kVerifyPassed;
                       } else {
                         event = StepEvent::kVerifyFailed;
                         info.reason = "verify failed: " + outcome.summary;
                         info.evidence = std::move(outcome.evidence);
                       }
                       Dispatch(id, index, event, std::move(info), Source::kChecks, gen);
                     }));
}

Status RunManager::Cancel(const std::string& run_id) {
  ActiveRun* run = Find(run_id);
  if (!run) {
    Result<std::optional<RunRecord>> loaded = store_.LoadRun(run_id, false);
    if (!loaded.ok()) return loaded.status();
    if (!loaded.value()) return Status::Error("no run '" + run_id + "'");
    return Status::Error("run " + run_id + " has already finished (" +
                         std::string(ToString(loaded.value()->state)) + ")");
  }
  run->stopping = true;
  if (run->preflight_cancel) run->preflight_cancel->emit(asio::cancellation_type::terminal);
  for (size_t i = 0; i < run->live.size(); ++i) {
    if (IsTerminal(run->record.steps[i].state)) continue;
    EventInfo info;
    info.reason = "cancelled by operator";
    Dispatch(run_id, i, StepEvent::kCancel, std::move(info), Source::kOperator, 0);
  }
  run->stopping = false;
  Finish(*run, RunState::kCancelled, "cancelled by operator", "");
  return Status::Ok();
}

Status RunManager::Reopen(ActiveRun& run, size_t from, const std::string& why) {
  for (size_t i = 0; i < run.live.size(); ++i) {
    StepState s = run.record.steps[i].state;
    bool reset = i >= run.main_count
                     ? IsTerminal(s)
                     : i >= from && (s == StepState::kFailed || s == StepState::kCancelled);
    if (reset) Dispatch(run.record.id, i, StepEvent::kOperatorRetry, {}, Source::kOperator, 0);
  }
  run.preflight_done = false;  // the host may have changed: check again before acting
  if (!CommitRunState(run, RunState::kRunning, why, "")) return Status::Error("cannot record");
  Start(run);
  return Status::Ok();
}

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

std::optional<size_t> StepIndex(const RunRecord& record, const std::string& step_id) {
  for (const auto& s : record.steps)
    if (s.id == step_id) return s.index;
  return std::nullopt;
}

}  // namespace

Status RunManager::Retry(const std::string& run_id, const std::string& step_id) {
  if (Find(run_id)) return Status::Error("run " + run_id + " is still running");
  Result<RunRecord> record =
      LoadFinished(store_, run_id, "only a failed or cancelled run can be retried");
  if (!record.ok()) return record.status();
  size_t from = 0;
  if (!step_id.empty()) {
    auto index = StepIndex(record.value(), step_id);
    if (!index) return Status::Error("run " + run_id + " has no step '" + step_id + "'");
    if (!IsTerminal(record->steps[*index].state))
      return Status::Error("step " + step_id + " has not run yet");
    from = *index;
  }
  Result<ActiveRun*> run = Activate(record.value());
  if (!run.ok()) return run.status();
  ActiveRun& r = *run.value();
  if (!step_id.empty()) Dispatch(run_id, from, StepEvent::kOperatorRetry, {}, Source::kOperator, 0);
  return Reopen(r, from, step_id.empty() ? "retry requested" : "retry from " + step_id);
}

Status RunManager::Skip(const std::string& run_id, const std::string& step_id) {
  if (ActiveRun* run = Find(run_id)) {
    auto index = StepIndex(run->record, step_id);
    if (!index) return Status::Error("run " + run_id + " has no step '" + step_id + "'");
    StepState s = run->record.steps[*index].state;
    if (s != StepState::kPending && s != StepState::kWaiting)
      return Status::Error("step " + step_id + " is " + std::string(ToString(s)) +
                           "; only a step that has not started, or has failed, can be skipped");
    EventInfo info;
    info.reason = "skipped by operator";
    Dispatch(run_id, *index, StepEvent::kOperatorSkip, std::move(info), Source::kOperator, 0);
    return Status::Ok();
  }
  Result<RunRecord> record = LoadFinished(
      store_, run_id, "only steps of a running, failed or cancelled run can be skipped");
  if (!record.ok()) return record.status();
  auto index = StepIndex(record.value(), step_id);
  if (!index) return Status::Error("run " + run_id + " has no step '" + step_id + "'");
  StepState s = record->steps[*index].state;
  if (s == StepState::kSucceeded || s == StepState::kSkipped)
    return Status::Error("step " + step_id + " is already " + std::string(ToString(s)));
  Result<ActiveRun*> run = Activate(record.value());
  if (!run.ok()) return run.status();
  EventInfo info;
  info.reason = "skipped by operator";
  Dispatch(run_id, *index, StepEvent::kOperatorSkip, std::move(info), Source::kOperator, 0);
  return Reopen(*run.value(), *index, "skipped " + step_id);
}

namespace {

// Why an operator's request about a run that is not active is refused.
Status NotActive(RunStore& store, const std::string& run_id, const std::string& refusal) {
  Result<std::optional<RunRecord>> loaded = store.LoadRun(run_id, false);
  if (!loaded.ok()) return loaded.status();
  if (!loaded.value()) return Status::Error("no run '" + run_id + "'");
  return Status::Error("run " + run_id + " has already finished (" +
                       std::string(ToString(loaded.value()->state)) + "); " + refusal);
}

}  // namespace

Status RunManager::Approve(const std::string& run_id, const std::string& step_id,
                           const std::string& by) {
  ActiveRun* run = Find(run_id);
  if (!run) return NotActive(store_, run_id, "there is nothing to approve");
  auto index = StepIndex(run->record, step_id);
  if (!index) return Status::Error("run " + run_id + " has no step '" + step_id + "'");
  if (!run->live[*index].def->approval)
    return Status::Error("step " + step_id + " is not an approval step");
  StepState s = run->record.steps[*index].state;
  if (s != StepState::kWaiting)
    return Status::Error("step " + step_id + " is " + std::string(ToString(s)) +
                         ", not waiting for approval");
  EventInfo info;
  info.reason = "approved by " + by;
  Dispatch(run_id, *index, StepEvent::kApprove, std::move(info), Source::kOperator, 0);
  return Status::Ok();
}

Status RunManager::Pause(const std::string& run_id) {
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
  std::string reason = "paused by operator";
  for (size_t i = 0; i < record.steps.size(); ++i) {
    const StepRecord& s = record.steps[i];
    if (s.state == StepState::kRunning || s.state == StepState::kVerifying ||
        (s.state == StepState::kPending && run->live[i].awaiting)) {
      reason += "; step " + s.id + " finishes first";
      break;
    }
  }
  if (!CommitRunState(*run, RunState::kPaused, reason, "")) return Status::Error("cannot record");
  return Status::Ok();
}

Status RunManager::Resume(const std::string& run_id) {
  ActiveRun* run = Find(run_id);
  if (!run) return NotActive(store_, run_id, "only a paused run can be resumed");
  if (run->record.state != RunState::kPaused)
    return Status::Error("run " + run_id + " is not paused (it is " +
                         std::string(ToString(run->record.state)) + ")");
  if (!CommitRunState(*run, RunState::kRunning, "resumed by operator", ""))
    return Status::Error("cannot record");
  SyncWaiting(*run);  // a retry of an approval step may have started to wait meanwhile
  Advance(*run);
  return Status::Ok();
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

std::shared_ptr<void> RunManager::WhenActionsExit(const std::string& run_id,
                                                  const std::string& step_id,
                                                  std::function<void()> done) {
  std::string key = run_id + "/" + step_id;
  if (alive_actions_.count(key)) {
    exit_waiters_[key].push_back(std::move(done));
    return nullptr;
  }
  // A background action outlives its step: wait for the recorded process itself.
  std::string action_json;
  if (ActiveRun* run = Find(run_id)) {
    for (const StepRecord& s : run->record.steps)
      if (s.id == step_id) action_json = s.action;
  } else if (Result<std::optional<RunRecord>> loaded = store_.LoadRun(run_id, true);
             loaded.ok() && loaded.value()) {
    for (const StepRecord& s : loaded.value()->steps)
      if (s.id == step_id) action_json = s.action;
  }
  std::optional<BackgroundActionInfo> info = BackgroundActionInfo::FromJson(action_json);
  if (info && info->action) {
    Result<std::unique_ptr<ProcessExitWatch>> watch = ProcessExitWatch::Open(ex_, *info->action);
    if (watch.ok()) {
      std::shared_ptr<ProcessExitWatch> held = std::move(watch.value());
      held->AsyncWait(std::move(done));
      return held;
    }
  }
  asio::post(ex_, std::move(done));
  return nullptr;
}

std::uint64_t RunManager::Subscribe(const std::string& run_id, Listener listener) {
  std::uint64_t token = next_token_++;
  listeners_[token] = {run_id, std::move(listener)};
  return token;
}

void RunManager::Unsubscribe(std::uint64_t token) { listeners_.erase(token); }

void RunManager::Notify(const std::string& run_id, const EventRecord& event, int attempt) {
  if (options_.on_activity) {
    std::string what = event.step_id.empty() ? "" : " step " + event.step_id;
    options_.on_activity(run_id + what + " " + (event.state.empty() ? event.kind : event.state));
  }
  if (listeners_.empty()) return;
  EventRecord stamped = event;
  if (!stamped.at_ms) stamped.at_ms = NowMs();
  json::object line = EventToJson(run_id, stamped);
  line["attempt"] = attempt;
  NotifyLine(run_id, line);
}

void RunManager::NotifyLine(const std::string& run_id, const json::object& line) {
  std::vector<Listener> targets;
  for (const auto& [token, entry] : listeners_)
    if (entry.first == run_id) targets.push_back(entry.second);
  for (const auto& l : targets) l(line);
}

void RunManager::Shutdown() {
  for (auto& [id, run] : runs_) {
    run->stopping = true;
    if (run->preflight_cancel) run->preflight_cancel->emit(asio::cancellation_type::terminal);
    for (auto& live : run->live) {
      live.timer->cancel();
      if (live.progress) live.progress->Stop();
      if (live.checks_cancel) live.checks_cancel->emit(asio::cancellation_type::terminal);
    }
  }
  listeners_.clear();
}

json::object EventToJson(const std::string& run_id, const EventRecord& event) {
  return {{"type", "event"},        {"run", run_id},       {"seq", event.seq},
          {"step", event.step_id},  {"kind", event.kind},  {"state", event.state},
          {"detail", event.detail}, {"at_ms", event.at_ms}};
}

json::object RunToJson(const RunRecord& run) {
  json::object o;
  o["id"] = run.id;
  o["plan"] = run.plan_name;
  o["plan_file"] = run.plan_file;
  o["state"] = ToString(run.state);
  o["created_at_ms"] = run.created_at_ms;
  o["finished_at_ms"] = run.finished_at_ms;
  o["reason"] = run.reason;
  json::object vars;
  for (const auto& [k, v] : run.vars) vars[k] = v;
  o["vars"] = std::move(vars);
  if (!run.evidence.empty()) {
    boost::system::error_code ec;
    json::value ev = json::parse(run.evidence, ec);
    if (!ec) o["evidence"] = std::move(ev);
  }
  json::array steps;
  for (const StepRecord& s : run.steps) {
    json::object so;
    so["id"] = s.id;
    so["phase"] = s.phase;
    so["state"] = ToString(s.state);
    so["attempts"] = s.attempts;
    so["started_at_ms"] = s.started_at_ms;
    so["finished_at_ms"] = s.finished_at_ms;
    so["exit_status"] = s.exit_status ? json::value(*s.exit_status) : json::value(nullptr);
    if (s.pid) so["pid"] = *s.pid;
    if (!s.action.empty()) {
      boost::system::error_code ec;
      json::value action = json::parse(s.action, ec);
      if (!ec) so["action"] = std::move(action);
    }
    so["reason"] = s.reason;
    if (!s.evidence.empty()) {
      boost::system::error_code ec;
      json::value ev = json::parse(s.evidence, ec);
      if (!ec) so["evidence"] = std::move(ev);
    }
    steps.push_back(std::move(so));
  }
  if (!run.steps.empty()) o["steps"] = std::move(steps);
  return o;
}

}  // namespace deployd
