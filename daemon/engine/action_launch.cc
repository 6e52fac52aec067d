// RunManager: starting an attempt of a step's action — its command, or deployd itself running
// a built-in action (`deployd --action`, builtin_action.h), in the foreground or the
// background alike — under its supervisor (process/supervisor.h), with its secrets, its log,
// its timeout; learning when every process of it is gone and how the action ended; stopping
// it; and telling `logs -f` when none of a step's processes is alive any more. (After a
// restart of deployd: attempt_recovery.cc.)
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <cstdlib>
#include <optional>
#include <set>

#include "actions/builtin_json.h"
#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "process/process_exit_watch.h"
#include "process/process_tree.h"
#include "util/clock.h"
#include "util/json_fields.h"
#include "util/line_splitter.h"
#include "util/secrets.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr size_t kTailLines = 20;

json::array Notes(const std::vector<ProcessNote>& notes) {
  json::array a;
  for (const ProcessNote& n : notes)
    a.emplace_back("pid " + std::to_string(n.pid) + " (" + n.name + ")");
  return a;
}

// "pid 7 (x) in state D"
std::string Stuck(const std::vector<ProcessNote>& stuck) {
  std::string out;
  for (const ProcessNote& n : stuck) {
    if (!out.empty()) out += ", ";
    out += "pid " + std::to_string(n.pid) + " (" + n.name + ") in state " + n.state;
  }
  return out;
}

}  // namespace

void RunManager::StartAction(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  const std::string run_id = run.record.id;
  int gen = ++live.action_gen;
  live.EndAttemptWatch();
  std::optional<AttemptRecord> intent = AttemptRecord::FromJson(run.record.steps[index].action);
  if (!intent) {
    // Dispatch commits the intent with the fire; without it nothing may start.
    FailSoon(run_id, index, gen, "internal error: the attempt's record was not committed");
    return;
  }
  Result<std::map<std::string, std::string>> secrets = LoadSecrets(run, def);
  if (!secrets.ok()) {
    FailSoon(run_id, index, gen, secrets.status().message());
    return;
  }
  if (!def.background) FollowJournal(run, index, gen);
  FollowKernelLog(run, index, gen);

  SpawnOptions options;
  options.argv = ActionArgv(def);
  options.env = def.env;
  options.env[std::string(kAttemptTagVar)] = intent->tag;
  options.cwd = def.cwd;
  SupervisorOptions supervision;
  supervision.status_file = intent->status_file;
  supervision.log_file = LogPath(run_id, def.id);
  supervision.grace = def.grace;
  supervision.log_cap_bytes = options_.log_cap_bytes;
  // An attempt fired again after a crash counts past the plan's attempts: "3 of 3" at least.
  supervision.attempt = std::max(1, static_cast<int>(run.record.steps[index].attempts));
  supervision.attempts = std::max(def.max_attempts(), supervision.attempt);
  for (const auto& [name, value] : secrets.value()) {
    options.env[name] = value;
    supervision.redact.push_back(name);  // the supervisor redacts the action's output
  }

  if (options_.crash_before_start) std::_Exit(137);
  SupervisedAction::Handlers handlers;
  handlers.on_started = [this, run_id, index, gen](const SupervisorRecord& record) {
    OnAttemptStarted(run_id, index, gen, record);
  };
  handlers.on_end = [this, run_id, index, gen](const ActionEnd& end) {
    OnAttemptEnd(run_id, index, gen, end, "");
  };
  const std::string& supervisor =
      options_.supervisor_program.empty() ? options_.supervisor_exe : options_.supervisor_program;
  Result<std::shared_ptr<SupervisedAction>> started =
      SupervisedAction::Start(ex_, options, supervision, supervisor, std::move(handlers));
  if (!started.ok()) {
    FailSoon(run_id, index, gen, started.status().message());
    return;
  }
  live.attempt = std::move(started.value());
  // A background action outlives its step; WhenActionsExit finds it by its recorded pid.
  if (!def.background) alive_actions_.Started(run_id + "/" + def.id);
  FollowOutput(run, index, gen, intent->log_offset);
  StartProgressWatch(run, index, gen);
  if (def.timeout && !def.background) ArmTimeout(run, index, gen, *def.timeout);
}

// The supervisor says who runs. A background step has done its part now (its processes are
// committed before it verifies); a foreground one is awaited.
void RunManager::OnAttemptStarted(const std::string& run_id, size_t index, int gen,
                                  const SupervisorRecord& started) {
  ActiveRun* run = Find(run_id);
  if (!run || !run->live[index].def->background) return;
  std::optional<AttemptRecord> record = AttemptRecord::FromJson(run->record.steps[index].action);
  if (!record) return;
  record->action = started.action;
  record->supervisor = started.supervisor;
  StepEventInfo info;
  info.pid = started.action.pid;
  info.action = record->ToJson();
  Dispatch(run_id, index, StepEvent::kActionStarted, std::move(info), EventSource::kAction, gen);
}

