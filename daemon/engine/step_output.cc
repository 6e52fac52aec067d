// RunManager: what a step's action says while it runs. Each output line — the action's own, a
// background action's log, a service's journal — feeds the progress watch first, then meets
// the step's fail_on patterns; a stall of the progress watch fails the attempt like a
// fail_on line does. The kernel's messages meet only the patterns meant for them (Xid faults).
// Progress samples go to the run's followers as they change.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <optional>

#include "engine/active_run.h"
#include "engine/attempt_record.h"
#include "engine/run_manager.h"
#include "engine/wire_records.h"
#include "util/clock.h"
#include "util/json_fields.h"
#include "util/units.h"

namespace deployd {

namespace json = boost::json;

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

StepEventInfo StallEvent(const ProgressSpec& spec, const ProgressSnapshot& snapshot,
                         std::int64_t stalled_for_ms) {
  StepEventInfo info;
  info.reason = StallReason(spec, snapshot);
  json::object progress = EncodeProgress(ToWire(snapshot));
  info.evidence["stalled_for_ms"] = stalled_for_ms;
  info.evidence["stall_after_ms"] = spec.stall_after.count();
  if (!spec.path.empty()) info.evidence["path"] = spec.path;
  info.evidence["bytes"] = progress["bytes"];
  info.evidence["last_progress_at_ms"] = snapshot.last_progress_at_ms;
  info.evidence["rate_bps"] = progress["rate_bps"];
  info.evidence["last_line"] =
      snapshot.last_line.empty() ? json::value(nullptr) : json::value(snapshot.last_line);
  return info;
}

}  // namespace

// The unit's journal from the attempt's fire on (journal_follower.h), started before the
// action, until the step ends.
void RunManager::FollowJournal(ActiveRun& run, size_t index, int gen, bool recovering) {
  LiveStep& live = run.live[index];
  const Step& def = *live.def;
  if (def.kind != ActionKind::kService || live.fail_on.empty() ||
      (def.service.state != "started" && def.service.state != "restarted"))
    return;
  const std::string run_id = run.record.id;
  auto on_line = [this, run_id, index, gen](std::string_view line) {
    ActiveRun* run = Find(run_id);
    if (!run || run->live[index].action_gen != gen) return;
    OnOutputLine(run_id, index, gen, line);
  };
  std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(run.record.steps[index].action);
  JournalFollower::Options options;
  options.unit = def.service.unit;
  // An attempt of an older deployd has no fire time: from now on.
  options.fired_at_ms = attempt && attempt->fired_at_ms ? attempt->fired_at_ms : NowMs();
  options.recovering = recovering;
  options.log_path = LogPath(run_id, def.id);
  struct stat log;
  if (recovering && ::stat(options.log_path.c_str(), &log) == 0) {
    // An mtime is only as fine as the kernel's tick: it may read a little earlier than the
    // last write, which came after journald stamped the line.
    constexpr std::int64_t kMtimeSlackMs = 20;
    options.logged_until_ms =
        std::int64_t{log.st_mtim.tv_sec} * 1000 + log.st_mtim.tv_nsec / 1000000 + kMtimeSlackMs;
  }
  options.log_cap_bytes = options_.log_cap_bytes;
  options.run_id = run_id;
  Result<std::unique_ptr<JournalFollower>> journal = JournalFollower::Start(ex_, options, on_line);
  if (!journal.ok()) {
    spdlog::warn("{} {}: cannot follow the journal of {}: {}", run_id, def.id, def.service.unit,
                 journal.status().message());
    return;
  }
  live.journal = std::move(journal.value());
}

