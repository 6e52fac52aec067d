// RunManager: background actions. A background action runs under its supervisor
// (process/supervisor.h), which deployd re-executes itself as; the step learns from the
// supervisor that the action has started (committed with its processes before the step
// verifies) and how it ended. Its log is followed for fail_on and progress. After a restart
// of deployd the action is found again from its committed record and watched as before.
#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "util/json_fields.h"
#include "util/line_splitter.h"

namespace deployd {

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
    StepEventInfo info;
    info.pid = record.action.pid;
    info.action = started.ToJson();
    Dispatch(run_id, index, StepEvent::kActionStarted, std::move(info), EventSource::kAction, gen);
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
    if (gen == live.action_gen) live.StopProgress();
    return;
  }
  StepEventInfo info;
  if (end.exit) {
    info.exit_status = end.exit->AsShellStatus();
    info.evidence["exit_status"] = end.exit->AsShellStatus();
    if (end.exit->signal) info.evidence["signal"] = end.exit->signal;
  }
  std::optional<BackgroundActionInfo> action = BackgroundActionInfo::FromJson(record.action);
  std::vector<std::string> tail = ReadLastLines(
      LogPath(run_id, record.id), action ? action->log_offset : 0, ChildProcess::kTailLines);
  info.evidence["output_tail"] = JsonStrings(tail);
  info.reason = (end.exit ? "background action " : "") + end.reason + when;
  // A built-in action's last line says why it failed (builtin_action.h).
  if (run->live[index].def->kind != ActionKind::kRun && end.exit && end.exit->code == 1 &&
      !end.exit->signal && !tail.empty())
    info.reason = tail.back() + when;
  if (!when.empty()) info.detail = "deployd restarted; " + info.reason;
  Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
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
      StepEventInfo event;
      event.pid = known.action->pid;
      event.action = known.ToJson();
      event.detail = "deployd restarted; reattached to the background action (pid " +
                     std::to_string(known.action->pid) + ")";
      Dispatch(run_id, index, StepEvent::kReattach, std::move(event), EventSource::kAction, gen);
      break;
    }
    case BackgroundAction::Found::Kind::kEnded: {
      if (!found.end.ok()) {
        OnBackgroundEnd(run_id, index, gen, found.end, " (it ended while deployd was down)");
        return true;
      }
      StepEventInfo event;
      event.exit_status = 0;
      event.detail = "deployd restarted; the background action had exited with status 0 meanwhile";
      Dispatch(run_id, index, StepEvent::kReattach, std::move(event), EventSource::kAction, gen);
      break;
    }
  }
  if (ActiveRun* r = Find(run_id); r && !IsTerminal(r->record.steps[index].state)) {
    FollowBackgroundOutput(*r, index, gen, info->log_offset);
    if (found.kind == BackgroundAction::Found::Kind::kAlive) StartProgressWatch(*r, index, gen);
  }
  return true;
}

}  // namespace deployd