// Every process of the attempt is gone (the supervisor's exit proves it). `when` ends the
// reason, e.g. " (it ended while deployd was down)".
void RunManager::OnAttemptEnd(const std::string& run_id, size_t index, int gen,
                              const ActionEnd& end, const std::string& when) {
  ActiveRun* run = Find(run_id);
  if (!run) return;
  LiveStep& live = run->live[index];
  if (!live.def->background) alive_actions_.Exited(run_id + "/" + live.def->id);
  if (gen != live.action_gen) return;
  // The last lines first: a fail_on line the action printed before it exited decides. The
  // attempt has ended: what that line decides is committed at once.
  if (live.output) live.output->CatchUp();
  if (!end.recorded && !live.pending_stop) {
    if (StopWhatIsLeft(*run, index, gen, end, when)) return;
  }
  StepEventInfo info;
  if (end.exit) {
    info.exit_status = end.exit->AsShellStatus();
    info.evidence["exit_status"] = end.exit->AsShellStatus();
    if (end.exit->signal) info.evidence["signal"] = end.exit->signal;
  }
  const StepRecord& record = run->record.steps[index];
  std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(record.action);
  std::vector<std::string> tail =
      ReadLastLines(LogPath(run_id, record.id), attempt ? attempt->log_offset : 0, kTailLines);
  info.evidence["output_tail"] = JsonStrings(tail);
  if (!end.left.empty()) info.evidence["left_running"] = Notes(end.left);
  if (!end.stuck.empty()) info.evidence["stuck"] = Notes(end.stuck);
  std::string stuck = end.stuck.empty() ? "" : "; still there after SIGKILL: " + Stuck(end.stuck);
  // A log the disk could not take does not decide the step — the action and the checks do —
  // but its record says what is missing, and that fail_on never saw those lines.
  std::string log_lost = end.log_lost.empty() ? "" : "; the log is incomplete: " + end.log_lost;
  if (!end.log_lost.empty()) info.evidence["log_incomplete"] = end.log_lost;

  if (std::optional<PendingStop> stop = std::exchange(live.pending_stop, std::nullopt)) {
    // What the stop was for, now that every process of the attempt is gone.
    info.reason = stop->reason + stuck + log_lost;
    for (auto& [key, value] : stop->evidence) info.evidence[key] = value;
    info.final = stop->final;
    live.EndAttemptWatch();
    Dispatch(run_id, index, stop->event, std::move(info), EventSource::kOperator, 0);
    return;
  }
  if (end.ok() && stuck.empty()) {
    if (live.def->background) {
      spdlog::info("{} {}: background action exited with status 0{}", run_id, record.id, when);
      // Nothing is left to make progress: a verify that takes longer than stall_after (hashing
      // the weights it downloaded, say) is not a stall.
      live.StopProgress();
      return;
    }
    if (live.journal) live.journal->Arm();
    if (!log_lost.empty()) info.reason = "exit status 0" + log_lost;
    if (!when.empty())
      info.detail = "deployd restarted; the action had exited with status 0" + when;
    Dispatch(run_id, index, StepEvent::kActionSucceeded, std::move(info), EventSource::kAction,
             gen);
    return;
  }
  info.reason = (end.exit && live.def->background ? "background action " : "") + end.reason;
  // A built-in action's last line says why it failed (builtin_action.h).
  if (live.def->kind != ActionKind::kRun && end.exit && end.exit->code == 1 && !end.exit->signal &&
      !tail.empty())
    info.reason = tail.back();
  if (end.ok()) info.reason = "the action exited with status 0";
  info.reason += stuck + log_lost + when;
  if (!when.empty()) info.detail = "deployd restarted; " + info.reason;
  Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
}

