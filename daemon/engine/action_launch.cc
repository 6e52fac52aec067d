// RunManager: starting a step's action in the foreground — its command, or deployd itself
// running a built-in action (`deployd --action`, builtin_action.h) — with its secrets, its
// log, its timeout; handling its exit; stopping it; and telling `logs -f` when none of a
// step's processes is alive any more. (A background action: background_attach.cc.)
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "actions/builtin_json.h"
#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "process/process_exit_watch.h"
#include "util/json_fields.h"
#include "util/secrets.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

void RunManager::StartAction(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  const std::string run_id = run.record.id;
  int gen = ++live.action_gen;
  live.EndBackgroundWatch();
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
  // Counted for WhenActionsExit(); the count is taken down after the exit has been handled.
  std::string key = run_id + "/" + def.id;
  auto on_exit = [this, run_id, index, gen, key](const ExitStatus& status) {
    OnActionExit(run_id, index, gen, status);
    alive_actions_.Exited(key);
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(ex_, options, std::move(on_line), std::move(on_exit));
  if (!child.ok()) {
    FailSoon(run_id, index, gen, child.status().message());
    return;
  }
  live.child = child.value();
  alive_actions_.Started(key);
  StartProgressWatch(run, index, gen);
  if (def.timeout) ArmTimeout(run, index, gen);
}

void RunManager::OnActionExit(const std::string& run_id, size_t index, int gen,
                              const ExitStatus& status) {
  ActiveRun* run = Find(run_id);
  if (!run) return;
  LiveStep& live = run->live[index];
  StepEventInfo info;
  info.exit_status = status.AsShellStatus();
  info.evidence["exit_status"] = status.AsShellStatus();
  if (status.signal) info.evidence["signal"] = status.signal;
  if (live.child) info.evidence["output_tail"] = JsonStrings(live.child->Tail());
  // The child has been reaped: release its pipe, pidfd and log descriptors now (output still
  // in flight keeps the object alive until EOF). Held until the run ended, they cost 3 fds
  // per finished step (EMFILE after ~330 steps under a 1024 limit) and made every later fork
  // slower (Asio re-registers each open descriptor in the child before exec).
  std::string last_line =
      live.child && !live.child->Tail().empty() ? live.child->Tail().back() : "";
  if (gen == live.action_gen) live.child.reset();
  if (status.ok()) {
    if (gen == live.action_gen && live.journal) live.journal->Arm();
    Dispatch(run_id, index, StepEvent::kActionSucceeded, std::move(info), EventSource::kAction,
             gen);
    return;
  }
  info.reason = status.ToString();
  // A built-in action's last line says why it failed (builtin_action.h).
  if (live.def->kind != ActionKind::kRun && status.code == 1 && !last_line.empty())
    info.reason = last_line;
  Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
}

void RunManager::ArmTimeout(ActiveRun& run, size_t index, int gen) {
  LiveStep& live = run.live[index];
  int timer_gen = live.timer_gen;
  Duration timeout = *live.def->timeout;
  live.timer->expires_after(timeout);
  live.timer->async_wait([this, run_id = run.record.id, index, gen, timer_gen,
                          timeout](boost::system::error_code ec) {
    ActiveRun* run = Find(run_id);
    if (ec || !run || run->live[index].timer_gen != timer_gen) return;
    StepEventInfo info;
    info.reason = "timed out after " + FormatDuration(timeout);
    info.evidence["timeout_ms"] = timeout.count();
    if (auto& c = run->live[index].child) info.evidence["output_tail"] = JsonStrings(c->Tail());
    Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
  });
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

void RunManager::StopAction(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  if (live.background) {
    // The action's process group, not its supervisor: the supervisor records the signal.
    live.background->Stop(live.def->grace);
    live.EndBackgroundWatch();
    return;
  }
  if (live.child && !live.child->exited()) live.child->Terminate(live.def->grace);
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

}  // namespace deployd
