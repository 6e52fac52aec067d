// RunManager: after a restart of deployd (DESIGN.md §1 "Crash and restart"), what became of
// each attempt that was running, read from its committed record and its supervisor:
//   - its supervisor is alive (also one found by the attempt's tag before its first record)
//     → reattached and awaited (a foreground action as a background
//     one), its log followed from where the attempt's output starts, its timeout re-armed for
//     what is left of it; a stop that was in progress goes on;
//   - it ended while deployd was down → judged by the end its supervisor recorded;
//   - it provably never started (this boot, no status file, no process with its tag) → fired;
//   - its supervisor died without recording the end → what is left of it (found by its tag)
//     is stopped, and the step recovers as one whose fate is unknown;
//   - otherwise (another boot, no record) → the step machine's rule for the unknown.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "process/process_tree.h"
#include "process/supervisor.h"
#include "util/clock.h"

namespace deployd {

namespace {

constexpr const char* kWhileDown = " (it ended while deployd was down)";

// Among an attempt's processes, its supervisor: the one started as `deployd --supervise` for
// this attempt's status file.
std::optional<ProcessIdentity> StartingSupervisor(const std::vector<ProcStat>& processes,
                                                  const std::string& status_file) {
  for (const ProcStat& p : processes) {
    std::optional<ProcessInfo> info = ReadProcess(p.pid);
    if (!info || info->stat.start_time != p.start_time || info->argv.size() < 2) continue;
    const std::vector<std::string>& argv = info->argv;
    if (argv[1] == kSuperviseFlag && std::find(argv.begin(), argv.end(), status_file) != argv.end())
      return ProcessIdentity{p.pid, p.start_time, CurrentBootId()};
  }
  return std::nullopt;
}

}  // namespace

void RunManager::Recover(ActiveRun& run, size_t index) {
  LiveStep& live = run.live[index];
  const StepRecord& record = run.record.steps[index];
  std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(record.action);
  // A foreground action that is verifying has exited 0 already: it is verified again.
  const bool verifying_foreground = record.state == StepState::kVerifying && !live.def->background;
  if (!attempt || verifying_foreground) {
    RecoverUnknown(run, index, false);
    return;
  }
  if (attempt->stop) live.pending_stop = attempt->stop;
  const std::string run_id = run.record.id;
  int gen = ++live.action_gen;
  auto find = [&](const std::optional<ProcessIdentity>& supervisor) {
    SupervisedAction::Handlers handlers;
    handlers.on_started = [this, run_id, index, gen](const SupervisorRecord& started) {
      OnAttemptStarted(run_id, index, gen, started);
    };
    handlers.on_end = [this, run_id, index, gen](const ActionEnd& end) {
      OnAttemptEnd(run_id, index, gen, end, "");
    };
    return SupervisedAction::Find(ex_, attempt->status_file, supervisor, std::move(handlers));
  };
  SupervisedAction::Found found = find(attempt->supervisor);
  std::vector<ProcStat> left;
  if (found.kind == SupervisedAction::Found::Kind::kNeverStarted && !attempt->tag.empty()) {
    // deployd went away between starting the supervisor and its first record: the supervisor
    // is found by the attempt's tag, and awaited like any other.
    left = ProcessesWithEnvironment(std::string(kAttemptTagVar) + "=" + attempt->tag);
    if (std::optional<ProcessIdentity> starting = StartingSupervisor(left, attempt->status_file))
      found = find(starting);
  }
  switch (found.kind) {
    case SupervisedAction::Found::Kind::kAlive:
      Reattach(run, index, gen, *attempt, found);
      return;
    case SupervisedAction::Found::Kind::kEnded:
      if (live.def->background && found.end.ok() && !live.pending_stop) {
        StepEventInfo event;
        event.exit_status = 0;
        event.detail =
            "deployd restarted; the background action had exited with status 0 meanwhile";
        Dispatch(run_id, index, StepEvent::kReattach, std::move(event), EventSource::kAction, gen);
        return;
      }
      OnAttemptEnd(run_id, index, gen, found.end, kWhileDown);
      return;
    case SupervisedAction::Found::Kind::kNeverStarted:
    case SupervisedAction::Found::Kind::kUnknown:
      break;
  }
  if (found.kind != SupervisedAction::Found::Kind::kNeverStarted && !attempt->tag.empty())
    left = ProcessesWithEnvironment(std::string(kAttemptTagVar) + "=" + attempt->tag);
  const bool never_started = found.kind == SupervisedAction::Found::Kind::kNeverStarted &&
                             attempt->boot_id == CurrentBootId() && left.empty();
  if (left.empty()) {
    if (!live.pending_stop) {
      RecoverUnknown(run, index, never_started);
      return;
    }
    // The stop had done its work: what it was for is recorded now.
    ActionEnd end;
    end.recorded = true;
    end.reason = "its supervisor is gone";
    OnAttemptEnd(run_id, index, gen, end, kWhileDown);
    return;
  }
  StopLeftovers(run, index, std::move(left));
}

void RunManager::StopLeftovers(ActiveRun& run, size_t index, std::vector<ProcStat> left) {
  LiveStep& live = run.live[index];
  const std::string run_id = run.record.id;
  spdlog::warn("{} {}: the attempt's supervisor is gone; stopping what is left of it: {}", run_id,
               live.def->id, NameProcesses(left));
  live.orphans = OrphanStop::Start(
      ex_, left, live.def->grace, [this, run_id, index, left](std::vector<ProcStat> stuck) {
        ActiveRun* run = Find(run_id);
        if (!run) return;
        LiveStep& live = run->live[index];
        live.orphans.reset();
        std::string what =
            "its supervisor was gone; stopped what was left of the attempt: " + NameProcesses(left);
        if (!stuck.empty()) what += "; still there after SIGKILL: " + NameProcesses(stuck);
        if (live.pending_stop) {
          ActionEnd end;
          end.recorded = true;
          end.reason = what;
          for (const ProcStat& p : stuck) end.stuck.push_back({p.pid, p.comm, p.state});
          OnAttemptEnd(run_id, index, live.action_gen, end, kWhileDown);
          return;
        }
        live.recovery_note = what;
        RecoverUnknown(*run, index, false);
      });
}

void RunManager::RecoverUnknown(ActiveRun& run, size_t index, bool never_started) {
  LiveStep& live = run.live[index];
  live.recovering = true;
  live.never_started = never_started;
  StepEventInfo info;
  if (never_started) info.detail = "deployd restarted; the action had never started: firing it";
  if (!live.recovery_note.empty()) {
    info.evidence["recovery"] = live.recovery_note;
    live.recovery_note.clear();
  }
  Dispatch(run.record.id, index, StepEvent::kRecover, std::move(info), EventSource::kOperator, 0);
  live.never_started = false;
}

void RunManager::Reattach(ActiveRun& run, size_t index, int gen, const AttemptRecord& attempt,
                          const SupervisedAction::Found& found) {
  LiveStep& live = run.live[index];
  const std::string run_id = run.record.id;
  live.attempt = found.watch;
  if (!live.def->background) alive_actions_.Started(run_id + "/" + live.def->id);
  FollowOutput(run, index, gen, attempt.log_offset);
  if (live.pending_stop) {
    // The stop goes on; its outcome is recorded once the attempt is gone.
    live.attempt->Stop();
    return;
  }
  AttemptRecord known = attempt;
  StepEventInfo event;
  if (found.record.action.pid) {
    known.action = found.record.action;
    known.supervisor = found.record.supervisor;
    event.pid = found.record.action.pid;
    event.action = known.ToJson();
  }
  event.detail = std::string("deployd restarted; reattached to the ") +
                 (live.def->background ? "background action" : "action") + " (pid " +
                 std::to_string(found.record.action.pid) + ")";
  if (!found.record.action.pid) {
    event.detail = "deployd restarted; reattached to the attempt's supervisor (pid " +
                   std::to_string(found.record.supervisor.pid) + "), which was starting the action";
  }
  Dispatch(run_id, index, StepEvent::kReattach, std::move(event), EventSource::kAction, gen);
  ActiveRun* r = Find(run_id);
  if (!r || IsTerminal(r->record.steps[index].state)) return;
  StartProgressWatch(*r, index, gen);
  FollowKernelLog(*r, index, gen);
  // What is left of its timeout, counted from when its supervisor started it.
  if (live.def->timeout && !live.def->background && found.record.started_at_ms) {
    std::int64_t ran = NowMs() - found.record.started_at_ms;
    Duration left = *live.def->timeout - Duration(std::max<std::int64_t>(0, ran));
    ArmTimeout(*r, index, gen, std::max(left, Duration(0)));
  }
}

}  // namespace deployd