// The supervisor died without recording the end (SIGKILLed, say): its orphans — found by the
// attempt's tag — are stopped before the step goes on. True when some were found: the end is
// handled once they are gone.
bool RunManager::StopWhatIsLeft(ActiveRun& run, size_t index, int gen, const ActionEnd& end,
                                const std::string& when) {
  LiveStep& live = run.live[index];
  std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(run.record.steps[index].action);
  if (!attempt || attempt->tag.empty()) return false;
  std::vector<ProcStat> left =
      ProcessesWithEnvironment(std::string(kAttemptTagVar) + "=" + attempt->tag);
  if (left.empty()) return false;
  spdlog::warn("{} {}: {}; stopping what is left of the attempt: {}", run.record.id, live.def->id,
               end.reason, NameProcesses(left));
  live.orphans = OrphanStop::Start(
      ex_, left, live.def->grace,
      [this, run_id = run.record.id, index, gen, end, when, left](std::vector<ProcStat> stuck) {
        ActiveRun* run = Find(run_id);
        if (!run) return;
        run->live[index].orphans.reset();
        ActionEnd stopped = end;
        stopped.recorded = true;  // now known: nothing of the attempt is left but `stuck`
        stopped.reason += "; stopped what was left of the attempt: " + NameProcesses(left);
        for (const ProcStat& p : stuck) stopped.stuck.push_back({p.pid, p.comm, p.state});
        OnAttemptEnd(run_id, index, gen, stopped, when);
      });
  return true;
}

void RunManager::ArmTimeout(ActiveRun& run, size_t index, int gen, Duration after) {
  LiveStep& live = run.live[index];
  int timer_gen = live.timer_gen;
  Duration timeout = *live.def->timeout;
  live.timer->expires_after(after);
  live.timer->async_wait([this, run_id = run.record.id, index, gen, timer_gen,
                          timeout](boost::system::error_code ec) {
    ActiveRun* run = Find(run_id);
    if (ec || !run || run->live[index].timer_gen != timer_gen) return;
    StepEventInfo info;
    info.reason = "timed out after " + FormatDuration(timeout);
    info.evidence["timeout_ms"] = timeout.count();
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
  });
}

// The log is followed as it grows (inotify) from where the attempt's output starts, so lines
// written while deployd was down are matched too.
void RunManager::FollowOutput(ActiveRun& run, size_t index, int gen, std::uint64_t offset) {
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

std::vector<std::string> RunManager::ActionArgv(const Step& step) const {
  if (step.kind == ActionKind::kRun) return step.run.Argv();
  ActionContext context;
  context.unit_dir = options_.unit_dir;
  context.allowed_roots = options_.allowed_roots;
  context.state_dir = options_.state_dir;
  return {options_.supervisor_exe, std::string(kBuiltinActionFlag),
          ActionRequestJson(step, context)};
}

namespace {

// The secret `name` of `plan`, read from its file or deployd's environment.
std::optional<Result<Secret>> ReadSecret(const Plan& plan, const std::string& name) {
  auto source = std::find_if(plan.secrets.begin(), plan.secrets.end(),
                             [&](const SecretSource& s) { return s.name == name; });
  if (source == plan.secrets.end()) return std::nullopt;  // the parser checked every name
  SecretSpec spec;
  spec.name = source->name;
  spec.file = source->file;
  spec.env = source->env;
  return LoadSecret(spec);
}

}  // namespace

Result<std::map<std::string, std::string>> RunManager::LoadSecrets(const ActiveRun& run,
                                                                   const Step& step) {
  std::map<std::string, std::string> values;
  for (const std::string& name : step.secrets) {
    std::optional<Result<Secret>> secret = ReadSecret(run.plan, name);
    if (!secret) continue;
    if (!secret->ok()) return secret->status();
    values[name] = secret->value().value;
  }
  return values;
}

std::vector<CheckOutcome> RunManager::SecretProblems(const Plan& plan) {
  std::set<std::string> used;
  for (const auto* steps : {&plan.steps, &plan.on_failure})
    for (const Step& step : *steps) used.insert(step.secrets.begin(), step.secrets.end());
  std::vector<CheckOutcome> problems;
  for (const std::string& name : used) {
    std::optional<Result<Secret>> secret = ReadSecret(plan, name);
    if (!secret || secret->ok()) continue;
    CheckOutcome problem;
    problem.summary = secret->status().message();
    problem.attempts = 1;
    problem.evidence["check"] = "secret " + name;
    problem.evidence["summary"] = problem.summary;
    problem.evidence["attempts"] = 1;
    problems.push_back(std::move(problem));
  }
  return problems;
}

std::shared_ptr<void> RunManager::WhenActionsExit(const std::string& run_id,
                                                  const std::string& step_id,
                                                  std::function<void()> done) {
  if (alive_actions_.WaitForNone(run_id + "/" + step_id, done)) return nullptr;
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
  std::optional<AttemptRecord> info = AttemptRecord::FromJson(action_json);
  if (info && info->supervisor) {
    Result<std::unique_ptr<ProcessExitWatch>> watch =
        ProcessExitWatch::Open(ex_, *info->supervisor);
    if (watch.ok()) {
      std::shared_ptr<ProcessExitWatch> held = std::move(watch.value());
      held->AsyncWait(std::move(done));
      return held;
    }
  }
  asio::post(ex_, std::move(done));
  return nullptr;
}

}  // namespace deployd