void RunManager::FollowKernelLog(ActiveRun& run, size_t index, int gen) {
  LiveStep& live = run.live[index];
  if (live.kernel_fail_on.empty() || (live.kernel_log && live.kernel_log_gen == gen)) return;
  const std::string run_id = run.record.id;
  std::optional<AttemptRecord> attempt = AttemptRecord::FromJson(run.record.steps[index].action);
  KernelLogFollower::Options options;
  // An attempt of an older deployd has no fire time: from now on.
  options.fired_at_ms = attempt && attempt->fired_at_ms ? attempt->fired_at_ms : NowMs();
  options.run_id = run_id;
  options.step_id = live.def->id;
  auto on_line = [this, run_id, index, gen](std::string_view line) {
    OnKernelLine(run_id, index, gen, line);
  };
  Result<std::unique_ptr<KernelLogFollower>> follower =
      KernelLogFollower::Start(ex_, options, on_line);
  if (!follower.ok()) {
    spdlog::warn("{} {}: cannot follow the kernel's log: {}", run_id, live.def->id,
                 follower.status().message());
    return;
  }
  if (live.kernel_log) live.kernel_log->Stop();
  live.kernel_log = std::move(follower.value());
  live.kernel_log_gen = gen;
}

// Each output line of the action, as it arrives: progress first, then the fail_on patterns.
void RunManager::OnOutputLine(const std::string& run_id, size_t index, int gen,
                              std::string_view line) {
  ActiveRun* run = Find(run_id);
  if (!run) return;
  if (const auto& watch = run->live[index].progress) watch->OnLine(line);
  std::optional<FailOnHit> hit = run->live[index].fail_on.Match(line);
  if (hit) FailOnLine(*run, index, gen, FailOnEvent(*hit->pattern, hit->line));
}

// A kernel message meets only the patterns meant for the kernel's log: a plan's own patterns
// were written for its action's output.
void RunManager::OnKernelLine(const std::string& run_id, size_t index, int gen,
                              std::string_view line) {
  ActiveRun* run = Find(run_id);
  if (!run || run->live[index].action_gen != gen) return;
  std::optional<FailOnHit> hit = run->live[index].kernel_fail_on.Match(line);
  if (hit) FailOnLine(*run, index, gen, KernelFailOnEvent(*hit->pattern, hit->line));
}

void RunManager::FailOnLine(ActiveRun& run, size_t index, int gen, StepEventInfo info) {
  if (Blocked()) {
    // While writes wait, the attempt's first fatal line decides; more would only pile up.
    if (run.live[index].fail_on_held_gen == gen) return;
    run.live[index].fail_on_held_gen = gen;
  }
  const std::string run_id = run.record.id;  // Dispatch may end the run
  Dispatch(run_id, index, StepEvent::kActionFailed, std::move(info), EventSource::kAction, gen);
}

// From fire until the action ends (see RunEffects); a stall comes back as kStalled of this
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
    if (followers_.empty()) return;
    followers_.Publish(run_id, EncodeProgressLine(run_id, step_id, ToWire(snapshot)));
  };
  auto on_stall = [this, run_id, index, action_gen, spec](const ProgressSnapshot& snapshot,
                                                          std::int64_t stalled_for_ms) {
    ActiveRun* run = Find(run_id);
    if (!run) return;
    StepEventInfo info = StallEvent(spec, snapshot, stalled_for_ms);
    Dispatch(run_id, index, StepEvent::kStalled, std::move(info), EventSource::kAction, action_gen);
  };
  live.progress = ProgressWatch::Start(ex_, spec, std::move(on_change), std::move(on_stall));
}

void RunManager::AddProgress(WireRun& wire) const {
  auto it = runs_.find(wire.id);
  if (it == runs_.end()) return;
  const ActiveRun& run = *it->second;
  for (WireStep& step : wire.steps) {
    for (const LiveStep& live : run.live) {
      if (step.id != live.def->id) continue;
      if (live.progress) step.progress = ToWire(live.progress->Snapshot());
      // A foreground attempt's processes are not committed: who runs, from its supervisor.
      if (!step.pid && live.AttemptAlive() && live.attempt->action())
        step.pid = live.attempt->action()->pid;
    }
  }
}

}  // namespace deployd
